/* Validation of kernel parameters against the buffers they will touch: everything C is handed (from a file's
 * plan or from Python) passes through here before a kernel runs, so that a hostile value is an error message, not
 * an out-of-bounds access. Sizes are bounded so that every offset a kernel computes fits in int64_t. */
#include <math.h>
#include <stdio.h>

#include "native.h"

#define DIM_MAX ((int64_t)1 << 31)   /* any one dimension, stride, padding or dilation */

static int fail(char *err, size_t cap, const char *msg, long long a, long long b)
{
    snprintf(err, cap, msg, a, b);
    return -1;
}

static int in_range(int64_t v, int64_t lo) { return v >= lo && v <= DIM_MAX; }

/* a * b * c * d, or -1 on overflow past 2^62 */
static int64_t product(int64_t a, int64_t b, int64_t c, int64_t d)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r) || __builtin_mul_overflow(r, d, &r)
        || r > ((int64_t)1 << 62))
        return -1;
    return r;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t before, int64_t after, int64_t d)
{
    int64_t span = in + before + after - d * (k - 1) - 1;
    return span < 0 ? 0 : span / s + 1;
}

int pl_epilogue_check(const pl_epilogue *ep, char *err, size_t cap)
{
    if (ep->act < 0 || ep->act >= PL_ACT_COUNT) return fail(err, cap, "unknown activation code %lld%.0lld", ep->act, 0);
    return 0;
}

int pl_conv_check(const pl_conv *p, size_t x_len, size_t w_len, size_t b_len, size_t y_len, char *err, size_t cap)
{
    if (!in_range(p->n, 1) || !in_range(p->h, 1) || !in_range(p->w, 1) || !in_range(p->c, 1) || !in_range(p->o, 1))
        return fail(err, cap, "convolution: a dimension of the input or output is out of range (C=%lld, O=%lld)",
                    p->c, p->o);
    if (!in_range(p->kh, 1) || !in_range(p->kw, 1) || !in_range(p->sh, 1) || !in_range(p->sw, 1)
        || !in_range(p->dh, 1) || !in_range(p->dw, 1))
        return fail(err, cap, "convolution: kernel %lldx%lld, stride or dilation out of range", p->kh, p->kw);
    if (!in_range(p->pt, 0) || !in_range(p->pb, 0) || !in_range(p->pl, 0) || !in_range(p->pr, 0))
        return fail(err, cap, "convolution: padding out of range (top %lld, left %lld)", p->pt, p->pl);
    if (product(p->dh, p->kh, 1, 1) < 0 || p->dh * p->kh > DIM_MAX || p->dw * p->kw > DIM_MAX)
        return fail(err, cap, "convolution: dilated kernel too large (%lldx%lld)", p->kh, p->kw);
    int64_t ho = out_size(p->h, p->kh, p->sh, p->pt, p->pb, p->dh);
    int64_t wo = out_size(p->w, p->kw, p->sw, p->pl, p->pr, p->dw);
    if (ho < 1 || wo < 1 || p->ho != ho || p->wo != wo)
        return fail(err, cap, "convolution: output size %lldx%lld does not follow from the input, kernel, stride, "
                    "padding and dilation", p->ho, p->wo);
    int depthwise = p->groups > 1;
    if (p->layout != PL_ROWS && ((p->layout != PL_PANELS && !pl_layout_winograd(p->layout)) || depthwise))
        return fail(err, cap, "convolution: weight layout %lld is not one of the dense layouts%.0lld", p->layout, 0);
    if (p->planar != 0 && (p->planar != 1 || !pl_conv_copies_rows(p)))
        return fail(err, cap, "convolution: an NCHW input only for a dense convolution of under %lld channels (C=%lld)",
                    PL_COPY_ROWS_BELOW_CHANNELS, p->c);
    if (pl_layout_winograd(p->layout)
        && (p->kh != 3 || p->kw != 3 || p->sh != 1 || p->sw != 1 || p->dh != 1 || p->dw != 1))
        return fail(err, cap, "convolution: Winograd takes 3x3, stride 1, undilated (kernel %lldx%lld)", p->kh, p->kw);
    if (p->groups != 1 && !(p->groups == p->c && p->c == p->o))
        return fail(err, cap, "convolution: groups=%lld is neither 1 nor depthwise (C=%lld)", p->groups, p->c);
    int64_t xs = product(p->n, p->h, p->w, p->c), ys = product(p->n, ho, wo, p->o);
    const int64_t columns = p->layout == PL_PANELS ? (p->o + PL_PANEL - 1) / PL_PANEL * PL_PANEL : p->o;
    int64_t ws = depthwise ? product(p->kh, p->kw, p->c, 1)
                 : p->layout == PL_WINOGRAD ? product(36, p->c, p->o, 1)
                 : p->layout == PL_WINOGRAD_2X2 ? product(16, p->c, p->o, 1) : product(p->kh, p->kw, p->c, columns);
    if (xs < 0 || ys < 0 || ws < 0) return fail(err, cap, "convolution: tensor sizes overflow%.0lld%.0lld", 0, 0);
    if ((size_t)xs > x_len) return fail(err, cap, "convolution: input holds %lld values, its shape needs %lld",
                                        (long long)x_len, xs);
    if ((size_t)ws > w_len) return fail(err, cap, "convolution: weight holds %lld values, its shape needs %lld",
                                        (long long)w_len, ws);
    if (b_len != 0 && b_len < (size_t)p->o) return fail(err, cap, "convolution: bias holds %lld values, %lld outputs",
                                                         (long long)b_len, p->o);
    if ((size_t)ys > y_len) return fail(err, cap, "convolution: output holds %lld values, needs %lld",
                                        (long long)y_len, ys);
    return pl_epilogue_check(&p->ep, err, cap);
}

