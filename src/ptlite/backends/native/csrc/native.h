/* ptlite's native kernels: the types every source file shares.
 *
 * Tensors are float32, images NHWC and C-contiguous. Every kernel is given its geometry in one of the parameter
 * structs below; the *_check functions (params.c) validate a struct against the lengths of the buffers it will
 * read and write before any kernel runs, so a kernel may trust its parameters. */
#ifndef PTLITE_NATIVE_H
#define PTLITE_NATIVE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Activations fused into a kernel's output (the IR's names: none, relu, clamp, hardswish, silu, sigmoid, tanh,
 * hardsigmoid, gelu, gelu_tanh; erf, elementwise only). */
enum pl_act { PL_ACT_NONE = 0, PL_ACT_RELU, PL_ACT_CLAMP, PL_ACT_HARDSWISH, PL_ACT_SILU, PL_ACT_SIGMOID, PL_ACT_TANH,
              PL_ACT_HARDSIGMOID, PL_ACT_GELU, PL_ACT_GELU_TANH, PL_ACT_ERF, PL_ACT_COUNT };

typedef struct {
    int act;          /* enum pl_act */
    float lo, hi;     /* the clamp's bounds (relu: 0, +inf) */
} pl_epilogue;

/* A 2-D convolution of an NHWC image: dense (groups == 1) or depthwise (groups == c == o, weight (kh*kw, c)).
 * A dense weight is the (K, o) matrix, K = kh*kw*c with rows ordered kh, kw, c: row-major (PL_ROWS), or in panels
 * of PL_PANEL columns, (ceil(o / PL_PANEL), K, PL_PANEL) with the columns past o zero (PL_PANELS); or, for a 3x3
 * stride-1 undilated convolution, Winograd F(4x4, 3x3)'s transformed weight U = G g Gt, (36, c, o) (PL_WINOGRAD), or
 * F(2x2, 3x3)'s, (16, c, o) (PL_WINOGRAD_2X2).
 * Padding is top, bottom, left, right. */
#define PL_PANEL 16
enum pl_layout { PL_ROWS = 0, PL_PANELS = 1, PL_WINOGRAD = 2, PL_WINOGRAD_2X2 = 3 };
static inline int pl_layout_winograd(int64_t layout) { return layout == PL_WINOGRAD || layout == PL_WINOGRAD_2X2; }
typedef struct {
    int64_t n, h, w, c, o;
    int64_t kh, kw, sh, sw, pt, pb, pl, pr, dh, dw;
    int64_t ho, wo, groups;
    int64_t layout;   /* enum pl_layout */
    pl_epilogue ep;
    int64_t planar;   /* 1: the input is NCHW (only where its rows are copied whole: pl_conv_copies_rows) */
} pl_conv;

/* A dense convolution with few input channels copies each tile's rows whole (conv.c): a tap's few channels would
 * make the micro-kernel's loop over taps the cost (an RGB stem: 3 channels per tap). Such a convolution can read an
 * NCHW input as well. */
#define PL_COPY_ROWS_BELOW_CHANNELS 16
#define PL_COPY_ROWS_MAX_K 1024
static inline int pl_conv_copies_rows(const pl_conv *p)
{
    return p->groups == 1 && !pl_layout_winograd(p->layout) && p->c >= 1 && p->c < PL_COPY_ROWS_BELOW_CHANNELS
           && p->kh >= 1 && p->kw >= 1 && p->kh <= PL_COPY_ROWS_MAX_K && p->kw <= PL_COPY_ROWS_MAX_K
           && p->kh * p->kw > 1 && p->kh * p->kw * p->c <= PL_COPY_ROWS_MAX_K;
}

/* Pooling of an NHWC image over windows (max, or average with or without the padding counted). */
enum pl_pool_kind { PL_POOL_MAX = 0, PL_POOL_AVG = 1, PL_POOL_AVG_EXCLUDE_PAD = 2 };
typedef struct {
    int64_t n, h, w, c;
    int64_t kh, kw, sh, sw, pt, pl, dh, dw;
    int64_t ho, wo;
    int kind;         /* enum pl_pool_kind */
    float divisor;    /* average pooling's divisor when > 0 (PyTorch's divisor_override) */
} pl_pool;

