/* A self-contained test of the kernels, without Python: every instruction set this CPU supports against naive
 * float64 loops, over awkward geometries (channel counts off the vector width, padding past half the kernel,
 * strides 2 and 3, dilation, batches, partial panels), plus the parameter checks on hostile values. It is what
 * runs the NEON build under qemu-aarch64 and the sanitizer build (tests/backends/native/test_selftest.py).
 * Prints one line per failure and a summary; exits 0 when everything passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

static unsigned long long rng_state = 88172645463325252ULL;
static float frand(void)  /* uniform in [-1, 1) */
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (float)((rng_state >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

static float *randoms(size_t n, float scale)
{
    float *a = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) a[i] = frand() * scale;
    return a;
}

static double act_ref(double x, const pl_epilogue *ep)
{
    switch (ep->act) {
    case PL_ACT_RELU: return x < 0 ? 0 : x;
    case PL_ACT_CLAMP: return x < ep->lo ? ep->lo : (x > ep->hi ? ep->hi : x);
    case PL_ACT_HARDSWISH: { double t = x + 3; t = t < 0 ? 0 : (t > 6 ? 6 : t); return x * t / 6; }
    case PL_ACT_SILU: return x / (1 + exp(-x));
    case PL_ACT_SIGMOID: return 1 / (1 + exp(-x));
    default: return x;
    }
}

static int failures, checks;

static void expect_close(const char *what, const float *got, const double *want, size_t n, double rtol)
{
    double scale = 0, worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - want[i]);
        if (!(d <= worst)) { worst = d; at = i; }
    }
    checks++;
    if (!(worst <= rtol * fmax(scale, 1e-30))) {
        failures++;
        printf("FAIL %s: max |diff| %.3g at %zu (got %.6g, want %.6g), max |want| %.3g\n", what, worst, at,
               (double)got[at], want[at], scale);
    }
}

/* ------------------------------------------------------------------------------------------------ convolution */

typedef struct { int n, c, h, w, o, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw, depthwise; } conv_case;

static const conv_case CONVS[] = {
    {1, 3, 17, 19, 13, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 0},
    {2, 16, 9, 9, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 0},
    {1, 64, 7, 7, 70, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},
    {1, 8, 5, 5, 16, 3, 3, 3, 3, 2, 2, 2, 2, 3, 3, 0},
    {1, 5, 1, 1, 7, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0},
    {1, 7, 6, 6, 9, 5, 5, 1, 1, 4, 4, 4, 4, 1, 1, 0},
    {3, 33, 10, 10, 17, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, 0},
    {1, 4, 10, 12, 6, 1, 7, 1, 2, 0, 0, 3, 3, 1, 1, 0},
    {1, 24, 8, 8, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 37, 11, 7, 37, 5, 5, 2, 2, 4, 4, 4, 4, 2, 2, 1},
    {1, 72, 14, 14, 72, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1},
    {1, 19, 1, 1, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1},
    {1, 6, 9, 12, 6, 3, 5, 2, 3, 1, 1, 0, 0, 1, 1, 1},
    {1, 20, 13, 11, 20, 3, 3, 1, 2, 2, 2, 2, 2, 2, 2, 1},   /* dilated 3x3: the interior path */
    {2, 40, 9, 16, 40, 3, 3, 2, 1, 0, 1, 1, 0, 1, 1, 1},    /* asymmetric padding */
    {1, 96, 28, 28, 96, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, 1},   /* MobileNet's stride 2 */
};

