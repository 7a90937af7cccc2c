/* Convolution, pooling and resizing over whole NHWC tensors: the tiling, the indirection buffer and the threads
 * around the current instruction set's micro-kernels.
 *
 * A dense convolution is a GEMM: output pixels are rows, output channels columns, and the reduction runs over
 * taps x input channels. No im2col copy is made: for each tile of mr output pixels an indirection buffer holds,
 * per tap, a pointer to the input pixel each row reads (or to a row of zeros where the tap falls in the padding),
 * and the micro-kernel reads channels straight from the image. Columns are taken in blocks whose weight slice
 * (K x columns) stays in L2 while every pixel tile passes over it; a last block narrower than the micro-kernel's
 * nr columns reads a zero-padded copy of its weight columns (and bias). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "native.h"

typedef float v4 __attribute__((vector_size(16)));
typedef int32_t v4i __attribute__((vector_size(16)));
#if defined(__clang__)
#define SHUFFLE(a, b, i0, i1, i2, i3) __builtin_shufflevector(a, b, i0, i1, i2, i3)
#else
#define SHUFFLE(a, b, i0, i1, i2, i3) __builtin_shuffle(a, b, (v4i){i0, i1, i2, i3})
#endif

#define L2_WEIGHT_FLOATS (64 * 1024)  /* 256 KB of weight columns per block */
#define TASKS_PER_THREAD 8

typedef struct {
    const pl_conv *p;
    const pl_isa *isa;
    const float *x, *w, *bias, *zeros, *edge_w, *edge_bias;
    float *y;
    size_t taps, k, m, tiles_per_task, mtasks, cols_per_block, jblocks;
    int pack;            /* copy each tile's rows (PACK_BELOW_CHANNELS) */
    _Atomic int failed;  /* a task could not allocate its indirection buffer */
    const float *padded; /* or read them from a padded NHWC copy, a kernel row at a time (padded_copy) */
    int64_t hp, wp;      /* its height and width */
    int pointwise;       /* 1x1, stride 1, no padding, NHWC: row r of the GEMM is input pixel r */
    const float *res;    /* NULL, or the residual added before the activation (laid out as y; PL_PANELS only) */
} dense_job;

/* Output pixel `pix` (flat over images, rows, columns): its image and the input position of its tap (0, 0). */
static void pixel_origin(const pl_conv *p, size_t pix, int64_t *n, int64_t *iy0, int64_t *ix0)
{
    const int64_t ox = (int64_t)(pix % (size_t)p->wo), rest = (int64_t)(pix / (size_t)p->wo);
    *n = rest / p->ho;
    *iy0 = rest % p->ho * p->sh - p->pt;
    *ix0 = ox * p->sw - p->pl;
}

/* The same for consecutive pixels without a division each: a cursor at `pix`, then moved one pixel on. */
typedef struct {
    int64_t n, iy0, ix0, ox;
} pixel_cursor;

static pixel_cursor cursor_at(const pl_conv *p, size_t pix)
{
    pixel_cursor at;
    pixel_origin(p, pix, &at.n, &at.iy0, &at.ix0);
    at.ox = (int64_t)(pix % (size_t)p->wo);
    return at;
}

static inline void cursor_next(const pl_conv *p, pixel_cursor *at)
{
    at->ix0 += p->sw;
    if (++at->ox < p->wo) return;
    at->ox = 0;
    at->ix0 = -p->pl;
    at->iy0 += p->sh;
    if (at->iy0 < p->ho * p->sh - p->pt) return;
    at->iy0 = -p->pt;
    at->n++;
}

/* A short run of floats: inline, where a call to memcpy for a kernel row of 9 values cost as much as the copy. */
static inline void copy_floats(float *restrict dst, const float *restrict src, int64_t n)
{
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
}

/* Output pixel `pix`'s K values (taps in order, c channels each; zeros in the padding) into row: where a kernel row
 * lies inside the image and is undilated, its kw * c values are one copy (NHWC). */
