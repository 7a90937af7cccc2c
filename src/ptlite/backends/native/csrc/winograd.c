/* Winograd convolution over whole NHWC tensors, F(4x4, 3x3) (PL_WINOGRAD) or F(2x2, 3x3) (PL_WINOGRAD_2X2): the
 * tiling and the threads around the current instruction set's transforms and GEMM micro-kernel.
 *
 * The output is cut into m x m tiles (m = 4 or 2), each reading an a x a input patch (a = m + 2). A task takes a
 * block of tiles: it transforms their patches (V = Bt d B, a * a rows of c values per tile), multiplies, for each of
 * the a * a positions q, the block's (tiles x c) matrix V[q] by the stored weight U[q] (c x o) with the GEMM
 * micro-kernel (M[q]), and transforms each tile's rows of M back into its m * m output pixels (Y = At M A) with the
 * bias and activation. A block's V and M stay in cache; each task works in one of the call's scratch slots, one per
 * thread. F(4x4) takes 4x fewer multiplications than the direct convolution (36 per tile and channel pair instead
 * of 144), F(2x2) 2.25x (16 instead of 36), for transforms that are O(c + o) per tile; F(2x2)'s weight is 16 / 9 of
 * the direct one's instead of 4x, which suits small images (few tiles to share each read of it). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

#define BLOCK_FLOATS (64 * 1024)  /* a block's V or M (a*a x tiles x channels): 256 KB at most, or mr tiles */

typedef struct {
    const pl_conv *p;
    const pl_isa *isa;
    const float *x, *u, *bias, *res, *edge_u;  /* edge_u: each U[q]'s last columns zero-padded to nr, (a*a, c, nr) */
    float *y, *scratch;
    size_t m, positions;  /* the tile's side, a * a */
    size_t th, tw, tiles, block, tile_blocks, cols, slots, slot_floats;
    _Atomic int *busy;
} wino_job;

/* One task: a block of tiles against one block of output columns (a small image's few tiles are split by columns
 * too, each task transforming the same patches, so that every thread has work). */
static void wino_task(void *vjob, size_t task)
{
    wino_job *j = vjob;
    const pl_conv *p = j->p;
    const pl_isa *isa = j->isa;
    const size_t c = (size_t)p->c, o = (size_t)p->o, mr = (size_t)isa->mr, nr = (size_t)isa->nr;
    size_t slot = 0;
    for (;;) {  /* at most one task per thread runs at a time: a slot is free */
        int expected = 0;
        if (atomic_compare_exchange_strong(&j->busy[slot], &expected, 1)) break;
        slot = (slot + 1) % j->slots;
    }
    const size_t tb = task % j->tile_blocks, cb = task / j->tile_blocks;
    const size_t o0 = cb * j->cols, o1 = o0 + j->cols < o ? o0 + j->cols : o, width = o1 - o0;
    const size_t positions = j->positions;
    const int64_t side = (int64_t)j->m;
    float *v = j->scratch + slot * j->slot_floats, *m = v + PL_ALIGNED_FLOATS(positions * j->block * c);
    const size_t t0 = tb * j->block, t1 = t0 + j->block < j->tiles ? t0 + j->block : j->tiles, count = t1 - t0;
    const size_t per_image = j->th * j->tw;
    for (size_t t = t0; t < t1; t++) {
        const size_t rest = t % per_image;
        isa->wino_input(p, j->x, (int64_t)(t / per_image), (int64_t)(rest / j->tw) * side - p->pt,
                        (int64_t)(rest % j->tw) * side - p->pl, v + (t - t0) * c, j->block * c);
    }
    const pl_epilogue none = {PL_ACT_NONE, 0.0f, 0.0f};
    const float *a[PL_GEMM_MAX_MR];
    for (size_t q = 0; q < positions; q++) {
        const float *vq = v + q * j->block * c, *uq = j->u + q * c * o;
        float *mq = m + q * j->block * width;
        for (size_t j0 = o0; j0 < o1; j0 += nr) {  /* a weight panel stays in L1 while the block's rows pass */
            const size_t nc = j0 + nr <= o ? nr : o - j0;
            const float *b = nc == nr ? uq + j0 : j->edge_u + q * c * nr;
            for (size_t r0 = 0; r0 < count; r0 += mr) {
                const size_t valid = r0 + mr <= count ? mr : count - r0;
                for (size_t r = 0; r < mr; r++) a[r] = vq + (r0 + (r < valid ? r : valid - 1)) * c;
                isa->gemm(valid, nc, 1, c, a, NULL, b, nc == nr ? o : nr, mq + r0 * width + (j0 - o0), width, NULL,
                          &none);
            }
        }
    }
    for (size_t t = t0; t < t1; t++) {
        const size_t rest = t % per_image;
        isa->wino_output(p, m + (t - t0) * width, j->block * width, o0, o1, j->bias, j->res, j->y,
                         (int64_t)(t / per_image), (int64_t)(rest / j->tw) * side, (int64_t)(rest % j->tw) * side);
    }
    atomic_store(&j->busy[slot], 0);
}

