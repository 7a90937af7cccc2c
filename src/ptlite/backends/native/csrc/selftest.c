/* A self-contained test of the kernels, without Python: every instruction set this CPU supports against naive
 * float64 loops, over awkward geometries (channel counts off the vector width, padding past half the kernel,
 * strides 2 and 3, dilation, batches, partial panels), plus the parameter checks on hostile values. It is what
 * runs the NEON build under qemu-aarch64 and the sanitizer build (tests/backends/native/test_selftest.py).
 * Prints one line per failure and a summary; exits 0 when everything passed. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    case PL_ACT_TANH: return tanh(x);
    case PL_ACT_HARDSIGMOID: { double t = x + 3; return (t < 0 ? 0 : (t > 6 ? 6 : t)) / 6; }
    case PL_ACT_GELU: return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case PL_ACT_GELU_TANH: return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case PL_ACT_ERF: return erf(x);
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
    {1, 40, 14, 14, 40, 5, 5, 1, 1, 2, 2, 2, 2, 1, 1, 1},   /* 5x5: the interior path */
    {2, 19, 9, 12, 19, 5, 5, 2, 2, 2, 2, 2, 2, 1, 1, 1},    /* 5x5 stride 2, channels off the vector width */
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
                             k->dh, k->dw, 0, 0, k->depthwise ? k->c : 1, layout, eps[e], 0};
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
                    if (pl_conv_copies_rows(&p)) {  /* the same from an NCHW input */
                        float *planar = malloc(xs * sizeof(float));
                        for (int64_t n = 0; n < p.n; n++)
                            for (int64_t q = 0; q < p.h * p.w; q++)
                                for (int64_t ci = 0; ci < p.c; ci++)
                                    planar[(n * p.c + ci) * p.h * p.w + q] = x[(n * p.h * p.w + q) * p.c + ci];
                        p.planar = 1;
                        if (pl_conv_check(&p, xs, ws, (size_t)p.o, ys, err, sizeof err) != 0) {
                            printf("FAIL %s conv case %zu: NCHW refused: %s\n", isa, i, err);
                            failures++;
                        } else {
                            pl_conv_run(&p, planar, w, b, y);
                            snprintf(what, sizeof what, "%s conv case %zu NCHW layout %d", isa, i, layout);
                            expect_close(what, y, want, ys, 1e-4);
                        }
                        free(planar);
                    }
                }
                free(x); free(w); free(b); free(y); free(want);
            }
    }
}

/* Winograd F(4x4, 3x3) and F(2x2, 3x3): U = G g Gt from a rows-layout 3x3 weight (G of the points 0, 1, -1, 2, -1/2,
 * infinity; of 0, 1, -1, infinity), run against the direct reference on that weight. */
static const double WINO_G[6][3] = {{1, 0, 0}, {-1.0 / 3, -1.0 / 3, -1.0 / 3}, {1.0 / 3, -1.0 / 3, 1.0 / 3},
                                    {1.0 / 15, 2.0 / 15, 4.0 / 15}, {-16.0 / 15, 8.0 / 15, -4.0 / 15}, {0, 0, 1}};
static const double WINO2_G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};

static void test_winograd(const char *isa)
{
    static const int cases[][8] = {  /* n, c, h, w, o, pt/pb, pl/pr, threads */
        {1, 16, 20, 20, 16, 1, 1, 1}, {2, 13, 9, 11, 21, 1, 1, 3}, {1, 64, 30, 30, 80, 1, 1, 3},
        {1, 5, 3, 3, 7, 2, 0, 1}, {1, 9, 7, 5, 33, 0, 2, 3}, {1, 40, 14, 14, 36, 1, 1, 2},
    };
    for (int small = 0; small < 2; small++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            const int *k = cases[i], a_side = small ? 4 : 6;
            const size_t positions = (size_t)(a_side * a_side);
            const pl_epilogue ep = {PL_ACT_RELU, 0, INFINITY};
            pl_conv p = {k[0], k[2], k[3], k[1], k[4], 3, 3, 1, 1, k[5], k[5], k[6], k[6], 1, 1, 0, 0, 1, PL_ROWS, ep,
                         0};
            p.ho = p.h + 2 * p.pt - 2;
            p.wo = p.w + 2 * p.pl - 2;
            const size_t c = (size_t)p.c, o = (size_t)p.o, xs = (size_t)(p.n * p.h * p.w) * c;
            const size_t ys = (size_t)(p.n * p.ho * p.wo) * o;
            float *x = randoms(xs, 2), *w = randoms(9 * c * o, 1), *b = randoms(o, 1);
            float *u = malloc(positions * c * o * sizeof(float)), *y = malloc(ys * sizeof(float));
            double *want = malloc(ys * sizeof(double));
            for (size_t ci = 0; ci < c; ci++)
                for (size_t oi = 0; oi < o; oi++)
                    for (int a = 0; a < a_side; a++)
                        for (int bb = 0; bb < a_side; bb++) {
                            double s = 0;
                            for (int ky = 0; ky < 3; ky++)
                                for (int kx = 0; kx < 3; kx++)
                                    s += (small ? WINO2_G[a][ky] * WINO2_G[bb][kx] : WINO_G[a][ky] * WINO_G[bb][kx])
                                         * w[((size_t)(ky * 3 + kx) * c + ci) * o + oi];
                            u[((size_t)(a_side * a + bb) * c + ci) * o + oi] = (float)s;
                        }
            conv_reference(&p, x, w, b, want);
            p.layout = small ? PL_WINOGRAD_2X2 : PL_WINOGRAD;
            char err[256], what[160];
            pl_set_threads(k[7]);
            if (pl_conv_check(&p, xs, positions * c * o, o, ys, err, sizeof err) != 0) {
                printf("FAIL %s Winograd %s case %zu refused: %s\n", isa, small ? "2x2" : "4x4", i, err);
                failures++;
            } else {
                pl_conv_run(&p, x, u, b, y);
                snprintf(what, sizeof what, "%s Winograd %s case %zu", isa, small ? "2x2" : "4x4", i);
                expect_close(what, y, want, ys, 1e-4);
            }
            free(x); free(w); free(b); free(u); free(y); free(want);
        }
}