static void pack_row(const pl_conv *p, const float *x, size_t pix, float *row)
{
    const int64_t c = p->c;
    int64_t n, iy0, ix0;
    pixel_origin(p, pix, &n, &iy0, &ix0);
    if (p->planar) {  /* NCHW: channel ci of pixel (iy, ix) at ((n * c + ci) * h + iy) * w + ix */
        const int64_t plane = p->h * p->w;
        const float *img = x + n * c * plane;
        if (iy0 >= 0 && iy0 + (p->kh - 1) * p->dh < p->h && ix0 >= 0 && ix0 + (p->kw - 1) * p->dw < p->w) {
            for (int64_t ky = 0; ky < p->kh; ky++) {  /* the window inside the image: no tests */
                const float *line = img + (iy0 + ky * p->dh) * p->w + ix0;
                if (c == 3 && p->dw == 1) {  /* RGB, the common stem: the three planes' runs interleaved */
                    const float *r = line, *g = line + plane, *b = line + 2 * plane;
                    for (int64_t kx = 0; kx < p->kw; kx++, row += 3) {
                        row[0] = r[kx];
                        row[1] = g[kx];
                        row[2] = b[kx];
                    }
                    continue;
                }
                for (int64_t kx = 0; kx < p->kw; kx++, row += c) {
                    const float *px = line + kx * p->dw;
                    for (int64_t ci = 0; ci < c; ci++) row[ci] = px[ci * plane];
                }
            }
            return;
        }
        for (int64_t ky = 0; ky < p->kh; ky++) {
            const int64_t iy = iy0 + ky * p->dh;
            for (int64_t kx = 0; kx < p->kw; kx++, row += c) {
                const int64_t ix = ix0 + kx * p->dw;
                const int inside = iy >= 0 && iy < p->h && ix >= 0 && ix < p->w;
                for (int64_t ci = 0; ci < c; ci++) row[ci] = inside ? img[ci * plane + iy * p->w + ix] : 0.0f;
            }
        }
        return;
    }
    const int whole = p->dw == 1 && ix0 >= 0 && ix0 + p->kw <= p->w;
    for (int64_t ky = 0; ky < p->kh; ky++, row += p->kw * c) {
        const int64_t iy = iy0 + ky * p->dh;
        if (iy < 0 || iy >= p->h) { memset(row, 0, (size_t)(p->kw * c) * sizeof(float)); continue; }
        const float *line = x + (n * p->h + iy) * p->w * c;
        if (whole) { copy_floats(row, line + ix0 * c, p->kw * c); continue; }
        for (int64_t kx = 0; kx < p->kw; kx++) {
            const int64_t ix = ix0 + kx * p->dw;
            for (int64_t ci = 0; ci < c; ci++) row[kx * c + ci] = (ix < 0 || ix >= p->w) ? 0.0f : line[ix * c + ci];
        }
    }
}

/* A convolution with few channels (an RGB stem) reads its input from a zero-padded NHWC copy: a kernel row's kw * c
 * values are then contiguous and inside the copy for every output pixel, so that the micro-kernel takes one tap per
 * kernel row (depth kw * c) straight from it, where copying each tile's rows cost as much as the multiply-adds. The
 * copy (its rows in parallel) also turns an NCHW input channels-last. NULL where the padding would more than double
 * the image or memory runs out: the caller then copies rows per tile. */
typedef struct {
    const pl_conv *p;
    const float *x;
    float *y;
    int64_t hp, wp;
} pad_job;

