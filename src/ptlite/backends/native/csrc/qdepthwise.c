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
    /* The AVX-512 row's (dw_prepare): weights paired as int16 per 32-bit lane, (taps + 1) / 2 rows of cp; the
     * first terms, cp; cp zero points; cp = c rounded up to 16. */
    int32_t *pairs, *first;
    uint8_t *zero_row;
    int64_t cp;
    /* 3x3 kernels of dilation 1 and stride 1 or 2 (row_avx512's inner pixels): per kernel row, the weights of its
     * first two taps paired, then of its third (paired with 0), 6 rows of cp; NULL for other kernels. The zero row
     * then spans a whole input row (w * c + cp bytes). */
    int32_t *rows3;
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

/* The row on AVX-512, a pixel at a time with its sums in registers. Each tap reads the input pixel it covers, or a
 * row of zero points where it falls in the padding, so every pixel computes the same way:
 *
 *   sum = (offset - zx * sum of the weights) + sum over the taps of x * w
 *
 * equal to the offset plus the sum of (x - zx) * w over the taps inside (a padding tap adds zx * w, which the first
 * term takes back). Two taps share each 32-bit lane as int16 (x, 0..255, and w, -128..127): vpmaddwd, or VNNI's
 * vpdpwssd (in assembly: GCC 12's intrinsic copies the sum around it), adds both products at once. int32 sums wrap,
 * so an out-of-range first term still ends at the exact sum, which fits int32 (the check). The paired weights and the
 * first terms are made once per call (dw_prepare). Returns 0 where a buffer cannot be allocated (the caller runs the
 * plain body instead). */

AVX512 static inline __m512i dw_dot(__m512i acc, __m512i x, __m512i w, int vnni)
{
    if (vnni) {
        __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(x), "v"(w));
        return acc;
    }
    return _mm512_add_epi32(acc, _mm512_madd_epi16(x, w));
}

/* The epilogue of dw_pixel: requantize a block's sums and store its bytes. */
AVX512 static inline void dw_store(__m512i acc, const float *mult, __mmask16 m, uint8_t *out, __m512 zy, __m512 lo,
                                   __m512 hi)
{
    __m512 f = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_maskz_loadu_ps(m, mult));
    f = _mm512_add_ps(_mm512_roundscale_ps(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), zy);
    f = _mm512_min_ps(_mm512_max_ps(f, lo), hi);
    _mm_mask_storeu_epi8(out, m, _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(f)));
}

/* One output pixel's 16-channel block l (mask m) from the tap pointers, requantized and stored. */
AVX512 static inline void dw_pixel(const dw_job *job, const uint8_t *const *ptr, int64_t taps, int64_t l,
                                   __mmask16 m, uint8_t *out, int vnni, __m512 zy, __m512 lo, __m512 hi)
{
    const int64_t cp = job->cp, off = 16 * l;
    __m512i acc = _mm512_loadu_si512(job->first + off);
    const int32_t *wp = job->pairs + off;
    int64_t t = 0;
    for (; t + 1 < taps; t += 2, wp += cp) {
        const __m512i xa = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, ptr[t] + off));
        const __m512i xb = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, ptr[t + 1] + off));
        acc = dw_dot(acc, _mm512_or_si512(xa, _mm512_slli_epi32(xb, 16)), _mm512_loadu_si512(wp), vnni);
    }
    if (t < taps)  /* the odd tap: its pair's second weight is 0 */
        acc = dw_dot(acc, _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, ptr[t] + off)), _mm512_loadu_si512(wp), vnni);
    dw_store(acc, job->mult + off, m, out + off, zy, lo, hi);
}

/* Pixels [o0, o1) of a row, all of whose taps fall inside it, for a 3x3 kernel of dilation 1 and stride S (1 or 2),
 * channel block l: two pixels at a time, with the block's weights in registers and the input columns the two share
 * widened once. rows: the three input rows (or the zero row). */
