/* Batched matrix products over whole tensors (pl_matmul): y[i] = a[i] b[i], b's matrices read at any strides (a
 * transposed view such as attention's keys, or one matrix for every batch entry). Each matrix of b is first packed
 * into zero-padded panels of PL_PANEL columns, the layout the GEMM micro-kernel reads (a dense convolution's
 * weight layout), then tasks of row tiles of one batch entry run the micro-kernel on rows of a in place. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define TASKS_PER_THREAD 4

typedef struct {
    const pl_matmul *p;
    const pl_isa *isa;
    const float *a, *b;
    float *y, *packed;
    int64_t panels, tiles, tiles_per_task, tasks_per_entry;
} matmul_job;

static void pack_task(void *vjob, size_t task)  /* one panel of one of b's matrices */
{
    const matmul_job *j = vjob;
    const pl_matmul *p = j->p;
    const int64_t entry = (int64_t)task / j->panels, panel = (int64_t)task % j->panels;
    const float *b = j->b + entry * p->sb_b + panel * PL_PANEL * p->sb_n;
    float *dst = j->packed + (entry * j->panels + panel) * p->k * PL_PANEL;
    const int64_t cols = p->n - panel * PL_PANEL < PL_PANEL ? p->n - panel * PL_PANEL : PL_PANEL;
    for (int64_t r = 0; r < p->k; r++, dst += PL_PANEL) {
        const float *row = b + r * p->sb_k;
        if (p->sb_n == 1) memcpy(dst, row, (size_t)cols * sizeof(float));
        else
            for (int64_t c = 0; c < cols; c++) dst[c] = row[c * p->sb_n];
        for (int64_t c = cols; c < PL_PANEL; c++) dst[c] = 0.0f;
    }
}

static void gemm_task(void *vjob, size_t task)  /* tiles_per_task tiles of mr rows of one batch entry */
{
    const matmul_job *j = vjob;
    const pl_matmul *p = j->p;
    const pl_epilogue none = {PL_ACT_NONE, 0.0f, 0.0f};
    const int64_t mr = j->isa->mr;
    const int64_t entry = (int64_t)task / j->tasks_per_entry, part = (int64_t)task % j->tasks_per_entry;
    const int64_t r0 = part * j->tiles_per_task * mr;
    const int64_t r1 = r0 + j->tiles_per_task * mr < p->m ? r0 + j->tiles_per_task * mr : p->m;
    const float *a = j->a + entry * p->sa_b;
    const float *panels = j->packed + (p->sb_b ? entry : 0) * j->panels * p->k * PL_PANEL;
    float *y = j->y + entry * p->m * p->n;
    for (int64_t t = r0; t < r1; t += mr) {
        const int64_t valid = t + mr <= r1 ? mr : r1 - t;
        const float *rows[PL_GEMM_MAX_MR];
        for (int64_t r = 0; r < mr; r++) rows[r] = a + (t + (r < valid ? r : valid - 1)) * p->sa_m;
        j->isa->gemm_panels((size_t)valid, 0, (size_t)p->n, (size_t)p->n, 1, (size_t)p->k, rows, NULL, panels,
                            (size_t)p->k, y + t * p->n, (size_t)p->n, NULL, NULL, NULL, &none);
    }
}

int pl_matmul_run(const pl_matmul *p, const float *a, const float *b, float *y)
{
    const pl_isa *isa = pl_isa_current();
    const int64_t panels = (p->n + PL_PANEL - 1) / PL_PANEL, b_entries = p->sb_b ? p->batch : 1;
    float *packed = pl_aligned_alloc((size_t)(b_entries * panels * p->k * PL_PANEL) * sizeof(float));
    if (!packed) return -1;
    const int64_t tiles = (p->m + isa->mr - 1) / isa->mr;
    const int64_t want = TASKS_PER_THREAD * (int64_t)pl_get_threads();
    int64_t per_entry = (want + p->batch - 1) / p->batch;
    if (per_entry > tiles) per_entry = tiles;
    const int64_t tiles_per_task = (tiles + per_entry - 1) / per_entry;
    matmul_job job = {p, isa, a, b, y, packed, panels, tiles, tiles_per_task,
                      (tiles + tiles_per_task - 1) / tiles_per_task};
    pl_parallel_work((size_t)(b_entries * panels), pack_task, &job, (double)(b_entries * panels * p->k * PL_PANEL));
    pl_parallel_work((size_t)(p->batch * job.tasks_per_entry), gemm_task, &job,
                     (double)p->batch * (double)p->m * (double)p->k * (double)p->n);
    pl_aligned_free(packed);
    return 0;
}
