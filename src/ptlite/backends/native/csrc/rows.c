/* Row-wise operations over whole tensors: elementwise arithmetic with a row of the second operand repeated within
 * each image, softmax and layer norm over rows (threaded by rows), and sums over a middle dimension. */
#include "native.h"

void pl_binary_run(int op, const float *a, const float *b, size_t b_len, float *y, size_t len, size_t images,
                   const pl_epilogue *ep)
{
    const pl_isa *isa = pl_isa_current();
    const size_t per_image = len / images, b_per_image = b_len / images;
    for (size_t m = 0; m < images; m++)
        isa->binary(op, a + m * per_image, b + m * b_per_image, b_per_image, y + m * per_image, per_image, ep);
}

typedef struct {
    const pl_isa *isa;
    const float *x, *gamma, *beta;
    float *y;
    size_t rows, n, per_task;
    float eps;
    int norm;  /* 1: layer norm, 0: softmax */
} rows_job;

static void rows_task(void *vjob, size_t task)
{
    const rows_job *j = vjob;
    const size_t r0 = task * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    if (j->norm) j->isa->layer_norm_rows(j->x + r0 * j->n, j->gamma, j->beta, j->y + r0 * j->n, r1 - r0, j->n, j->eps);
    else j->isa->softmax_rows(j->x + r0 * j->n, j->y + r0 * j->n, r1 - r0, j->n);
}

static void rows_run(const float *x, const float *gamma, const float *beta, float *y, size_t rows, size_t n,
                     float eps, int norm)
{
    const size_t tasks = (size_t)pl_get_threads() * 4, per_task = (rows + tasks - 1) / (tasks ? tasks : 1);
    rows_job job = {pl_isa_current(), x, gamma, beta, y, rows, n, per_task ? per_task : 1, eps, norm};
    pl_parallel_work((rows + job.per_task - 1) / job.per_task, rows_task, &job, 8.0 * (double)rows * (double)n);
}

void pl_softmax_run(const float *x, float *y, size_t rows, size_t n) { rows_run(x, NULL, NULL, y, rows, n, 0, 0); }

void pl_layer_norm_run(const float *x, const float *gamma, const float *beta, float *y, size_t rows, size_t n,
                       float eps)
{
    rows_run(x, gamma, beta, y, rows, n, eps, 1);
}

/* Sums in float64 (a float32 running sum of 10^5 values drifts by ~1e-4 of the total), a block of inner columns at a
 * time. */
void pl_reduce_run(const pl_reduce *p, const float *x, float *y)
{
    enum { BLOCK = 256 };
    double acc[BLOCK];
    const int64_t inner = p->inner;
    for (int64_t o = 0; o < p->outer; o++)
        for (int64_t i0 = 0; i0 < inner; i0 += BLOCK) {
            const int64_t m = inner - i0 < BLOCK ? inner - i0 : BLOCK;
            const float *xo = x + o * p->r * inner + i0;
            for (int64_t i = 0; i < m; i++) acc[i] = 0.0;
            for (int64_t r = 0; r < p->r; r++, xo += inner)
                for (int64_t i = 0; i < m; i++) acc[i] += (double)xo[i];
            for (int64_t i = 0; i < m; i++) y[o * inner + i0 + i] = (float)(acc[i] * (double)p->scale);
        }
}