static void pad_task(void *vjob, size_t task)  /* input row `task` (over images and rows) */
{
    const pad_job *j = vjob;
    const pl_conv *p = j->p;
    const int64_t n = (int64_t)task / p->h, iy = (int64_t)task % p->h, c = p->c, w = p->w;
    float *line = j->y + (n * j->hp + iy + p->pt) * j->wp * c, *dst = line + p->pl * c;
    /* the padding this row owns: its left and right ends, and the rows above the first and below the last */
    memset(line, 0, (size_t)(p->pl * c) * sizeof(float));
    memset(dst + w * c, 0, (size_t)(p->pr * c) * sizeof(float));
    if (iy == 0) memset(line - p->pt * j->wp * c, 0, (size_t)(p->pt * j->wp * c) * sizeof(float));
    if (iy == p->h - 1) memset(line + j->wp * c, 0, (size_t)(p->pb * j->wp * c) * sizeof(float));
    if (p->planar) {
        const float *src = j->x + (n * c * p->h + iy) * w;
        if (c == 3) {  /* RGB: the three planes' rows interleaved in one pass, 4 pixels at a time by shuffles */
            const float *r = src, *g = src + p->h * w, *b = src + 2 * p->h * w;
            int64_t ix = 0;
            for (; ix + 4 <= w; ix += 4) {
                v4 vr, vg, vb;
                memcpy(&vr, r + ix, sizeof vr);
                memcpy(&vg, g + ix, sizeof vg);
                memcpy(&vb, b + ix, sizeof vb);
                const v4 lo = SHUFFLE(vr, vg, 0, 4, 1, 5);           /* r0 g0 r1 g1 */
                const v4 hi = SHUFFLE(vr, vg, 2, 6, 3, 7);           /* r2 g2 r3 g3 */
                const v4 o0 = SHUFFLE(lo, vb, 0, 1, 4, 2);           /* r0 g0 b0 r1 */
                const v4 gb = SHUFFLE(lo, vb, 3, 5, 3, 5);           /* g1 b1 . . */
                const v4 o1 = SHUFFLE(gb, hi, 0, 1, 4, 5);           /* g1 b1 r2 g2 */
                const v4 o2 = SHUFFLE(hi, vb, 6, 2, 3, 7);           /* b2 r3 g3 b3 */
                memcpy(dst + 3 * ix, &o0, sizeof o0);
                memcpy(dst + 3 * ix + 4, &o1, sizeof o1);
                memcpy(dst + 3 * ix + 8, &o2, sizeof o2);
            }
            for (; ix < w; ix++) {
                dst[3 * ix] = r[ix];
                dst[3 * ix + 1] = g[ix];
                dst[3 * ix + 2] = b[ix];
            }
            return;
        }
        for (int64_t ci = 0; ci < c; ci++, src += p->h * w)
            for (int64_t ix = 0; ix < w; ix++) dst[ix * c + ci] = src[ix];
    } else {
        memcpy(dst, j->x + (n * p->h + iy) * w * c, (size_t)(w * c) * sizeof(float));
    }
}

static float *padded_copy(const pl_conv *p, const float *x, int64_t *hp, int64_t *wp)
{
    *hp = p->h + p->pt + p->pb;
    *wp = p->w + p->pl + p->pr;
    int64_t floats;
    if (__builtin_mul_overflow(p->n * p->c, *hp, &floats) || __builtin_mul_overflow(floats, *wp, &floats)
        || floats > 2 * p->n * p->h * p->w * p->c + 65536)  /* padding that would dwarf the image: copy rows */
        return NULL;
    float *y = malloc((size_t)floats * sizeof(float));  /* every float written by pad_task, the padding too */
    if (!y) return NULL;
    pad_job job = {p, x, y, *hp, *wp};
    pl_parallel_work((size_t)(p->n * p->h), pad_task, &job, (double)(p->n * p->h * p->w * p->c));
    return y;
}

