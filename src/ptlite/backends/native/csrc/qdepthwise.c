/* The int8 depthwise convolution with PyTorch's requantization, bit for bit the NumPy reference's:
 *
 *   y[b][oy][ox][ch] = clamp(round_half_even(float(sum over the taps inside the input of (x - zx) * w[tap][ch]
 *                                                  + offset[ch]) * mult[ch]) + zy, lo, hi)
 *
 * (a tap in the padding reads the zero point zx, the real 0, and adds nothing). x uint8 NHWC (batch, h, w, c), w int8
 * (kh * kw, c), offset int32 (the bias rounded at the product's scale), mult float32 (input scale x weight scale /
 * output scale), y uint8 NHWC (batch, ho, wo, c). A product fits int16 (255 x 127) and the sums int32: the check
 * bounds kh * kw * 255 * 128 + |offset| below 2^31 (the Python side checks the offsets). One body, compiled for
 * AVX-512 BW, AVX2 and plain C, so the compiler vectorizes the channel loops at each width; the table pl_isa_current
 * selects picks which runs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "native.h"

#define CHANNEL_BLOCK 256  /* channels whose sums stay on the stack at once */

typedef struct {
    const pl_qdepthwise *p;
    const uint8_t *x;
    const int8_t *w;
    const int32_t *offset;
    const float *mult;
    uint8_t *y;
    int variant;
} dw_job;

int pl_qdepthwise_check(const pl_qdepthwise *p, size_t x_len, size_t w_len, size_t offset_len, size_t mult_len,
                        size_t y_len, char *err, size_t cap)
{
    const int64_t big = (int64_t)1 << 30;
    const int64_t dims[] = {p->batch, p->h, p->w, p->c, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw, p->ho, p->wo};
    int ok = p->top >= 0 && p->left >= 0 && p->top < big && p->left < big;
    for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) ok = ok && dims[i] >= 1 && dims[i] < big;
    if (!ok || p->kh * p->kw > PL_QDEPTHWISE_MAX_TAPS
        || (double)p->batch * (double)p->h * (double)p->w * (double)p->c > (double)((int64_t)1 << 50)
        || (double)p->batch * (double)p->ho * (double)p->wo * (double)p->c > (double)((int64_t)1 << 50)) {
        snprintf(err, cap, "qdepthwise: invalid sizes (input %lld x %lld x %lld x %lld, kernel %lld x %lld, "
                 "output %lld x %lld)", (long long)p->batch, (long long)p->h, (long long)p->w, (long long)p->c,
                 (long long)p->kh, (long long)p->kw, (long long)p->ho, (long long)p->wo);
        return -1;
    }
    if (p->zx < 0 || p->zx > 255 || p->zy < 0 || p->zy > 255 || p->lo < 0 || p->hi > 255 || p->lo > p->hi) {
        snprintf(err, cap, "qdepthwise: a zero point (%lld, %lld) or the range [%lld, %lld] is outside uint8",
                 (long long)p->zx, (long long)p->zy, (long long)p->lo, (long long)p->hi);
        return -1;
    }
    if ((size_t)(p->batch * p->h * p->w * p->c) > x_len || (size_t)(p->kh * p->kw * p->c) > w_len
        || (size_t)p->c > offset_len || (size_t)p->c > mult_len || (size_t)(p->batch * p->ho * p->wo * p->c) > y_len) {
        snprintf(err, cap, "qdepthwise: a buffer is shorter than the sizes need");
        return -1;
    }
    return 0;
}

/* Output row `row` (image b, row oy) of the convolution. */
#define DEPTHWISE_ROW(NAME, ATTR)                                                                                    \
    ATTR static void NAME(const dw_job *job, int64_t row)                                                          \
    {                                                                                                                \
        const pl_qdepthwise *p = job->p;                                                                             \
        const int64_t b = row / p->ho, oy = row % p->ho, c = p->c;                                                   \
        const int16_t zx = (int16_t)p->zx;                                                                           \
        const float zy = (float)p->zy, lo = (float)p->lo, hi = (float)p->hi;                                         \
        int32_t acc[CHANNEL_BLOCK];                                                                                  \
        for (int64_t ox = 0; ox < p->wo; ox++) {                                                                     \
            uint8_t *restrict y = job->y + ((b * p->ho + oy) * p->wo + ox) * c;                                      \
            for (int64_t c0 = 0; c0 < c; c0 += CHANNEL_BLOCK) {                                                      \
                const int64_t cn = c - c0 < CHANNEL_BLOCK ? c - c0 : CHANNEL_BLOCK;                                  \
                for (int64_t ch = 0; ch < cn; ch++) acc[ch] = job->offset[c0 + ch];                                  \
                for (int64_t ty = 0; ty < p->kh; ty++) {                                                             \
                    const int64_t iy = oy * p->sh - p->top + ty * p->dh;                                             \
                    if (iy < 0 || iy >= p->h) continue;                                                              \
                    for (int64_t tx = 0; tx < p->kw; tx++) {                                                         \
                        const int64_t ix = ox * p->sw - p->left + tx * p->dw;                                        \
                        if (ix < 0 || ix >= p->w) continue;                                                          \
                        const uint8_t *restrict xs = job->x + ((b * p->h + iy) * p->w + ix) * c + c0;                \
                        const int8_t *restrict ws = job->w + (ty * p->kw + tx) * c + c0;                             \
                        for (int64_t ch = 0; ch < cn; ch++)                                                          \
                            acc[ch] += (int16_t)((int16_t)xs[ch] - zx) * (int16_t)ws[ch];                            \
                    }                                                                                                \
                }                                                                                                    \
                for (int64_t ch = 0; ch < cn; ch++) {                                                                \
                    float v = nearbyintf((float)acc[ch] * job->mult[c0 + ch]) + zy;                                  \
                    v = v < lo ? lo : v;                                                                             \
                    v = v > hi ? hi : v;                                                                             \
                    y[c0 + ch] = (uint8_t)(int32_t)v;                                                                \
                }                                                                                                    \
            }                                                                                                        \
        }                                                                                                            \
    }

DEPTHWISE_ROW(row_generic, )
#ifdef PL_X86
DEPTHWISE_ROW(row_avx2, __attribute__((target("avx2,fma"))))
DEPTHWISE_ROW(row_avx512, __attribute__((target("avx512f,avx512bw,avx512vl,avx2,fma"))))
#endif

static void dw_task(void *ctx, size_t task)
{
    const dw_job *job = ctx;
#ifdef PL_X86
    if (job->variant == 2) {
        row_avx512(job, (int64_t)task);
        return;
    }
    if (job->variant == 1) {
        row_avx2(job, (int64_t)task);
        return;
    }
#endif
    row_generic(job, (int64_t)task);
}

void pl_qdepthwise_run(const pl_qdepthwise *p, const uint8_t *x, const int8_t *w, const int32_t *offset,
                       const float *mult, uint8_t *y)
{
    int variant = 0;
#ifdef PL_X86
    __builtin_cpu_init();
    const pl_isa *isa = pl_isa_current();
    if (isa == &pl_isa_avx512 && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl"))
        variant = 2;
    else if (isa == &pl_isa_avx512 || isa == &pl_isa_avx2)
        variant = 1;
#endif
    dw_job job = {p, x, w, offset, mult, y, variant};
    pl_parallel_work((size_t)(p->batch * p->ho), dw_task, &job,
                     (double)p->batch * (double)p->ho * (double)p->wo * (double)p->c * (double)(p->kh * p->kw));
}