#define DW3X3_INTERIOR(NAME, S)                                                                                      \
    AVX512 static void NAME(const dw_job *job, const uint8_t *const *rows, int64_t o0, int64_t o1, int64_t l,        \
                            __mmask16 m, uint8_t *out, int vnni, __m512 zy, __m512 lo, __m512 hi)                    \
    {                                                                                                                \
        const pl_qdepthwise *p = job->p;                                                                             \
        const int64_t c = p->c, cp = job->cp, off = 16 * l;                                                          \
        const __m512i first = _mm512_loadu_si512(job->first + off);                                                  \
        __m512i w01[3], w2[3];                                                                                       \
        for (int r = 0; r < 3; r++) {                                                                                \
            w01[r] = _mm512_loadu_si512(job->rows3 + (2 * r) * cp + off);                                            \
            w2[r] = _mm512_loadu_si512(job->rows3 + (2 * r + 1) * cp + off);                                         \
        }                                                                                                            \
        int64_t ox = o0;                                                                                             \
        for (; ox + 1 < o1; ox += 2) {                                                                               \
            const int64_t col = (ox * S - p->left) * c + off;                                                        \
            __m512i a = first, b = first;                                                                            \
            for (int r = 0; r < 3; r++) {                                                                            \
                const uint8_t *x = rows[r] + col;                                                                    \
                const __m512i x0 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x));                                \
                const __m512i x1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + c));                            \
                const __m512i x2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + 2 * c));                        \
                const __m512i x3 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + 3 * c));                        \
                a = dw_dot(a, _mm512_or_si512(x0, _mm512_slli_epi32(x1, 16)), w01[r], vnni);                        \
                a = dw_dot(a, x2, w2[r], vnni);                                                                      \
                if (S == 1) {                                                                                        \
                    b = dw_dot(b, _mm512_or_si512(x1, _mm512_slli_epi32(x2, 16)), w01[r], vnni);                    \
                    b = dw_dot(b, x3, w2[r], vnni);                                                                  \
                } else {                                                                                             \
                    const __m512i x4 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + 4 * c));                    \
                    b = dw_dot(b, _mm512_or_si512(x2, _mm512_slli_epi32(x3, 16)), w01[r], vnni);                    \
                    b = dw_dot(b, x4, w2[r], vnni);                                                                  \
                }                                                                                                    \
            }                                                                                                        \
            dw_store(a, job->mult + off, m, out + ox * c + off, zy, lo, hi);                                         \
            dw_store(b, job->mult + off, m, out + (ox + 1) * c + off, zy, lo, hi);                                   \
        }                                                                                                            \
        if (ox < o1) {                                                                                               \
            const int64_t col = (ox * S - p->left) * c + off;                                                        \
            __m512i a = first;                                                                                       \
            for (int r = 0; r < 3; r++) {                                                                            \
                const uint8_t *x = rows[r] + col;                                                                    \
                const __m512i x0 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x));                                \
                const __m512i x1 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + c));                            \
                const __m512i x2 = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x + 2 * c));                        \
                a = dw_dot(a, _mm512_or_si512(x0, _mm512_slli_epi32(x1, 16)), w01[r], vnni);                        \
                a = dw_dot(a, x2, w2[r], vnni);                                                                      \
            }                                                                                                        \
            dw_store(a, job->mult + off, m, out + ox * c + off, zy, lo, hi);                                         \
        }                                                                                                            \
    }

DW3X3_INTERIOR(dw3x3_stride1, 1)
DW3X3_INTERIOR(dw3x3_stride2, 2)