/* Bilinear resizing by a table of source rows and columns (clamped where hostile), against float64 loops. */
static void test_resize(const pl_isa *isa)
{
    const pl_resize p = {2, 5, 7, 19, 9, 4};
    const size_t xs = 2 * 5 * 7 * 19, ys = 2 * 9 * 4 * 19, ts = 4 * (9 + 4);
    float *x = randoms(xs, 1), *t = malloc(ts * sizeof(float)), *y = malloc(ys * sizeof(float));
    double *want = malloc(ys * sizeof(double));
    for (size_t i = 0; i < 9 + 4; i++) {
        const int size = i < 9 ? 5 : 7;
        t[4 * i] = (float)(i * 3 % size);
        t[4 * i + 1] = i % 4 == 0 ? 99.0f : (float)((i * 5 + 1) % size);  /* 99: past the image, read as the last */
        t[4 * i + 2] = 0.25f + 0.05f * (float)(i % 5);
        t[4 * i + 3] = 1.0f - t[4 * i + 2];
    }
    char err[128], what[96];
    checks++;
    if (pl_resize_check(&p, xs, ts, ys, err, sizeof err) != 0) {
        failures++;
        printf("FAIL resize refused: %s\n", err);
    } else {
        isa->resize_rows(&p, x, t, y, 0, 0, 9);
        isa->resize_rows(&p, x, t, y, 1, 0, 9);
        for (int n = 0; n < 2; n++)
            for (int oy = 0; oy < 9; oy++)
                for (int ox = 0; ox < 4; ox++)
                    for (int c = 0; c < 19; c++) {
                        const float *r = t + 4 * oy, *q = t + 4 * (9 + ox);
                        const int y0 = (int)r[0], y1 = r[1] > 4 ? 4 : (int)r[1];
                        const int x0 = (int)q[0], x1 = q[1] > 6 ? 6 : (int)q[1];
#define PX(yy, xx) ((double)x[(((size_t)n * 5 + (size_t)(yy)) * 7 + (size_t)(xx)) * 19 + (size_t)c])
                        const double top = q[2] * PX(y0, x0) + q[3] * PX(y0, x1);
                        const double bottom = q[2] * PX(y1, x0) + q[3] * PX(y1, x1);
#undef PX
                        const size_t at = (((size_t)n * 9 + (size_t)oy) * 4 + (size_t)ox) * 19 + (size_t)c;
                        want[at] = r[2] * top + r[3] * bottom;
                    }
        snprintf(what, sizeof what, "%s resize", isa->name);
        expect_close(what, y, want, ys, 1e-6);
    }
    free(x); free(t); free(y); free(want);
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
                                {PL_ACT_CLAMP, -1, 2}, {PL_ACT_TANH, 0, 0}, {PL_ACT_HARDSIGMOID, 0, 0},
                                {PL_ACT_GELU, 0, 0}, {PL_ACT_GELU_TANH, 0, 0}, {PL_ACT_ERF, 0, 0}};
    for (size_t e = 0; e < sizeof acts / sizeof acts[0]; e++) {
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
    /* softmax and layer norm over 59 rows of 17 (off the vector width) */
    isa->softmax_rows(a, y, 59, 17);
    for (size_t r = 0; r < 59; r++) {
        double m = -INFINITY, s = 0;
        for (size_t c = 0; c < 17; c++) m = fmax(m, a[r * 17 + c]);
        for (size_t c = 0; c < 17; c++) s += exp(a[r * 17 + c] - m);
        for (size_t c = 0; c < 17; c++) want[r * 17 + c] = exp(a[r * 17 + c] - m) / s;
    }
    snprintf(what, sizeof what, "%s softmax", isa->name);
    expect_close(what, y, want, 59 * 17, 1e-5);
    isa->layer_norm_rows(a, b, b + 17, y, 59, 17, 1e-5f);
    for (size_t r = 0; r < 59; r++) {
        double m = 0, q = 0;
        for (size_t c = 0; c < 17; c++) m += a[r * 17 + c];
        m /= 17;
        for (size_t c = 0; c < 17; c++) q += (a[r * 17 + c] - m) * (a[r * 17 + c] - m);
        const double rstd = 1 / sqrt(q / 17 + 1e-5);
        for (size_t c = 0; c < 17; c++) want[r * 17 + c] = (a[r * 17 + c] - m) * rstd * b[c] + b[17 + c];
    }
    snprintf(what, sizeof what, "%s layer norm", isa->name);
    expect_close(what, y, want, 59 * 17, 1e-5);
    free(a); free(b); free(y); free(want);
}

/* ------------------------------------------------------------------------------------------------ recurrent */

static double sigm(double x) { return 1 / (1 + exp(-x)); }