static void conv_reference(const pl_conv *p, const float *x, const float *w, const float *b, double *y)
{
    const int64_t K = p->kh * p->kw * p->c, cols = p->layout == PL_PANELS ? (p->o + 15) / 16 * 16 : p->o;
    (void)cols;
    for (int64_t n = 0; n < p->n; n++)
        for (int64_t oy = 0; oy < p->ho; oy++)
            for (int64_t ox = 0; ox < p->wo; ox++)
                for (int64_t o = 0; o < p->o; o++) {
                    double s = b ? b[o] : 0;
                    for (int64_t ky = 0; ky < p->kh; ky++)
                        for (int64_t kx = 0; kx < p->kw; kx++) {
                            int64_t iy = oy * p->sh - p->pt + ky * p->dh, ix = ox * p->sw - p->pl + kx * p->dw;
                            if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) continue;
                            const float *xp = x + ((n * p->h + iy) * p->w + ix) * p->c;
                            int64_t t = ky * p->kw + kx;
                            if (p->groups > 1) { s += (double)xp[o] * w[t * p->c + o]; continue; }
                            for (int64_t ci = 0; ci < p->c; ci++) {
                                int64_t row = t * p->c + ci;
                                double wv = p->layout == PL_PANELS ? w[(o / 16) * K * 16 + row * 16 + o % 16]
                                                                   : w[row * p->o + o];
                                s += (double)xp[ci] * wv;
                            }
                        }
                    y[((n * p->ho + oy) * p->wo + ox) * p->o + o] = act_ref(s, &p->ep);
                }
}

static void test_convolutions(const char *isa)
{
    const pl_epilogue eps[] = {{PL_ACT_NONE, 0, 0}, {PL_ACT_RELU, 0, INFINITY}, {PL_ACT_CLAMP, -0.5f, 0.75f},
                               {PL_ACT_HARDSWISH, 0, 0}, {PL_ACT_SILU, 0, 0}};
    for (size_t i = 0; i < sizeof CONVS / sizeof CONVS[0]; i++) {
        const conv_case *k = &CONVS[i];
        for (int layout = PL_ROWS; layout <= (k->depthwise ? PL_ROWS : PL_PANELS); layout++)
            for (size_t e = 0; e < sizeof eps / sizeof eps[0]; e++) {
                pl_conv p = {k->n, k->h, k->w, k->c, k->o, k->kh, k->kw, k->sh, k->sw, k->pt, k->pb, k->pl, k->pr,
                             k->dh, k->dw, 0, 0, k->depthwise ? k->c : 1, layout, eps[e]};
                p.ho = (p.h + p.pt + p.pb - p.dh * (p.kh - 1) - 1) / p.sh + 1;
                p.wo = (p.w + p.pl + p.pr - p.dw * (p.kw - 1) - 1) / p.sw + 1;
                size_t xs = (size_t)(p.n * p.h * p.w * p.c), ys = (size_t)(p.n * p.ho * p.wo * p.o);
                size_t cols = layout == PL_PANELS ? (size_t)(p.o + 15) / 16 * 16 : (size_t)p.o;
                size_t ws = k->depthwise ? (size_t)(p.kh * p.kw * p.c) : (size_t)(p.kh * p.kw * p.c) * cols;
                float *x = randoms(xs, 2), *w = randoms(ws, 1), *b = randoms((size_t)p.o, 1);
                float *y = malloc(ys * sizeof(float));
                double *want = malloc(ys * sizeof(double));
                char err[256], what[160];
                if (pl_conv_check(&p, xs, ws, (size_t)p.o, ys, err, sizeof err) != 0) {
                    printf("FAIL %s conv case %zu: a valid geometry was refused: %s\n", isa, i, err);
                    failures++;
                } else {
                    pl_conv_run(&p, x, w, b, y);
                    conv_reference(&p, x, w, b, want);
                    snprintf(what, sizeof what, "%s conv case %zu layout %d activation %d", isa, i, layout, p.ep.act);
                    expect_close(what, y, want, ys, 1e-4);
                }
                free(x); free(w); free(b); free(y); free(want);
            }
    }
}

/* ------------------------------------------------------------------------------------------------ the rest */

