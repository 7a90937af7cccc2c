/* A planned region: the steps of several nodes, over numbered buffers (the region's arena, its inputs, outputs and
 * weights), checked once when the plan is made and then run in one call. A plan comes from a file (the memory plan's
 * offsets, the operators' arguments), so everything in it is validated before any step runs: every reference lies
 * inside its buffer, every geometry agrees with the lengths it will touch (params.c), outputs go only to writable
 * buffers and never partly overlap what the step reads. */
#define _POSIX_C_SOURCE 199309L  /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

static int fail(char *err, size_t cap, int64_t step, const char *msg)
{
    snprintf(err, cap, "step %lld: %s", (long long)step, msg);
    return -1;
}

static int ref_ok(const pl_ref *r, const pl_plan *plan, int optional)
{
    if (optional && r->buf == -1) return r->off == 0 && r->len == 0;
    if (r->buf < 0 || r->buf >= plan->nbuf || r->off < 0 || r->len < 0) return 0;
    int64_t end;
    return !__builtin_add_overflow(r->off, r->len, &end) && end <= plan->buf_len[r->buf];
}

static int overlap(const pl_ref *a, const pl_ref *b)
{
    return a->buf == b->buf && a->buf >= 0 && a->len > 0 && b->len > 0 && a->off < b->off + b->len
           && b->off < a->off + a->len;
}

static int same(const pl_ref *a, const pl_ref *b) { return a->buf == b->buf && a->off == b->off && a->len == b->len; }

/* The bytes of a reference's floats (an int8 step's operand). A length this large is never run: a run's buffers are
 * checked to hold buf_len floats. */
static size_t bytes_of(const pl_ref *r)
{
    return r->len > (int64_t)(SIZE_MAX / 4) ? SIZE_MAX : (size_t)r->len * 4;
}

/* An int8 GEMM or depthwise step: the kernel's own check on the byte and item lengths of its operands, the
 * requantization table halved (offsets, then multipliers). */
static int check_int8_conv(const pl_step *s, int64_t i, char *err, size_t cap)
{
    char why[200];
    if (s->in1.buf < 0 || s->in2.buf < 0 || s->in2.len % 2)
        return fail(err, cap, i, "an int8 convolution without its weight, or a requantization table of odd length");
    const size_t half = (size_t)s->in2.len / 2;
    const int bad = s->kind == PL_STEP_QGEMM
        ? pl_qgemm_check(&s->u.qgemm, bytes_of(&s->in0), bytes_of(&s->in1), half, half, bytes_of(&s->out), why,
                         sizeof why)
        : pl_qdepthwise_check(&s->u.qdepthwise, bytes_of(&s->in0), (size_t)s->in1.len, half, half, bytes_of(&s->out),
                              why, sizeof why);
    if (bad) return fail(err, cap, i, why);
    if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1) || overlap(&s->out, &s->in2))
        return fail(err, cap, i, "an int8 convolution's output overlaps its inputs");
    return 0;
}

/* An int8 elementwise step: a float32 input for quantize, a float32 output for dequantize, uint8 elsewhere; only an
 * addition may write over an operand, whole (it reads each value before writing it). */
static int check_int8_elementwise(const pl_step *s, int64_t i, char *err, size_t cap)
{
    char why[200];
    const pl_qelementwise *q = &s->u.qel;
    const int add = q->op == PL_Q_ADD;
    if (add != (s->in1.buf >= 0) || s->in2.buf >= 0)
        return fail(err, cap, i, "an int8 elementwise step's operands do not match its operation");
    const int quantize = q->op == PL_Q_QUANTIZE || q->op == PL_Q_QUANTIZE_NHWC;
    if (pl_qelementwise_check(q, quantize ? (size_t)s->in0.len : bytes_of(&s->in0), add ? bytes_of(&s->in1) : 0,
                              q->op == PL_Q_DEQUANTIZE ? (size_t)s->out.len : bytes_of(&s->out), why, sizeof why) != 0)
        return fail(err, cap, i, why);
    if ((overlap(&s->out, &s->in0) && !(add && same(&s->out, &s->in0)))
        || (overlap(&s->out, &s->in1) && !(add && same(&s->out, &s->in1))))
        return fail(err, cap, i, "an int8 elementwise output overlaps an operand");
    return 0;
}