/* Bilinear resizing of an NHWC image to (ho, wo): a table of 4 floats per output row then per output column, (i0,
 * i1, w0, w1): the two source rows (columns) and their weights. Indices are clamped into the image when read, so
 * any table is safe to run. */
typedef struct {
    int64_t n, h, w, c, ho, wo;
} pl_resize;

/* y = op(a, b) elementwise then the epilogue; b is broadcast along rows when b_len divides... see params.c */
enum pl_binop { PL_ADD = 0, PL_SUB, PL_MUL, PL_DIV, PL_BINOP_COUNT };

/* One direction of one recurrent layer (PyTorch's LSTM, GRU, or Elman RNN with tanh or relu, gates in PyTorch's
 * order) over t steps of a batch of b: x (t, b, in); weights transposed, w_ih (in, g*hidden) and w_hh (hidden,
 * g*hidden), g the gates (4, 3, 1); biases (g*hidden) each; states (b, hidden). Step s reads x[i], i = reverse ?
 * t-1-s : s, and writes its state to out at (i * b + batch) * out_stride + out_offset. */
enum pl_rnn_mode { PL_LSTM = 0, PL_GRU, PL_RNN_TANH, PL_RNN_RELU, PL_RNN_MODE_COUNT };
typedef struct {
    int64_t mode, t, b, in, hidden, out_stride, out_offset, reverse;
} pl_rnn;

/* Scaled dot-product attention: per batch entry (b1, b2), y (l, ev) = softmax(q k^T * scale + mask) v over q (l, e),
 * k (s, e), v (s, ev), every operand C-contiguous (b1, b2, rows, columns). The additive mask is read at b1 * ms[0] +
 * b2 * ms[1] + i * ms[2] + j * ms[3] (a stride 0 broadcasts); causal: key j > query i is masked. A query whose every
 * key is masked gets zeros (PyTorch's safe softmax). */
typedef struct {
    int64_t b1, b2, l, s, e, ev, causal;
    int64_t ms[4];
    float scale;
} pl_attention;

/* A strided gather into a C-contiguous output: y[i0..i5] = x[sum i_k * stride[k]] over `shape` (a transpose, a
 * permutation, a broadcast with stride 0). */
#define PL_COPY_MAX_DIMS 6
typedef struct {
    int64_t ndim;
    int64_t shape[PL_COPY_MAX_DIMS], stride[PL_COPY_MAX_DIMS];
} pl_copy;

/* Elementwise arithmetic with broadcasting: y (C-contiguous, `shape`) = epilogue(a op b), a and b read at their own
 * strides (0 where broadcast). */
typedef struct {
    int64_t op, ndim;  /* enum pl_binop */
    int64_t shape[PL_COPY_MAX_DIMS], sa[PL_COPY_MAX_DIMS], sb[PL_COPY_MAX_DIMS];
    pl_epilogue ep;
} pl_broadcast;

/* A sum over the middle dimension of x (outer, r, inner) times scale (1 / r: a mean) into y (outer, inner). */
typedef struct {
    int64_t outer, r, inner;
    float scale;
} pl_reduce;

/* A whole recurrent operator (aten::lstm / gru / rnn_*): `layers` layers of `dirs` directions over x, (t, b, in), or
 * (b, t, in) when batch_first; the weights of each layer and direction k in turn (layer-major) as w_ih transposed
 * (in_k, g*hidden), w_hh transposed (hidden, g*hidden), b_ih and b_hh (g*hidden each), in_k = in for the first layer,
 * dirs * hidden after; h0 (and c0 for LSTM) (layers * dirs, b, hidden); y the last layer's output, (t, b, dirs *
 * hidden) or (b, t, dirs * hidden). */
typedef struct {
    int64_t mode, t, b, in, hidden, layers, dirs, batch_first;
} pl_rnn_stack;

/* One input of a concatenation: y[o * total + offset + i] = x[o * inner + i] for o < outer, i < inner (the input's
 * slice of every output row). */
typedef struct {
    int64_t outer, inner, total, offset;
} pl_slice;

/* Constant padding of a C-contiguous tensor: y (out[0] x ... x out[ndim-1]) at index i holds x at i - before where
 * that lies inside x (in[]), else value; a negative `before` crops. */
typedef struct {
    int64_t ndim;
    int64_t in[PL_COPY_MAX_DIMS], out[PL_COPY_MAX_DIMS], before[PL_COPY_MAX_DIMS];
    float value;
} pl_pad;

