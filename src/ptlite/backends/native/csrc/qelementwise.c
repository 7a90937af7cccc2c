/* Elementwise int8 kernels, bit for bit the NumPy reference's float32 arithmetic (backends/numpy/quantized.py):
 *
 *   add:        y = clamp(round_half_even(((a - za) * sa + (b - zb) * sb) * inv) + zy, lo, hi)
 *   quantize:   y = clamp(round_half_even(x * inv) + zy, 0, 255)   (optionally NCHW float -> NHWC uint8)
 *   dequantize: y = (q - zq) * s
 *
 * with every product rounded to float32 before the sum, as NumPy computes it: the products pass through an empty
 * assembly statement (OPAQUE) so that -ffp-contract=fast cannot fuse one into the addition (an FMA skips that
 * rounding and changes the last bit, then a rounding tie). AVX-512 where the AVX-512 table is selected, plain C
 * elsewhere; threaded over chunks. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "native.h"

#define CHUNK 16384  /* elements per task */

#if defined(__x86_64__) || defined(__i386__)
#define OPAQUE(v) __asm__("" : "+x"(v))
#elif defined(__aarch64__) || defined(__arm__)
#define OPAQUE(v) __asm__("" : "+w"(v))
#else
#define OPAQUE(v) do { volatile float opaque_ = (v); (v) = opaque_; } while (0)
#endif

static inline float clampf(float v, float lo, float hi)  /* NaN -> lo */
{
    v = v > lo ? v : lo;
    return v < hi ? v : hi;
}

typedef struct {
    const pl_qelementwise *p;
    const void *a, *b;
    void *y;
    int avx512, vbmi;
} ew_job;

int pl_qelementwise_check(const pl_qelementwise *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap)
{
    if (p->op < 0 || p->op >= PL_Q_OP_COUNT || p->count < 0 || p->count > ((int64_t)1 << 50)) {
        snprintf(err, cap, "qelementwise: invalid operation %lld or count %lld", (long long)p->op,
                 (long long)p->count);
        return -1;
    }
    if (p->za < 0 || p->za > 255 || p->zb < 0 || p->zb > 255 || p->zy < 0 || p->zy > 255 || p->lo < 0 || p->hi > 255
        || p->lo > p->hi) {
        snprintf(err, cap, "qelementwise: a zero point or the range [%lld, %lld] is outside uint8", (long long)p->lo,
                 (long long)p->hi);
        return -1;
    }
    if (p->op == PL_Q_QUANTIZE_NHWC
        && (p->channels < 1 || p->pixels < 1 || p->count % p->channels || p->count / p->channels % p->pixels)) {
        snprintf(err, cap, "qelementwise: %lld values are not whole images of %lld channels x %lld pixels",
                 (long long)p->count, (long long)p->channels, (long long)p->pixels);
        return -1;
    }
    if ((size_t)p->count > a_len || (p->op == PL_Q_ADD && (size_t)p->count > b_len) || (size_t)p->count > y_len) {
        snprintf(err, cap, "qelementwise: a buffer is shorter than %lld values", (long long)p->count);
        return -1;
    }
    return 0;
}

static void add_generic(const pl_qelementwise *p, const uint8_t *a, const uint8_t *b, uint8_t *y, int64_t n)
{
    const float za = (float)p->za, zb = (float)p->zb, sa = p->sa, sb = p->sb, inv = p->inv, zy = (float)p->zy;
    for (int64_t i = 0; i < n; i++) {
        float pa = ((float)a[i] - za) * sa, pb = ((float)b[i] - zb) * sb;
        OPAQUE(pa);
        OPAQUE(pb);
        y[i] = (uint8_t)clampf(nearbyintf((pa + pb) * inv) + zy, (float)p->lo, (float)p->hi);
    }
}

static void quantize_generic(const pl_qelementwise *p, const float *x, uint8_t *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = (uint8_t)clampf(nearbyintf(x[i] * p->inv) + (float)p->zy, 0.0f, 255.0f);
}

static void dequantize_generic(const pl_qelementwise *p, const uint8_t *q, float *y, int64_t n)
{
    for (int64_t i = 0; i < n; i++) y[i] = ((float)q[i] - (float)p->za) * p->sa;
}

#ifdef PL_X86
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

AVX512 static inline __m512 load_u8(const uint8_t *x, __mmask16 m)
{
    return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, x)));
}

AVX512 static inline void store_u8(uint8_t *y, __m512 v, __mmask16 m)
{
    _mm_mask_storeu_epi8(y, m, _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(v)));
}

