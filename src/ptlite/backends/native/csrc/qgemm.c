/* The int8 GEMM with PyTorch's requantization (ops/quantized.py's arithmetic, bit for bit the NumPy reference's):
 *
 *   y[i][j] = clamp(round_half_even(float(sum_k x[i][k] * w[k][j] + offset[j]) * mult[j]) + zy, lo, hi)
 *
 * x uint8: m rows of k bytes (row i at x + i * ldx), or a convolution's patches gathered here from its NHWC input
 * (p->conv: the padding reads as the input's zero point, the real 0). w int8 in panels of PL_QNB columns (see
 * native.h), made once per weight on the Python side. offset int32 (the bias at the product's scale minus the
 * input's zero point times the column's sum) and mult float32 (input scale x weight scale / output scale), padded to
 * np entries. The sums are exact in int32: the check bounds k * 255 * 128 + |offset| below 2^31.
 *
 * Work is split into tiles of TILE_M rows by panel groups, on the thread pool. A tile of a convolution first gathers
 * its rows (k padded to a multiple of 4 with zeros) into a per-thread buffer. The micro-kernel (pl_qgemm_kernel):
 * - AVX-512 VNNI (vpdpbusd: four u8 x s8 products per int32 lane), when the AVX-512 table is selected and the CPU
 *   has it: QMR rows times one 64-column panel at a time (24 zmm accumulators);
 * - 256-bit vpdpbusd, when the AVX2 table is selected (or the AVX-512 one on a CPU without AVX-512 VNNI) and the CPU
 *   has AVX-VNNI (its VEX encoding) or AVX-512 VNNI with VL (the EVEX one: the same instruction, which lets a CPU
 *   without AVX-VNNI run this kernel): QMR rows times 16 columns (12 ymm accumulators);
 * - AVX2 without a dot product (vpmaddwd on the bytes widened to int16, exact), under either table on a CPU
 *   with neither: QMR rows times 8 columns;
 * - NEON sdot on aarch64 CPUs with dot products (panel_dot);
 * - plain C elsewhere (which the compiler vectorizes). */
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define QMR 6        /* rows the VNNI micro-kernel computes at once */
#define TILE_M 48    /* rows a task computes (a multiple of QMR) */
#define MIN_TASKS 8  /* split the panels too when the rows give fewer tiles than this */

typedef struct {
    const pl_qgemm *p;
    const uint8_t *x;
    const int8_t *w;
    const int32_t *offset;
    const float *mult;
    uint8_t *y;
    int64_t np, k4, panels, groups, per_group;
    int kernel;  /* enum pl_qgemm_kernel */
    atomic_int failed;
    int32_t *flip;  /* aarch64 with dot products: 128 x each column's weight sum (see panel_dot), np of them */
} qgemm_job;

int pl_qgemm_check(const pl_qgemm *p, size_t x_len, size_t w_len, size_t offset_len, size_t mult_len, size_t y_len,
                   char *err, size_t cap)
{
    /* products in double, so that none wraps: every buffer and index stays below 2^50 */
    const double limit = (double)((int64_t)1 << 50);
    if (p->m < 1 || p->k < 1 || p->n < 1 || p->m > ((int64_t)1 << 40) || p->k > PL_QGEMM_MAX_K
        || p->n > ((int64_t)1 << 30) || (!p->conv && (p->ldx < p->k || p->ldx > ((int64_t)1 << 40)))
        || (double)p->m * (double)p->n > limit || (double)(p->m - 1) * (double)p->ldx + (double)p->k > limit) {
        snprintf(err, cap, "qgemm: invalid sizes (m %lld, k %lld, n %lld, ldx %lld)", (long long)p->m,
                 (long long)p->k, (long long)p->n, (long long)p->ldx);
        return -1;
    }
    if (p->lo < 0 || p->hi > 255 || p->lo > p->hi || p->zy < 0 || p->zy > 255) {
        snprintf(err, cap, "qgemm: output zero point %lld or range [%lld, %lld] outside uint8", (long long)p->zy,
                 (long long)p->lo, (long long)p->hi);
        return -1;
    }
    size_t x_need = p->conv ? 0 : (size_t)((p->m - 1) * p->ldx + p->k);  /* (ldx is a plain GEMM's only) */
    if (p->conv) {
        const int64_t big = (int64_t)1 << 30;
        int ok = p->batch >= 1 && p->h >= 1 && p->w >= 1 && p->c >= 1 && p->kh >= 1 && p->kw >= 1 && p->sh >= 1
                 && p->sw >= 1 && p->dh >= 1 && p->dw >= 1 && p->ho >= 1 && p->wo >= 1 && p->zx >= 0 && p->zx <= 255;
        const int64_t dims[] = {p->batch, p->h, p->w, p->c, p->kh, p->kw, p->sh, p->sw, p->dh, p->dw, p->top,
                                p->left, p->ho, p->wo};
        for (size_t i = 0; i < sizeof dims / sizeof dims[0]; i++) ok = ok && dims[i] >= 0 && dims[i] < big;
        if (!ok || (double)p->batch * (double)p->ho * (double)p->wo != (double)p->m
            || (double)p->kh * (double)p->kw * (double)p->c != (double)p->k
            || (double)p->batch * (double)p->h * (double)p->w * (double)p->c > limit) {
            snprintf(err, cap, "qgemm: invalid convolution (input %lld x %lld x %lld x %lld, kernel %lld x %lld, "
                     "output %lld x %lld, m %lld, k %lld)", (long long)p->batch, (long long)p->h, (long long)p->w,
                     (long long)p->c, (long long)p->kh, (long long)p->kw, (long long)p->ho, (long long)p->wo,
                     (long long)p->m, (long long)p->k);
            return -1;
        }
        x_need = (size_t)(p->batch * p->h * p->w * p->c);
    }
    const int64_t np = (p->n + PL_QNR - 1) / PL_QNR * PL_QNR, k4 = (p->k + 3) / 4;
    if (x_need > x_len || (size_t)(k4 * np * 4) > w_len || (size_t)np > offset_len || (size_t)np > mult_len
        || (size_t)(p->m * p->n) > y_len) {
        snprintf(err, cap, "qgemm: a buffer is shorter than the sizes need (m %lld, k %lld, n %lld)",
                 (long long)p->m, (long long)p->k, (long long)p->n);
        return -1;
    }
    return 0;
}

