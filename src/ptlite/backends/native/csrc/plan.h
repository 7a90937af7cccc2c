/* Planned regions (plan.c): the steps of several nodes over numbered buffers, validated once, run in one call. */
#ifndef PTLITE_PLAN_H
#define PTLITE_PLAN_H

#include "native.h"

enum pl_step_kind { PL_STEP_CONV = 1, PL_STEP_POOL = 2, PL_STEP_BINARY = 3, PL_STEP_UNARY = 4, PL_STEP_MEAN = 5,
                    PL_STEP_RESIZE = 6, PL_STEP_ROWS = 7, PL_STEP_COPY = 8, PL_STEP_ATTENTION = 9,
                    PL_STEP_BROADCAST = 10, PL_STEP_REDUCE = 11, PL_STEP_RNN = 12, PL_STEP_SLICE = 13,
                    PL_STEP_MATMUL = 14, PL_STEP_PAD = 15, PL_STEP_QGEMM = 16, PL_STEP_QDEPTHWISE = 17,
                    PL_STEP_QELEMENTWISE = 18, PL_STEP_QMAXPOOL = 19 };

/* floats [off, off + len) of buffer `buf` (-1: none, for an optional operand such as a bias). The int8 steps (QGEMM,
 * QDEPTHWISE, QELEMENTWISE, QMAXPOOL) read and write their uint8 values as the bytes of those floats (4 a float), a
 * GEMM's packed weight as int8 bytes, a depthwise weight as int32, and their requantization table (in2) as int32
 * offsets then float32 multipliers, half the table each. */
typedef struct { int64_t buf, off, len; } pl_ref;

typedef struct {
    int kind;                  /* enum pl_step_kind */
    pl_ref in0, in1, in2, out; /* conv: x, weight, bias; pool, unary, mean, copy: x; binary: a, b; resize: x, table;
                                  rows: x, gamma, beta (layer norm); attention: q, k, v (its mask in u.attn);
                                  broadcast: a, b; reduce: x; rnn: x, weights, h0 (c0 in u.rnn); slice: x;
                                  matmul: a, b; pad: x; qgemm, qdepthwise: x, weight, requantization table;
                                  qelementwise: a, b (add only); qmaxpool: x */
    pl_ref res;                /* conv: the residual added before the activation (length 0: none) */
    pl_ref scale;              /* conv: per-image factors of x's channels, (n, c) (length 0: none) */
    union {
        pl_conv conv;
        pl_pool pool;                                          /* also qmaxpool's */
        pl_resize resize;
        struct { int op; int64_t images; pl_epilogue ep; } bin;  /* b's rows repeat within each image */
        struct { pl_epilogue ep; } un;
        struct { int64_t n, rows, c; } mean;
        struct { int64_t norm, rows, n; float eps; } rows;  /* norm 0: softmax, 1: layer norm */
        pl_copy copy;
        struct { pl_attention a; pl_ref mask; } attn;        /* mask.buf -1: none */
        pl_broadcast broadcast;
        pl_reduce reduce;
        pl_slice slice;
        pl_matmul matmul;
        pl_pad pad;
        struct { pl_rnn_stack r; pl_ref c0; } rnn;           /* c0.buf -1: none (not LSTM) */
        pl_qgemm qgemm;
        pl_qdepthwise qdepthwise;
        pl_qelementwise qel;
    } u;
} pl_step;

typedef struct {
    int64_t nbuf, nsteps;
    int64_t *buf_len;          /* floats each buffer must hold */
    unsigned char *buf_writable;
    pl_step *steps;
} pl_plan;

int pl_plan_check(const pl_plan *plan, char *err, size_t cap);
/* times: NULL, or one double per step, to which each step's seconds are added (profiling) */
int pl_plan_run(const pl_plan *plan, float *const *bufs, double *times);

#endif