/* Every mode, forward and reversed, batch 2, hidden 13 (off the vector width), against float64 loops. */
static void test_recurrent(const pl_isa *isa)
{
    enum { T = 5, B = 2, IN = 7, H = 13, STRIDE = 2 * H };
    char err[128], what[96];
    for (int mode = 0; mode < PL_RNN_MODE_COUNT; mode++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            const size_t g = pl_rnn_gates(mode) * H;
            pl_rnn p = {mode, T, B, IN, H, STRIDE, reverse * H, reverse};
            float *x = randoms(T * B * IN, 1), *wi = randoms(IN * g, 0.5f), *wh = randoms(H * g, 0.5f);
            float *bi = randoms(g, 0.5f), *bh = randoms(g, 0.5f), *h0 = randoms(B * H, 1), *c0 = randoms(B * H, 1);
            float *out = randoms(T * B * STRIDE, 1), *hn = malloc(B * H * sizeof(float));
            float *cn = malloc(B * H * sizeof(float)), *scratch = malloc((2 * g + 2 * B * H) * sizeof(float));
            double *want = malloc(T * B * H * sizeof(double)), h[B][H], c[B][H], gx[64], gh[64];
            checks++;
            if (pl_rnn_check(&p, T * B * IN, IN * g, H * g, g, g, B * H, B * H, T * B * STRIDE, err, sizeof err)) {
                failures++;
                printf("FAIL recurrent mode %d refused: %s\n", mode, err);
                continue;
            }
            isa->rnn(&p, x, wi, wh, bi, bh, h0, mode == PL_LSTM ? c0 : NULL, out, hn, mode == PL_LSTM ? cn : NULL,
                     scratch);
            for (int b = 0; b < B; b++)
                for (int j = 0; j < H; j++) { h[b][j] = h0[b * H + j]; c[b][j] = c0[b * H + j]; }
            for (int s = 0; s < T; s++) {
                const int t = reverse ? T - 1 - s : s;
                for (int b = 0; b < B; b++) {
                    for (size_t j = 0; j < g; j++) {
                        gx[j] = bi[j];
                        gh[j] = bh[j];
                        for (int k = 0; k < IN; k++) gx[j] += (double)x[(t * B + b) * IN + k] * wi[k * g + j];
                        for (int k = 0; k < H; k++) gh[j] += h[b][k] * wh[k * g + j];
                    }
                    for (int j = 0; j < H; j++) {
                        double v;
                        if (mode == PL_LSTM) {
                            double i = sigm(gx[j] + gh[j]), f = sigm(gx[H + j] + gh[H + j]);
                            double gg = tanh(gx[2 * H + j] + gh[2 * H + j]), o = sigm(gx[3 * H + j] + gh[3 * H + j]);
                            c[b][j] = f * c[b][j] + i * gg;
                            v = o * tanh(c[b][j]);
                        } else if (mode == PL_GRU) {
                            double r = sigm(gx[j] + gh[j]), z = sigm(gx[H + j] + gh[H + j]);
                            double n = tanh(gx[2 * H + j] + r * gh[2 * H + j]);
                            v = (1 - z) * n + z * h[b][j];
                        } else {
                            v = gx[j] + gh[j];
                            v = mode == PL_RNN_TANH ? tanh(v) : (v < 0 ? 0 : v);
                        }
                        want[(t * B + b) * H + j] = v;
                    }
                    for (int j = 0; j < H; j++) h[b][j] = want[(t * B + b) * H + j];
                }
            }
            float *got = malloc(T * B * H * sizeof(float));
            for (int r = 0; r < T * B; r++) memcpy(got + r * H, out + r * STRIDE + reverse * H, H * sizeof(float));
            snprintf(what, sizeof what, "%s recurrent mode %d reverse %d", isa->name, mode, reverse);
            expect_close(what, got, want, T * B * H, 1e-5);
            double last[B * H];
            for (int b = 0; b < B; b++)
                for (int j = 0; j < H; j++) last[b * H + j] = h[b][j];
            expect_close(what, hn, last, B * H, 1e-5);
            free(x); free(wi); free(wh); free(bi); free(bh); free(h0); free(c0); free(out); free(hn); free(cn);
            free(scratch); free(want); free(got);
        }
}

static void test_hostile_parameters(void)
{
    char err[256];
    const pl_conv good = {1, 6, 6, 4, 8, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 1, PL_ROWS, {PL_ACT_NONE, 0, 0}, 0};
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
    /* attention: a mask stride reaching past the mask, sizes past the buffers, a huge stride, a bad causal flag */
    const pl_attention att = {1, 2, 3, 4, 5, 6, 0, {0, 12, 4, 1}, 1.0f};
    pl_attention abad[5];
    for (int i = 0; i < 5; i++) abad[i] = att;
    abad[0].ms[1] = 13; abad[1].s = 5; abad[2].ms[3] = (int64_t)1 << 40; abad[3].causal = 2; abad[4].e = 0;
    checks++;
    if (pl_attention_check(&att, 30, 40, 48, 24, 36, err, sizeof err) != 0) {
        printf("FAIL a valid attention was refused: %s\n", err);
        failures++;
    }
    for (int i = 0; i < 5; i++) {
        checks++;
        if (pl_attention_check(&abad[i], 30, 40, 48, 24, 36, err, sizeof err) == 0) {
            printf("FAIL hostile attention %d was accepted\n", i);
            failures++;
        }
    }
    /* copy: a stride reaching past the input, too many dimensions, a negative stride; rows past their buffers */
    const pl_copy cbad[3] = {{2, {3, 4}, {5, 1}}, {7, {1, 1, 1, 1, 1, 1}, {0}}, {1, {4}, {-1}}};
    for (int i = 0; i < 3; i++) {
        checks++;
        if (pl_copy_check(&cbad[i], 12, 12, err, sizeof err) == 0) {
            printf("FAIL hostile copy %d was accepted\n", i);
            failures++;
        }
    }
    /* broadcast: a stride reaching past an operand, an unknown operation; reduce: sizes past the input */
    const pl_broadcast bbad[2] = {{PL_ADD, 2, {3, 4}, {4, 1}, {0, 2}, {0, 0, 0}}, {9, 1, {4}, {1}, {1}, {0, 0, 0}}};
    for (int i = 0; i < 2; i++) {
        checks++;
        if (pl_broadcast_check(&bbad[i], 12, 4, 12, err, sizeof err) == 0) {
            printf("FAIL hostile broadcast %d was accepted\n", i);
            failures++;
        }
    }
    const pl_reduce rbad = {2, 3, 4, 1.0f};
    checks++;
    if (pl_reduce_check(&rbad, 23, 8, err, sizeof err) == 0 || pl_reduce_check(&rbad, 24, 7, err, sizeof err) == 0) {
        printf("FAIL a hostile reduction was accepted\n");
        failures++;
    }
    checks++;
    if (pl_rows_check(1, 3, 4, 12, 4, 4, 12, err, sizeof err) != 0 || pl_rows_check(1, 3, 4, 11, 4, 4, 12, err, sizeof err)
        == 0 || pl_rows_check(0, 3, 4, 12, 4, 0, 12, err, sizeof err) == 0 || pl_rows_check(1, 3, 4, 12, 3, 4, 12, err,
        sizeof err) == 0) {
        printf("FAIL the rows check\n");
        failures++;
    }
}