/* Batched matrix products: y[i] (m x n, C-contiguous, entries one after another) = a[i] (m x k, row i of entry e at
 * a + e * sa_b + i * sa_m, its k values contiguous) times b[i] (k x n: element (r, c) at b + e * sb_b + r * sb_k +
 * c * sb_n; sb_b 0: one matrix for every entry), for i < batch. */
typedef struct {
    int64_t batch, m, k, n;
    int64_t sa_b, sa_m, sb_b, sb_k, sb_n;
} pl_matmul;

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
    /* gemm over columns [j0, j1) of o, PL_NR at a time, of a weight in panels (PL_PANELS, k rows); the last tile's
     * bias from edge_bias where it is partial; res: NULL, or values added before the activation, laid out as y */
    void (*gemm_panels)(size_t mr_valid, size_t j0, size_t j1, size_t o, size_t taps, size_t c, const float **a,
                        const uint32_t *tap_ids, const float *w, size_t k, float *y, size_t ldy, const float *bias,
                        const float *edge_bias, const float *res, const pl_epilogue *ep);
    /* Depthwise convolution of output rows [oy0, oy1) of image n. */
    void (*depthwise_rows)(const pl_conv *p, const float *x, const float *w, const float *bias, float *y,
                           int64_t n, int64_t oy0, int64_t oy1, const float *zeros);
    /* Bilinear resizing of output rows [oy0, oy1) of image n (pl_resize). */
    void (*resize_rows)(const pl_resize *p, const float *x, const float *table, float *y, int64_t n, int64_t oy0,
                        int64_t oy1);
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
    /* Over each of `rows` rows of n values: softmax (max subtracted first); layer norm, y = (x - mean) / sqrt(var +
     * eps) * gamma + beta (two passes for the variance; gamma, beta: n values or NULL). y may be x. */
    void (*softmax_rows)(const float *x, float *y, size_t rows, size_t n);
    void (*layer_norm_rows)(const float *x, const float *gamma, const float *beta, float *y, size_t rows, size_t n,
                            float eps);
    /* Attention for query rows [i0, i1) of one batch entry (pl_attention): q, v and y that entry's, kt its keys
     * transposed (e, s) followed by vw readable floats, mask its mask (ms[2], ms[3] apply) or NULL; scores: s
     * floats of scratch. */
    void (*attention_rows)(const pl_attention *p, const float *q, const float *kt, const float *v, const float *mask,
                           float *y, int64_t i0, int64_t i1, float *scores);
    /* A recurrent layer's direction (pl_rnn); h0 and c0 (LSTM only, else NULL) are read before h_n and c_n are
     * written; scratch holds 2 * g * hidden + 2 * b * hidden floats. */
    void (*rnn)(const pl_rnn *p, const float *x, const float *w_ih, const float *w_hh, const float *b_ih,
                const float *b_hh, const float *h0, const float *c0, float *out, float *h_n, float *c_n,
                float *scratch);
    /* Winograd (PL_WINOGRAD, F(4x4, 3x3): a = 6; PL_WINOGRAD_2X2, F(2x2, 3x3): a = 4): the input transform of the
     * a x a patch at (iy0, ix0) of image n, its a * a rows of c values at v + q * ldv; the output transform of one
     * tile's a * a rows of output channels [o0, o1) at m + q * ldm, with the bias, the residual res (NULL: none; laid
     * out as the output) and the epilogue, into the output pixels at (oy0, ox0) of image n that exist. */
    void (*wino_input)(const pl_conv *p, const float *x, int64_t n, int64_t iy0, int64_t ix0, float *v, size_t ldv);
    void (*wino_output)(const pl_conv *p, const float *m, size_t ldm, size_t o0, size_t o1, const float *bias,
                        const float *res, float *y, int64_t n, int64_t oy0, int64_t ox0);
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

/* Threads: run fn(ctx, i) for i in [0, tasks) on the pool (the caller's thread takes part). pl_parallel_work
 * runs them all on the caller where the job's work (multiply-adds, or values read) is under PL_SERIAL_WORK: handing
 * a few microseconds of work to another thread costs more than it saves; and under PL_WAKE_WORK when the workers
 * are asleep, since waking one (a futex call, an interrupt to another core: tens of microseconds in a virtual
 * machine) costs the caller more than the work it would take. */
