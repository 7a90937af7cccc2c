/* A whole recurrent operator (pl_rnn_stack) in one call: each layer's directions run the instruction set's rnn kernel
 * over the previous layer's output, two sequence buffers taking turns; a batch-first input and output are
 * transposed on the way in and out. */
#include <stdlib.h>
#include <string.h>

#include "native.h"

/* (a, b, n) -> (b, a, n) */
static void swap_leading(const float *x, float *y, int64_t a, int64_t b, int64_t n)
{
    for (int64_t i = 0; i < a; i++)
        for (int64_t j = 0; j < b; j++) memcpy(y + (j * a + i) * n, x + (i * b + j) * n, (size_t)n * sizeof(float));
}

int pl_rnn_stack_run(const pl_rnn_stack *p, const float *x, const float *w, const float *h0, const float *c0, float *y)
{
    const pl_isa *isa = pl_isa_current();
    const int64_t t = p->t, b = p->b, hidden = p->hidden, d = p->dirs, g = (int64_t)pl_rnn_gates(p->mode) * hidden;
    const int64_t seq = t * b * d * hidden, state = b * hidden;
    const size_t floats = (size_t)(p->batch_first ? t * b * p->in : 0) + 2 * (size_t)seq + 2 * (size_t)state
                          + 2 * (size_t)g + 2 * (size_t)state;
    float *scratch = malloc(floats * sizeof(float));
    if (!scratch) return -1;
    float *xs = scratch, *bufs[2], *h_n, *c_n, *work;
    bufs[0] = xs + (p->batch_first ? t * b * p->in : 0);
    bufs[1] = bufs[0] + seq;
    h_n = bufs[1] + seq;
    c_n = h_n + state;
    work = c_n + state;
    const float *in_seq = x;
    if (p->batch_first) {
        swap_leading(x, xs, b, t, p->in);
        in_seq = xs;
    }
    int64_t in = p->in;
    for (int64_t layer = 0; layer < p->layers; layer++) {
        float *out = bufs[layer % 2];
        for (int64_t dir = 0; dir < d; dir++) {
            const int64_t k = layer * d + dir;
            const pl_rnn r = {p->mode, t, b, in, hidden, d * hidden, dir * hidden, dir};
            const float *w_ih = w, *w_hh = w_ih + in * g, *b_ih = w_hh + hidden * g, *b_hh = b_ih + g;
            isa->rnn(&r, in_seq, w_ih, w_hh, b_ih, b_hh, h0 + k * state, c0 ? c0 + k * state : NULL, out, h_n,
                     p->mode == PL_LSTM ? c_n : NULL, work);
            w = b_hh + g;
        }
        in_seq = out;
        in = d * hidden;
    }
    if (p->batch_first) swap_leading(in_seq, y, t, b, d * hidden);
    else memcpy(y, in_seq, (size_t)seq * sizeof(float));
    free(scratch);
    return 0;
}
