/* The strided copy (pl_copy): a transpose, permutation or broadcast written out C-contiguous, dimension by dimension
 * with the last one's run copied whole where its stride is 1; a concatenation's input copied into its slice of
 * every output row (pl_slice); and constant padding (pl_pad), row by row. */
#include <string.h>

#include "native.h"

void pl_copy_run(const pl_copy *p, const float *x, float *y)
{
    const int64_t nd = p->ndim, inner = p->shape[nd - 1], step = p->stride[nd - 1];
    int64_t index[PL_COPY_MAX_DIMS] = {0}, outer = 1;
    for (int64_t d = 0; d < nd - 1; d++) outer *= p->shape[d];
    for (int64_t o = 0; o < outer; o++, y += inner) {
        int64_t at = 0;
        for (int64_t d = 0; d < nd - 1; d++) at += index[d] * p->stride[d];
        const float *src = x + at;
        if (step == 1) memcpy(y, src, (size_t)inner * sizeof(float));
        else
            for (int64_t i = 0; i < inner; i++) y[i] = src[i * step];
        for (int64_t d = nd - 2; d >= 0; d--) {  /* the next index, last dimension fastest */
            if (++index[d] < p->shape[d]) break;
            index[d] = 0;
        }
    }
}

void pl_slice_run(const pl_slice *p, const float *x, float *y)
{
    for (int64_t o = 0; o < p->outer; o++)
        memcpy(y + o * p->total + p->offset, x + o * p->inner, (size_t)p->inner * sizeof(float));
}

void pl_pad_run(const pl_pad *p, const float *x, float *y)
{
    const int64_t nd = p->ndim, in_last = p->in[nd - 1], out_last = p->out[nd - 1], before = p->before[nd - 1];
    /* the last dimension's output columns [c0, c1) read input columns [c0 - before, c1 - before) */
    const int64_t c0 = before > 0 ? before : 0;
    const int64_t c1 = before + in_last < out_last ? before + in_last : out_last;
    int64_t index[PL_COPY_MAX_DIMS] = {0}, outer = 1;
    for (int64_t d = 0; d < nd - 1; d++) outer *= p->out[d];
    for (int64_t o = 0; o < outer; o++, y += out_last) {
        int64_t at = 0, inside = c0 < c1;
        for (int64_t d = 0; d < nd - 1 && inside; d++) {
            const int64_t i = index[d] - p->before[d];
            inside = i >= 0 && i < p->in[d];
            at = at * p->in[d] + i;
        }
        if (!inside) {
            for (int64_t c = 0; c < out_last; c++) y[c] = p->value;
        } else {
            for (int64_t c = 0; c < c0; c++) y[c] = p->value;
            memcpy(y + c0, x + at * in_last + (c0 - before), (size_t)(c1 - c0) * sizeof(float));
            for (int64_t c = c1; c < out_last; c++) y[c] = p->value;
        }
        for (int64_t d = nd - 2; d >= 0; d--) {
            if (++index[d] < p->out[d]) break;
            index[d] = 0;
        }
    }
}