static int check_step(const pl_step *s, const pl_plan *plan, int64_t i, char *err, size_t cap)
{
    char why[200];
    if (!ref_ok(&s->out, plan, 0) || !ref_ok(&s->in0, plan, 0) || !ref_ok(&s->in1, plan, 1)
        || !ref_ok(&s->in2, plan, 1))
        return fail(err, cap, i, "a reference lies outside its buffer");
    if (!plan->buf_writable[s->out.buf]) return fail(err, cap, i, "it writes into a read-only buffer");
    switch (s->kind) {
    case PL_STEP_CONV:
        if (pl_conv_check(&s->u.conv, (size_t)s->in0.len, (size_t)s->in1.len, (size_t)s->in2.len, (size_t)s->out.len,
                          why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (s->in1.buf < 0 || overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1) || overlap(&s->out, &s->in2))
            return fail(err, cap, i, "a convolution's output overlaps its inputs");
        if (s->scale.len == 0) {  /* none: (-1, 0, 0), or the zeros of a row that stops before it */
            if (!(s->scale.buf == -1 || s->scale.buf == 0) || s->scale.off != 0)
                return fail(err, cap, i, "a bad input scale");
        } else {  /* read whole before the output is written: it may lie anywhere */
            if (!ref_ok(&s->scale, plan, 0) || s->scale.len != s->u.conv.n * s->u.conv.c)
                return fail(err, cap, i, "a convolution's input scale is not (images, channels), or outside its buffer");
            if (!pl_conv_takes_scale(&s->u.conv))
                return fail(err, cap, i, "only a 1x1 stride-1 convolution with its weight in panels scales its input");
        }
        if (s->res.len == 0)
            return (s->res.buf == -1 || s->res.buf == 0) && s->res.off == 0 ? 0 : fail(err, cap, i, "a bad residual");
        if (!ref_ok(&s->res, plan, 0) || s->res.len != s->out.len)
            return fail(err, cap, i, "a convolution's residual is not the size of its output, or outside its buffer");
        if (!pl_conv_takes_residual(&s->u.conv))
            return fail(err, cap, i, "only a dense convolution (weight in panels or Winograd's) adds a residual");
        if (overlap(&s->res, &s->out) && !same(&s->res, &s->out))
            return fail(err, cap, i, "a convolution's residual overlaps part of its output");
        return 0;
    case PL_STEP_POOL:
        if (pl_pool_check(&s->u.pool, (size_t)s->in0.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "pooling's output overlaps its input");
        return 0;
    case PL_STEP_BINARY: {
        if (s->in1.buf < 0 || pl_binary_check(s->u.bin.op, (size_t)s->in0.len, (size_t)s->in1.len, (size_t)s->out.len,
                                               s->u.bin.images, why, sizeof why) != 0)
            return fail(err, cap, i, s->in1.buf < 0 ? "an elementwise step without its second operand" : why);
        if ((overlap(&s->out, &s->in0) && !same(&s->out, &s->in0))
            || (overlap(&s->out, &s->in1) && !same(&s->out, &s->in1)))
            return fail(err, cap, i, "an elementwise output partly overlaps an operand");
        return pl_epilogue_check(&s->u.bin.ep, err, cap) ? fail(err, cap, i, "bad activation") : 0;
    }
    case PL_STEP_UNARY:
        if (s->in0.len != s->out.len || (overlap(&s->out, &s->in0) && !same(&s->out, &s->in0)))
            return fail(err, cap, i, "an activation's input and output do not match");
        return pl_epilogue_check(&s->u.un.ep, err, cap) ? fail(err, cap, i, "bad activation") : 0;
    case PL_STEP_MEAN: {
        const int64_t n = s->u.mean.n, rows = s->u.mean.rows, c = s->u.mean.c;
        int64_t need;
        if (n < 1 || rows < 1 || c < 1 || __builtin_mul_overflow(n, rows, &need) || __builtin_mul_overflow(need, c, &need)
            || need > s->in0.len || n * c > s->out.len || overlap(&s->out, &s->in0))
            return fail(err, cap, i, "a mean's sizes do not match its buffers");
        return 0;
    }
    case PL_STEP_RESIZE:
        if (s->in1.buf < 0 || pl_resize_check(&s->u.resize, (size_t)s->in0.len, (size_t)s->in1.len, (size_t)s->out.len,
                                              why, sizeof why) != 0)
            return fail(err, cap, i, s->in1.buf < 0 ? "a resize without its table" : why);
        if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1))
            return fail(err, cap, i, "a resize's output overlaps its input");
        return 0;
    case PL_STEP_ROWS:
        if (pl_rows_check((int)s->u.rows.norm, s->u.rows.rows, s->u.rows.n, (size_t)s->in0.len, (size_t)s->in1.len,
                          (size_t)s->in2.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if ((overlap(&s->out, &s->in0) && !same(&s->out, &s->in0)) || overlap(&s->out, &s->in1)
            || overlap(&s->out, &s->in2))
            return fail(err, cap, i, "a row operation's output partly overlaps its input");
        return 0;
    case PL_STEP_COPY:
        if (pl_copy_check(&s->u.copy, (size_t)s->in0.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "a copy's output overlaps its input");
        return 0;
    case PL_STEP_ATTENTION: {
        const pl_ref *m = &s->u.attn.mask;
        if (s->in1.buf < 0 || s->in2.buf < 0 || !ref_ok(m, plan, 1))
            return fail(err, cap, i, "attention without its keys or values, or a mask outside its buffer");
        if (m->buf >= 0 && m->len == 0) return fail(err, cap, i, "attention: an empty mask");
        if (pl_attention_check(&s->u.attn.a, (size_t)s->in0.len, (size_t)s->in1.len, (size_t)s->in2.len,
                               m->buf >= 0 ? (size_t)m->len : 0, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1) || overlap(&s->out, &s->in2) || overlap(&s->out, m))
            return fail(err, cap, i, "attention's output overlaps an operand");
        return 0;
    }
    case PL_STEP_BROADCAST:
        if (s->in1.buf < 0 || pl_broadcast_check(&s->u.broadcast, (size_t)s->in0.len, (size_t)s->in1.len,
                                                 (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, s->in1.buf < 0 ? "a broadcast without its second operand" : why);
        if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1))
            return fail(err, cap, i, "a broadcast's output overlaps an operand");
        return 0;
    case PL_STEP_REDUCE:
        if (pl_reduce_check(&s->u.reduce, (size_t)s->in0.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "a reduction's output overlaps its input");
        return 0;
    case PL_STEP_RNN: {
        const pl_ref *c0 = &s->u.rnn.c0;
        if (s->in1.buf < 0 || s->in2.buf < 0 || !ref_ok(c0, plan, 1))
            return fail(err, cap, i, "a recurrent step without its weights or states, or a state outside its buffer");
        if (pl_rnn_stack_check(&s->u.rnn.r, (size_t)s->in0.len, (size_t)s->in1.len, (size_t)s->in2.len,
                               c0->buf >= 0 ? (size_t)c0->len : 0, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1) || overlap(&s->out, &s->in2) || overlap(&s->out, c0))
            return fail(err, cap, i, "a recurrent step's output overlaps an operand");
        return 0;
    }
    case PL_STEP_PAD:
        if (pl_pad_check(&s->u.pad, (size_t)s->in0.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "a padding's output overlaps its input");
        return 0;
    case PL_STEP_MATMUL:
        if (s->in1.buf < 0 || pl_matmul_check(&s->u.matmul, (size_t)s->in0.len, (size_t)s->in1.len,
                                              (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, s->in1.buf < 0 ? "a matrix product without its second operand" : why);
        if (overlap(&s->out, &s->in0) || overlap(&s->out, &s->in1))
            return fail(err, cap, i, "a matrix product's output overlaps an operand");
        return 0;
    case PL_STEP_QGEMM:
    case PL_STEP_QDEPTHWISE:
        return check_int8_conv(s, i, err, cap);
    case PL_STEP_QELEMENTWISE:
        return check_int8_elementwise(s, i, err, cap);
    case PL_STEP_QMAXPOOL:
        if (s->u.pool.kind != PL_POOL_MAX) return fail(err, cap, i, "int8 pooling is max pooling only");
        if (pl_pool_check(&s->u.pool, bytes_of(&s->in0), bytes_of(&s->out), why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "pooling's output overlaps its input");
        return 0;
    case PL_STEP_SLICE:
        if (pl_slice_check(&s->u.slice, (size_t)s->in0.len, (size_t)s->out.len, why, sizeof why) != 0)
            return fail(err, cap, i, why);
        if (overlap(&s->out, &s->in0)) return fail(err, cap, i, "a concatenation's output overlaps its input");
        return 0;
    default:
        return fail(err, cap, i, "unknown step kind");
    }
}

int pl_plan_check(const pl_plan *plan, char *err, size_t cap)
{
    for (int64_t b = 0; b < plan->nbuf; b++)
        if (plan->buf_len[b] < 0) return fail(err, cap, -1, "a buffer has a negative length");
    for (int64_t i = 0; i < plan->nsteps; i++)
        if (check_step(&plan->steps[i], plan, i, err, cap) != 0) return -1;
    return 0;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int pl_plan_run(const pl_plan *plan, float *const *bufs, double *times)
{
    double t0 = times ? seconds_now() : 0.0;
    for (int64_t i = 0; i < plan->nsteps; i++) {
        const pl_step *s = &plan->steps[i];
        float *out = bufs[s->out.buf] + s->out.off;
        const float *a = bufs[s->in0.buf] + s->in0.off;
        const float *b = s->in1.buf >= 0 ? bufs[s->in1.buf] + s->in1.off : NULL;
        const float *c = s->in2.buf >= 0 ? bufs[s->in2.buf] + s->in2.off : NULL;
        switch (s->kind) {
        case PL_STEP_CONV:
            if (pl_conv_run_scaled(&s->u.conv, a, b, c, s->scale.len > 0 ? bufs[s->scale.buf] + s->scale.off : NULL,
                                   s->res.len > 0 ? bufs[s->res.buf] + s->res.off : NULL, out) != 0)
                return -1;
            break;
        case PL_STEP_POOL:
            pl_pool_run(&s->u.pool, a, out);
            break;
        case PL_STEP_RESIZE:
            pl_resize_run(&s->u.resize, a, b, out);
            break;
        case PL_STEP_BINARY:
            pl_binary_run(s->u.bin.op, a, b, (size_t)s->in1.len, out, (size_t)s->out.len, (size_t)s->u.bin.images,
                          &s->u.bin.ep);
            break;
        case PL_STEP_UNARY:
            pl_activate_run(a, out, (size_t)s->out.len, &s->u.un.ep);
            break;
        case PL_STEP_ROWS:
            if (s->u.rows.norm) pl_layer_norm_run(a, b, c, out, (size_t)s->u.rows.rows, (size_t)s->u.rows.n,
                                                  s->u.rows.eps);
            else pl_softmax_run(a, out, (size_t)s->u.rows.rows, (size_t)s->u.rows.n);
            break;
        case PL_STEP_COPY:
            pl_copy_run(&s->u.copy, a, out);
            break;
        case PL_STEP_ATTENTION: {
            const pl_ref *m = &s->u.attn.mask;
            if (pl_attention_run(&s->u.attn.a, a, b, c, m->buf >= 0 ? bufs[m->buf] + m->off : NULL, out) != 0)
                return -1;
            break;
        }
        case PL_STEP_BROADCAST:
            pl_broadcast_run(&s->u.broadcast, a, b, out);
            break;
        case PL_STEP_REDUCE:
            pl_reduce_run(&s->u.reduce, a, out);
            break;
        case PL_STEP_RNN: {
            const pl_ref *c0 = &s->u.rnn.c0;
            if (pl_rnn_stack_run(&s->u.rnn.r, a, b, c, c0->buf >= 0 ? bufs[c0->buf] + c0->off : NULL, out) != 0)
                return -1;
            break;
        }
        case PL_STEP_SLICE:
            pl_slice_run(&s->u.slice, a, out);
            break;
        case PL_STEP_PAD:
            pl_pad_run(&s->u.pad, a, out);
            break;
        case PL_STEP_MATMUL:
            if (pl_matmul_run(&s->u.matmul, a, b, out) != 0) return -1;
            break;
        case PL_STEP_QGEMM:
            if (pl_qgemm_run(&s->u.qgemm, (const uint8_t *)a, (const int8_t *)b, (const int32_t *)c,
                             c + s->in2.len / 2, (uint8_t *)out) != 0)
                return -1;
            break;
        case PL_STEP_QDEPTHWISE:
            pl_qdepthwise_run(&s->u.qdepthwise, (const uint8_t *)a, (const int32_t *)b, (const int32_t *)c,
                              c + s->in2.len / 2, (uint8_t *)out);
            break;
        case PL_STEP_QELEMENTWISE:
            pl_qelementwise_run(&s->u.qel, a, b, out);
            break;
        case PL_STEP_QMAXPOOL:
            pl_qmaxpool_run(&s->u.pool, (const uint8_t *)a, (uint8_t *)out);
            break;
        case PL_STEP_MEAN:
            if (pl_mean_run(a, out, (size_t)s->u.mean.n, (size_t)s->u.mean.rows, (size_t)s->u.mean.c) != 0) return -1;
            break;
        }
        if (times) {
            const double t1 = seconds_now();
            times[i] += t1 - t0;
            t0 = t1;
        }
    }
    return 0;
}