/* A pixel of the same kernel some of whose taps fall left or right of the input: those read the zero row. */
AVX512 static void dw3x3_edge(const dw_job *job, const uint8_t *const *rows, int64_t ox, int64_t l, __mmask16 m,
                              uint8_t *out, int vnni, __m512 zy, __m512 lo, __m512 hi)
{
    const pl_qdepthwise *p = job->p;
    const int64_t c = p->c, off = 16 * l, ix = ox * p->sw - p->left;
    __m512i a = _mm512_loadu_si512(job->first + off);
    for (int r = 0; r < 3; r++) {
        __m512i x[3];
        for (int k = 0; k < 3; k++) {
            const uint8_t *at = ix + k >= 0 && ix + k < p->w ? rows[r] + (ix + k) * c : job->zero_row;
            x[k] = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, at + off));
        }
        a = dw_dot(a, _mm512_or_si512(x[0], _mm512_slli_epi32(x[1], 16)),
                   _mm512_loadu_si512(job->rows3 + (2 * r) * job->cp + off), vnni);
        a = dw_dot(a, x[2], _mm512_loadu_si512(job->rows3 + (2 * r + 1) * job->cp + off), vnni);
    }
    dw_store(a, job->mult + off, m, out + ox * c + off, zy, lo, hi);
}

AVX512 static int row_avx512(const dw_job *job, int64_t row)
{
    const pl_qdepthwise *p = job->p;
    const int64_t b = row / p->ho, oy = row % p->ho, c = p->c, kh = p->kh, kw = p->kw, taps = kh * kw;
    const int64_t lanes = (c + 15) / 16, step = p->sw * c;
    /* the thread's tap pointers and their steps, one after the other */
    void *scratch = pl_thread_scratch(PL_SCRATCH_TAPS, (size_t)taps * (sizeof(const uint8_t *) + sizeof(int64_t)));
    if (!scratch) return 0;
    const uint8_t **ptr = scratch;
    int64_t *inc = (int64_t *)(ptr + taps);
    const __mmask16 last = c % 16 ? (__mmask16)((1u << (c % 16)) - 1) : (__mmask16)0xffff;
    /* The pixels whose taps all fall inside the row: [in0, in1). */
    const int64_t reach = (kw - 1) * p->dw;
    int64_t in0 = p->left > 0 ? (p->left + p->sw - 1) / p->sw : 0;
    int64_t in1 = p->w - 1 - reach + p->left < 0 ? 0 : (p->w - 1 - reach + p->left) / p->sw + 1;
    if (in1 > p->wo) in1 = p->wo;
    if (in0 > in1) in0 = in1;
    const int vnni = job->vnni;
    const __m512 zy = _mm512_set1_ps((float)p->zy), lo = _mm512_set1_ps((float)p->lo);
    const __m512 hi = _mm512_set1_ps((float)p->hi);
    uint8_t *out = job->y + (b * p->ho + oy) * p->wo * c;
    if (job->rows3) {
        const uint8_t *rows[3];
        for (int64_t ty = 0; ty < 3; ty++) {
            const int64_t iy = oy * p->sh - p->top + ty;
            rows[ty] = iy >= 0 && iy < p->h ? job->x + (b * p->h + iy) * p->w * c : job->zero_row;
        }
        for (int64_t l = 0; l < lanes; l++) {
            const __mmask16 m = l == lanes - 1 ? last : (__mmask16)0xffff;
            if (p->sw == 1)
                dw3x3_stride1(job, rows, in0, in1, l, m, out, vnni, zy, lo, hi);
            else
                dw3x3_stride2(job, rows, in0, in1, l, m, out, vnni, zy, lo, hi);
            for (int64_t ox = 0; ox < in0; ox++) dw3x3_edge(job, rows, ox, l, m, out, vnni, zy, lo, hi);
            for (int64_t ox = in1 > in0 ? in1 : in0; ox < p->wo; ox++)
                dw3x3_edge(job, rows, ox, l, m, out, vnni, zy, lo, hi);
        }
        return 1;
    }
    for (int64_t ox = 0; ox < p->wo; ox++) {
        if (ox == 0 || ox <= in0 || ox >= in1) {  /* every pointer anew; inside, each moves by a stride */
            for (int64_t ty = 0, t = 0; ty < kh; ty++) {
                const int64_t iy = oy * p->sh - p->top + ty * p->dh;
                const int row_in = iy >= 0 && iy < p->h;
                for (int64_t tx = 0; tx < kw; tx++, t++) {
                    const int64_t ix = ox * p->sw - p->left + tx * p->dw;
                    const int in = row_in && ix >= 0 && ix < p->w;
                    ptr[t] = in ? job->x + ((b * p->h + iy) * p->w + ix) * c : job->zero_row;
                    inc[t] = row_in ? step : 0;
                }
            }
        } else {
            for (int64_t t = 0; t < taps; t++) ptr[t] += inc[t];
        }
        for (int64_t l = 0; l < lanes; l++)
            dw_pixel(job, ptr, taps, l, l == lanes - 1 ? last : (__mmask16)0xffff, out + ox * c, vnni, zy, lo, hi);
    }
    return 1;
}
#endif