int pl_pool_check(const pl_pool *p, size_t x_len, size_t y_len, char *err, size_t cap)
{
    if (!in_range(p->n, 1) || !in_range(p->h, 1) || !in_range(p->w, 1) || !in_range(p->c, 1))
        return fail(err, cap, "pooling: input dimension out of range (C=%lld, H=%lld)", p->c, p->h);
    if (!in_range(p->kh, 1) || !in_range(p->kw, 1) || !in_range(p->sh, 1) || !in_range(p->sw, 1)
        || !in_range(p->dh, 1) || !in_range(p->dw, 1) || !in_range(p->pt, 0) || !in_range(p->pl, 0)
        || p->dh * p->kh > DIM_MAX || p->dw * p->kw > DIM_MAX)
        return fail(err, cap, "pooling: kernel %lldx%lld, stride, padding or dilation out of range", p->kh, p->kw);
    if (2 * p->pt > p->kh || 2 * p->pl > p->kw)
        return fail(err, cap, "pooling: padding (%lld, %lld) is more than half the kernel", p->pt, p->pl);
    if (p->kind < PL_POOL_MAX || p->kind > PL_POOL_AVG_EXCLUDE_PAD)
        return fail(err, cap, "pooling: unknown kind %lld%.0lld", p->kind, 0);
    if (!(p->divisor >= 0) || isinf(p->divisor)) return fail(err, cap, "pooling: bad divisor%.0lld%.0lld", 0, 0);
    if (!in_range(p->ho, 1) || !in_range(p->wo, 1))
        return fail(err, cap, "pooling: output size %lldx%lld out of range", p->ho, p->wo);
    /* every window must start inside the padded image (ceil_mode may add a last one that does not end there) */
    if ((p->ho - 1) * p->sh >= p->h + p->pt || (p->wo - 1) * p->sw >= p->w + p->pl)
        return fail(err, cap, "pooling: output size %lldx%lld has windows outside the input", p->ho, p->wo);
    int64_t xs = product(p->n, p->h, p->w, p->c), ys = product(p->n, p->ho, p->wo, p->c);
    if (xs < 0 || ys < 0) return fail(err, cap, "pooling: tensor sizes overflow%.0lld%.0lld", 0, 0);
    if ((size_t)xs > x_len) return fail(err, cap, "pooling: input holds %lld values, needs %lld", (long long)x_len, xs);
    if ((size_t)ys > y_len) return fail(err, cap, "pooling: output holds %lld values, needs %lld", (long long)y_len, ys);
    return 0;
}

