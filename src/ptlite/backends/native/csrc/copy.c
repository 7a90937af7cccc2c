/* The strided copy (pl_copy): a transpose, permutation or broadcast written out C-contiguous, dimension by dimension
 * with the last one's run copied whole where its stride is 1; and a concatenation's input copied into its slice of
 * every output row (pl_slice). */
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