static void test_pooling(const char *isa)
{
    const int cases[][12] = {  /* n, c, h, w, k, s, p, d, ceil, kind */
        {1, 13, 9, 7, 3, 2, 1, 1, 1, PL_POOL_MAX}, {2, 8, 8, 8, 2, 3, 1, 2, 1, PL_POOL_MAX},
        {1, 17, 1, 1, 1, 1, 0, 1, 0, PL_POOL_MAX}, {1, 9, 7, 7, 3, 2, 1, 1, 1, PL_POOL_AVG},
        {1, 9, 7, 7, 3, 2, 1, 1, 0, PL_POOL_AVG_EXCLUDE_PAD}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const int *k = cases[i];
        pl_pool p = {k[0], k[2], k[3], k[1], k[4], k[4], k[5], k[5], k[6], k[6], k[7], k[7], 0, 0, k[9], 0};
        int64_t span_h = p.h + 2 * p.pt - p.dh * (p.kh - 1) - 1, span_w = p.w + 2 * p.pl - p.dw * (p.kw - 1) - 1;
        p.ho = (span_h + (k[8] ? p.sh - 1 : 0)) / p.sh + 1;
        p.wo = (span_w + (k[8] ? p.sw - 1 : 0)) / p.sw + 1;
        if (k[8] && (p.ho - 1) * p.sh >= p.h + p.pt) p.ho--;
        if (k[8] && (p.wo - 1) * p.sw >= p.w + p.pl) p.wo--;
        size_t xs = (size_t)(p.n * p.h * p.w * p.c), ys = (size_t)(p.n * p.ho * p.wo * p.c);
        float *x = randoms(xs, 3), *y = malloc(ys * sizeof(float));
        double *want = malloc(ys * sizeof(double));
        char err[256], what[96];
        if (pl_pool_check(&p, xs, ys, err, sizeof err) != 0) {
            printf("FAIL %s pool case %zu refused: %s\n", isa, i, err);
            failures++;
        } else {
            pl_pool_run(&p, x, y);
            for (int64_t n = 0; n < p.n; n++)
                for (int64_t oy = 0; oy < p.ho; oy++)
                    for (int64_t ox = 0; ox < p.wo; ox++)
                        for (int64_t c = 0; c < p.c; c++) {
                            double s = p.kind == PL_POOL_MAX ? -INFINITY : 0;
                            int count = 0;
                            int64_t y0 = oy * p.sh - p.pt, x0 = ox * p.sw - p.pl;
                            for (int64_t ky = 0; ky < p.kh; ky++)
                                for (int64_t kx = 0; kx < p.kw; kx++) {
                                    int64_t iy = y0 + ky * p.dh, ix = x0 + kx * p.dw;
                                    if (iy < 0 || iy >= p.h || ix < 0 || ix >= p.w) continue;
                                    double v = x[((n * p.h + iy) * p.w + ix) * p.c + c];
                                    s = p.kind == PL_POOL_MAX ? fmax(s, v) : s + v;
                                    count++;
                                }
                            if (p.kind == PL_POOL_AVG_EXCLUDE_PAD) s /= count;
                            if (p.kind == PL_POOL_AVG) {
                                int64_t y1 = y0 + (p.kh - 1) * p.dh + 1, x1 = x0 + (p.kw - 1) * p.dw + 1;
                                if (y1 > p.h + p.pt) y1 = p.h + p.pt;
                                if (x1 > p.w + p.pl) x1 = p.w + p.pl;
                                s /= (double)((y1 - y0) * (x1 - x0));
                            }
                            want[((n * p.ho + oy) * p.wo + ox) * p.c + c] = s;
                        }
            snprintf(what, sizeof what, "%s pool case %zu", isa, i);
            expect_close(what, y, want, ys, 1e-6);
        }
        free(x); free(y); free(want);
    }
}