AVX512 static inline __m512 round_even(__m512 v)
{
    return _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}

AVX512 static inline __m512 clamp16(__m512 v, __m512 lo, __m512 hi)  /* NaN -> lo, as clampf */
{
    return _mm512_min_ps(_mm512_max_ps(v, lo), hi);
}

AVX512 static void add_avx512(const pl_qelementwise *p, const uint8_t *a, const uint8_t *b, uint8_t *y, int64_t n)
{
    const __m512 za = _mm512_set1_ps((float)p->za), zb = _mm512_set1_ps((float)p->zb), sa = _mm512_set1_ps(p->sa);
    const __m512 sb = _mm512_set1_ps(p->sb), inv = _mm512_set1_ps(p->inv), zy = _mm512_set1_ps((float)p->zy);
    const __m512 lo = _mm512_set1_ps((float)p->lo), hi = _mm512_set1_ps((float)p->hi);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 pa = _mm512_mul_ps(_mm512_sub_ps(load_u8(a + i, m), za), sa);
        __m512 pb = _mm512_mul_ps(_mm512_sub_ps(load_u8(b + i, m), zb), sb);
        __asm__("" : "+v"(pa));
        __asm__("" : "+v"(pb));
        const __m512 v = _mm512_add_ps(round_even(_mm512_mul_ps(_mm512_add_ps(pa, pb), inv)), zy);
        store_u8(y + i, clamp16(v, lo, hi), m);
    }
}

AVX512 static void quantize_avx512(const pl_qelementwise *p, const float *x, uint8_t *y, int64_t n)
{
    const __m512 inv = _mm512_set1_ps(p->inv), zy = _mm512_set1_ps((float)p->zy);
    const __m512 lo = _mm512_setzero_ps(), hi = _mm512_set1_ps(255.0f);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        const __m512 v = _mm512_add_ps(round_even(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), inv)), zy);
        store_u8(y + i, clamp16(v, lo, hi), m);
    }
}

/* 16 pixels of one image, from pixel i (counted over every image) on, of the NCHW-to-NHWC quantization: each
 * channel's 16 values quantized together, then interleaved. */
#define QUANTIZE_NHWC_MAX_C 64  /* more channels go one value at a time */
AVX512 static void quantize16_nhwc_avx512(const pl_qelementwise *p, const float *x, uint8_t *y, int64_t i)
{
    const int64_t c = p->channels, hw = p->pixels, b = i / hw, px = i % hw;
    const __m512 inv = _mm512_set1_ps(p->inv), zy = _mm512_set1_ps((float)p->zy);
    uint8_t planes[QUANTIZE_NHWC_MAX_C][16];
    for (int64_t ch = 0; ch < c; ch++) {
        const __m512 v = _mm512_loadu_ps(x + (b * c + ch) * hw + px);
        const __m512 q = clamp16(_mm512_add_ps(round_even(_mm512_mul_ps(v, inv)), zy), _mm512_setzero_ps(),
                                 _mm512_set1_ps(255.0f));
        _mm_storeu_si128((__m128i *)planes[ch], _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(q)));
    }
    uint8_t *dst = y + i * c;
    for (int t = 0; t < 16; t++)
        for (int64_t ch = 0; ch < c; ch++) dst[t * c + ch] = planes[ch][t];
}

/* The same for images of up to 4 channels (a photograph's 3) with AVX-512 VBMI: the channels' 16 bytes each in one
 * register, interleaved by one byte permutation (`order`: byte t of the row is plane t % c's byte t / c), stored at
 * once. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512vbmi")))
static void quantize16_nhwc_vbmi(const pl_qelementwise *p, const float *x, uint8_t *y, int64_t i,
                                 const uint8_t *order)
{
    const int64_t c = p->channels, hw = p->pixels, b = i / hw, px = i % hw;
    const __m512 inv = _mm512_set1_ps(p->inv), zy = _mm512_set1_ps((float)p->zy);
    __m512i planes = _mm512_setzero_si512();
    for (int64_t ch = 0; ch < c; ch++) {
        const __m512 v = _mm512_loadu_ps(x + (b * c + ch) * hw + px);
        const __m512 q = clamp16(_mm512_add_ps(round_even(_mm512_mul_ps(v, inv)), zy), _mm512_setzero_ps(),
                                 _mm512_set1_ps(255.0f));
        const __m128i bytes = _mm512_cvtusepi32_epi8(_mm512_cvtps_epi32(q));
        planes = ch == 0 ? _mm512_inserti32x4(planes, bytes, 0) : ch == 1 ? _mm512_inserti32x4(planes, bytes, 1)
                 : ch == 2 ? _mm512_inserti32x4(planes, bytes, 2) : _mm512_inserti32x4(planes, bytes, 3);
    }
    const __m512i row = _mm512_permutexvar_epi8(_mm512_loadu_si512(order), planes);
    _mm512_mask_storeu_epi8(y + i * c, c * 16 >= 64 ? ~(__mmask64)0 : ((__mmask64)1 << (c * 16)) - 1, row);
}

AVX512 static void dequantize_avx512(const pl_qelementwise *p, const uint8_t *q, float *y, int64_t n)
{
    const __m512 zq = _mm512_set1_ps((float)p->za), s = _mm512_set1_ps(p->sa);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 m = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        _mm512_mask_storeu_ps(y + i, m, _mm512_mul_ps(_mm512_sub_ps(load_u8(q + i, m), zq), s));
    }
}
#endif

/* Task i: values [i * CHUNK, ...) of the output; for the NHWC quantize, pixels [i * CHUNK, ...) of every image
 * (all channels of each). */