/* Attention (pl_attention_run, the selected instruction set's rows kernel) against float64 loops: key counts off the
 * vector width and past 4 vectors, a mask broadcast over b1 with a fully masked row, and causal masking. */
static void test_attention(const char *isa)
{
    static const int cases[][7] = {  /* b1, b2, l, s, e, ev, causal */
        {2, 3, 7, 19, 16, 24, 0}, {1, 2, 40, 37, 5, 3, 0}, {1, 1, 9, 9, 33, 70, 1}, {3, 1, 1, 1, 1, 1, 0},
        {1, 2, 12, 12, 16, 16, 1},
    };
    for (size_t ci = 0; ci < sizeof cases / sizeof cases[0]; ci++) {
        const int *k = cases[ci];
        const int64_t b1 = k[0], b2 = k[1], l = k[2], s = k[3], e = k[4], ev = k[5];
        const int causal = k[6];
        pl_attention p = {b1, b2, l, s, e, ev, causal, {0, causal ? 0 : l * s, s, 1}, 0.25f};
        const size_t nq = (size_t)(b1 * b2 * l * e), nk = (size_t)(b1 * b2 * s * e), nv = (size_t)(b1 * b2 * s * ev);
        const size_t ny = (size_t)(b1 * b2 * l * ev), nm = (size_t)(b2 * l * s);
        float *q = randoms(nq, 1), *kk = randoms(nk, 1), *v = randoms(nv, 1), *mask = randoms(nm, 1);
        float *y = malloc(ny * sizeof(float));
        double *want = malloc(ny * sizeof(double)), *sc = malloc((size_t)s * sizeof(double));
        if (!causal && l > 2)
            for (int64_t j = 0; j < s; j++) mask[2 * s + j] = -INFINITY;  /* query 2 of b2 = 0: every key masked */
        for (int64_t b = 0; b < b1 * b2; b++)
            for (int64_t i = 0; i < l; i++) {
                double m = -INFINITY;
                for (int64_t j = 0; j < s; j++) {
                    double a = 0;
                    for (int64_t d = 0; d < e; d++) a += (double)q[(b * l + i) * e + d] * kk[(b * s + j) * e + d];
                    a *= 0.25;
                    if (causal && j > i) a = -INFINITY;
                    else if (!causal) a += mask[(b % b2) * l * s + i * s + j];
                    sc[j] = a;
                    m = fmax(m, a);
                }
                double sum = 0;
                for (int64_t j = 0; j < s; j++) { sc[j] = m == -INFINITY ? 0 : exp(sc[j] - m); sum += sc[j]; }
                for (int64_t c = 0; c < ev; c++) {
                    double o = 0;
                    for (int64_t j = 0; j < s; j++) o += sc[j] * v[(b * s + j) * ev + c];
                    want[(b * l + i) * ev + c] = sum > 0 ? o / sum : 0;
                }
            }
        char err[256], what[96];
        checks++;
        if (pl_attention_check(&p, nq, nk, nv, causal ? 0 : nm, ny, err, sizeof err) != 0) {
            printf("FAIL %s attention case %zu refused: %s\n", isa, ci, err);
            failures++;
        } else if (pl_attention_run(&p, q, kk, v, causal ? NULL : mask, y) != 0) {
            printf("FAIL %s attention case %zu: out of memory\n", isa, ci);
            failures++;
        } else {
            snprintf(what, sizeof what, "%s attention case %zu", isa, ci);
            expect_close(what, y, want, ny, 1e-5);
        }
        free(q); free(kk); free(v); free(mask); free(y); free(want); free(sc);
    }
}

/* The strided copy: a permutation with a broadcast dimension, against index arithmetic. */
static void test_copy(void)
{
    const pl_copy p = {4, {3, 2, 5, 4}, {4, 0, 12, 1}};  /* x (5, 3, 4) read as (3, [2], 5, 4) */
    float x[60], y[120];
    for (int i = 0; i < 60; i++) x[i] = (float)i;
    char err[128];
    checks++;
    if (pl_copy_check(&p, 60, 120, err, sizeof err) != 0) {
        printf("FAIL a valid copy was refused: %s\n", err);
        failures++;
        return;
    }
    pl_copy_run(&p, x, y);
    int wrong = 0;
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 5; c++)
                for (int d = 0; d < 4; d++) wrong += y[((a * 2 + b) * 5 + c) * 4 + d] != x[c * 12 + a * 4 + d];
    if (wrong) {
        printf("FAIL copy: %d values wrong\n", wrong);
        failures++;
    }
    /* a concatenation's input: rows of 4 into their slice at 2 of rows of 7 */
    const pl_slice sl = {3, 4, 7, 2}, bad = {3, 4, 7, 4};
    float z[21] = {0};
    checks++;
    if (pl_slice_check(&sl, 12, 21, err, sizeof err) != 0 || pl_slice_check(&bad, 12, 21, err, sizeof err) == 0
        || pl_slice_check(&sl, 11, 21, err, sizeof err) == 0) {
        printf("FAIL the slice check\n");
        failures++;
        return;
    }
    pl_slice_run(&sl, x, z);
    wrong = 0;
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 7; i++) wrong += z[o * 7 + i] != (i >= 2 && i < 6 ? x[o * 4 + i - 2] : 0.0f);
    if (wrong) {
        printf("FAIL slice: %d values wrong\n", wrong);
        failures++;
    }
}

/* Broadcasting arithmetic (contiguous rows, a scalar second operand, and gathered rows) and the float64 sums,
 * against index arithmetic. */