#define GATHER_SLACK 32  /* bytes the gather buffer holds past its rows: a short run is copied 16 or 32 at a time */

/* Rows i0.. (count of them) of the convolution's patch matrix into buf, each k4 * 4 bytes: taps (kh, kw, c) in the
 * weight's row order, the padding and the bytes past k as the input's zero point and 0. */
static void gather(const pl_qgemm *p, const uint8_t *x, int64_t i0, int64_t count, int64_t k4, uint8_t *buf)
{
    const int64_t c = p->c, row_bytes = k4 * 4;
    const uint8_t *end = x + p->batch * p->h * p->w * c;
    /* the first row's image and pixel, then a step per row (no division per row) */
    int64_t b = i0 / (p->ho * p->wo), oy = i0 / p->wo % p->ho, ox = i0 % p->wo - 1;
    for (int64_t r = 0; r < count; r++) {
        if (++ox == p->wo) {
            ox = 0;
            if (++oy == p->ho) {
                oy = 0;
                b++;
            }
        }
        const uint8_t *image = x + b * p->h * p->w * c;
        uint8_t *dst = buf + r * row_bytes;
        const int64_t ix0 = ox * p->sw - p->left;
        const int whole = p->dw == 1 && ix0 >= 0 && ix0 + p->kw <= p->w;  /* a tap row is one run of the input */
        for (int64_t ty = 0; ty < p->kh; ty++) {
            const int64_t iy = oy * p->sh - p->top + ty * p->dh;
            if (whole && iy >= 0 && iy < p->h) {
                const uint8_t *src = image + (iy * p->w + ix0) * c;
                /* a run of up to 32 bytes (3x3 or 7x7 taps of 3 channels) as a copy of constant size, one or two
                   loads and stores instead of a call; the bytes past the run are overwritten next (the buffer has
                   room for the last) */
                if (p->kw * c <= 16 && src + 16 <= end)
                    memcpy(dst, src, 16);
                else if (p->kw * c <= GATHER_SLACK && src + GATHER_SLACK <= end)
                    memcpy(dst, src, GATHER_SLACK);
                else
                    memcpy(dst, src, (size_t)(p->kw * c));
                dst += p->kw * c;
                continue;
            }
            for (int64_t tx = 0; tx < p->kw; tx++, dst += c) {
                const int64_t ix = ix0 + tx * p->dw;
                if (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w) memset(dst, (int)p->zx, (size_t)c);
                else memcpy(dst, image + (iy * p->w + ix) * c, (size_t)c);
            }
        }
        for (int64_t j = p->k; j < row_bytes; j++) *dst++ = 0;  /* at most 3 bytes: no call */
    }
}

static inline uint8_t requantize(int32_t acc, int32_t offset, float mult, const pl_qgemm *p)
{
    float v = nearbyintf((float)(acc + offset) * mult) + (float)p->zy;
    v = v < (float)p->lo ? (float)p->lo : v;
    v = v > (float)p->hi ? (float)p->hi : v;
    return (uint8_t)v;
}

/* x's four bytes k0..k0+3 of a row as one int32 (bytes past k read as 0: never past the row's end). */
static inline int32_t four(const uint8_t *row, int64_t k0, int64_t k)
{
    int32_t v = 0;
    memcpy(&v, row + k0, (size_t)(k - k0 >= 4 ? 4 : k - k0));
    return v;
}