size_t pl_rnn_gates(int64_t mode) { return mode == PL_LSTM ? 4 : mode == PL_GRU ? 3 : 1; }

int pl_rnn_check(const pl_rnn *p, size_t x_len, size_t w_ih_len, size_t w_hh_len, size_t b_ih_len, size_t b_hh_len,
                 size_t h_len, size_t c_len, size_t out_len, char *err, size_t cap)
{
    if (p->mode < 0 || p->mode >= PL_RNN_MODE_COUNT)
        return fail(err, cap, "unknown recurrent mode %lld%.0lld", p->mode, 0);
    if (!in_range(p->t, 0) || !in_range(p->b, 1) || !in_range(p->in, 1) || !in_range(p->hidden, 1)
        || !in_range(p->out_stride, 1) || !in_range(p->out_offset, 0) || (p->reverse != 0 && p->reverse != 1))
        return fail(err, cap, "recurrent layer: bad sizes (steps %lld, batch %lld, ...)", p->t, p->b);
    if (p->out_offset + p->hidden > p->out_stride)
        return fail(err, cap, "recurrent layer: the state (offset %lld) does not fit an output row of %lld",
                    p->out_offset, p->out_stride);
    const int64_t g = (int64_t)pl_rnn_gates(p->mode) * p->hidden;
    const int64_t x = product(p->t, p->b, p->in, 1), wi = product(p->in, g, 1, 1), wh = product(p->hidden, g, 1, 1);
    const int64_t st = product(p->b, p->hidden, 1, 1), out = product(p->t, p->b, p->out_stride, 1);
    if (x < 0 || wi < 0 || wh < 0 || st < 0 || out < 0)
        return fail(err, cap, "recurrent layer: sizes overflow (steps %lld, batch %lld)", p->t, p->b);
    if ((size_t)x > x_len)
        return fail(err, cap, "recurrent layer: the input has %lld values, needs %lld", (long long)x_len, x);
    if ((size_t)wi != w_ih_len || (size_t)wh != w_hh_len)
        return fail(err, cap, "recurrent layer: weights of %lld and %lld values do not fit", (long long)w_ih_len,
                    (long long)w_hh_len);
    if ((size_t)g != b_ih_len || (size_t)g != b_hh_len)
        return fail(err, cap, "recurrent layer: biases of %lld and %lld values do not fit", (long long)b_ih_len,
                    (long long)b_hh_len);
    if ((size_t)st != h_len || (p->mode == PL_LSTM && (size_t)st != c_len))
        return fail(err, cap, "recurrent layer: states of %lld and %lld values do not fit", (long long)h_len,
                    (long long)c_len);
    if ((size_t)out > out_len) return fail(err, cap, "recurrent layer: the output has %lld values, needs %lld",
                                           (long long)out_len, out);
    return 0;
}

int pl_resize_check(const pl_resize *p, size_t x_len, size_t table_len, size_t y_len, char *err, size_t cap)
{
    if (!in_range(p->n, 1) || !in_range(p->h, 1) || !in_range(p->w, 1) || !in_range(p->c, 1) || !in_range(p->ho, 1)
        || !in_range(p->wo, 1))
        return fail(err, cap, "resize: a dimension is out of range (%lldx%lld output)", p->ho, p->wo);
    const int64_t xs = product(p->n, p->h, p->w, p->c), ys = product(p->n, p->ho, p->wo, p->c);
    if (xs < 0 || ys < 0) return fail(err, cap, "resize: tensor sizes overflow%.0lld%.0lld", 0, 0);
    if ((size_t)xs > x_len) return fail(err, cap, "resize: input holds %lld values, needs %lld", (long long)x_len, xs);
    if ((size_t)ys > y_len) return fail(err, cap, "resize: output holds %lld values, needs %lld", (long long)y_len, ys);
    if (table_len != (size_t)(4 * (p->ho + p->wo)))
        return fail(err, cap, "resize: a table of %lld values for %lld output rows and columns", (long long)table_len,
                    p->ho + p->wo);
    return 0;
}