/* One task: tiles_per_task tiles of mr output pixels, against one block of output columns. */
static void dense_task(void *vjob, size_t task)
{
    dense_job *j = vjob;
    const pl_conv *p = j->p;
    const size_t mr = (size_t)j->isa->mr, nr = (size_t)j->isa->nr, o = (size_t)p->o, c = (size_t)p->c;
    const size_t jb = task / j->mtasks, mt = task % j->mtasks;
    const size_t col0 = jb * j->cols_per_block;
    const size_t col1 = col0 + j->cols_per_block < o ? col0 + j->cols_per_block : o;
    const float *stack_ptrs[64 * PL_GEMM_MAX_MR];
    uint32_t stack_ids[64];
    const float **a = j->taps <= 64 ? stack_ptrs : malloc(j->taps * mr * sizeof *a);
    uint32_t *ids = j->taps <= 64 ? stack_ids : malloc(j->taps * sizeof *ids);
    if (!a || !ids) {
        atomic_store(&j->failed, 1);
        if (a != stack_ptrs) free(a);
        if (ids != stack_ids) free(ids);
        return;
    }
    float pack[j->pack ? PL_GEMM_MAX_MR * PL_COPY_ROWS_MAX_K : 1];
    const size_t m0 = mt * j->tiles_per_task * mr;
    const size_t m1 = m0 + j->tiles_per_task * mr < j->m ? m0 + j->tiles_per_task * mr : j->m;
    pixel_cursor at = cursor_at(p, m0 < j->m ? m0 : 0);  /* at pixel r0 at each tile (the tiles follow each other) */
    for (size_t r0 = m0; r0 < m1; r0 += mr) {
        const size_t valid = r0 + mr <= m1 ? mr : m1 - r0;
        const float *packed_rows[PL_GEMM_MAX_MR];
        const float **rows = a;
        size_t taps, depth = c, kept = 0;
        const uint32_t *tap_ids = NULL;  /* the taps kept, where some were left out */
        if (j->pointwise) {  /* 1x1, stride 1, no padding: row r is pixel r0 + r */
            for (size_t r = 0; r < mr; r++) a[r] = j->x + (r0 + (r < valid ? r : valid - 1)) * c;
            taps = 1;
        } else if (j->padded) {  /* few channels: a tap per kernel row, its kw * c values contiguous in the copy */
            const int64_t step = p->dh * j->wp * p->c;  /* from one kernel row to the next */
            for (size_t r = 0; r < valid; r++, cursor_next(p, &at)) {
                const float *row = j->padded + ((at.n * j->hp + at.iy0 + p->pt) * j->wp + at.ix0 + p->pl) * p->c;
                for (int64_t ky = 0; ky < p->kh; ky++, row += step) a[(size_t)ky * mr + r] = row;
            }
            for (size_t r = valid; r < mr; r++)
                for (int64_t ky = 0; ky < p->kh; ky++) a[(size_t)ky * mr + r] = a[(size_t)ky * mr + valid - 1];
            taps = (size_t)p->kh;
            depth = (size_t)(p->kw * p->c);
        } else if (j->pack) {  /* few channels: each row copied whole, a row of the kernel's taps at a time */
            for (size_t r = 0; r < mr; r++) {
                pack_row(p, j->x, r0 + (r < valid ? r : valid - 1), pack + r * j->k);
                packed_rows[r] = pack + r * j->k;
            }
            rows = packed_rows;
            taps = 1;
            depth = j->k;
        } else {
            for (size_t r = 0; r < valid; r++, cursor_next(p, &at)) {  /* the indirection buffer: per tap, the pixel
                                                                         * each row reads */
                for (int64_t ky = 0; ky < p->kh; ky++) {
                    const int64_t iy = at.iy0 + ky * p->dh;
                    for (int64_t kx = 0; kx < p->kw; kx++) {
                        const int64_t ix = at.ix0 + kx * p->dw;
                        const size_t t = (size_t)(ky * p->kw + kx);
                        a[t * mr + r] = (iy < 0 || iy >= p->h || ix < 0 || ix >= p->w)
                                            ? j->zeros : j->x + ((at.n * p->h + iy) * p->w + ix) * p->c;
                    }
                }
            }
            for (size_t r = valid; r < mr; r++)  /* a partial tile's missing rows repeat its last */
                for (size_t t = 0; t < j->taps; t++) a[t * mr + r] = a[t * mr + valid - 1];
            /* Taps every row of the tile reads in the padding add nothing: they are left out (atrous convolutions
             * on small maps, DeepLab's ASPP, have most of their taps there). */
            for (size_t t = 0; t < j->taps; t++) {
                size_t r = 0;
                while (r < mr && a[t * mr + r] == j->zeros) r++;
                if (r == mr) continue;
                if (kept != t) memmove(a + kept * mr, a + t * mr, mr * sizeof *a);
                ids[kept++] = (uint32_t)t;
            }
            taps = kept;
            tap_ids = kept == j->taps ? NULL : ids;
        }
        if (p->layout == PL_PANELS) {  /* the whole column block in one call */
            j->isa->gemm_panels(valid, col0, col1, o, taps, depth, rows, tap_ids, j->w, j->k, j->y + r0 * o, o,
                                j->bias, j->edge_bias, j->res ? j->res + r0 * o : NULL, &p->ep);
            continue;
        }
        for (size_t j0 = col0; j0 < col1; j0 += nr) {
            const size_t nc = j0 + nr <= o ? nr : o - j0;
            const float *bias = nc == nr ? (j->bias ? j->bias + j0 : NULL) : j->edge_bias;
            const float *b = nc == nr ? j->w + j0 : j->edge_w;  /* row-major weights (PL_ROWS) */
            j->isa->gemm(valid, nc, taps, depth, rows, tap_ids, b, nc == nr ? o : nr, j->y + r0 * o + j0, o, bias,
                         &p->ep);
        }
    }
    if (a != stack_ptrs) free(a);
    if (ids != stack_ids) free(ids);
}