typedef void (*pl_task_fn)(void *ctx, size_t i);
#define PL_SERIAL_WORK ((double)(1 << 17))
#define PL_WAKE_WORK ((double)(1 << 21))
void pl_parallel(size_t tasks, pl_task_fn fn, void *ctx);
void pl_parallel_work(size_t tasks, pl_task_fn fn, void *ctx, double work);
void pl_set_threads(int n);

/* A scratch buffer of at least `bytes` of the calling thread's, one per slot, grown as needed, kept for the thread's
 * next calls and freed when it exits (the pool's workers, or a caller's own threads); NULL when it cannot be
 * allocated. */
enum { PL_SCRATCH_GATHER = 0, PL_SCRATCH_TAPS, PL_SCRATCH_SLOTS };
void *pl_thread_scratch(int slot, size_t bytes);
int pl_get_threads(void);

/* Validation (params.c): 0 if the parameters are consistent and the buffers (lengths in floats) large enough,
 * else -1 with a message in err. */
int pl_conv_check(const pl_conv *p, size_t x_len, size_t w_len, size_t b_len, size_t y_len, char *err, size_t cap);
int pl_pool_check(const pl_pool *p, size_t x_len, size_t y_len, char *err, size_t cap);
int pl_binary_check(int op, size_t a_len, size_t b_len, size_t len, int64_t images, char *err, size_t cap);
int pl_resize_check(const pl_resize *p, size_t x_len, size_t table_len, size_t y_len, char *err, size_t cap);
int pl_epilogue_check(const pl_epilogue *ep, char *err, size_t cap);
/* the recurrent layer's lengths (in floats): x, each weight, each bias, each state, out; c0 and c_n only for LSTM */
int pl_rnn_check(const pl_rnn *p, size_t x_len, size_t w_ih_len, size_t w_hh_len, size_t b_ih_len, size_t b_hh_len,
                 size_t h_len, size_t c_len, size_t out_len, char *err, size_t cap);
size_t pl_rnn_gates(int64_t mode);
int64_t pl_rnn_stack_weights(const pl_rnn_stack *p);  /* floats of all the weights, or -1 if the sizes overflow */
int pl_rnn_stack_check(const pl_rnn_stack *p, size_t x_len, size_t w_len, size_t h_len, size_t c_len, size_t y_len,
                       char *err, size_t cap);
/* mask_len 0: no mask */
int pl_attention_check(const pl_attention *p, size_t q_len, size_t k_len, size_t v_len, size_t mask_len,
                       size_t y_len, char *err, size_t cap);
int pl_copy_check(const pl_copy *p, size_t x_len, size_t y_len, char *err, size_t cap);
/* softmax (norm 0) or layer norm (norm 1) over rows x n; gamma and beta lengths (0: none), layer norm only */
int pl_broadcast_check(const pl_broadcast *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap);
int pl_reduce_check(const pl_reduce *p, size_t x_len, size_t y_len, char *err, size_t cap);
int pl_slice_check(const pl_slice *p, size_t x_len, size_t y_len, char *err, size_t cap);
int pl_pad_check(const pl_pad *p, size_t x_len, size_t y_len, char *err, size_t cap);
int pl_matmul_check(const pl_matmul *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap);
int pl_rows_check(int norm, int64_t rows, int64_t n, size_t x_len, size_t gamma_len, size_t beta_len, size_t y_len,
                  char *err, size_t cap);

/* Scratch that kernels load as vectors: 64-byte aligned, as the arenas and a loaded file's weights are (a vector
 * load then spans one cache line); pl_aligned_free releases it. NULL if out of memory. Plain malloc underneath,
 * the block's own pointer kept before the aligned address: aligned_alloc and posix_memalign are missing from some
 * of the C libraries ptlite runs on (Android before API 28, macOS before 10.15) or from strict C11 headers. */
static inline void *pl_aligned_alloc(size_t bytes)
{
    if (bytes > SIZE_MAX - 64 - sizeof(void *)) return NULL;
    unsigned char *raw = malloc(bytes + 64 + sizeof(void *));
    if (!raw) return NULL;
    void **at = (void **)(((uintptr_t)(raw + sizeof(void *)) + 63) & ~(uintptr_t)63);
    at[-1] = raw;
    return at;
}
static inline void pl_aligned_free(void *p)
{
    if (p) free(((void **)p)[-1]);
}
#define PL_ALIGNED_FLOATS(n) (((n) + 15) / 16 * 16)  /* a float count rounded up to a whole cache line */