int pl_winograd_run(const pl_conv *p, const pl_isa *isa, const float *x, const float *u, const float *bias,
                    const float *res, float *y)
{
    const size_t c = (size_t)p->c, o = (size_t)p->o, mr = (size_t)isa->mr, nr = (size_t)isa->nr;
    const size_t side = p->layout == PL_WINOGRAD_2X2 ? 2 : 4, positions = (side + 2) * (side + 2);
    const size_t th = ((size_t)p->ho + side - 1) / side, tw = ((size_t)p->wo + side - 1) / side;
    const size_t tiles = (size_t)p->n * th * tw;
    const size_t threads = (size_t)pl_get_threads();
    /* tiles per block: what fits the budget, in whole micro-kernel rows, evened out over the threads */
    size_t block = BLOCK_FLOATS / (positions * c) / mr * mr;
    if (block < mr) block = mr;
    size_t blocks = (tiles + block - 1) / block;
    blocks = (blocks + threads - 1) / threads * threads;
    block = ((tiles + blocks - 1) / blocks + mr - 1) / mr * mr;
    blocks = (tiles + block - 1) / block;
    /* too few blocks for the threads: columns split too, in whole panels */
    size_t col_blocks = blocks >= 2 * threads ? 1 : (2 * threads + blocks - 1) / blocks;
    size_t cols = ((o + col_blocks - 1) / col_blocks + nr - 1) / nr * nr;
    col_blocks = (o + cols - 1) / cols;
    const size_t tasks = blocks * col_blocks;
    const size_t slots = threads < tasks ? threads : tasks;
    const size_t slot_floats = PL_ALIGNED_FLOATS(positions * block * c) + PL_ALIGNED_FLOATS(positions * block * cols);
    const size_t tail = o % nr;
    float *scratch = pl_aligned_alloc(slots * slot_floats * sizeof(float));
    float *edge = tail ? pl_aligned_alloc(positions * c * nr * sizeof(float)) : NULL;
    _Atomic int *busy = calloc(slots, sizeof *busy);
    if (!scratch || !busy || (tail && !edge)) {
        pl_aligned_free(scratch);
        pl_aligned_free(edge);
        free(busy);
        return -1;
    }
    if (tail) {
        memset(edge, 0, positions * c * nr * sizeof(float));
        for (size_t r = 0; r < positions * c; r++) memcpy(edge + r * nr, u + r * o + (o - tail), tail * sizeof(float));
    }
    wino_job job = {p, isa, x, u, bias, res, edge, y, scratch, side, positions, th, tw, tiles, block, blocks, cols,
                    slots, slot_floats, busy};
    pl_parallel_work(tasks, wino_task, &job, (double)positions * (double)tiles * (double)c * (double)o);
    free(busy);
    pl_aligned_free(edge);
    pl_aligned_free(scratch);
    return 0;
}