/* The micro-kernels' QMR row pointers from row t0 of a tile of `count` (past its end the first again, whose results
 * are not stored); how many are real. */
static inline int64_t tile_rows(const uint8_t *const *rows, int64_t count, int64_t t0, const uint8_t *r[QMR])
{
    const int64_t n = count - t0 < QMR ? count - t0 : QMR;
    for (int64_t t = 0; t < QMR; t++) r[t] = rows[t0 + (t < n ? t : 0)];
    return n;
}

/* Rows rows[0..count) (their first bytes; row t is output row i0 + t) by panel `panel`, in plain C. */
static void panel_generic(const qgemm_job *job, const uint8_t *const *rows, int64_t count, int64_t i0, int64_t panel)
{
    const pl_qgemm *p = job->p;
    const int64_t j0 = panel * PL_QNB, wp = job->np - j0 < PL_QNB ? job->np - j0 : PL_QNB;
    const int64_t valid = p->n - j0 < wp ? p->n - j0 : wp;
    const int8_t *w = job->w + j0 * job->k4 * 4;
    int32_t acc[PL_QNB];
    for (int64_t t = 0; t < count; t++) {
        memset(acc, 0, sizeof acc);
        for (int64_t kk = 0; kk < job->k4; kk++) {
            const int32_t packed = four(rows[t], 4 * kk, p->k);
            uint8_t a[4];
            memcpy(a, &packed, 4);
            const int8_t *b = w + kk * wp * 4;
            for (int64_t c = 0; c < wp; c++)
                acc[c] += a[0] * b[4 * c] + a[1] * b[4 * c + 1] + a[2] * b[4 * c + 2] + a[3] * b[4 * c + 3];
        }
        uint8_t *y = job->y + (i0 + t) * p->n + j0;
        for (int64_t c = 0; c < valid; c++) y[c] = requantize(acc[c], job->offset[j0 + c], job->mult[j0 + c], p);
    }
}

#ifdef PL_X86
#include <immintrin.h>

#define VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni")))

/* 16 sums (offsets included) of output row y, requantized up to the zero point: float, times the multipliers,
 * rounded half to even in the conversion (below 2^30 first: a larger product would convert to INT32_MIN; any such
 * saturates to 255 below). */
