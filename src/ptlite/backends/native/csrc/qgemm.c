/* The int8 GEMM with PyTorch's requantization (ops/quantized.py's arithmetic, bit for bit the NumPy reference's):
 *
 *   y[i][j] = clamp(round_half_even(float(sum_k x[i][k] * w[k][j] + offset[j]) * mult[j]) + zy, lo, hi)
 *
 * x uint8 (m x k, row i at x + i * ldx), w int8 packed in groups of four rows, (ceil(k / 4), np, 4) with np = n
 * rounded up to PL_QNR and the rows and columns past k and n zero (made once per weight, on the Python side), offset
 * int32 (the bias at the product's scale minus the input's zero point times the column's sum) and mult float32 (input
 * scale x weight scale / output scale), both padded to np entries. The sum is exact in int32: the check bounds k * 255 * 128 + |offset| below 2^31.
 * On AVX-512 VNNI (vpdpbusd: 4 u8 x s8 products per int32 lane) when the AVX-512 table is selected and the CPU has
 * it; in plain C otherwise (which the compiler vectorizes). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "native.h"

#define QMR 4            /* rows a micro-kernel computes */
#define ROWS_PER_TASK 64

typedef struct {
    const pl_qgemm *p;
    const uint8_t *x;
    const int8_t *w;
    const int32_t *offset;
    const float *mult;
    uint8_t *y;
    int64_t np;
    int vnni;
} qgemm_job;

int pl_qgemm_check(const pl_qgemm *p, size_t x_len, size_t w_len, size_t offset_len, size_t mult_len, size_t y_len,
                   char *err, size_t cap)
{
    if (p->m < 1 || p->k < 1 || p->n < 1 || p->m > ((int64_t)1 << 40) || p->k > PL_QGEMM_MAX_K
        || p->n > ((int64_t)1 << 30) || p->ldx < p->k) {
        snprintf(err, cap, "qgemm: invalid sizes (m %lld, k %lld, n %lld, ldx %lld)", (long long)p->m,
                 (long long)p->k, (long long)p->n, (long long)p->ldx);
        return -1;
    }
    if (p->lo < 0 || p->hi > 255 || p->lo > p->hi || p->zy < 0 || p->zy > 255) {
        snprintf(err, cap, "qgemm: output zero point %lld or range [%lld, %lld] outside uint8", (long long)p->zy,
                 (long long)p->lo, (long long)p->hi);
        return -1;
    }
    const int64_t np = (p->n + PL_QNR - 1) / PL_QNR * PL_QNR, k4 = (p->k + 3) / 4;
    if ((size_t)((p->m - 1) * p->ldx + p->k) > x_len || (size_t)(k4 * np * 4) > w_len || (size_t)np > offset_len
        || (size_t)np > mult_len || (size_t)(p->m * p->n) > y_len) {
        snprintf(err, cap, "qgemm: a buffer is shorter than the sizes need (m %lld, k %lld, n %lld)",
                 (long long)p->m, (long long)p->k, (long long)p->n);
        return -1;
    }
    return 0;
}

static inline uint8_t requantize(int32_t acc, int32_t offset, float mult, const pl_qgemm *p)
{
    float v = nearbyintf((float)(acc + offset) * mult) + (float)p->zy;
    v = v < (float)p->lo ? (float)p->lo : v;
    v = v > (float)p->hi ? (float)p->hi : v;
    return (uint8_t)v;
}

/* x's four bytes k0..k0+3 of row i as one int32 (bytes past k read as 0: never past the row's end). */
static inline int32_t four(const uint8_t *row, int64_t k0, int64_t k)
{
    int32_t v = 0;
    memcpy(&v, row + k0, (size_t)(k - k0 >= 4 ? 4 : k - k0));
    return v;
}

static void rows_generic(const qgemm_job *job, int64_t i0, int64_t i1)
{
    const pl_qgemm *p = job->p;
    const int64_t k4 = (p->k + 3) / 4;
    int32_t acc[PL_QNR];
    for (int64_t i = i0; i < i1; i++) {
        const uint8_t *row = job->x + i * p->ldx;
        for (int64_t j0 = 0; j0 < p->n; j0 += PL_QNR) {
            memset(acc, 0, sizeof acc);
            for (int64_t kk = 0; kk < k4; kk++) {
                int32_t packed = four(row, 4 * kk, p->k);
                uint8_t a[4];
                memcpy(a, &packed, 4);
                const int8_t *b = job->w + (kk * job->np + j0) * 4;
                for (int c = 0; c < PL_QNR; c++)
                    acc[c] += a[0] * b[4 * c] + a[1] * b[4 * c + 1] + a[2] * b[4 * c + 2] + a[3] * b[4 * c + 3];
            }
            const int64_t valid = p->n - j0 < PL_QNR ? p->n - j0 : PL_QNR;
            for (int64_t c = 0; c < valid; c++)
                job->y[i * p->n + j0 + c] = requantize(acc[c], job->offset[j0 + c], job->mult[j0 + c], p);
        }
    }
}

#ifdef PL_X86
#include <immintrin.h>

