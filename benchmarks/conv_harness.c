/* One convolution through the native library's C driver (pl_conv_run), no Python: the timing harness
 * bench_conv_harness.py builds against two revisions' csrc/ to compare a kernel change. Prints the median and
 * minimum of `runs` calls in milliseconds.
 * usage: conv_harness C HW O K STRIDE PAD THREADS PLANAR DEPTHWISE RUNS [ACT]
 * (ACT: relu6, the default, or none, relu, hardswish, silu: the epilogue the convolution applies) */
#define _POSIX_C_SOURCE 199309L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "native.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int by_value(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static float *aligned(size_t count)  /* zeroed */
{
    const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
    float *f = aligned_alloc(64, bytes ? bytes : 64);
    if (f) memset(f, 0, bytes);
    return f;
}

int main(int argc, char **argv)
{
    static const struct { const char *name; pl_epilogue ep; } acts[] = {
        {"relu6", {PL_ACT_CLAMP, 0.0f, 6.0f}}, {"none", {PL_ACT_NONE, 0.0f, 0.0f}}, {"relu", {PL_ACT_RELU, 0.0f, 0.0f}},
        {"hardswish", {PL_ACT_HARDSWISH, 0.0f, 0.0f}}, {"silu", {PL_ACT_SILU, 0.0f, 0.0f}}};
    size_t act = 0;
    while (argc == 12 && act < sizeof acts / sizeof acts[0] && strcmp(argv[11], acts[act].name) != 0) act++;
    if ((argc != 11 && argc != 12) || act == sizeof acts / sizeof acts[0]) {
        fprintf(stderr, "usage: %s C HW O K STRIDE PAD THREADS PLANAR DEPTHWISE RUNS [relu6|none|relu|hardswish|silu]\n",
                argv[0]);
        return 2;
    }
    const int64_t c = atoll(argv[1]), hw = atoll(argv[2]), o = atoll(argv[3]), k = atoll(argv[4]);
    const int64_t s = atoll(argv[5]), pad = atoll(argv[6]), planar = atoll(argv[8]), dw = atoll(argv[9]);
    const int runs = atoi(argv[10]);
    pl_set_threads(atoi(argv[7]));
    const int64_t out = (hw + 2 * pad - k) / s + 1, cols = (dw ? c : (o + PL_PANEL - 1) / PL_PANEL * PL_PANEL);
    pl_conv p = {1, hw, hw, c, dw ? c : o, k, k, s, s, pad, pad, pad, pad, 1, 1, out, out, dw ? c : 1,
                 dw ? PL_ROWS : PL_PANELS, acts[act].ep, planar};
    const size_t xs = (size_t)(hw * hw * c), ws = (size_t)(k * k * (dw ? 1 : c) * cols);
    /* 64-byte aligned, as ptlite's arenas are (a vector load from an aligned offset then spans one cache line) */
    float *x = aligned(xs), *w = aligned(ws), *b = aligned((size_t)p.o), *y = aligned((size_t)(out * out * p.o));
    double *t = malloc((size_t)runs * sizeof(double));
    char err[200];
    if (!x || !w || !b || !y || !t || runs < 1
        || pl_conv_check(&p, xs, ws, (size_t)p.o, (size_t)(out * out * p.o), err, sizeof err) != 0) {
        fprintf(stderr, "conv_harness: %s\n", runs < 1 || !t ? "runs must be positive" : err);
        return 1;
    }
    for (size_t i = 0; i < xs; i++) x[i] = (float)(i % 7) * 0.1f;
    for (int r = 0; r < runs; r++) {
        const double t0 = now();
        pl_conv_run(&p, x, w, b, y);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)runs, sizeof(double), by_value);
    printf("%.4f %.4f\n", t[runs / 2] * 1e3, t[0] * 1e3);
    return 0;
}