static void ew_task(void *ctx, size_t task)
{
    const ew_job *job = ctx;
    const pl_qelementwise *p = job->p;
    const int64_t i0 = (int64_t)task * CHUNK;
    if (p->op == PL_Q_QUANTIZE_NHWC) {
        const int64_t c = p->channels, hw = p->pixels, images = p->count / (c * hw);
        const int64_t end = i0 + CHUNK < images * hw ? i0 + CHUNK : images * hw;
        const float *x = job->a;
        uint8_t *y = job->y;
        const float inv = p->inv, zy = (float)p->zy;
#ifdef PL_X86
        uint8_t order[64];
        for (int t = 0; t < 64; t++) order[t] = (uint8_t)(c <= 4 && t / c < 16 ? t % c * 16 + t / c : 0);
#endif
        for (int64_t i = i0; i < end;) {
#ifdef PL_X86
            if (job->avx512 && c <= QUANTIZE_NHWC_MAX_C && i % hw + 16 <= hw && i + 16 <= end) {
                if (c <= 4 && job->vbmi) quantize16_nhwc_vbmi(p, x, y, i, order);
                else quantize16_nhwc_avx512(p, x, y, i);
                i += 16;
                continue;
            }
#endif
            const float *src = x + i / hw * c * hw + i % hw;
            uint8_t *dst = y + i * c;
            for (int64_t ch = 0; ch < c; ch++)
                dst[ch] = (uint8_t)clampf(nearbyintf(src[ch * hw] * inv) + zy, 0.0f, 255.0f);
            i++;
        }
        return;
    }
    const int64_t n = p->count - i0 < CHUNK ? p->count - i0 : CHUNK;
    if (p->op == PL_Q_ADD) {
        const uint8_t *a = (const uint8_t *)job->a + i0, *b = (const uint8_t *)job->b + i0;
        uint8_t *y = (uint8_t *)job->y + i0;
#ifdef PL_X86
        if (job->avx512) {
            add_avx512(p, a, b, y, n);
            return;
        }
#endif
        add_generic(p, a, b, y, n);
    } else if (p->op == PL_Q_QUANTIZE) {
        const float *x = (const float *)job->a + i0;
        uint8_t *y = (uint8_t *)job->y + i0;
#ifdef PL_X86
        if (job->avx512) {
            quantize_avx512(p, x, y, n);
            return;
        }
#endif
        quantize_generic(p, x, y, n);
    } else {
        const uint8_t *q = (const uint8_t *)job->a + i0;
        float *y = (float *)job->y + i0;
#ifdef PL_X86
        if (job->avx512) {
            dequantize_avx512(p, q, y, n);
            return;
        }
#endif
        dequantize_generic(p, q, y, n);
    }
}

void pl_qelementwise_run(const pl_qelementwise *p, const void *a, const void *b, void *y)
{
    int avx512 = 0;
#ifdef PL_X86
    __builtin_cpu_init();
    avx512 = pl_isa_current() == &pl_isa_avx512 && __builtin_cpu_supports("avx512bw")
             && __builtin_cpu_supports("avx512vl");
#endif
    int vbmi = 0;
#ifdef PL_X86
    vbmi = avx512 && __builtin_cpu_supports("avx512vbmi");
#endif
    ew_job job = {p, a, b, y, avx512, vbmi};
    const int64_t units = p->op == PL_Q_QUANTIZE_NHWC ? p->count / p->channels : p->count;
    pl_parallel_work((size_t)((units + CHUNK - 1) / CHUNK), ew_task, &job, (double)p->count);
}