static void test_broadcast_and_reduce(const char *isa)
{
    /* y (3, 4, 5) = a (3, 1, 5) - b (4, 5) read transposed (b stored (5, 4)), then relu */
    const pl_broadcast p = {PL_SUB, 3, {3, 4, 5}, {5, 0, 1}, {0, 1, 4}, {PL_ACT_RELU, 0.0f, INFINITY}};
    const pl_broadcast q = {PL_DIV, 2, {6, 7}, {7, 1}, {1, 0}, {PL_ACT_NONE, 0.0f, INFINITY}};  /* b per row */
    float *a = randoms(42, 1), *b = randoms(20, 1), y[60], z[42];
    double want[60], want_z[42];
    for (int i = 0; i < 6; i++) b[i] += 3.0f;
    char err[128], what[96];
    checks++;
    if (pl_broadcast_check(&p, 15, 20, 60, err, sizeof err) != 0 || pl_broadcast_check(&q, 42, 6, 42, err, sizeof err)) {
        printf("FAIL %s a valid broadcast was refused: %s\n", isa, err);
        failures++;
    } else {
        pl_broadcast_run(&p, a, b, y);
        pl_broadcast_run(&q, a, b, z);
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++)
                for (int k = 0; k < 5; k++) want[(i * 4 + j) * 5 + k] = fmax(0.0, (double)a[i * 5 + k] - b[k * 4 + j]);
        for (int i = 0; i < 6; i++)
            for (int j = 0; j < 7; j++) want_z[i * 7 + j] = (double)a[i * 7 + j] / b[i];
        snprintf(what, sizeof what, "%s broadcast (gathered rows)", isa);
        expect_close(what, y, want, 60, 1e-6);
        snprintf(what, sizeof what, "%s broadcast (a scalar per row)", isa);
        expect_close(what, z, want_z, 42, 1e-6);
    }
    const pl_reduce r = {2, 3, 7, 0.5f};  /* (2, 3, 7) summed over the 3, halved */
    float out[14];
    double want_r[14];
    for (int o = 0; o < 2; o++)
        for (int i = 0; i < 7; i++) {
            double t = 0;
            for (int k = 0; k < 3; k++) t += a[(o * 3 + k) * 7 + i];
            want_r[o * 7 + i] = 0.5 * t;
        }
    checks++;
    if (pl_reduce_check(&r, 42, 14, err, sizeof err) != 0) {
        printf("FAIL %s a valid reduction was refused: %s\n", isa, err);
        failures++;
    } else {
        pl_reduce_run(&r, a, out);
        snprintf(what, sizeof what, "%s reduce", isa);
        expect_close(what, out, want_r, 14, 1e-6);
    }
    free(a);
    free(b);
}

/* The recurrent stack (two bidirectional GRU layers, batch first) against the per-direction kernel called layer by
 * layer (the same arithmetic: equal to the bit), and its check on hostile sizes. */
static void test_rnn_stack(const char *isa_name)
{
    const pl_isa *isa = pl_isa_current();
    enum { T = 4, B = 3, IN = 5, H = 6, G = 3 * H, D = 2, L = 2 };
    const pl_rnn_stack p = {PL_GRU, T, B, IN, H, L, D, 1};
    const int64_t wn = pl_rnn_stack_weights(&p);
    float *x = randoms(B * T * IN, 1), *w = randoms((size_t)wn, 0.4f), *h0 = randoms(L * D * B * H, 1);
    float y[B * T * D * H], xt[T * B * IN], seq[2][T * B * D * H], hn[B * H], scratch[2 * G + 2 * B * H];
    char err[128];
    checks++;
    if (wn != D * ((IN + H + 2) * G) + D * ((D * H + H + 2) * G)
        || pl_rnn_stack_check(&p, B * T * IN, (size_t)wn, L * D * B * H, 0, B * T * D * H, err, sizeof err) != 0
        || pl_rnn_stack_run(&p, x, w, h0, NULL, y) != 0) {
        printf("FAIL %s recurrent stack refused or failed: %s\n", isa_name, err);
        failures++;
    } else {
        for (int t = 0; t < T; t++)
            for (int b = 0; b < B; b++) memcpy(xt + (t * B + b) * IN, x + (b * T + t) * IN, IN * sizeof(float));
        const float *in_seq = xt, *wk = w;
        int64_t in = IN;
        for (int l = 0; l < L; l++) {
            for (int d = 0; d < D; d++) {
                const pl_rnn r = {PL_GRU, T, B, in, H, D * H, d * H, d};
                isa->rnn(&r, in_seq, wk, wk + in * G, wk + in * G + H * G, wk + in * G + H * G + G,
                         h0 + (l * D + d) * B * H, NULL, seq[l], hn, NULL, scratch);
                wk += in * G + H * G + 2 * G;
            }
            in_seq = seq[l];
            in = D * H;
        }
        int wrong = 0;
        for (int b = 0; b < B; b++)
            for (int t = 0; t < T; t++)
                wrong += memcmp(y + (b * T + t) * D * H, seq[1] + (t * B + b) * D * H, D * H * sizeof(float)) != 0;
        if (wrong) {
            printf("FAIL %s recurrent stack: %d rows differ from the layers run one by one\n", isa_name, wrong);
            failures++;
        }
    }
    pl_rnn_stack bad[4] = {p, p, p, p};
    bad[0].dirs = 3; bad[1].mode = 9; bad[2].layers = 0; bad[3].hidden = (int64_t)1 << 40;
    for (int i = 0; i < 4; i++) {
        checks++;
        if (pl_rnn_stack_check(&bad[i], B * T * IN, (size_t)wn, L * D * B * H, 0, B * T * D * H, err, sizeof err) == 0) {
            printf("FAIL hostile recurrent stack %d was accepted\n", i);
            failures++;
        }
    }
    checks++;
    if (pl_rnn_stack_check(&p, B * T * IN, (size_t)wn - 1, L * D * B * H, 0, B * T * D * H, err, sizeof err) == 0
        || pl_rnn_stack_check(&p, B * T * IN, (size_t)wn, L * D * B * H, 5, B * T * D * H, err, sizeof err) == 0) {
        printf("FAIL a recurrent stack with short weights or a c0 for a GRU was accepted\n");
        failures++;
    }
    free(x); free(w); free(h0);
}