/* Kernels over whole tensors (threaded), after their check passed. */
int pl_conv_run(const pl_conv *p, const float *x, const float *w, const float *bias, float *y);
/* The same with a residual added before the activation (res: the output's shape and layout; a dense convolution
 * with its weight in panels or Winograd's: pl_conv_takes_residual), as a convolution followed by an addition (and
 * relu). */
int pl_conv_run_residual(const pl_conv *p, const float *x, const float *w, const float *bias, const float *res,
                         float *y);
static inline int pl_conv_takes_residual(const pl_conv *p)
{
    return p->groups == 1 && (p->layout == PL_PANELS || pl_layout_winograd(p->layout));
}
/* The same with x's channels multiplied by per-image factors first (scale: (n, c), NULL: none), as a
 * squeeze-and-excitation multiply before a 1x1 convolution: the factors (copied first: scale may lie anywhere)
 * scale a copy of the weight, an image's at a time; a 1x1 stride-1 convolution with its weight in panels only
 * (pl_conv_takes_scale). -1: not such a convolution, or no memory. */
int pl_conv_run_scaled(const pl_conv *p, const float *x, const float *w, const float *bias, const float *scale,
                       const float *res, float *y);
static inline int pl_conv_takes_scale(const pl_conv *p)
{
    return p->groups == 1 && p->layout == PL_PANELS && p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1
           && p->pt == 0 && p->pb == 0 && p->pl == 0 && p->pr == 0 && !p->planar;
}
int pl_winograd_run(const pl_conv *p, const pl_isa *isa, const float *x, const float *u, const float *bias,
                    const float *res, float *y);
void pl_pool_run(const pl_pool *p, const float *x, float *y);
/* Row-wise operations (rows.c), threaded: y = a op b with b's rows repeated within each of `images` images (len
 * and b_len divisible by images, len / images by b_len / images: pl_binary_check); y = act(x) (x may be y); per image
 * the mean over rows of a (rows, c) matrix (-1: no memory for the threads' partial means); softmax / layer norm over
 * rows. */
void pl_binary_run(int op, const float *a, const float *b, size_t b_len, float *y, size_t len, size_t images,
                   const pl_epilogue *ep);
void pl_activate_run(const float *x, float *y, size_t len, const pl_epilogue *ep);
int pl_mean_run(const float *x, float *y, size_t n, size_t rows, size_t c);
void pl_softmax_run(const float *x, float *y, size_t rows, size_t n);
void pl_layer_norm_run(const float *x, const float *gamma, const float *beta, float *y, size_t rows, size_t n,
                       float eps);
void pl_resize_run(const pl_resize *p, const float *x, const float *table, float *y);
/* attention.c: -1 when its scratch cannot be allocated */
int pl_attention_run(const pl_attention *p, const float *q, const float *k, const float *v, const float *mask,
                     float *y);
/* recurrent.c: -1 when its scratch cannot be allocated */
int pl_rnn_stack_run(const pl_rnn_stack *p, const float *x, const float *w, const float *h0, const float *c0, float *y);
/* copy.c */
void pl_copy_run(const pl_copy *p, const float *x, float *y);
void pl_slice_run(const pl_slice *p, const float *x, float *y);
void pl_pad_run(const pl_pad *p, const float *x, float *y);
/* matmul.c: -1 when b's packed copy cannot be allocated */
int pl_matmul_run(const pl_matmul *p, const float *a, const float *b, float *y);
/* broadcast.c (threaded by rows of the output) */
void pl_broadcast_run(const pl_broadcast *p, const float *a, const float *b, float *y);
/* rows.c */
void pl_reduce_run(const pl_reduce *p, const float *x, float *y);