static int dense_run(const pl_conv *p, const pl_isa *isa, const float *x, const float *w, const float *bias,
                     const float *res, float *y)
{
    const size_t nr = (size_t)isa->nr, mr = (size_t)isa->mr, o = (size_t)p->o, c = (size_t)p->c;
    const size_t taps = (size_t)(p->kh * p->kw), k = taps * c;
    const size_t m = (size_t)(p->n * p->ho * p->wo);
    const size_t tail = o % nr;
    float *zeros = calloc(c, sizeof(float));
    /* the last columns' bias padded to nr, and (row-major weights) their weight columns too */
    float *edge = tail ? calloc((p->layout == PL_ROWS ? k * nr : 0) + nr, sizeof(float)) : NULL;
    if (!zeros || (tail && !edge)) { free(zeros); free(edge); return -1; }
    const float *edge_bias = NULL;
    if (tail) {
        float *edge_b = edge + (p->layout == PL_ROWS ? k * nr : 0);
        if (p->layout == PL_ROWS)
            for (size_t r = 0; r < k; r++) memcpy(edge + r * nr, w + r * o + (o - tail), tail * sizeof(float));
        if (bias) { memcpy(edge_b, bias + (o - tail), tail * sizeof(float)); edge_bias = edge_b; }
    }
    /* Column blocks whose weights stay in L2 (whole panels), then enough pixel tasks for the threads. */
    size_t cols = (L2_WEIGHT_FLOATS / (k ? k : 1)) / PL_PANEL * PL_PANEL;
    if (cols < PL_PANEL) cols = PL_PANEL;
    const size_t jblocks = (o + cols - 1) / cols, tiles = (m + mr - 1) / mr;
    const size_t want = (size_t)pl_get_threads() * TASKS_PER_THREAD;
    const size_t split = (want + jblocks - 1) / jblocks;
    const size_t per_task = (tiles + split - 1) / split;
    dense_job job = {p, isa, x, w, bias, zeros, edge, edge_bias, y, taps, k, m, per_task,
                     (tiles + per_task - 1) / per_task, cols, jblocks,
                     pl_conv_copies_rows(p), 0, NULL, 0, 0, 0, res};
    float *padded = job.pack && p->dw == 1 ? padded_copy(p, x, &job.hp, &job.wp) : NULL;
    job.padded = padded;
    job.pointwise = p->kh == 1 && p->kw == 1 && p->sh == 1 && p->sw == 1 && p->pt == 0 && p->pb == 0 && p->pl == 0
                    && p->pr == 0 && !p->planar && !job.pack;
    pl_parallel_work(job.mtasks * job.jblocks, dense_task, &job, (double)m * (double)k * (double)o);
    free(padded);
    free(edge);
    free(zeros);
    return atomic_load(&job.failed) ? -1 : 0;
}

typedef struct {
    const pl_conv *p;
    const pl_isa *isa;
    const float *x, *w, *bias;
    float *y;
    int64_t rows_per_task, tasks_per_image;
} dw_job;

static void dw_task(void *vjob, size_t task)
{
    const dw_job *j = vjob;
    const int64_t n = (int64_t)task / j->tasks_per_image, part = (int64_t)task % j->tasks_per_image;
    const int64_t oy0 = part * j->rows_per_task;
    const int64_t oy1 = oy0 + j->rows_per_task < j->p->ho ? oy0 + j->rows_per_task : j->p->ho;
    j->isa->depthwise_rows(j->p, j->x, j->w, j->bias, j->y, n, oy0, oy1, NULL);
}

int pl_conv_run(const pl_conv *p, const float *x, const float *w, const float *bias, float *y)
{
    return pl_conv_run_residual(p, x, w, bias, NULL, y);
}