int pl_binary_check(int op, size_t a_len, size_t b_len, size_t len, int64_t images, char *err, size_t cap)
{
    if (op < 0 || op >= PL_BINOP_COUNT) return fail(err, cap, "unknown binary operation %lld%.0lld", op, 0);
    if (a_len != len)
        return fail(err, cap, "binary: operand lengths do not match: the first operand and the output differ (%lld, "
                    "%lld)", (long long)a_len, (long long)len);
    if (images < 1 || b_len == 0 || len % (size_t)images != 0 || b_len % (size_t)images != 0
        || (len / (size_t)images) % (b_len / (size_t)images) != 0)
        return fail(err, cap, "binary: operand lengths do not match: the second operand's (%lld) does not divide "
                    "the output's in each of %lld image(s)", (long long)b_len, images);
    return 0;
}

int pl_attention_check(const pl_attention *p, size_t q_len, size_t k_len, size_t v_len, size_t mask_len,
                       size_t y_len, char *err, size_t cap)
{
    if (!in_range(p->b1, 1) || !in_range(p->b2, 1) || !in_range(p->l, 1) || !in_range(p->s, 1) || !in_range(p->e, 1)
        || !in_range(p->ev, 1) || (p->causal != 0 && p->causal != 1))
        return fail(err, cap, "attention: invalid sizes (l %lld, s %lld, ...)", p->l, p->s);
    const int64_t q = product(p->b1, p->b2, p->l, p->e), k = product(p->b1, p->b2, p->s, p->e);
    const int64_t v = product(p->b1, p->b2, p->s, p->ev), y = product(p->b1, p->b2, p->l, p->ev);
    if (q < 0 || k < 0 || v < 0 || y < 0 || product(p->e + 1, p->s, 1, 1) < 0)
        return fail(err, cap, "attention: sizes too large (l %lld, s %lld)", p->l, p->s);
    if ((size_t)q > q_len || (size_t)k > k_len || (size_t)v > v_len || (size_t)y > y_len)
        return fail(err, cap, "attention: an operand is shorter than its sizes need (q %lld floats, needs %lld)",
                    (long long)q_len, q);
    if (mask_len) {
        const int64_t last[4] = {p->b1 - 1, p->b2 - 1, p->l - 1, p->s - 1};
        int64_t end = 0;
        for (int d = 0; d < 4; d++) {
            int64_t t;
            if (!in_range(p->ms[d], 0) || __builtin_mul_overflow(last[d], p->ms[d], &t)
                || __builtin_add_overflow(end, t, &end))
                return fail(err, cap, "attention: invalid mask stride %lld (dimension %lld)", p->ms[d], d);
        }
        if ((size_t)end >= mask_len)
            return fail(err, cap, "attention: the mask reaches float %lld of %lld", end, (long long)mask_len);
    }
    return 0;
}

int pl_copy_check(const pl_copy *p, size_t x_len, size_t y_len, char *err, size_t cap)
{
    if (p->ndim < 1 || p->ndim > PL_COPY_MAX_DIMS)
        return fail(err, cap, "copy: %lld dimensions (1 to %lld are taken)", p->ndim, PL_COPY_MAX_DIMS);
    int64_t count = 1, end = 0;
    for (int64_t d = 0; d < p->ndim; d++) {
        int64_t t;
        if (!in_range(p->shape[d], 1) || !in_range(p->stride[d], 0) || __builtin_mul_overflow(count, p->shape[d], &count)
            || count > ((int64_t)1 << 62) || __builtin_mul_overflow(p->shape[d] - 1, p->stride[d], &t)
            || __builtin_add_overflow(end, t, &end))
            return fail(err, cap, "copy: invalid size %lld or stride %lld", p->shape[d], p->stride[d]);
    }
    if ((size_t)count > y_len || (size_t)end >= x_len)
        return fail(err, cap, "copy: reads float %lld of %lld, or writes past its output", end, (long long)x_len);
    return 0;
}

