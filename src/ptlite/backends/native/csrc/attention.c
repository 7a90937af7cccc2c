/* Scaled dot-product attention over whole tensors (pl_attention): tasks of query rows of one batch entry each, on
 * the pool. A task transposes its entry's keys (e, s) into scratch, so that a query's scores are a row of a matrix
 * product (vectors across keys, no horizontal sums), then runs the instruction set's rows kernel. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

typedef struct {
    const pl_isa *isa;
    const pl_attention *p;
    const float *q, *k, *v, *mask;
    float *y;
    int64_t blocks, rows_per_block;  /* per batch entry */
    _Atomic int failed;
} attention_job;

static void attention_task(void *vjob, size_t task)
{
    attention_job *j = vjob;
    const pl_attention *p = j->p;
    const int64_t entry = (int64_t)task / j->blocks, i0 = ((int64_t)task % j->blocks) * j->rows_per_block;
    const int64_t i1 = i0 + j->rows_per_block < p->l ? i0 + j->rows_per_block : p->l;
    if (i0 >= i1) return;
    const size_t vw = (size_t)j->isa->vw, kt_floats = (size_t)(p->e * p->s) + vw;  /* vw readable after kt */
    float *scratch = malloc((kt_floats + (size_t)p->s) * sizeof(float));
    if (!scratch) { atomic_store(&j->failed, 1); return; }
    memset(scratch + kt_floats - vw, 0, vw * sizeof(float));
    const float *k = j->k + entry * p->s * p->e;
    for (int64_t r = 0; r < p->s; r++)
        for (int64_t d = 0; d < p->e; d++) scratch[d * p->s + r] = k[r * p->e + d];
    const float *mask = j->mask ? j->mask + (entry / p->b2) * p->ms[0] + (entry % p->b2) * p->ms[1] : NULL;
    j->isa->attention_rows(p, j->q + entry * p->l * p->e, scratch, j->v + entry * p->s * p->ev, mask,
                           j->y + entry * p->l * p->ev, i0, i1, scratch + kt_floats);
    free(scratch);
}

int pl_attention_run(const pl_attention *p, const float *q, const float *k, const float *v, const float *mask,
                     float *y)
{
    const int64_t entries = p->b1 * p->b2, want = 4 * (int64_t)pl_get_threads();
    int64_t blocks = (want + entries - 1) / entries;
    if (blocks > p->l) blocks = p->l;
    attention_job job = {pl_isa_current(), p, q, k, v, mask, y, blocks, (p->l + blocks - 1) / blocks, 0};
    const double work = 2.0 * (double)entries * (double)p->l * (double)p->s * (double)(p->e + p->ev);
    pl_parallel_work((size_t)(entries * blocks), attention_task, &job, work);
    return atomic_load(&job.failed) ? -1 : 0;
}
