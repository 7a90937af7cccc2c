/* Elementwise arithmetic with broadcasting (pl_broadcast): the output's rows (its last dimension) in tasks on the
 * pool. A row whose operands are contiguous, or whose second operand is one value, goes to the instruction set's
 * binary kernel as it is; other rows are gathered into short contiguous pieces first. */
#include "native.h"

typedef struct {
    const pl_isa *isa;
    const pl_broadcast *p;
    const float *a, *b;
    float *y;
    int64_t rows, per_task;
} broadcast_job;

enum { PIECE = 64 };

static void broadcast_row(const broadcast_job *j, int64_t row)
{
    const pl_broadcast *p = j->p;
    const int64_t nd = p->ndim, n = p->shape[nd - 1], sa = p->sa[nd - 1], sb = p->sb[nd - 1];
    int64_t oa = 0, ob = 0, rest = row;
    for (int64_t d = nd - 2; d >= 0; d--) {  /* the row's index, last dimension fastest */
        const int64_t i = rest % p->shape[d];
        rest /= p->shape[d];
        oa += i * p->sa[d];
        ob += i * p->sb[d];
    }
    const float *a = j->a + oa, *b = j->b + ob;
    float *y = j->y + row * n;
    if (sa == 1 && (sb == 1 || sb == 0)) {
        j->isa->binary((int)p->op, a, b, sb ? (size_t)n : 1, y, (size_t)n, &p->ep);
        return;
    }
    float ta[PIECE], tb[PIECE];
    for (int64_t i0 = 0; i0 < n; i0 += PIECE) {
        const int64_t m = n - i0 < PIECE ? n - i0 : PIECE;
        for (int64_t i = 0; i < m; i++) {
            ta[i] = a[(i0 + i) * sa];
            tb[i] = b[(i0 + i) * sb];
        }
        j->isa->binary((int)p->op, ta, tb, (size_t)m, y + i0, (size_t)m, &p->ep);
    }
}

static void broadcast_task(void *vjob, size_t task)
{
    const broadcast_job *j = vjob;
    const int64_t r0 = (int64_t)task * j->per_task, r1 = r0 + j->per_task < j->rows ? r0 + j->per_task : j->rows;
    for (int64_t r = r0; r < r1; r++) broadcast_row(j, r);
}

void pl_broadcast_run(const pl_broadcast *p, const float *a, const float *b, float *y)
{
    int64_t rows = 1;
    for (int64_t d = 0; d < p->ndim - 1; d++) rows *= p->shape[d];
    const int64_t tasks = 4 * (int64_t)pl_get_threads(), per_task = (rows + tasks - 1) / tasks;
    broadcast_job job = {pl_isa_current(), p, a, b, y, rows, per_task ? per_task : 1};
    pl_parallel_work((size_t)((rows + job.per_task - 1) / job.per_task), broadcast_task, &job,
                     (double)rows * (double)p->shape[p->ndim - 1]);
}
