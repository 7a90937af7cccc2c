/* Max pooling of uint8 NHWC images (quantized activations keep their scale and zero point through it): the largest
 * value of each window's taps inside the input, the padding taking no part (as PyTorch's quantized max_pool2d and
 * the reference). p is a pl_pool of kind PL_POOL_MAX, lengths in bytes; threaded over output rows. */
#include <string.h>

#include "native.h"

typedef struct {
    const pl_pool *p;
    const uint8_t *x;
    uint8_t *y;
} qpool_job;

static void qpool_row(void *ctx, size_t task)
{
    const qpool_job *job = ctx;
    const pl_pool *p = job->p;
    const int64_t b = (int64_t)task / p->ho, oy = (int64_t)task % p->ho, c = p->c;
    const uint8_t *image = job->x + b * p->h * p->w * c;
    for (int64_t ox = 0; ox < p->wo; ox++) {
        uint8_t *restrict y = job->y + ((b * p->ho + oy) * p->wo + ox) * c;
        memset(y, 0, (size_t)c);
        for (int64_t ty = 0; ty < p->kh; ty++) {
            const int64_t iy = oy * p->sh - p->pt + ty * p->dh;
            if (iy < 0 || iy >= p->h) continue;
            for (int64_t tx = 0; tx < p->kw; tx++) {
                const int64_t ix = ox * p->sw - p->pl + tx * p->dw;
                if (ix < 0 || ix >= p->w) continue;
                const uint8_t *restrict x = image + (iy * p->w + ix) * c;
                for (int64_t ch = 0; ch < c; ch++) y[ch] = x[ch] > y[ch] ? x[ch] : y[ch];
            }
        }
    }
}

void pl_qmaxpool_run(const pl_pool *p, const uint8_t *x, uint8_t *y)
{
    qpool_job job = {p, x, y};
    pl_parallel_work((size_t)(p->n * p->ho), qpool_row, &job,
                     (double)p->n * (double)p->ho * (double)p->wo * (double)p->c * (double)(p->kh * p->kw) / 4.0);
}