/* The pool: every task of every run runs once, whether the workers are spinning, asleep or waking late (runs back
 * to back, and runs after pauses longer than the workers' spin). */
typedef struct { _Atomic int *hits; size_t tasks; } pool_job;

static void count_task(void *ctx, size_t i)
{
    pool_job *job = ctx;
    atomic_fetch_add(&job->hits[i], 1);
}

static void test_pool(void)
{
    enum { RUNS = 400, MAX_TASKS = 37 };
    _Atomic int hits[MAX_TASKS];
    int wrong = 0;
    pl_set_threads(3);
    for (int run = 0; run < RUNS; run++) {
        pool_job job = {hits, (size_t)(1 + run % MAX_TASKS)};
        for (size_t i = 0; i < job.tasks; i++) atomic_store(&hits[i], 0);
        if (run % 50 == 49) {
            struct timespec pause = {0, 1000000};  /* 1 ms: past the spin, so the workers sleep */
            nanosleep(&pause, NULL);
        }
        pl_parallel(job.tasks, count_task, &job);
        for (size_t i = 0; i < job.tasks; i++) wrong += atomic_load(&hits[i]) != 1;
    }
    checks++;
    if (wrong) {
        printf("FAIL thread pool: %d task(s) ran other than once\n", wrong);
        failures++;
    }
}

/* The int8 GEMM against plain integer sums and the same float32 requantization, bytes compared exactly: rows and
 * columns past a block, reductions not a multiple of four, both clamps. */
static void test_qgemm(const char *isa)
{
    static const int64_t shapes[][3] = {{1, 1, 1}, {5, 3, 17}, {9, 37, 33}, {70, 130, 16}, {3, 301, 5}, {13, 40, 200},
                                         {100, 8, 80}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t m = shapes[s][0], k = shapes[s][1], n = shapes[s][2];
        const int64_t np = (n + PL_QNR - 1) / PL_QNR * PL_QNR, k4 = (k + 3) / 4;
        uint8_t *x = malloc((size_t)(m * k)), *y = malloc((size_t)(m * n)), *want = malloc((size_t)(m * n));
        int8_t *w = malloc((size_t)(k * n)), *packed = calloc((size_t)(k4 * np * 4), 1);
        int32_t *offset = calloc((size_t)np, sizeof *offset);
        float *mult = calloc((size_t)np, sizeof *mult);
        for (int64_t i = 0; i < m * k; i++) x[i] = (uint8_t)((frand() + 1) * 127.9);
        for (int64_t i = 0; i < k * n; i++) w[i] = (int8_t)(frand() * 127);
        for (int64_t r = 0; r < k; r++)
            for (int64_t j = 0; j < n; j++) {
                const int64_t j0 = j / PL_QNB * PL_QNB, wp = np - j0 < PL_QNB ? np - j0 : PL_QNB;
                packed[j0 * k4 * 4 + ((r / 4) * wp + j - j0) * 4 + r % 4] = w[r * n + j];
            }
        for (int64_t j = 0; j < n; j++) {
            offset[j] = (int32_t)(frand() * 5000);
            mult[j] = (float)((frand() + 1.5) * 0.3 / (double)(k * 64));
        }
        pl_qgemm p;
        memset(&p, 0, sizeof p);
        p.m = m, p.k = k, p.n = n, p.ldx = k, p.zy = 1 + (int64_t)s * 30, p.lo = s % 2 ? 1 + (int64_t)s * 30 : 0;
        p.hi = 255;
        for (int64_t i = 0; i < m; i++)
            for (int64_t j = 0; j < n; j++) {
                int64_t acc = offset[j];
                for (int64_t r = 0; r < k; r++) acc += (int64_t)x[i * k + r] * w[r * n + j];
                float v = nearbyintf((float)acc * mult[j]) + (float)p.zy;
                v = v < (float)p.lo ? (float)p.lo : v > (float)p.hi ? (float)p.hi : v;
                want[i * n + j] = (uint8_t)v;
            }
        char err[256];
        checks++;
        if (pl_qgemm_check(&p, (size_t)(m * k), (size_t)(k4 * np * 4), (size_t)np, (size_t)np, (size_t)(m * n), err,
                           sizeof err) != 0) {
            printf("FAIL %s qgemm %lld x %lld x %lld: %s\n", isa, (long long)m, (long long)k, (long long)n, err);
            failures++;
        } else {
            for (int kernel = 0; kernel < PL_QGEMM_KERNELS; kernel++) {  /* every micro-kernel this CPU runs */
                if (!pl_qgemm_kernel_usable(kernel)) continue;
                checks++;
                memset(y, 0, (size_t)(m * n));
                pl_qgemm_run_as(&p, x, packed, offset, mult, y, kernel);
                if (memcmp(y, want, (size_t)(m * n)) != 0) {
                    printf("FAIL %s qgemm kernel %d %lld x %lld x %lld: bytes differ from the integer sums\n", isa,
                           kernel, (long long)m, (long long)k, (long long)n);
                    failures++;
                }
            }
        }
        free(x); free(y); free(want); free(w); free(packed); free(offset); free(mult);
    }
}

/* The GEMM's convolution rows: the patches gathered from an NHWC input (padding = the zero point) against the
 * direct sums, strided, dilated, padded unevenly, with channel counts that leave k % 4 != 0. */