int pl_conv_run_residual(const pl_conv *p, const float *x, const float *w, const float *bias, const float *res,
                         float *y)
{
    if (res && !pl_conv_takes_residual(p)) return -1;  /* the plan's check refuses such a step */
    const pl_isa *isa = pl_isa_current();
    if (p->groups > 1) {
        const int64_t per_row = p->wo * p->c * p->kh * p->kw;
        int64_t rows = (32 * 1024) / (per_row > 0 ? per_row : 1);
        rows = rows < 1 ? 1 : rows;
        dw_job job = {p, isa, x, w, bias, y, rows, (p->ho + rows - 1) / rows};
        pl_parallel_work((size_t)(p->n * job.tasks_per_image), dw_task, &job,
                         (double)(p->n * p->ho) * (double)per_row);
        return 0;
    }
    if (pl_layout_winograd(p->layout)) return pl_winograd_run(p, isa, x, w, bias, res, y);
    return dense_run(p, isa, x, w, bias, res, y);
}

int pl_conv_run_scaled(const pl_conv *p, const float *x, const float *w, const float *bias, const float *scale,
                       const float *res, float *y)
{
    if (!scale) return pl_conv_run_residual(p, x, w, bias, res, y);
    if (!pl_conv_takes_scale(p)) return -1;  /* the plan's check refuses such a step */
    const size_t n = (size_t)p->n, c = (size_t)p->c, rows = ((size_t)p->o + PL_PANEL - 1) / PL_PANEL * c;
    size_t factors_bytes, weight_bytes;
    if (__builtin_mul_overflow(n * c, sizeof(float), &factors_bytes)
        || __builtin_mul_overflow(rows, PL_PANEL * sizeof(float), &weight_bytes))
        return -1;
    /* the factors first (they may lie in y, which the first image's output overwrites), then one image's weight
     * copy at a time, (panels, c, PL_PANEL): row r reads x's channel r % c */
    float *factors = malloc(factors_bytes ? factors_bytes : 1), *scaled = pl_aligned_alloc(weight_bytes);
    if (!factors || !scaled) { free(factors); pl_aligned_free(scaled); return -1; }
    memcpy(factors, scale, factors_bytes);
    pl_conv one = *p;
    one.n = 1;
    const size_t in = (size_t)(p->h * p->w) * c, out = (size_t)(p->ho * p->wo * p->o);
    int failed = 0;
    for (size_t i = 0; i < n && !failed; i++) {
        for (size_t r = 0; r < rows; r++) {
            const float f = factors[i * c + r % c], *src = w + r * PL_PANEL;
            float *dst = scaled + r * PL_PANEL;
            for (size_t j = 0; j < PL_PANEL; j++) dst[j] = src[j] * f;
        }
        failed = dense_run(&one, pl_isa_current(), x + i * in, scaled, bias, res ? res + i * out : NULL, y + i * out);
    }
    pl_aligned_free(scaled);
    free(factors);
    return failed;
}

typedef struct {
    const pl_resize *p;
    const pl_isa *isa;
    const float *x, *table;
    float *y;
} resize_job;

static void resize_task(void *vjob, size_t task)
{
    const resize_job *j = vjob;
    const int64_t n = (int64_t)task / j->p->ho, oy = (int64_t)task % j->p->ho;
    j->isa->resize_rows(j->p, j->x, j->table, j->y, n, oy, oy + 1);
}

void pl_resize_run(const pl_resize *p, const float *x, const float *table, float *y)
{
    resize_job job = {p, pl_isa_current(), x, table, y};
    pl_parallel_work((size_t)(p->n * p->ho), resize_task, &job, 4.0 * (double)(p->n * p->ho * p->wo * p->c));
}

typedef struct {
    const pl_pool *p;
    const pl_isa *isa;
    const float *x;
    float *y;
} pool_job;

static void pool_task(void *vjob, size_t task)
{
    const pool_job *j = vjob;
    const int64_t n = (int64_t)task / j->p->ho, oy = (int64_t)task % j->p->ho;
    j->isa->pool_rows(j->p, j->x, j->y, n, oy, oy + 1);
}

void pl_pool_run(const pl_pool *p, const float *x, float *y)
{
    pool_job job = {p, pl_isa_current(), x, y};
    pl_parallel_work((size_t)(p->n * p->ho), pool_task, &job,
                     (double)(p->n * p->ho * p->wo * p->c) * (double)(p->kh * p->kw));
}