/* The AVX-512 row's per-call tables (see row_avx512); 0 where they cannot be allocated. */
static int dw_prepare(dw_job *job)
{
    const pl_qdepthwise *p = job->p;
    const int64_t c = p->c, taps = p->kh * p->kw, cp = (c + 15) / 16 * 16, npairs = (taps + 1) / 2;
    const int three = p->kh == 3 && p->kw == 3 && p->dh == 1 && p->dw == 1 && (p->sw == 1 || p->sw == 2);
    const size_t zeros = (size_t)(three ? p->w * c + cp : cp);
    job->cp = cp;
    job->pairs = calloc((size_t)(npairs * cp), sizeof *job->pairs);
    job->first = calloc((size_t)cp, sizeof *job->first);
    job->zero_row = malloc(zeros);
    job->rows3 = three ? calloc((size_t)(6 * cp), sizeof *job->rows3) : NULL;
    if (!job->pairs || !job->first || !job->zero_row || (three && !job->rows3)) {
        free(job->pairs);
        free(job->first);
        free(job->zero_row);
        free(job->rows3);
        job->pairs = job->first = job->rows3 = NULL;
        job->zero_row = NULL;
        return 0;
    }
    memset(job->zero_row, (int)p->zx, zeros);
    /* tap by tap over the channels (loops the compiler vectorizes), in uint32: the first terms are modulo 2^32, and
     * the sums end exact (see row_avx512) */
    uint32_t *first = (uint32_t *)job->first, *pairs = (uint32_t *)job->pairs, *rows3 = (uint32_t *)job->rows3;
    const uint32_t zx = (uint32_t)p->zx;
    for (int64_t ch = 0; ch < c; ch++) first[ch] = (uint32_t)job->offset[ch];
    for (int64_t t = 0; t < taps; t++) {
        const int32_t *wt = job->w + t * c;
        uint32_t *pair = pairs + (t / 2) * cp, *row = three ? rows3 + (2 * (t / 3) + (t % 3 == 2)) * cp : NULL;
        const int shift = t % 2 ? 16 : 0, row_shift = t % 3 == 1 ? 16 : 0;  /* tap t = 3 * row + column */
        for (int64_t ch = 0; ch < c; ch++) {
            const uint32_t half = (uint32_t)(uint16_t)(int16_t)wt[ch];
            first[ch] -= zx * (uint32_t)wt[ch];
            pair[ch] |= half << shift;
        }
        for (int64_t ch = 0; row && ch < c; ch++) row[ch] |= (uint32_t)(uint16_t)(int16_t)wt[ch] << row_shift;
    }
    return 1;
}

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
    pl_qdepthwise_run_as(p, x, w, offset, mult, y, variant, vnni);
}

void pl_qdepthwise_run_as(const pl_qdepthwise *p, const uint8_t *x, const int32_t *w, const int32_t *offset,
                          const float *mult, uint8_t *y, int variant, int vnni)
{
    dw_job job = {p, x, w, offset, mult, y, variant, vnni, NULL, NULL, NULL, 0, NULL};
    if (variant == 2 && !dw_prepare(&job)) job.variant = 1;
    pl_parallel_work((size_t)(p->batch * p->ho), dw_task, &job,
                     (double)p->batch * (double)p->ho * (double)p->wo * (double)p->c * (double)(p->kh * p->kw));
    free(job.pairs);
    free(job.first);
    free(job.zero_row);
    free(job.rows3);
}