static void test_elementwise(const pl_isa *isa)
{
    const size_t len = 1003, rows[] = {1, 17, 1003};
    float *a = randoms(len, 4), *b = randoms(len, 4), *y = malloc(len * sizeof(float));
    double *want = malloc(len * sizeof(double));
    char what[96];
    const pl_epilogue relu = {PL_ACT_RELU, 0, INFINITY};
    for (int op = 0; op < PL_BINOP_COUNT; op++)
        for (size_t r = 0; r < 3; r++) {
            size_t bl = rows[r] == 17 ? 17 : rows[r];
            size_t n = bl == 17 ? 17 * 59 : len;
            isa->binary(op, a, b, bl, y, n, &relu);
            for (size_t i = 0; i < n; i++) {
                double u = a[i], v = b[i % bl];
                double s = op == PL_ADD ? u + v : op == PL_SUB ? u - v : op == PL_MUL ? u * v : u / v;
                want[i] = s < 0 ? 0 : s;
            }
            snprintf(what, sizeof what, "%s binary op %d, b of %zu", isa->name, op, bl);
            expect_close(what, y, want, n, op == PL_DIV ? 1e-5 : 1e-6);
        }
    const pl_epilogue acts[] = {{PL_ACT_HARDSWISH, 0, 0}, {PL_ACT_SILU, 0, 0}, {PL_ACT_SIGMOID, 0, 0},
                                {PL_ACT_CLAMP, -1, 2}};
    for (size_t e = 0; e < 4; e++) {
        isa->activate(a, y, len, &acts[e]);
        for (size_t i = 0; i < len; i++) want[i] = act_ref(a[i], &acts[e]);
        snprintf(what, sizeof what, "%s activation %d", isa->name, acts[e].act);
        expect_close(what, y, want, len, 2e-6);
    }
    isa->exp(a, y, len);
    for (size_t i = 0; i < len; i++) want[i] = exp(a[i]);
    snprintf(what, sizeof what, "%s exp", isa->name);
    expect_close(what, y, want, len, 1e-6);
    isa->mean_rows(a, 59, 17, y);
    for (size_t c = 0; c < 17; c++) {
        double s = 0;
        for (size_t r = 0; r < 59; r++) s += a[r * 17 + c];
        want[c] = s / 59;
    }
    snprintf(what, sizeof what, "%s mean_rows", isa->name);
    expect_close(what, y, want, 17, 1e-5);
    free(a); free(b); free(y); free(want);
}

static void test_hostile_parameters(void)
{
    char err[256];
    const pl_conv good = {1, 6, 6, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 1, PL_ROWS, {PL_ACT_NONE, 0, 0}};
    pl_conv bad[12];
    for (int i = 0; i < 12; i++) bad[i] = good;
    bad[0].ho = 7; bad[1].c = 5; bad[2].kh = 0; bad[3].sh = -1; bad[4].pt = -1; bad[5].pl = (int64_t)1 << 40;
    bad[6].groups = 3; bad[7].layout = 9; bad[8].ep.act = 99; bad[9].n = 0;
    bad[10].h = bad[10].w = bad[10].c = (int64_t)1 << 31; bad[10].ho = bad[10].wo = (int64_t)1 << 31;
    bad[11].dh = (int64_t)1 << 30; bad[11].kh = 4;
    checks++;
    if (pl_conv_check(&good, 144, 288, 8, 288, err, sizeof err) != 0) {
        printf("FAIL a valid convolution was refused: %s\n", err);
        failures++;
    }
    for (int i = 0; i < 12; i++) {
        checks++;
        if (pl_conv_check(&bad[i], 144, 288, 8, 288, err, sizeof err) == 0) {
            printf("FAIL hostile convolution %d was accepted\n", i);
            failures++;
        }
    }
    checks++;
    if (pl_conv_check(&good, 143, 288, 8, 288, err, sizeof err) == 0
        || pl_conv_check(&good, 144, 288, 7, 288, err, sizeof err) == 0
        || pl_conv_check(&good, 144, 288, 8, 287, err, sizeof err) == 0) {
        printf("FAIL a short buffer was accepted\n");
        failures++;
    }
}

int main(void)
{
    size_t n;
    const pl_isa *const *all = pl_isa_all(&n);
    int tested = 0;
    for (size_t i = 0; i < n; i++) {
        if (!pl_isa_supported(all[i])) continue;
        pl_isa_select(all[i]->name);
        for (int threads = 1; threads <= 3; threads += 2) {
            pl_set_threads(threads);
            test_convolutions(all[i]->name);
            test_pooling(all[i]->name);
        }
        test_elementwise(all[i]);
        tested++;
    }
    test_hostile_parameters();
    printf("%s: %d instruction set(s), %d checks, %d failed\n", failures ? "FAILED" : "ok", tested, checks,
           failures);
    return failures ? 1 : 0;
}
