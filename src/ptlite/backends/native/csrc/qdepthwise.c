/* The int8 depthwise convolution with PyTorch's requantization, bit for bit the NumPy reference's:
 *
 *   y[b][oy][ox][ch] = clamp(round_half_even(float(sum over the taps inside the input of (x - zx) * w[tap][ch]
 *                                                  + offset[ch]) * mult[ch]) + zy, lo, hi)
 *
 * (a tap in the padding reads the zero point zx, the real 0, and adds nothing). x uint8 NHWC (batch, h, w, c); w the
 * int8 weight's values widened to int32 (kh * kw, c), made once per weight on the Python side; offset int32 (the bias
 * rounded at the product's scale); mult float32 (input scale x weight scale / output scale); y uint8 NHWC (batch,
 * ho, wo, c). The sums fit int32: the check bounds kh * kw * 255 * 128, and the Python side the offsets. A plain body,
 * compiled for AVX2 and plain C so that the compiler vectorizes its channel loops at each width, and an AVX-512 BW
 * one in intrinsics; the table pl_isa_current selects picks which runs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define CHANNEL_BLOCK 256  /* channels whose sums stay on the stack at once */

typedef struct {
    const pl_qdepthwise *p;
    const uint8_t *x;
    const int32_t *w;
    const int32_t *offset;
    const float *mult;
    uint8_t *y;
    int variant, vnni;
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
        const int32_t zx = (int32_t)p->zx;                                                                           \
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
                        const int32_t *restrict ws = job->w + (ty * p->kw + tx) * c + c0;                             \
                        for (int64_t ch = 0; ch < cn; ch++)                                                          \
                            acc[ch] += ((int32_t)xs[ch] - zx) * ws[ch];                            \
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
#include <immintrin.h>

DEPTHWISE_ROW(row_avx2, __attribute__((target("avx2,fma"))))

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

/* The same row on AVX-512, a tap at a time over the whole row: the row's sums (wo x c, padded to 16 channels) stay
 * in a per-thread buffer in L1, each tap's weights in a register over every pixel the tap reaches (its range
 * computed once, no test per pixel), then requantized and stored; the last 16 channels masked. Returns 0 where the
 * buffer cannot be allocated (the caller runs the plain body instead). */
static _Thread_local int32_t *row_sums;
static _Thread_local size_t row_sums_cap;

/* The output pixels [*ox0, *ox1) of a row that tap column tx reaches inside the input. */
static inline void tap_range(const pl_qdepthwise *p, int64_t tx, int64_t *ox0, int64_t *ox1)
{
    const int64_t shift = tx * p->dw - p->left;  /* ix = ox * sw + shift */
    *ox0 = shift >= 0 ? 0 : (-shift + p->sw - 1) / p->sw;
    *ox1 = p->w - 1 - shift < 0 ? 0 : (p->w - 1 - shift) / p->sw + 1;
    if (*ox1 > p->wo) *ox1 = p->wo;
    if (*ox0 > *ox1) *ox0 = *ox1;
}

/* sums[ox] += (x - zx) * w over pixels [ox0, ox1) for tap column tx of input row xrow (weights wt). */
AVX512 static inline void tap_one(const dw_job *job, int32_t *sums, const uint8_t *xrow, int64_t tx, const int32_t *wt,
                                  int64_t ox0, int64_t ox1)
{
    const pl_qdepthwise *p = job->p;
    const int64_t c = p->c, lanes = (c + 15) / 16, cp = lanes * 16, step = p->sw * c;
    const int64_t shift = tx * p->dw - p->left;
    const __m512i zx = _mm512_set1_epi32((int)p->zx);
    for (int64_t l = 0; l < lanes && ox0 < ox1; l++) {
        const __mmask16 m = c - 16 * l >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (c - 16 * l)) - 1);
        const __m512i wv = _mm512_maskz_loadu_epi32(m, wt + 16 * l);
        const uint8_t *xs = xrow + (ox0 * p->sw + shift) * c + 16 * l;
        int32_t *acc = sums + ox0 * cp + 16 * l;
        for (int64_t ox = ox0; ox < ox1; ox++, xs += step, acc += cp) {
            const __m512i xv = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, xs)), zx);
            _mm512_storeu_si512(acc, _mm512_add_epi32(_mm512_loadu_si512(acc), _mm512_mullo_epi32(xv, wv)));
        }
    }
}

/* Tap columns tx and tx + 1 over pixels [ox0, ox1), where both are inside the input: each lane of 32 bits holds the
 * two taps' (x - zx) as int16, and VNNI's vpdpwssd adds both products to the sum at once (in assembly: GCC 12's
 * intrinsic copies the sum around it). */