int pl_rows_check(int norm, int64_t rows, int64_t n, size_t x_len, size_t gamma_len, size_t beta_len, size_t y_len,
                  char *err, size_t cap)
{
    const int64_t count = product(rows, n, 1, 1);
    if ((norm != 0 && norm != 1) || !in_range(rows, 1) || !in_range(n, 1) || count < 0)
        return fail(err, cap, "rows: invalid sizes %lld x %lld", rows, n);
    if ((size_t)count > x_len || (size_t)count > y_len)
        return fail(err, cap, "rows: %lld x %lld values do not fit the buffers", rows, n);
    if ((gamma_len && (!norm || gamma_len != (size_t)n)) || (beta_len && (!norm || beta_len != (size_t)n)))
        return fail(err, cap, "rows: the scale and shift must have %lld values (%lld given)", n, (long long)gamma_len);
    return 0;
}

int pl_broadcast_check(const pl_broadcast *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap)
{
    if (p->op < 0 || p->op >= PL_BINOP_COUNT || p->ndim < 1 || p->ndim > PL_COPY_MAX_DIMS)
        return fail(err, cap, "broadcast: unknown operation %lld or %lld dimensions", p->op, p->ndim);
    int64_t count = 1, end_a = 0, end_b = 0;
    for (int64_t d = 0; d < p->ndim; d++) {
        int64_t ta, tb;
        if (!in_range(p->shape[d], 1) || !in_range(p->sa[d], 0) || !in_range(p->sb[d], 0)
            || __builtin_mul_overflow(count, p->shape[d], &count) || count > ((int64_t)1 << 62)
            || __builtin_mul_overflow(p->shape[d] - 1, p->sa[d], &ta) || __builtin_add_overflow(end_a, ta, &end_a)
            || __builtin_mul_overflow(p->shape[d] - 1, p->sb[d], &tb) || __builtin_add_overflow(end_b, tb, &end_b))
            return fail(err, cap, "broadcast: invalid size %lld or strides (dimension %lld)", p->shape[d], d);
    }
    if ((size_t)count > y_len || (size_t)end_a >= a_len || (size_t)end_b >= b_len)
        return fail(err, cap, "broadcast: reads past an operand or writes past its %lld-float output (%lld)",
                    (long long)y_len, count);
    return pl_epilogue_check(&p->ep, err, cap);
}

int pl_reduce_check(const pl_reduce *p, size_t x_len, size_t y_len, char *err, size_t cap)
{
    const int64_t in = product(p->outer, p->r, p->inner, 1), out = product(p->outer, p->inner, 1, 1);
    if (!in_range(p->outer, 1) || !in_range(p->r, 1) || !in_range(p->inner, 1) || in < 0 || out < 0)
        return fail(err, cap, "reduce: invalid sizes (%lld over %lld)", p->r, p->inner);
    if ((size_t)in > x_len || (size_t)out > y_len)
        return fail(err, cap, "reduce: %lld values in, %lld out do not fit the buffers", in, out);
    return 0;
}

int64_t pl_rnn_stack_weights(const pl_rnn_stack *p)
{
    const int64_t g = (int64_t)pl_rnn_gates(p->mode) * p->hidden, first = product(p->in + p->hidden + 2, g, p->dirs, 1);
    const int64_t rest = product(p->dirs * p->hidden + p->hidden + 2, g, p->dirs, p->layers - 1);
    return first < 0 || rest < 0 ? -1 : first + rest;
}

int pl_rnn_stack_check(const pl_rnn_stack *p, size_t x_len, size_t w_len, size_t h_len, size_t c_len, size_t y_len,
                       char *err, size_t cap)
{
    if (p->mode < 0 || p->mode >= PL_RNN_MODE_COUNT || !in_range(p->t, 1) || !in_range(p->b, 1)
        || !in_range(p->in, 1) || !in_range(p->hidden, 1) || !in_range(p->layers, 1) || p->dirs < 1 || p->dirs > 2
        || (p->batch_first != 0 && p->batch_first != 1) || p->hidden > ((int64_t)1 << 20) || p->layers > 1024)
        return fail(err, cap, "recurrent stack: bad sizes (steps %lld, hidden %lld, ...)", p->t, p->hidden);
    const int64_t x = product(p->t, p->b, p->in, 1), w = pl_rnn_stack_weights(p);
    const int64_t h = product(p->layers * p->dirs, p->b, p->hidden, 1), y = product(p->t, p->b, p->dirs, p->hidden);
    if (x < 0 || w < 0 || h < 0 || y < 0) return fail(err, cap, "recurrent stack: sizes overflow%.0lld%.0lld", 0, 0);
    if ((size_t)x > x_len || (size_t)w != w_len || (size_t)h > h_len || (size_t)y > y_len
        || (p->mode == PL_LSTM ? (size_t)h > c_len : c_len != 0))
        return fail(err, cap, "recurrent stack: buffers of %lld (input) and %lld (weights) values do not fit",
                    (long long)x_len, (long long)w_len);
    return 0;
}