/* Requantize one row's 16 accumulators at columns j0.. (offset and mult are read for all 16: they are padded to np) */
__attribute__((target("avx512f,avx512vnni")))
static void epilogue_vnni(const qgemm_job *job, __m512i acc, int64_t i, int64_t j0)
{
    const pl_qgemm *p = job->p;
    const int64_t valid = p->n - j0 < PL_QNR ? p->n - j0 : PL_QNR;
    __m512 v = _mm512_cvtepi32_ps(_mm512_add_epi32(acc, _mm512_loadu_si512(job->offset + j0)));
    v = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_loadu_ps(job->mult + j0)),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_add_ps(v, _mm512_set1_ps((float)p->zy));
    v = _mm512_min_ps(_mm512_max_ps(v, _mm512_set1_ps((float)p->lo)), _mm512_set1_ps((float)p->hi));
    const __m128i bytes = _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v));
    uint8_t *y = job->y + i * p->n + j0;
    if (valid == PL_QNR) {
        _mm_storeu_si128((__m128i *)y, bytes);
    } else {
        uint8_t lanes[PL_QNR];
        _mm_storeu_si128((__m128i *)lanes, bytes);
        memcpy(y, lanes, (size_t)valid);
    }
}

/* QMR rows at a time, one 16-column block: the weight block's 64 bytes are loaded once per four k and serve every row */
__attribute__((target("avx512f,avx512vnni")))
static void rows_vnni(const qgemm_job *job, int64_t i0, int64_t i1)
{
    const pl_qgemm *p = job->p;
    const int64_t k4 = (p->k + 3) / 4, full4 = p->k / 4;
    for (int64_t i = i0; i < i1; i += QMR) {
        const int64_t rows = i1 - i < QMR ? i1 - i : QMR;
        const uint8_t *r[QMR];
        for (int64_t t = 0; t < QMR; t++) r[t] = job->x + (i + (t < rows ? t : 0)) * p->ldx;
        for (int64_t j0 = 0; j0 < p->n; j0 += PL_QNR) {
            __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
            const int8_t *b = job->w + j0 * 4;
            int64_t kk = 0;
            for (; kk < full4; kk++, b += job->np * 4) {
                const __m512i w = _mm512_loadu_si512(b);
                int32_t v0, v1, v2, v3;
                memcpy(&v0, r[0] + 4 * kk, 4);
                memcpy(&v1, r[1] + 4 * kk, 4);
                memcpy(&v2, r[2] + 4 * kk, 4);
                memcpy(&v3, r[3] + 4 * kk, 4);
                a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(v0), w);
                a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(v1), w);
                a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(v2), w);
                a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(v3), w);
            }
            if (kk < k4) {  /* the last k % 4 bytes of each row, the rest read as 0 */
                const __m512i w = _mm512_loadu_si512(b);
                a0 = _mm512_dpbusd_epi32(a0, _mm512_set1_epi32(four(r[0], 4 * kk, p->k)), w);
                a1 = _mm512_dpbusd_epi32(a1, _mm512_set1_epi32(four(r[1], 4 * kk, p->k)), w);
                a2 = _mm512_dpbusd_epi32(a2, _mm512_set1_epi32(four(r[2], 4 * kk, p->k)), w);
                a3 = _mm512_dpbusd_epi32(a3, _mm512_set1_epi32(four(r[3], 4 * kk, p->k)), w);
            }
            const __m512i acc[QMR] = {a0, a1, a2, a3};
            for (int64_t t = 0; t < rows; t++) epilogue_vnni(job, acc[t], i + t, j0);
        }
    }
}

static int vnni_available(void)
{
    __builtin_cpu_init();
    return pl_isa_current() == &pl_isa_avx512 && __builtin_cpu_supports("avx512f")
           && __builtin_cpu_supports("avx512vnni");
}
#endif

static void qgemm_task(void *ctx, size_t task)
{
    const qgemm_job *job = ctx;
    const int64_t i0 = (int64_t)task * ROWS_PER_TASK;
    const int64_t i1 = i0 + ROWS_PER_TASK < job->p->m ? i0 + ROWS_PER_TASK : job->p->m;
#ifdef PL_X86
    if (job->vnni) {
        rows_vnni(job, i0, i1);
        return;
    }
#endif
    rows_generic(job, i0, i1);
}

int pl_qgemm_vnni(void)
{
#ifdef PL_X86
    return vnni_available();
#else
    return 0;
#endif
}

int pl_qgemm_run(const pl_qgemm *p, const uint8_t *x, const int8_t *w, const int32_t *offset, const float *mult,
                 uint8_t *y)
{
    qgemm_job job = {p, x, w, offset, mult, y, (p->n + PL_QNR - 1) / PL_QNR * PL_QNR, pl_qgemm_vnni()};
    const int64_t tasks = (p->m + ROWS_PER_TASK - 1) / ROWS_PER_TASK;
    pl_parallel_work((size_t)tasks, qgemm_task, &job, (double)p->m * (double)p->k * (double)p->n / 4.0);
    return 0;
}