/* qgemm.c: the int8 GEMM with requantization (uint8 activations, int8 weights, int32 offsets, float32
 * multipliers; see qgemm.c). The weight (k, n) is packed in panels of PL_QNB columns: np = n rounded up to PL_QNR,
 * panel p (columns 64p.., width wp = min(PL_QNB, np - 64p)) at 64p * k4 * 4, element (row r, column j) of it at
 * ((r / 4) * wp + j - 64p) * 4 + r % 4, with k4 = ceil(k / 4) and the rows and columns past k and n zero. The rows
 * are x's (m rows of k bytes, ldx apart) or, when conv is set, a convolution's patches of the NHWC input x (batch,
 * h, w, c) with taps ordered (kh, kw, c) and the padding the zero point zx: m = batch * ho * wo, k = kh * kw * c.
 * pl_qgemm_run returns -1 when a thread's gather buffer cannot be allocated. pl_qgemm_kernel: the micro-kernel runs
 * use here (enum pl_qgemm_kernel; qgemm.c says when each is chosen); pl_qgemm_run_as runs a given one where the CPU
 * can (pl_qgemm_kernel_usable; else plain C), for the selftest. */
#define PL_QNR 16
#define PL_QNB 64
#define PL_QGEMM_MAX_K 60000  /* k * 255 * 128 stays below 2^31 with room for the offsets */
typedef struct {
    int64_t m, k, n, ldx, zy, lo, hi;
    int64_t conv, batch, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho, wo, zx;
} pl_qgemm;
int pl_qgemm_check(const pl_qgemm *p, size_t x_len, size_t w_len, size_t offset_len, size_t mult_len, size_t y_len,
                   char *err, size_t cap);
int pl_qgemm_run(const pl_qgemm *p, const uint8_t *x, const int8_t *w, const int32_t *offset, const float *mult,
                 uint8_t *y);
enum pl_qgemm_kernel { PL_QGEMM_GENERIC = 0, PL_QGEMM_AVX512_VNNI, PL_QGEMM_AVX_VNNI, PL_QGEMM_AVX512_VNNI_256,
                      PL_QGEMM_NEON_DOT, PL_QGEMM_AVX2, PL_QGEMM_KERNELS };
int pl_qgemm_kernel(void);
int pl_qgemm_kernel_usable(int kernel);
int pl_qgemm_run_as(const pl_qgemm *p, const uint8_t *x, const int8_t *w, const int32_t *offset, const float *mult,
                    uint8_t *y, int kernel);

/* qdepthwise.c: the int8 depthwise convolution with requantization on NHWC uint8 (see qdepthwise.c). */
#define PL_QDEPTHWISE_MAX_TAPS 16384  /* taps * 255 * 128 stays below 2^31 with room for the offsets */
typedef struct {
    int64_t batch, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho, wo, zx, zy, lo, hi;
} pl_qdepthwise;
int pl_qdepthwise_check(const pl_qdepthwise *p, size_t x_len, size_t w_len, size_t offset_len, size_t mult_len,
                        size_t y_len, char *err, size_t cap);
void pl_qdepthwise_run(const pl_qdepthwise *p, const uint8_t *x, const int32_t *w, const int32_t *offset,
                       const float *mult, uint8_t *y);
/* The same as a given body (0 plain C, 1 AVX2, 2 AVX-512 BW), with VNNI or without: for the selftest, on a CPU that
 * has them. */
void pl_qdepthwise_run_as(const pl_qdepthwise *p, const uint8_t *x, const int32_t *w, const int32_t *offset,
                          const float *mult, uint8_t *y, int variant, int vnni);

/* qpool.c: max pooling of uint8 NHWC images (p->kind PL_POOL_MAX; pl_pool_check's lengths in bytes). */
void pl_qmaxpool_run(const pl_pool *p, const uint8_t *x, uint8_t *y);

/* qelementwise.c: elementwise int8 kernels on count values (see qelementwise.c). PL_Q_ADD: a, b, y uint8 (za, sa,
 * zb, sb; inv = float32(1 / output scale), zy, lo, hi); PL_Q_QUANTIZE: a float32, y uint8 (inv, zy);
 * PL_Q_QUANTIZE_NHWC: the same from NCHW a to NHWC y, channels x pixels per image; PL_Q_DEQUANTIZE: a uint8,
 * y float32 (za, sa). */
enum pl_q_op { PL_Q_ADD = 0, PL_Q_QUANTIZE, PL_Q_QUANTIZE_NHWC, PL_Q_DEQUANTIZE, PL_Q_OP_COUNT };
typedef struct {
    int64_t op, count, channels, pixels, za, zb, zy, lo, hi;
    float sa, sb, inv;
} pl_qelementwise;
int pl_qelementwise_check(const pl_qelementwise *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap);
void pl_qelementwise_run(const pl_qelementwise *p, const void *a, const void *b, void *y);

#endif