int pl_slice_check(const pl_slice *p, size_t x_len, size_t y_len, char *err, size_t cap)
{
    const int64_t in = product(p->outer, p->inner, 1, 1), out = product(p->outer, p->total, 1, 1);
    if (!in_range(p->outer, 1) || !in_range(p->inner, 1) || !in_range(p->total, 1) || !in_range(p->offset, 0)
        || p->offset + p->inner > p->total || in < 0 || out < 0)
        return fail(err, cap, "concatenation: a slice of %lld at %lld does not fit its rows", p->inner, p->offset);
    if ((size_t)in > x_len || (size_t)out > y_len)
        return fail(err, cap, "concatenation: %lld values in, %lld out do not fit the buffers", in, out);
    return 0;
}

/* end (the float past the last one read), moved by `count` - 1 steps of `stride`; -1 if end is -1 already, the
 * stride negative or too large, or the sum overflows (counts >= 1) */
static int64_t reach(int64_t end, int64_t count, int64_t stride)
{
    int64_t t;
    if (end < 0 || !in_range(stride, 0) || __builtin_mul_overflow(count - 1, stride, &t) || __builtin_add_overflow(end, t, &end))
        return -1;
    return end;
}

int pl_matmul_check(const pl_matmul *p, size_t a_len, size_t b_len, size_t y_len, char *err, size_t cap)
{
    if (!in_range(p->batch, 1) || !in_range(p->m, 1) || !in_range(p->k, 1) || !in_range(p->n, 1))
        return fail(err, cap, "matmul: invalid sizes (m %lld, n %lld)", p->m, p->n);
    const int64_t y = product(p->batch, p->m, p->n, 1);
    const int64_t packed = product(p->sb_b ? p->batch : 1, (p->n + PL_PANEL - 1) / PL_PANEL, p->k, PL_PANEL);
    const int64_t a_end = reach(reach(reach(1, p->batch, p->sa_b), p->m, p->sa_m), p->k, 1);
    const int64_t b_end = reach(reach(reach(1, p->batch, p->sb_b), p->k, p->sb_k), p->n, p->sb_n);
    if (y < 0 || packed < 0 || a_end < 0 || b_end < 0)
        return fail(err, cap, "matmul: sizes or strides too large (m %lld, n %lld)", p->m, p->n);
    if ((size_t)a_end > a_len || (size_t)b_end > b_len || (size_t)y > y_len)
        return fail(err, cap, "matmul: an operand is shorter than its sizes and strides need (a: %lld floats, needs "
                    "%lld)", (long long)a_len, a_end);
    return 0;
}

int pl_pad_check(const pl_pad *p, size_t x_len, size_t y_len, char *err, size_t cap)
{
    if (p->ndim < 1 || p->ndim > PL_COPY_MAX_DIMS)
        return fail(err, cap, "pad: %lld dimensions (1 to %lld are taken)", p->ndim, PL_COPY_MAX_DIMS);
    int64_t in = 1, out = 1;
    for (int64_t d = 0; d < p->ndim; d++)
        if (!in_range(p->in[d], 1) || !in_range(p->out[d], 1) || p->before[d] < -DIM_MAX || p->before[d] > DIM_MAX
            || __builtin_mul_overflow(in, p->in[d], &in) || __builtin_mul_overflow(out, p->out[d], &out)
            || in > ((int64_t)1 << 62) || out > ((int64_t)1 << 62))
            return fail(err, cap, "pad: invalid sizes (dimension %lld: %lld)", d, p->in[d]);
    if ((size_t)in > x_len || (size_t)out > y_len)
        return fail(err, cap, "pad: %lld floats in or %lld out do not fit the buffers", in, out);
    return 0;
}