static void test_qconv(const char *isa)
{
    /* batch, h, w, c, kh, kw, stride, dilation, top, left, bottom/right, n */
    static const int64_t cases[][12] = {{1, 9, 7, 3, 3, 3, 1, 1, 1, 1, 1, 20}, {2, 11, 8, 5, 7, 7, 2, 1, 3, 3, 3, 64},
                                        {1, 6, 6, 8, 3, 3, 1, 2, 2, 0, 1, 70}, {1, 5, 9, 1, 1, 3, 2, 1, 0, 1, 2, 16},
                                        {1, 15, 14, 3, 7, 7, 2, 1, 3, 3, 3, 64}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const int64_t *q = cases[s];
        const int64_t b = q[0], h = q[1], w = q[2], c = q[3], kh = q[4], kw = q[5], st = q[6], dil = q[7];
        const int64_t top = q[8], left = q[9], extra = q[10], n = q[11];
        const int64_t ho = (h + top + extra - dil * (kh - 1) - 1) / st + 1;
        const int64_t wo = (w + left + extra - dil * (kw - 1) - 1) / st + 1;
        const int64_t m = b * ho * wo, k = kh * kw * c, k4 = (k + 3) / 4, np = (n + PL_QNR - 1) / PL_QNR * PL_QNR;
        const int64_t zx = 37 + (int64_t)s;
        uint8_t *x = malloc((size_t)(b * h * w * c)), *y = malloc((size_t)(m * n)), *want = malloc((size_t)(m * n));
        int8_t *wt = malloc((size_t)(k * n)), *packed = calloc((size_t)(k4 * np * 4), 1);
        int32_t *offset = calloc((size_t)np, sizeof *offset);
        float *mult = calloc((size_t)np, sizeof *mult);
        for (int64_t i = 0; i < b * h * w * c; i++) x[i] = (uint8_t)((frand() + 1) * 127.9);
        for (int64_t i = 0; i < k * n; i++) wt[i] = (int8_t)(frand() * 127);
        for (int64_t r = 0; r < k; r++)
            for (int64_t j = 0; j < n; j++) {
                const int64_t j0 = j / PL_QNB * PL_QNB, wp = np - j0 < PL_QNB ? np - j0 : PL_QNB;
                packed[j0 * k4 * 4 + ((r / 4) * wp + j - j0) * 4 + r % 4] = wt[r * n + j];
            }
        for (int64_t j = 0; j < n; j++) mult[j] = (float)((frand() + 1.5) * 0.3 / (double)(k * 64));
        pl_qgemm p;
        memset(&p, 0, sizeof p);
        p.m = m, p.k = k, p.n = n, p.ldx = k, p.zy = 100, p.lo = 0, p.hi = 255, p.conv = 1;
        p.batch = b, p.h = h, p.w = w, p.c = c, p.kh = kh, p.kw = kw, p.sh = p.sw = st, p.dh = p.dw = dil;
        p.top = top, p.left = left, p.ho = ho, p.wo = wo, p.zx = zx;
        for (int64_t i = 0; i < m; i++) {
            const int64_t bi = i / (ho * wo), oy = i / wo % ho, ox = i % wo;
            for (int64_t j = 0; j < n; j++) {
                int64_t acc = 0;
                for (int64_t ty = 0; ty < kh; ty++)
                    for (int64_t tx = 0; tx < kw; tx++)
                        for (int64_t ch = 0; ch < c; ch++) {
                            const int64_t iy = oy * st - top + ty * dil, ix = ox * st - left + tx * dil;
                            const int64_t v = iy < 0 || iy >= h || ix < 0 || ix >= w ? zx
                                              : x[((bi * h + iy) * w + ix) * c + ch];
                            acc += v * wt[((ty * kw + tx) * c + ch) * n + j];
                        }
                float v = nearbyintf((float)acc * mult[j]) + (float)p.zy;
                want[i * n + j] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
        char err[256];
        checks++;
        if (pl_qgemm_check(&p, (size_t)(b * h * w * c), (size_t)(k4 * np * 4), (size_t)np, (size_t)np,
                           (size_t)(m * n), err, sizeof err) != 0) {
            printf("FAIL %s qgemm convolution case %zu: %s\n", isa, s, err);
            failures++;
        } else {
            for (int kernel = 0; kernel < PL_QGEMM_KERNELS; kernel++) {
                if (!pl_qgemm_kernel_usable(kernel)) continue;
                checks++;
                memset(y, 0, (size_t)(m * n));
                if (pl_qgemm_run_as(&p, x, packed, offset, mult, y, kernel) != 0
                    || memcmp(y, want, (size_t)(m * n)) != 0) {
                    printf("FAIL %s qgemm kernel %d convolution case %zu: bytes differ from the direct sums\n", isa,
                           kernel, s);
                    failures++;
                }
            }
        }
        free(x); free(y); free(want); free(wt); free(packed); free(offset); free(mult);
    }
}

/* The int8 depthwise convolution against the direct sums: padded unevenly, strided, dilated, more channels than the
 * kernel's block of sums. */
static void test_qdepthwise(const char *isa)
{
    /* batch, h, w, c, kh, kw, stride, dilation, top, left, bottom/right */
    static const int64_t cases[][11] = {{1, 9, 7, 3, 3, 3, 1, 1, 1, 1, 1}, {2, 8, 11, 300, 5, 5, 2, 1, 2, 1, 3},
                                        {1, 6, 6, 17, 3, 3, 1, 2, 2, 0, 1}, {2, 10, 13, 40, 3, 3, 2, 1, 1, 1, 0},
                                        {1, 5, 12, 33, 3, 3, 1, 1, 0, 2, 1}, {1, 2, 2, 5, 3, 3, 1, 1, 1, 1, 1},
                                        {1, 3, 1, 16, 3, 3, 2, 1, 1, 1, 1}};
    for (size_t s = 0; s < sizeof cases / sizeof cases[0]; s++) {
        const int64_t *q = cases[s];
        pl_qdepthwise p = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[6], q[7], q[7], q[8], q[9], 0, 0,
                           20 + (int64_t)s, 90, 5, 250};
        p.ho = (p.h + p.top + q[10] - p.dh * (p.kh - 1) - 1) / p.sh + 1;
        p.wo = (p.w + p.left + q[10] - p.dw * (p.kw - 1) - 1) / p.sw + 1;
        const int64_t c = p.c, taps = p.kh * p.kw, xn = p.batch * p.h * p.w * c, yn = p.batch * p.ho * p.wo * c;
        uint8_t *x = malloc((size_t)xn), *y = malloc((size_t)yn), *want = malloc((size_t)yn);
        int32_t *w = malloc((size_t)(taps * c) * sizeof *w);
        int32_t *offset = malloc((size_t)c * sizeof *offset);
        float *mult = malloc((size_t)c * sizeof *mult);
        for (int64_t i = 0; i < xn; i++) x[i] = (uint8_t)((frand() + 1) * 127.9);
        for (int64_t i = 0; i < taps * c; i++) w[i] = (int8_t)(frand() * 127);
        for (int64_t ch = 0; ch < c; ch++) {
            offset[ch] = (int32_t)(frand() * 3000);
            mult[ch] = (float)((frand() + 1.5) * 0.3 / (double)(taps * 64));
        }
        for (int64_t i = 0; i < yn; i++) {
            const int64_t ch = i % c, ox = i / c % p.wo, oy = i / c / p.wo % p.ho, b = i / c / p.wo / p.ho;
            int64_t acc = offset[ch];
            for (int64_t ty = 0; ty < p.kh; ty++)
                for (int64_t tx = 0; tx < p.kw; tx++) {
                    const int64_t iy = oy * p.sh - p.top + ty * p.dh, ix = ox * p.sw - p.left + tx * p.dw;
                    if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w)
                        acc += ((int64_t)x[((b * p.h + iy) * p.w + ix) * c + ch] - p.zx) * w[(ty * p.kw + tx) * c + ch];
                }
            float v = nearbyintf((float)acc * mult[ch]) + (float)p.zy;
            want[i] = (uint8_t)(v < (float)p.lo ? (float)p.lo : v > (float)p.hi ? (float)p.hi : v);
        }
        char err[256];
        checks++;
        if (pl_qdepthwise_check(&p, (size_t)xn, (size_t)(taps * c), (size_t)c, (size_t)c, (size_t)yn, err,
                                sizeof err) != 0) {
            printf("FAIL %s qdepthwise case %zu: %s\n", isa, s, err);
            failures++;
        } else {
            pl_qdepthwise_run(&p, x, w, offset, mult, y);
            if (memcmp(y, want, (size_t)yn) != 0) {
                printf("FAIL %s qdepthwise case %zu: bytes differ from the direct sums\n", isa, s);
                failures++;
            }
#ifdef PL_X86
            /* the AVX-512 body with and without VNNI, whichever the ISA table picks */
            for (int vnni = 0; vnni < 2 && pl_isa_current() == &pl_isa_avx512; vnni++) {
                if (!__builtin_cpu_supports("avx512bw") || !__builtin_cpu_supports("avx512vl")
                    || (vnni && !__builtin_cpu_supports("avx512vnni")))
                    continue;
                memset(y, 0, (size_t)yn);
                pl_qdepthwise_run_as(&p, x, w, offset, mult, y, 2, vnni);
                checks++;
                if (memcmp(y, want, (size_t)yn) != 0) {
                    printf("FAIL %s qdepthwise case %zu (AVX-512, VNNI %d): bytes differ from the direct sums\n",
                           isa, s, vnni);
                    failures++;
                }
            }
#endif
        }
        free(x); free(y); free(want); free(w); free(offset); free(mult);
    }
}