VNNI static inline __m512i requantize16(const qgemm_job *job, __m512i acc, int64_t j0)
{
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(acc), _mm512_loadu_ps(job->mult + j0));
    v = _mm512_min_ps(v, _mm512_set1_ps(1073741824.0f));
    return _mm512_cvt_roundps_epi32(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

/* Up to 64 columns of one output row from requantize16 (nv vectors, the rest zero): plus the zero point and clamped
 * to [lo, hi], packed into bytes in column order and stored (the first `valid` of them). The zero point is added
 * to int16 values saturated from int32 and the sum saturated to uint8 before the clamp: a value the saturations
 * change is past 255 or below 0 either way, so it clamps to hi or lo as the reference's int32 sum does (lo >= 0,
 * hi <= 255), with one clamp for 64 columns instead of four. */
VNNI static inline void store64(const pl_qgemm *p, __m512i a, __m512i b, __m512i c, __m512i d, uint8_t *y,
                                int64_t valid)
{
    const __m512i zy = _mm512_set1_epi16((short)p->zy);
    const __m512i ab = _mm512_adds_epi16(_mm512_packs_epi32(a, b), zy);
    const __m512i cd = _mm512_adds_epi16(_mm512_packs_epi32(c, d), zy);
    /* packs / packus work within 128-bit lanes: lane k holds a, b, c, d's columns 4k..4k+3; gather them back */
    const __m512i bytes = _mm512_packus_epi16(ab, cd);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m512i row = _mm512_permutexvar_epi32(order, bytes);
    row = _mm512_min_epu8(_mm512_max_epu8(row, _mm512_set1_epi8((char)p->lo)), _mm512_set1_epi8((char)p->hi));
    if (valid >= 64) _mm512_storeu_si512(y, row);
    else if (valid > 0) _mm512_mask_storeu_epi8(y, ((__mmask64)1 << valid) - 1, row);
}

/* QMR rows (duplicates past `count`, not stored) by one panel of nv x 16 columns: per four k, nv weight vectors
 * loaded once serve every row. nv is a constant in each call below and the 24 accumulators are named variables, so
 * the compiler keeps them in registers and drops the columns past nv. */
/* acc += the four u8 x s8 products of each lane. In assembly: GCC 12's intrinsic copies the accumulator to a
 * scratch register and back around every instruction, a third of the loop's instructions. */
#define QDOT(acc, av, wv) __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(av), "v"(wv))
#define QROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define QDECLARE(t) __m512i c##t##0 = o0, c##t##1 = o1, c##t##2 = o2, c##t##3 = o3;
#define QUPDATE(t, av) \
    QDOT(c##t##0, av, w0); \
    if (nv > 1) QDOT(c##t##1, av, w1); \
    if (nv > 2) QDOT(c##t##2, av, w2); \
    if (nv > 3) QDOT(c##t##3, av, w3);
#define QSTEP(t) { int32_t a; memcpy(&a, r##t + 4 * kk, 4); const __m512i av = _mm512_set1_epi32(a); QUPDATE(t, av) }
#define QTAIL(t) { const __m512i av = _mm512_set1_epi32(four(r##t, 4 * full4, p->k)); QUPDATE(t, av) }
#define QSTORE(t) \
    if (t < count) { \
        const __m512i z = _mm512_setzero_si512(); \
        store64(p, requantize16(job, c##t##0, j0), nv > 1 ? requantize16(job, c##t##1, j0 + 16) : z, \
                nv > 2 ? requantize16(job, c##t##2, j0 + 32) : z, nv > 3 ? requantize16(job, c##t##3, j0 + 48) : z, \
                job->y + (i0 + t) * p->n + j0, p->n - j0); \
    }

VNNI static inline __attribute__((always_inline)) void tile_vnni(const qgemm_job *job, const uint8_t *const *r,
                                                                 int64_t count, int64_t i0, int64_t j0, const int8_t *w,
                                                                 const int nv)
{
    const pl_qgemm *p = job->p;
    /* gathered rows are padded with zeros to k4 * 4 bytes: every group of four is whole */
    const int64_t full4 = p->conv ? job->k4 : p->k / 4, step = nv * 64;
    const uint8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4], *r5 = r[5];
    /* the sums start at the columns' offsets (padded to np: 16 x nv of them are there) */
    const __m512i o0 = _mm512_loadu_si512(job->offset + j0);
    const __m512i o1 = nv > 1 ? _mm512_loadu_si512(job->offset + j0 + 16) : o0;
    const __m512i o2 = nv > 2 ? _mm512_loadu_si512(job->offset + j0 + 32) : o0;
    const __m512i o3 = nv > 3 ? _mm512_loadu_si512(job->offset + j0 + 48) : o0;
    QROWS(QDECLARE)
    const int8_t *b = w;
    __m512i w0, w1 = _mm512_setzero_si512(), w2 = w1, w3 = w1;
    for (int64_t kk = 0; kk < full4; kk++, b += step) {
        w0 = _mm512_loadu_si512(b);
        if (nv > 1) w1 = _mm512_loadu_si512(b + 64);
        if (nv > 2) w2 = _mm512_loadu_si512(b + 128);
        if (nv > 3) w3 = _mm512_loadu_si512(b + 192);
        QROWS(QSTEP)
    }
    if (full4 < job->k4) {  /* the last k % 4 bytes of each row, the rest read as 0 */
        w0 = _mm512_loadu_si512(b);
        if (nv > 1) w1 = _mm512_loadu_si512(b + 64);
        if (nv > 2) w2 = _mm512_loadu_si512(b + 128);
        if (nv > 3) w3 = _mm512_loadu_si512(b + 192);
        QROWS(QTAIL)
    }
    QROWS(QSTORE)
}

VNNI static void panel_vnni(const qgemm_job *job, const uint8_t *const *rows, int64_t count, int64_t i0, int64_t panel)
{
    const int64_t j0 = panel * PL_QNB, wp = job->np - j0 < PL_QNB ? job->np - j0 : PL_QNB;
    const int8_t *w = job->w + j0 * job->k4 * 4;
    for (int64_t t0 = 0; t0 < count; t0 += QMR) {
        const uint8_t *r[QMR];
        const int64_t n = tile_rows(rows, count, t0, r);
        switch (wp / 16) {
        case 4: tile_vnni(job, r, n, i0 + t0, j0, w, 4); break;
        case 3: tile_vnni(job, r, n, i0 + t0, j0, w, 3); break;
        case 2: tile_vnni(job, r, n, i0 + t0, j0, w, 2); break;
        default: tile_vnni(job, r, n, i0 + t0, j0, w, 1); break;
        }
    }
}

/* 16 columns of QMR rows with 256-bit vpdpbusd, its encoding DOT's: "{vex} vpdpbusd" (AVX-VNNI) or "{evex}
 * vpdpbusd" (AVX-512 VNNI with VL). The panel's rows of four k are wp * 4 bytes apart; the 16 columns' are 64
 * contiguous bytes of each. 12 accumulators, two weight vectors and the row's broadcast bytes take 15 of the 16
 * registers the VEX encoding can name ("x"). */
#define AVX2_TARGET __attribute__((target("avx2,fma")))
#define V8DOT(DOT, acc, av, wv) __asm__(DOT " %2, %1, %0" : "+x"(acc) : "x"(av), "x"(wv))
#define V8DECLARE(t) __m256i d##t##0 = o0, d##t##1 = o1;
#define V8UPDATE(DOT, t, av) V8DOT(DOT, d##t##0, av, w0); V8DOT(DOT, d##t##1, av, w1);
#define V8STORE(t) if (t < count) store16(job, d##t##0, d##t##1, j0, job->y + (i0 + t) * p->n + j0);

/* 8 sums (offsets included) of output row y from column j0, requantized as requantize16 does up to the zero point
 * (the conversion rounds half to even: the default rounding mode, as the reference's nearbyintf). */
AVX2_TARGET static inline __m256i requantize8(const qgemm_job *job, __m256i acc, int64_t j0)
{
    const __m256 v = _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_loadu_ps(job->mult + j0));
    return _mm256_cvtps_epi32(_mm256_min_ps(v, _mm256_set1_ps(1073741824.0f)));
}

/* Bytes from int16 values (in column order): plus the zero point, clamped, the first n - j0 (up to `width`)
 * stored. */
AVX2_TARGET static inline void store_bytes(const pl_qgemm *p, __m128i lo, __m128i hi, int64_t j0, int64_t width,
                                           uint8_t *y)
{
    const __m128i zy = _mm_set1_epi16((short)p->zy);
    __m128i row = _mm_packus_epi16(_mm_adds_epi16(lo, zy), _mm_adds_epi16(hi, zy));
    row = _mm_min_epu8(_mm_max_epu8(row, _mm_set1_epi8((char)p->lo)), _mm_set1_epi8((char)p->hi));
    const int64_t valid = p->n - j0 < width ? p->n - j0 : width;
    if (valid == 16) {
        _mm_storeu_si128((__m128i *)y, row);
    } else if (valid > 0) {
        uint8_t bytes[16];
        _mm_storeu_si128((__m128i *)bytes, row);
        memcpy(y, bytes, (size_t)valid);
    }
}

/* Columns j0..j0+15 of one output row from their sums (offsets included), requantized and stored. */
AVX2_TARGET static inline void store16(const qgemm_job *job, __m256i a, __m256i b, int64_t j0, uint8_t *y)
{
    /* packs works within 128-bit lanes: (a0-3, b0-3 | a4-7, b4-7); put a's halves, then b's, together */
    const __m256i ab = _mm256_permute4x64_epi64(_mm256_packs_epi32(requantize8(job, a, j0),
                                                                   requantize8(job, b, j0 + 8)), 0xD8);
    store_bytes(job->p, _mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1), j0, 16, y);
}

/* Columns j0..j0+7 of one output row. */
AVX2_TARGET static inline void store8(const qgemm_job *job, __m256i a, int64_t j0, uint8_t *y)
{
    const __m256i q = requantize8(job, a, j0);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    store_bytes(job->p, w, w, j0, 8, y);
}

#define PANEL_VNNI256(NAME, DOT)                                                                                       \
    AVX2_TARGET static void NAME(const qgemm_job *job, const uint8_t *const *rows, int64_t count_all, int64_t i0_all,  \
                                 int64_t panel)                                                                        \
    {                                                                                                                  \
        const pl_qgemm *p = job->p;                                                                                    \
        const int64_t jp = panel * PL_QNB, wp = job->np - jp < PL_QNB ? job->np - jp : PL_QNB;                        \
        const int64_t full4 = p->conv ? job->k4 : p->k / 4, step = wp * 4;                                             \
        for (int64_t t0 = 0; t0 < count_all; t0 += QMR) {                                                              \
            const uint8_t *r[QMR];                                                                                     \
            const int64_t count = tile_rows(rows, count_all, t0, r), i0 = i0_all + t0;                                 \
            const uint8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4], *r5 = r[5];                     \
            for (int64_t j0 = jp; j0 < jp + wp; j0 += 16) {                                                            \
                const __m256i o0 = _mm256_loadu_si256((const __m256i *)(job->offset + j0));                           \
                const __m256i o1 = _mm256_loadu_si256((const __m256i *)(job->offset + j0 + 8));                       \
                QROWS(V8DECLARE)                                                                                       \
                const int8_t *b = job->w + jp * job->k4 * 4 + (j0 - jp) * 4;                                           \
                __m256i w0, w1;                                                                                        \
                for (int64_t kk = 0; kk < full4; kk++, b += step) {                                                    \
                    w0 = _mm256_loadu_si256((const __m256i *)b);                                                       \
                    w1 = _mm256_loadu_si256((const __m256i *)(b + 32));                                                \
                    V8ROWS_STEP(DOT)                                                                                   \
                }                                                                                                      \
                if (full4 < job->k4) {                                                                                 \
                    w0 = _mm256_loadu_si256((const __m256i *)b);                                                       \
                    w1 = _mm256_loadu_si256((const __m256i *)(b + 32));                                                \
                    V8ROWS_TAIL(DOT)                                                                                   \
                }                                                                                                      \
                QROWS(V8STORE)                                                                                         \
            }                                                                                                          \
        }                                                                                                              \
    }
#define V8STEP(DOT, t) { int32_t a; memcpy(&a, r##t + 4 * kk, 4); const __m256i av = _mm256_set1_epi32(a);            \
                         V8UPDATE(DOT, t, av) }
#define V8TAIL(DOT, t) { const __m256i av = _mm256_set1_epi32(four(r##t, 4 * full4, p->k)); V8UPDATE(DOT, t, av) }
#define V8ROWS_STEP(DOT) V8STEP(DOT, 0) V8STEP(DOT, 1) V8STEP(DOT, 2) V8STEP(DOT, 3) V8STEP(DOT, 4) V8STEP(DOT, 5)
#define V8ROWS_TAIL(DOT) V8TAIL(DOT, 0) V8TAIL(DOT, 1) V8TAIL(DOT, 2) V8TAIL(DOT, 3) V8TAIL(DOT, 4) V8TAIL(DOT, 5)

PANEL_VNNI256(panel_vnni256_vex, "%{vex%} vpdpbusd")
PANEL_VNNI256(panel_vnni256_evex, "%{evex%} vpdpbusd")

/* Without a dot product: per four k, a row's bytes a0..a3 widened to int16 and repeated, times the 8 columns' four
 * weights widened to int16 (two vectors of 4 columns), by vpmaddwd: two pair sums per column, exact in int32 (a pair
 * is at most 2 * 255 * 128), added into two accumulators per row; at the end each column's two sums are added
 * (vphaddd) and put back in column order. 12 accumulators, two weight vectors and the row's pattern: 15 registers. */
#define W8DECLARE(t) __m256i e##t##0 = _mm256_setzero_si256(), e##t##1 = e##t##0;
#define W8UPDATE(t, a) {                                                                                               \
        const __m256i xp = _mm256_broadcastq_epi64(_mm_cvtepu8_epi16(_mm_cvtsi32_si128(a)));                        \
        e##t##0 = _mm256_add_epi32(e##t##0, _mm256_madd_epi16(xp, w0));                                                \
        e##t##1 = _mm256_add_epi32(e##t##1, _mm256_madd_epi16(xp, w1)); }
#define W8STEP(t) { int32_t a; memcpy(&a, r##t + 4 * kk, 4); W8UPDATE(t, a) }
#define W8TAIL(t) W8UPDATE(t, four(r##t, 4 * full4, p->k))
#define W8STORE(t)                                                                                                     \
    if (t < count)                                                                                                     \
        store8(job, _mm256_add_epi32(_mm256_permute4x64_epi64(_mm256_hadd_epi32(e##t##0, e##t##1), 0xD8), o),         \
               j0, job->y + (i0 + t) * p->n + j0);

AVX2_TARGET static void panel_avx2(const qgemm_job *job, const uint8_t *const *rows, int64_t count_all,
                                   int64_t i0_all, int64_t panel)
{
    const pl_qgemm *p = job->p;
    const int64_t jp = panel * PL_QNB, wp = job->np - jp < PL_QNB ? job->np - jp : PL_QNB;
    const int64_t full4 = p->conv ? job->k4 : p->k / 4, step = wp * 4;
    for (int64_t t0 = 0; t0 < count_all; t0 += QMR) {
        const uint8_t *r[QMR];
        const int64_t count = tile_rows(rows, count_all, t0, r), i0 = i0_all + t0;
        const uint8_t *r0 = r[0], *r1 = r[1], *r2 = r[2], *r3 = r[3], *r4 = r[4], *r5 = r[5];
        for (int64_t j0 = jp; j0 < jp + wp; j0 += 8) {
            QROWS(W8DECLARE)
            const int8_t *b = job->w + jp * job->k4 * 4 + (j0 - jp) * 4;
            __m256i w0, w1;
            for (int64_t kk = 0; kk < full4; kk++, b += step) {
                w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
                w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
                QROWS(W8STEP)
            }
            if (full4 < job->k4) {
                w0 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b));
                w1 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(b + 16)));
                QROWS(W8TAIL)
            }
            const __m256i o = _mm256_loadu_si256((const __m256i *)(job->offset + j0));
            QROWS(W8STORE)
        }
    }
}

/* The kernel the CPU and the selected table give (see the top of this file). */
static int x86_kernel(void)
{
    __builtin_cpu_init();
    const pl_isa *isa = pl_isa_current();
    const int evex_vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")
                          && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    if (isa == &pl_isa_avx512 && evex_vnni) return PL_QGEMM_AVX512_VNNI;
    if ((isa == &pl_isa_avx2 || isa == &pl_isa_avx512) && __builtin_cpu_supports("avx2")) {
        if (__builtin_cpu_supports("avxvnni")) return PL_QGEMM_AVX_VNNI;
        if (evex_vnni) return PL_QGEMM_AVX512_VNNI_256;
        return PL_QGEMM_AVX2;
    }
    return PL_QGEMM_GENERIC;
}
#endif

#if defined(__aarch64__)
#include <arm_neon.h>
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif

#define DOTPROD __attribute__((target("arch=armv8.2-a+dotprod")))

/* Rows by one panel with the Armv8.2 dot product (sdot: four s8 x s8 products per 32-bit lane), four rows by 16
 * columns at a time. sdot takes signed bytes on both sides, so each input byte is flipped to x - 128 (xor 0x80)
 * and 128 x the column's weight sum (job->flip) added back: sum (x - 128) w + 128 sum w = sum x w. Bytes past k
 * (zero after gathering, or left out by four()) meet zero weights. */
DOTPROD static void panel_dot(const qgemm_job *job, const uint8_t *const *rows, int64_t count, int64_t i0,
                              int64_t panel)
{
    const pl_qgemm *p = job->p;
    const int64_t j0 = panel * PL_QNB, wp = job->np - j0 < PL_QNB ? job->np - j0 : PL_QNB;
    const int64_t full4 = p->conv ? job->k4 : p->k / 4;
    const int8_t *w = job->w + j0 * job->k4 * 4;
    const uint8x16_t flip = vdupq_n_u8(0x80);
    for (int64_t t0 = 0; t0 < count; t0 += 4) {
        const int64_t n = count - t0 < 4 ? count - t0 : 4;
        for (int64_t cb = 0; cb < wp; cb += 16) {
            int32x4_t acc[4][4];
            for (int r = 0; r < 4; r++)
                for (int v = 0; v < 4; v++) acc[r][v] = vdupq_n_s32(0);
            for (int64_t kk = 0; kk < job->k4; kk++) {
                const int8_t *b = w + (kk * wp + cb) * 4;
                const int8x16_t w0 = vld1q_s8(b), w1 = vld1q_s8(b + 16), w2 = vld1q_s8(b + 32), w3 = vld1q_s8(b + 48);
                for (int64_t r = 0; r < n; r++) {
                    int32_t a;
                    if (kk < full4) memcpy(&a, rows[t0 + r] + 4 * kk, 4);
                    else a = four(rows[t0 + r], 4 * kk, p->k);
                    const int8x16_t x = vreinterpretq_s8_u8(veorq_u8(vreinterpretq_u8_s32(vdupq_n_s32(a)), flip));
                    acc[r][0] = vdotq_s32(acc[r][0], w0, x);
                    acc[r][1] = vdotq_s32(acc[r][1], w1, x);
                    acc[r][2] = vdotq_s32(acc[r][2], w2, x);
                    acc[r][3] = vdotq_s32(acc[r][3], w3, x);
                }
            }
            for (int64_t r = 0; r < n; r++) {
                int32_t sums[16];
                for (int v = 0; v < 4; v++) vst1q_s32(sums + 4 * v, acc[r][v]);
                uint8_t *y = job->y + (i0 + t0 + r) * p->n + j0 + cb;
                for (int64_t c = 0; c < 16 && j0 + cb + c < p->n; c++) {
                    const int64_t j = j0 + cb + c;
                    y[c] = requantize((int32_t)((uint32_t)sums[c] + (uint32_t)job->flip[j]), job->offset[j],
                                      job->mult[j], p);
                }
            }
        }
    }
}

/* 128 x the sum of each column's weights, from the packed panels (np columns); NULL where it cannot be allocated
 * (the plain C panel runs instead). */
static int32_t *flip_sums(const pl_qgemm *p, const int8_t *w, int64_t np, int64_t k4)
{
    int32_t *sums = calloc((size_t)np, sizeof *sums);
    if (!sums) return NULL;
    for (int64_t j0 = 0; j0 < np; j0 += PL_QNB) {
        const int64_t wp = np - j0 < PL_QNB ? np - j0 : PL_QNB;
        const int8_t *b = w + j0 * k4 * 4;
        for (int64_t kk = 0; kk < k4; kk++, b += wp * 4)
            for (int64_t c = 0; c < wp; c++)
                sums[j0 + c] += b[4 * c] + b[4 * c + 1] + b[4 * c + 2] + b[4 * c + 3];
    }
    for (int64_t j = 0; j < np; j++) sums[j] = (int32_t)((uint32_t)sums[j] << 7);  /* modulo 2^32, as the sums */
    (void)p;
    return sums;
}
#endif


static void qgemm_task(void *ctx, size_t task)
{
    qgemm_job *job = ctx;
    const pl_qgemm *p = job->p;
    const int64_t tile = (int64_t)task / job->groups, group = (int64_t)task % job->groups;
    const int64_t i0 = tile * TILE_M, count = p->m - i0 < TILE_M ? p->m - i0 : TILE_M;
    const int64_t first = group * job->per_group;
    const int64_t last = first + job->per_group < job->panels ? first + job->per_group : job->panels;
    const uint8_t *rows[TILE_M];
    if (p->conv) {
        /* the thread's gather buffer: a few hundred KiB at most for the usual layers */
        uint8_t *gathered = pl_thread_scratch(PL_SCRATCH_GATHER, (size_t)(TILE_M * job->k4 * 4 + GATHER_SLACK));
        if (!gathered) {
            atomic_store(&job->failed, 1);
            return;
        }
        gather(p, job->x, i0, count, job->k4, gathered);
        for (int64_t t = 0; t < count; t++) rows[t] = gathered + t * job->k4 * 4;
    } else {
        for (int64_t t = 0; t < count; t++) rows[t] = job->x + (i0 + t) * p->ldx;
    }
    for (int64_t panel = first; panel < last; panel++) {
        switch (job->kernel) {
#ifdef PL_X86
        case PL_QGEMM_AVX512_VNNI: panel_vnni(job, rows, count, i0, panel); break;
        case PL_QGEMM_AVX_VNNI: panel_vnni256_vex(job, rows, count, i0, panel); break;
        case PL_QGEMM_AVX512_VNNI_256: panel_vnni256_evex(job, rows, count, i0, panel); break;
        case PL_QGEMM_AVX2: panel_avx2(job, rows, count, i0, panel); break;
#endif
#if defined(__aarch64__)
        case PL_QGEMM_NEON_DOT: panel_dot(job, rows, count, i0, panel); break;
#endif
        default: panel_generic(job, rows, count, i0, panel); break;
        }
    }
}

int pl_qgemm_kernel(void)
{
#ifdef PL_X86
    return x86_kernel();
#elif defined(__aarch64__)
    return getauxval(AT_HWCAP) & HWCAP_ASIMDDP ? PL_QGEMM_NEON_DOT : PL_QGEMM_GENERIC;
#else
    return PL_QGEMM_GENERIC;
#endif
}

int pl_qgemm_kernel_usable(int kernel)
{
    switch (kernel) {
    case PL_QGEMM_GENERIC: return 1;
#ifdef PL_X86
    case PL_QGEMM_AVX512_VNNI: return pl_qgemm_kernel() == PL_QGEMM_AVX512_VNNI;
    case PL_QGEMM_AVX_VNNI: __builtin_cpu_init(); return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avxvnni");
    case PL_QGEMM_AVX2: __builtin_cpu_init(); return __builtin_cpu_supports("avx2");
    case PL_QGEMM_AVX512_VNNI_256:
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
#endif
#if defined(__aarch64__)
    case PL_QGEMM_NEON_DOT: return pl_qgemm_kernel() == PL_QGEMM_NEON_DOT;
#endif
    default: return 0;
    }
}

int pl_qgemm_run_as(const pl_qgemm *p, const uint8_t *x, const int8_t *w, const int32_t *offset, const float *mult,
                    uint8_t *y, int kernel)
{
    const int64_t np = (p->n + PL_QNR - 1) / PL_QNR * PL_QNR, panels = (np + PL_QNB - 1) / PL_QNB;
    const int64_t tiles = (p->m + TILE_M - 1) / TILE_M;
    int64_t groups = tiles >= MIN_TASKS ? 1 : (MIN_TASKS + tiles - 1) / tiles;
    if (groups > panels) groups = panels;
    const int64_t per_group = (panels + groups - 1) / groups;
    groups = (panels + per_group - 1) / per_group;
    if (!pl_qgemm_kernel_usable(kernel)) kernel = PL_QGEMM_GENERIC;
    qgemm_job job = {p, x, w, offset, mult, y, np, (p->k + 3) / 4, panels, groups, per_group, kernel, 0, NULL};
#if defined(__aarch64__)
    if (kernel == PL_QGEMM_NEON_DOT) {
        job.flip = flip_sums(p, w, np, job.k4);
        if (!job.flip) job.kernel = PL_QGEMM_GENERIC;
    }
#endif
    pl_parallel_work((size_t)(tiles * groups), qgemm_task, &job, (double)p->m * (double)p->k * (double)p->n / 4.0);
    free(job.flip);
    return atomic_load(&job.failed) ? -1 : 0;
}

int pl_qgemm_run(const pl_qgemm *p, const uint8_t *x, const int8_t *w, const int32_t *offset, const float *mult,
                 uint8_t *y)
{
    return pl_qgemm_run_as(p, x, w, offset, mult, y, pl_qgemm_kernel());
}
