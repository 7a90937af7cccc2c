/* Row-wise operations over whole tensors, threaded: elementwise arithmetic with a row of the second operand
 * repeated within each image, activations, per-image means over rows, softmax and layer norm over rows, and sums
 * over a middle dimension. */
#include <math.h>
#include <stdlib.h>

#include "native.h"

enum { CHUNK = 16 * 1024 };  /* floats per elementwise task: 64 KB, a few microseconds */

/* Work per value of an activation (pl_parallel_work's units): the exp-based ones cost ~10x a load. */
static double act_cost(const pl_epilogue *ep)
{
    return ep->act == PL_ACT_NONE || ep->act == PL_ACT_RELU || ep->act == PL_ACT_CLAMP ||
                   ep->act == PL_ACT_HARDSWISH || ep->act == PL_ACT_HARDSIGMOID
               ? 1.0
               : 10.0;
}

typedef struct {
    const pl_isa *isa;
    int op;
    const float *a, *b;
    float *y;
    size_t len, b_len, per_image, b_per_image, rows_per_task;  /* rows: b's row (b_per_image values) at a time */
    const pl_epilogue *ep;
} binary_job;

static void binary_task(void *vjob, size_t task)
{
    const binary_job *j = vjob;
    if (j->b_len == j->len || j->b_len == 1) {  /* b as long as a, or one value: any slice */
        const size_t i0 = task * CHUNK, n = j->len - i0 < CHUNK ? j->len - i0 : CHUNK;
        j->isa->binary(j->op, j->a + i0, j->b_len == 1 ? j->b : j->b + i0, j->b_len == 1 ? 1 : n, j->y + i0, n,
                       j->ep);
        return;
    }
    const size_t rows = j->len / j->b_per_image, r1 = (task + 1) * j->rows_per_task;
    for (size_t r = task * j->rows_per_task; r < r1 && r < rows;) {  /* whole rows, an image's at a time */
        const size_t image = r * j->b_per_image / j->per_image, image_end = (image + 1) * j->per_image / j->b_per_image;
        const size_t end = image_end < r1 ? image_end : r1, stop = end < rows ? end : rows;
        const size_t i0 = r * j->b_per_image, n = (stop - r) * j->b_per_image;
        j->isa->binary(j->op, j->a + i0, j->b + image * j->b_per_image, j->b_per_image, j->y + i0, n, j->ep);
        r = stop;
    }
}

void pl_binary_run(int op, const float *a, const float *b, size_t b_len, float *y, size_t len, size_t images,
                   const pl_epilogue *ep)
{
    if (len == 0) return;
    binary_job job = {pl_isa_current(), op, a, b, y, len, b_len, len / images, b_len / images, 0, ep};
    size_t tasks;
    if (b_len == len || b_len == 1) tasks = (len + CHUNK - 1) / CHUNK;
    else {
        const size_t rows = len / job.b_per_image;
        job.rows_per_task = CHUNK / job.b_per_image ? CHUNK / job.b_per_image : 1;
        tasks = (rows + job.rows_per_task - 1) / job.rows_per_task;
    }
    pl_parallel_work(tasks, binary_task, &job, 2.0 * (double)len * act_cost(ep));
}

typedef struct {
    const pl_isa *isa;
    const float *x;
    float *y;
    size_t len;
    const pl_epilogue *ep;
} activate_job;

static void activate_task(void *vjob, size_t task)
{
    const activate_job *j = vjob;
    const size_t i0 = task * CHUNK, n = j->len - i0 < CHUNK ? j->len - i0 : CHUNK;
    j->isa->activate(j->x + i0, j->y + i0, n, j->ep);
}

void pl_activate_run(const float *x, float *y, size_t len, const pl_epilogue *ep)
{
    activate_job job = {pl_isa_current(), x, y, len, ep};
    pl_parallel_work((len + CHUNK - 1) / CHUNK, activate_task, &job, (double)len * act_cost(ep));
}

typedef struct {
    const pl_isa *isa;
    const float *x;
    float *partial;  /* each task's mean of its rows: (tasks, c) */
    size_t rows, c, blocks, per_block;
} mean_job;

static void mean_task(void *vjob, size_t task)
{
    const mean_job *j = vjob;
    const size_t image = task / j->blocks, r0 = task % j->blocks * j->per_block;
    const size_t n = j->rows - r0 < j->per_block ? j->rows - r0 : j->per_block;
    j->isa->mean_rows(j->x + (image * j->rows + r0) * j->c, n, j->c, j->partial + task * j->c);
}

int pl_mean_run(const float *x, float *y, size_t n, size_t rows, size_t c)
{
    if (n == 0 || c == 0) return 0;
    if (rows == 0) {  /* the mean of nothing */
        for (size_t i = 0; i < n * c; i++) y[i] = NAN;
        return 0;
    }
    /* an image's rows in blocks of at least CHUNK values, one per thread at most; the blocks' means weighted */
    const size_t threads = (size_t)pl_get_threads(), by_size = rows * c / CHUNK ? rows * c / CHUNK : 1;
    const size_t blocks = n >= threads ? 1 : (by_size < threads ? by_size : threads);
    const size_t per_block = (rows + blocks - 1) / blocks, used = (rows + per_block - 1) / per_block;
    if (used == 1) {
        mean_job job = {pl_isa_current(), x, y, rows, c, 1, rows};
        pl_parallel_work(n, mean_task, &job, (double)(n * rows * c));
        return 0;
    }
    float *partial = malloc(n * used * c * sizeof(float));
    if (!partial) return -1;
    mean_job job = {pl_isa_current(), x, partial, rows, c, used, per_block};
    pl_parallel_work(n * used, mean_task, &job, (double)(n * rows * c));
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < c; k++) {
            double s = 0.0;
            for (size_t b = 0; b < used; b++) {
                const size_t count = rows - b * per_block < per_block ? rows - b * per_block : per_block;
                s += (double)partial[(i * used + b) * c + k] * (double)count;
            }
            y[i * c + k] = (float)(s / (double)rows);
        }
    free(partial);
    return 0;
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
