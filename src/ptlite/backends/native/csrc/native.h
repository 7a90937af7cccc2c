/* ptlite's native kernels: the types every source file shares.
 *
 * Tensors are float32, images NHWC and C-contiguous. Every kernel is given its geometry in one of the parameter
 * structs below; the *_check functions (params.c) validate a struct against the lengths of the buffers it will
 * read and write before any kernel runs, so a kernel may trust its parameters. */
#ifndef PTLITE_NATIVE_H
#define PTLITE_NATIVE_H

#include <stddef.h>
#include <stdint.h>

/* Activations fused into a kernel's output (the IR's names: none, relu, clamp, hardswish, silu, sigmoid). */
enum pl_act { PL_ACT_NONE = 0, PL_ACT_RELU, PL_ACT_CLAMP, PL_ACT_HARDSWISH, PL_ACT_SILU, PL_ACT_SIGMOID,
              PL_ACT_COUNT };

typedef struct {
    int act;          /* enum pl_act */
    float lo, hi;     /* the clamp's bounds (relu: 0, +inf) */
} pl_epilogue;

/* A 2-D convolution of an NHWC image: dense (groups == 1) or depthwise (groups == c == o, weight (kh*kw, c)).
 * A dense weight is the (K, o) matrix, K = kh*kw*c with rows ordered kh, kw, c: row-major (PL_ROWS), or in panels
 * of PL_PANEL columns, (ceil(o / PL_PANEL), K, PL_PANEL) with the columns past o zero (PL_PANELS). Padding is top,
 * bottom, left, right. */
#define PL_PANEL 16
enum pl_layout { PL_ROWS = 0, PL_PANELS = 1 };
typedef struct {
    int64_t n, h, w, c, o;
    int64_t kh, kw, sh, sw, pt, pb, pl, pr, dh, dw;
    int64_t ho, wo, groups;
    int64_t layout;   /* enum pl_layout */
    pl_epilogue ep;
} pl_conv;

/* Pooling of an NHWC image over windows (max, or average with or without the padding counted). */
enum pl_pool_kind { PL_POOL_MAX = 0, PL_POOL_AVG = 1, PL_POOL_AVG_EXCLUDE_PAD = 2 };
typedef struct {
    int64_t n, h, w, c;
    int64_t kh, kw, sh, sw, pt, pl, dh, dw;
    int64_t ho, wo;
    int kind;         /* enum pl_pool_kind */
    float divisor;    /* average pooling's divisor when > 0 (PyTorch's divisor_override) */
} pl_pool;

/* y = op(a, b) elementwise then the epilogue; b is broadcast along rows when b_len divides... see params.c */
enum pl_binop { PL_ADD = 0, PL_SUB, PL_MUL, PL_DIV, PL_BINOP_COUNT };

/* The kernels one instruction set provides (isa_*.c fill one table each from kernels.inc). */
#define PL_GEMM_MAX_MR 16
typedef struct {
    const char *name;
    int mr, nr;       /* the GEMM micro-kernel's tile: mr rows (pixels) by nr columns (output channels) */
    int vw;           /* floats per vector */
    /* y[mr_valid x nc] = epilogue(bias + sum over taps t, k < c of a[t*mr + r][k] * b[(T*c + k)*ldb + j]), T the
     * weight rows' tap: tap_ids[t], or t when tap_ids is NULL; a: taps*mr row pointers (rows past mr_valid repeat
     * a valid one), b: nr readable columns per row. */
    void (*gemm)(size_t mr_valid, size_t nc, size_t taps, size_t c, const float **a, const uint32_t *tap_ids,
                 const float *b, size_t ldb, float *y, size_t ldy, const float *bias, const pl_epilogue *ep);
    /* Depthwise convolution of output rows [oy0, oy1) of image n. */
    void (*depthwise_rows)(const pl_conv *p, const float *x, const float *w, const float *bias, float *y,
                           int64_t n, int64_t oy0, int64_t oy1, const float *zeros);
    /* Pooling of output rows [oy0, oy1) of image n. */
    void (*pool_rows)(const pl_pool *p, const float *x, float *y, int64_t n, int64_t oy0, int64_t oy1);
    /* y[i] = epilogue(a[i] op b[i % b_len]) for i < len (b_len == 1: a scalar; b_len == len: elementwise). */
    void (*binary)(int op, const float *a, const float *b, size_t b_len, float *y, size_t len,
                   const pl_epilogue *ep);
    /* y[i] = epilogue(x[i]) */
    void (*activate)(const float *x, float *y, size_t len, const pl_epilogue *ep);
    /* y[c] = mean over rows of x (rows x c) */
    void (*mean_rows)(const float *x, size_t rows, size_t c, float *y);
    /* y = exp(x) elementwise */
    void (*exp)(const float *x, float *y, size_t len);
} pl_isa;

extern const pl_isa pl_isa_generic;
#if defined(__x86_64__) || defined(_M_X64)
extern const pl_isa pl_isa_avx2;
extern const pl_isa pl_isa_avx512;
#define PL_X86 1
#endif

/* The instruction set chosen at load (the best the CPU has, or PTLITE_NATIVE_ISA), and the ones usable here. */
const pl_isa *pl_isa_current(void);
int pl_isa_select(const char *name);   /* 0 on success, -1 if unknown or not supported by this CPU */
int pl_isa_supported(const pl_isa *isa);
const pl_isa *const *pl_isa_all(size_t *count);

/* Threads: run fn(ctx, i) for i in [0, tasks) on the pool (the caller's thread takes part). */
typedef void (*pl_task_fn)(void *ctx, size_t i);
void pl_parallel(size_t tasks, pl_task_fn fn, void *ctx);
void pl_set_threads(int n);
int pl_get_threads(void);

/* Validation (params.c): 0 if the parameters are consistent and the buffers (lengths in floats) large enough,
 * else -1 with a message in err. */
int pl_conv_check(const pl_conv *p, size_t x_len, size_t w_len, size_t b_len, size_t y_len, char *err, size_t cap);
int pl_pool_check(const pl_pool *p, size_t x_len, size_t y_len, char *err, size_t cap);
int pl_epilogue_check(const pl_epilogue *ep, char *err, size_t cap);

/* Kernels over whole tensors (threaded), after their check passed. */
int pl_conv_run(const pl_conv *p, const float *x, const float *w, const float *bias, float *y);
void pl_pool_run(const pl_pool *p, const float *x, float *y);

#endif