/* uint8 max pooling against direct maxima: padded, strided, dilated. */
static void test_qmaxpool(void)
{
    pl_pool p;
    memset(&p, 0, sizeof p);
    p.n = 2, p.h = 9, p.w = 7, p.c = 19, p.kh = 3, p.kw = 2, p.sh = 2, p.sw = 1, p.pt = 1, p.pl = 1, p.dh = 1;
    p.dw = 2, p.kind = PL_POOL_MAX;
    p.ho = (p.h + 2 * p.pt - p.dh * (p.kh - 1) - 1) / p.sh + 1;
    p.wo = (p.w + 2 * p.pl - p.dw * (p.kw - 1) - 1) / p.sw + 1;
    const int64_t xn = p.n * p.h * p.w * p.c, yn = p.n * p.ho * p.wo * p.c;
    uint8_t *x = malloc((size_t)xn), *y = malloc((size_t)yn), *want = malloc((size_t)yn);
    for (int64_t i = 0; i < xn; i++) x[i] = (uint8_t)((frand() + 1) * 127.9);
    for (int64_t i = 0; i < yn; i++) {
        const int64_t ch = i % p.c, ox = i / p.c % p.wo, oy = i / p.c / p.wo % p.ho, b = i / p.c / p.wo / p.ho;
        int best = 0;
        for (int64_t ty = 0; ty < p.kh; ty++)
            for (int64_t tx = 0; tx < p.kw; tx++) {
                const int64_t iy = oy * p.sh - p.pt + ty * p.dh, ix = ox * p.sw - p.pl + tx * p.dw;
                if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w && x[((b * p.h + iy) * p.w + ix) * p.c + ch] > best)
                    best = x[((b * p.h + iy) * p.w + ix) * p.c + ch];
            }
        want[i] = (uint8_t)best;
    }
    char err[256];
    checks++;
    if (pl_pool_check(&p, (size_t)xn, (size_t)yn, err, sizeof err) != 0) {
        printf("FAIL qmaxpool: %s\n", err);
        failures++;
    } else {
        pl_qmaxpool_run(&p, x, y);
        if (memcmp(y, want, (size_t)yn) != 0) {
            printf("FAIL qmaxpool: bytes differ from the direct maxima\n");
            failures++;
        }
    }
    free(x); free(y); free(want);
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
        test_winograd(all[i]->name);
        test_elementwise(all[i]);
        test_recurrent(all[i]);
        test_resize(all[i]);
        test_attention(all[i]->name);
        test_broadcast_and_reduce(all[i]->name);
        test_rnn_stack(all[i]->name);
        test_qgemm(all[i]->name);
        test_qconv(all[i]->name);
        test_qdepthwise(all[i]->name);
        tested++;
    }
    test_hostile_parameters();
    test_copy();
    test_pool();
    test_qmaxpool();
    printf("%s: %d instruction set(s), %d checks, %d failed\n", failures ? "FAILED" : "ok", tested, checks,
           failures);
    return failures ? 1 : 0;
}