AVX512 __attribute__((target("avx512vnni"))) static inline void tap_pair(const dw_job *job, int32_t *sums,
                                                                        const uint8_t *xrow, int64_t tx,
                                                                        const int32_t *wt, int64_t ox0, int64_t ox1)
{
    const pl_qdepthwise *p = job->p;
    const int64_t c = p->c, lanes = (c + 15) / 16, cp = lanes * 16, step = p->sw * c, next = p->dw * c;
    const int64_t shift = tx * p->dw - p->left;
    const __m512i zx = _mm512_set1_epi16((short)p->zx), low = _mm512_set1_epi32(0xffff);
    for (int64_t l = 0; l < lanes; l++) {
        const __mmask16 m = c - 16 * l >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (c - 16 * l)) - 1);
        const __m512i wv = _mm512_or_si512(_mm512_and_si512(_mm512_maskz_loadu_epi32(m, wt + 16 * l), low),
                                           _mm512_slli_epi32(_mm512_maskz_loadu_epi32(m, wt + c + 16 * l), 16));
        const uint8_t *xs = xrow + (ox0 * p->sw + shift) * c + 16 * l;
        int32_t *acc = sums + ox0 * cp + 16 * l;
        for (int64_t ox = ox0; ox < ox1; ox++, xs += step, acc += cp) {
            const __m512i xa = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, xs));
            const __m512i xb = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, xs + next));
            const __m512i xv = _mm512_sub_epi16(_mm512_or_si512(xa, _mm512_slli_epi32(xb, 16)), zx);
            __m512i sum = _mm512_loadu_si512(acc);
            __asm__("vpdpwssd %2, %1, %0" : "+v"(sum) : "v"(xv), "v"(wv));
            _mm512_storeu_si512(acc, sum);
        }
    }
}

AVX512 static int row_avx512(const dw_job *job, int64_t row)
{
    const pl_qdepthwise *p = job->p;
    const int64_t b = row / p->ho, oy = row % p->ho, c = p->c, w = p->w, wo = p->wo;
    const int64_t lanes = (c + 15) / 16, cp = lanes * 16;
    if (row_sums_cap < (size_t)(wo * cp)) {
        int32_t *grown = realloc(row_sums, (size_t)(wo * cp) * sizeof *grown);
        if (!grown) return 0;
        row_sums = grown;
        row_sums_cap = (size_t)(wo * cp);
    }
    int32_t *sums = row_sums;
    const __mmask16 last = c % 16 ? (__mmask16)((1u << (c % 16)) - 1) : (__mmask16)0xffff;
    for (int64_t l = 0; l < lanes; l++) {
        const __m512i offset = _mm512_maskz_loadu_epi32(l == lanes - 1 ? last : 0xffff, job->offset + 16 * l);
        for (int64_t ox = 0; ox < wo; ox++) _mm512_storeu_si512(sums + ox * cp + 16 * l, offset);
    }
    const int64_t iy0 = oy * p->sh - p->top;
    for (int64_t ty = 0; ty < p->kh; ty++) {
        const int64_t iy = iy0 + ty * p->dh;
        if (iy < 0 || iy >= p->h) continue;
        const uint8_t *xrow = job->x + ((b * p->h + iy) * w) * c;
        for (int64_t tx = 0; tx < p->kw;) {
            int64_t a0, a1;
            tap_range(p, tx, &a0, &a1);
            const int32_t *wt = job->w + (ty * p->kw + tx) * c;
            if (job->vnni && tx + 1 < p->kw) {  /* taps tx and tx + 1 together where both fall inside the row */
                int64_t b0, b1;
                tap_range(p, tx + 1, &b0, &b1);
                const int64_t i0 = a0 > b0 ? a0 : b0, i1 = a1 < b1 ? a1 : b1;
                if (i0 < i1) {
                    tap_pair(job, sums, xrow, tx, wt, i0, i1);
                    tap_one(job, sums, xrow, tx, wt, a0, i0 < a1 ? i0 : a1);
                    tap_one(job, sums, xrow, tx, wt, i1 > a0 ? i1 : a0, a1);
                    tap_one(job, sums, xrow, tx + 1, wt + c, b0, i0 < b1 ? i0 : b1);
                    tap_one(job, sums, xrow, tx + 1, wt + c, i1 > b0 ? i1 : b0, b1);
                    tx += 2;
                    continue;
                }
            }
            tap_one(job, sums, xrow, tx, wt, a0, a1);
            tx++;
        }
    }
    const __m512 zy = _mm512_set1_ps((float)p->zy), lo = _mm512_set1_ps((float)p->lo);
    const __m512 hi = _mm512_set1_ps((float)p->hi);
    uint8_t *out = job->y + (b * p->ho + oy) * wo * c;
    for (int64_t l = 0; l < lanes; l++) {
        const __mmask16 m = l == lanes - 1 ? last : (__mmask16)0xffff;
        const __m512 mult = _mm512_maskz_loadu_ps(m, job->mult + 16 * l);
        for (int64_t ox = 0; ox < wo; ox++) {
            __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_loadu_si512(sums + ox * cp + 16 * l)), mult);
            f = _mm512_add_ps(_mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
            f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
            _mm_mask_storeu_epi8(out + ox * c + 16 * l, m, _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(f)));
        }
    }
    return 1;
}
#endif

static void dw_task(void *ctx, size_t task)
{
    const dw_job *job = ctx;
#ifdef PL_X86
    if (job->variant == 2 && row_avx512(job, (int64_t)task)) return;
    if (job->variant == 1) {
        row_avx2(job, (int64_t)task);
        return;
    }
#endif
    row_generic(job, (int64_t)task);
}

void pl_qdepthwise_run(const pl_qdepthwise *p, const uint8_t *x, const int32_t *w, const int32_t *offset,
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
    int vnni = 0;
#ifdef PL_X86
    vnni = variant == 2 && __builtin_cpu_supports("avx512vnni");
#endif
    dw_job job = {p, x, w, offset, mult, y, variant, vnni};
    pl_parallel_work((size_t)(p->batch * p->ho), dw_task, &job,
                     (double)p->batch * (double)p->ho * (double)p->wo * (double)p->c * (double)(p->kh * p->kw));
}
