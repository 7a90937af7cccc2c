/* The Python binding: ptlite.backends.native._native. Each function takes NumPy arrays (any object with the
 * buffer protocol: float32, C-contiguous; the Python side guarantees the dtype) and its geometry as integers,
 * validates the geometry against the buffers' lengths (params.c), and runs with the GIL released. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "plan.h"

#define ERR_CAP 256

static int get_floats(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? (PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a %sC-contiguous float32 array", what, writable ? "writable " : "");
        return -1;
    }
    if (view->len % 4 != 0) {
        PyBuffer_Release(view);
        PyErr_Format(PyExc_ValueError, "%s is not a float32 array (%zd bytes)", what, view->len);
        return -1;
    }
    return 0;
}

static size_t floats(const Py_buffer *view) { return (size_t)view->len / 4; }

static int overlaps(const Py_buffer *a, const Py_buffer *b)
{
    const char *a0 = a->buf, *b0 = b->buf;
    return a->len > 0 && b->len > 0 && a0 < b0 + b->len && b0 < a0 + a->len;
}

static int epilogue(int act, double lo, double hi, pl_epilogue *ep)
{
    char err[ERR_CAP];
    ep->act = act;
    ep->lo = (float)lo;
    ep->hi = (float)hi;
    if (pl_epilogue_check(ep, err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        return -1;
    }
    return 0;
}

/* conv2d(x, w, bias_or_None, y, (n, h, w, c, o, kh, kw, sh, sw, pt, pb, pl, pr, dh, dw, ho, wo, groups, layout),
 *        act, lo, hi) */
static PyObject *py_conv2d(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *wo, *bo, *yo;
    pl_conv p;
    int act;
    double lo, hi;
    if (!PyArg_ParseTuple(args, "OOOO(LLLLLLLLLLLLLLLLLLL)idd", &xo, &wo, &bo, &yo, &p.n, &p.h, &p.w, &p.c, &p.o,
                          &p.kh, &p.kw, &p.sh, &p.sw, &p.pt, &p.pb, &p.pl, &p.pr, &p.dh, &p.dw, &p.ho, &p.wo,
                          &p.groups, &p.layout, &act, &lo, &hi))
        return NULL;
    if (epilogue(act, lo, hi, &p.ep) != 0) return NULL;
    p.planar = 0;
    Py_buffer x, w, b = {0}, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(wo, &w, 0, "the weight") != 0) goto fail_x;
    if (bo != Py_None && get_floats(bo, &b, 0, "the bias") != 0) goto fail_w;
    if (get_floats(yo, &y, 1, "the output") != 0) goto fail_b;
    char err[ERR_CAP];
    if (pl_conv_check(&p, floats(&x), floats(&w), bo == Py_None ? 0 : floats(&b), floats(&y), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        goto fail_y;
    }
    if (overlaps(&y, &x) || overlaps(&y, &w) || (bo != Py_None && overlaps(&y, &b))) {
        PyErr_SetString(PyExc_ValueError, "convolution: the output overlaps an input");
        goto fail_y;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = pl_conv_run(&p, x.buf, w.buf, bo == Py_None ? NULL : b.buf, y.buf);
    Py_END_ALLOW_THREADS
    if (rc != 0) {
        PyErr_NoMemory();
        goto fail_y;
    }
    PyBuffer_Release(&y);
    if (bo != Py_None) PyBuffer_Release(&b);
    PyBuffer_Release(&w);
    PyBuffer_Release(&x);
    Py_RETURN_NONE;
fail_y:
    PyBuffer_Release(&y);
fail_b:
    if (bo != Py_None) PyBuffer_Release(&b);
fail_w:
    PyBuffer_Release(&w);
fail_x:
    PyBuffer_Release(&x);
    return NULL;
}

/* pool2d(x, y, (n, h, w, c, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo), kind, divisor) */
static PyObject *py_pool2d(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo;
    pl_pool p;
    double divisor;
    if (!PyArg_ParseTuple(args, "OO(LLLLLLLLLLLLLL)id", &xo, &yo, &p.n, &p.h, &p.w, &p.c, &p.kh, &p.kw, &p.sh,
                          &p.sw, &p.pt, &p.pl, &p.dh, &p.dw, &p.ho, &p.wo, &p.kind, &divisor))
        return NULL;
    p.divisor = (float)divisor;
    Py_buffer x, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    char err[ERR_CAP];
    int ok = pl_pool_check(&p, floats(&x), floats(&y), err, sizeof err) == 0;
    if (!ok) PyErr_SetString(PyExc_ValueError, err);
    else if (overlaps(&x, &y)) { ok = 0; PyErr_SetString(PyExc_ValueError, "pooling: the output overlaps the input"); }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        pl_pool_run(&p, x.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* softmax(x, y, rows, n) / layer_norm(x, gamma_or_None, beta_or_None, y, rows, n, eps): over rows of n values;
 * y may be x. */
static PyObject *rows_op(PyObject *args, int norm)
{
    PyObject *xo, *go = Py_None, *bo = Py_None, *yo;
    Py_ssize_t rows, n;
    double eps = 0.0;
    if (norm ? !PyArg_ParseTuple(args, "OOOOnnd", &xo, &go, &bo, &yo, &rows, &n, &eps)
             : !PyArg_ParseTuple(args, "OOnn", &xo, &yo, &rows, &n))
        return NULL;
    if (rows < 1 || n < 1 || rows > (Py_ssize_t)1 << 40 || n > (Py_ssize_t)1 << 40 || !(eps >= 0.0))
        return PyErr_Format(PyExc_ValueError, "%s: bad sizes (%zd rows of %zd) or eps",
                            norm ? "layer norm" : "softmax", rows, n);
    Py_buffer x, g = {0}, b = {0}, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    int ok = 1;
    if (go != Py_None && get_floats(go, &g, 0, "the weight") != 0) ok = 0;
    if (ok && bo != Py_None && get_floats(bo, &b, 0, "the bias") != 0) ok = 0;
    if (ok && get_floats(yo, &y, 1, "the output") != 0) ok = 0;
    else if (ok) {
        size_t len;
        const char *problem = NULL;
        if (__builtin_mul_overflow((size_t)rows, (size_t)n, &len) || floats(&x) != len || floats(&y) != len)
            problem = "the input and output must hold rows * n values";
        else if ((g.obj && floats(&g) != (size_t)n) || (b.obj && floats(&b) != (size_t)n))
            problem = "the weight and bias must hold n values";
        else if (overlaps(&x, &y) && x.buf != y.buf) problem = "the output partly overlaps the input";
        else if ((g.obj && overlaps(&g, &y)) || (b.obj && overlaps(&b, &y))) problem = "the output overlaps the weight";
        if (problem) {
            PyErr_Format(PyExc_ValueError, "%s: %s", norm ? "layer norm" : "softmax", problem);
            ok = 0;
        } else {
            Py_BEGIN_ALLOW_THREADS
            if (norm) pl_layer_norm_run(x.buf, g.obj ? g.buf : NULL, b.obj ? b.buf : NULL, y.buf, len / (size_t)n,
                                        (size_t)n, (float)eps);
            else pl_softmax_run(x.buf, y.buf, (size_t)rows, (size_t)n);
            Py_END_ALLOW_THREADS
        }
        PyBuffer_Release(&y);
    }
    if (b.obj) PyBuffer_Release(&b);
    if (g.obj) PyBuffer_Release(&g);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_softmax(PyObject *self, PyObject *args) { (void)self; return rows_op(args, 0); }
static PyObject *py_layer_norm(PyObject *self, PyObject *args) { (void)self; return rows_op(args, 1); }

/* resize(x, table, y, (n, h, w, c, ho, wo)): bilinear, NHWC, by a table of source rows, columns and weights */
static PyObject *py_resize(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *to, *yo;
    pl_resize p;
    if (!PyArg_ParseTuple(args, "OOO(LLLLLL)", &xo, &to, &yo, &p.n, &p.h, &p.w, &p.c, &p.ho, &p.wo)) return NULL;
    Py_buffer x, t, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(to, &t, 0, "the table") != 0) { PyBuffer_Release(&x); return NULL; }
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&t); PyBuffer_Release(&x); return NULL; }
    char err[ERR_CAP];
    int ok = pl_resize_check(&p, floats(&x), floats(&t), floats(&y), err, sizeof err) == 0;
    if (!ok) PyErr_SetString(PyExc_ValueError, err);
    else if (overlaps(&x, &y) || overlaps(&t, &y)) {
        ok = 0;
        PyErr_SetString(PyExc_ValueError, "resize: the output overlaps an input");
    }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        pl_resize_run(&p, x.buf, t.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&t);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* binary(op, a, b, y, act, lo, hi[, images]): y = act(a op b); b has len(y) values, one, or a divisor of len(y) (a
 * row repeated), within each of `images` images; a has len(y) values. y may be a itself (in place) but not overlap
 * b unless it is b. */
static PyObject *py_binary(PyObject *self, PyObject *args)
{
    (void)self;
    int op, act;
    PyObject *ao, *bo, *yo;
    double lo, hi;
    long long images = 1;
    pl_epilogue ep;
    if (!PyArg_ParseTuple(args, "iOOOidd|L", &op, &ao, &bo, &yo, &act, &lo, &hi, &images)) return NULL;
    if (epilogue(act, lo, hi, &ep) != 0) return NULL;
    Py_buffer a, b, y;
    if (get_floats(ao, &a, 0, "the first operand") != 0) return NULL;
    if (get_floats(bo, &b, 0, "the second operand") != 0) { PyBuffer_Release(&a); return NULL; }
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&b); PyBuffer_Release(&a); return NULL; }
    size_t len = floats(&y), bl = floats(&b);
    const char *problem = NULL;
    char err[ERR_CAP];
    if (pl_binary_check(op, floats(&a), bl, len, images, err, sizeof err) != 0) problem = err;
    else if ((overlaps(&y, &a) && a.buf != y.buf) || (overlaps(&y, &b) && !(b.buf == y.buf && bl == len)))
        problem = "binary: the output partly overlaps an operand";
    if (problem) PyErr_SetString(PyExc_ValueError, problem);
    else {
        Py_BEGIN_ALLOW_THREADS
        pl_binary_run(op, a.buf, b.buf, bl, y.buf, len, (size_t)images, &ep);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    if (problem) return NULL;
    Py_RETURN_NONE;
}

/* unary(kind, x, y, act, lo, hi): kind 0: y = act(x); kind 1: y = exp(x). y may be x (in place). */
static PyObject *py_unary(PyObject *self, PyObject *args)
{
    (void)self;
    int kind, act;
    PyObject *xo, *yo;
    double lo, hi;
    pl_epilogue ep;
    if (!PyArg_ParseTuple(args, "iOOidd", &kind, &xo, &yo, &act, &lo, &hi)) return NULL;
    if (kind < 0 || kind > 1) return PyErr_Format(PyExc_ValueError, "unknown unary kind %d", kind);
    if (epilogue(act, lo, hi, &ep) != 0) return NULL;
    Py_buffer x, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    const char *problem = NULL;
    if (floats(&x) != floats(&y)) problem = "unary: the input and the output differ in length";
    else if (overlaps(&x, &y) && x.buf != y.buf) problem = "unary: the output partly overlaps the input";
    if (problem) PyErr_SetString(PyExc_ValueError, problem);
    else {
        const pl_isa *isa = pl_isa_current();
        Py_BEGIN_ALLOW_THREADS
        if (kind == 0) pl_activate_run(x.buf, y.buf, floats(&y), &ep);
        else isa->exp(x.buf, y.buf, floats(&y));
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (problem) return NULL;
    Py_RETURN_NONE;
}

/* mean_rows(x, y, n, rows, c): y[i, :] = mean of x[i] viewed as (rows, c), for each of n images */
static PyObject *py_mean_rows(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo;
    Py_ssize_t n, rows, c;
    if (!PyArg_ParseTuple(args, "OOnnn", &xo, &yo, &n, &rows, &c)) return NULL;
    Py_buffer x, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    const char *problem = NULL;
    size_t need;
    if (n < 1 || rows < 1 || c < 1 || __builtin_mul_overflow((size_t)n, (size_t)rows, &need)
        || __builtin_mul_overflow(need, (size_t)c, &need) || need > floats(&x) || (size_t)n * (size_t)c > floats(&y))
        problem = "mean: the sizes do not match the buffers";
    else if (overlaps(&x, &y)) problem = "mean: the output overlaps the input";
    int failed = 0;
    if (problem) PyErr_SetString(PyExc_ValueError, problem);
    else {
        Py_BEGIN_ALLOW_THREADS
        failed = pl_mean_run(x.buf, y.buf, (size_t)n, (size_t)rows, (size_t)c);
        Py_END_ALLOW_THREADS
        if (failed) PyErr_NoMemory();
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (problem || failed) return NULL;
    Py_RETURN_NONE;
}

/* rnn(x, w_ih, w_hh, b_ih, b_hh, h0, c0_or_None, out, h_n, c_n_or_None,
 *     (mode, steps, batch, in, hidden, out_stride, out_offset, reverse)): one direction of a recurrent layer */
static PyObject *py_rnn(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[10];
    pl_rnn p;
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO(LLLLLLLL)", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &obj[5], &obj[6],
                          &obj[7], &obj[8], &obj[9], &p.mode, &p.t, &p.b, &p.in, &p.hidden, &p.out_stride,
                          &p.out_offset, &p.reverse))
        return NULL;
    static const char *const names[10] = {"the input", "w_ih", "w_hh", "b_ih", "b_hh", "h0", "c0", "the output",
                                          "h_n", "c_n"};
    const int lstm = p.mode == PL_LSTM;
    Py_buffer v[10];
    int got = 0, ok = 1;
    for (; got < 10; got++) {
        int optional = got == 6 || got == 9;
        if (optional && !lstm) {
            if (obj[got] != Py_None) {
                PyErr_Format(PyExc_ValueError, "%s is for LSTM only", names[got]);
                ok = 0;
                break;
            }
            memset(&v[got], 0, sizeof v[got]);
            continue;
        }
        if (get_floats(obj[got], &v[got], got >= 7, names[got]) != 0) { ok = 0; break; }
    }
    char err[ERR_CAP];
    if (ok && pl_rnn_check(&p, floats(&v[0]), floats(&v[1]), floats(&v[2]), floats(&v[3]), floats(&v[4]),
                           floats(&v[5]), lstm ? floats(&v[6]) : 0, floats(&v[7]), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    }
    if (ok && (floats(&v[8]) != floats(&v[5]) || (lstm && floats(&v[9]) != floats(&v[5])))) {
        PyErr_SetString(PyExc_ValueError, "recurrent layer: h_n and c_n must have the states' length");
        ok = 0;
    }
    for (int o = 7; ok && o < 10; o++)
        for (int i = 0; ok && i < 10; i++)
            if (i != o && v[o].obj && v[i].obj && overlaps(&v[o], &v[i])) {
                PyErr_Format(PyExc_ValueError, "recurrent layer: %s overlaps %s", names[o], names[i]);
                ok = 0;
            }
    float *scratch = NULL;
    if (ok) {
        const size_t g = pl_rnn_gates(p.mode) * (size_t)p.hidden, st = (size_t)p.b * (size_t)p.hidden;
        scratch = malloc((2 * g + 2 * st) * sizeof(float));
        if (!scratch) { PyErr_NoMemory(); ok = 0; }
    }
    if (ok) {
        const pl_isa *isa = pl_isa_current();
        Py_BEGIN_ALLOW_THREADS
        isa->rnn(&p, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf, v[5].buf, lstm ? v[6].buf : NULL, v[7].buf,
                 v[8].buf, lstm ? v[9].buf : NULL, scratch);
        Py_END_ALLOW_THREADS
    }
    free(scratch);
    for (int i = 0; i < got; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* broadcast(op, a, b, y, (ndim, shape x 6, a strides x 6, b strides x 6), act, lo, hi): y = act(a op b) with
 * broadcasting (pl_broadcast) */
static PyObject *py_broadcast(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *ao, *bo, *yo;
    pl_broadcast p;
    int op, act;
    double lo, hi;
    int64_t *q[3] = {p.shape, p.sa, p.sb};
    if (!PyArg_ParseTuple(args, "iOOO(L(LLLLLL)(LLLLLL)(LLLLLL))idd", &op, &ao, &bo, &yo, &p.ndim, q[0], q[0] + 1,
                          q[0] + 2, q[0] + 3, q[0] + 4, q[0] + 5, q[1], q[1] + 1, q[1] + 2, q[1] + 3, q[1] + 4, q[1] + 5,
                          q[2], q[2] + 1, q[2] + 2, q[2] + 3, q[2] + 4, q[2] + 5, &act, &lo, &hi))
        return NULL;
    p.op = op;
    if (epilogue(act, lo, hi, &p.ep) != 0) return NULL;
    Py_buffer a, b, y;
    if (get_floats(ao, &a, 0, "the first operand") != 0) return NULL;
    if (get_floats(bo, &b, 0, "the second operand") != 0) { PyBuffer_Release(&a); return NULL; }
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&b); PyBuffer_Release(&a); return NULL; }
    char err[ERR_CAP];
    int ok = 1;
    if (pl_broadcast_check(&p, floats(&a), floats(&b), floats(&y), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    } else if (overlaps(&y, &a) || overlaps(&y, &b)) {
        PyErr_SetString(PyExc_ValueError, "broadcast: the output overlaps an operand");
        ok = 0;
    } else {
        Py_BEGIN_ALLOW_THREADS
        pl_broadcast_run(&p, a.buf, b.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&b);
    PyBuffer_Release(&a);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* reduce(x, y, outer, r, inner, scale): y (outer, inner) = scale * the sum of x (outer, r, inner) over r */
static PyObject *py_reduce(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo;
    pl_reduce p;
    double scale;
    if (!PyArg_ParseTuple(args, "OOLLLd", &xo, &yo, &p.outer, &p.r, &p.inner, &scale)) return NULL;
    p.scale = (float)scale;
    Py_buffer x, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    char err[ERR_CAP];
    int ok = 1;
    if (pl_reduce_check(&p, floats(&x), floats(&y), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    } else if (overlaps(&x, &y)) {
        PyErr_SetString(PyExc_ValueError, "reduce: the output overlaps the input");
        ok = 0;
    } else {
        Py_BEGIN_ALLOW_THREADS
        pl_reduce_run(&p, x.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* pad(x, y, in_shape, out_shape, before, value): constant padding (pl_pad), the shapes and offsets as tuples of up
 * to PL_COPY_MAX_DIMS integers */
static int dims_from(PyObject *seq, int64_t *dims, int64_t *ndim, const char *what)
{
    PyObject *fast = PySequence_Fast(seq, "pad: shapes must be sequences");
    if (!fast) return -1;
    const Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
    if (n < 1 || n > PL_COPY_MAX_DIMS || (*ndim && n != *ndim)) {
        Py_DECREF(fast);
        PyErr_Format(PyExc_ValueError, "pad: %s has %zd dimensions (1 to %d, as many as the others)", what, n,
                     PL_COPY_MAX_DIMS);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        dims[i] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(fast, i));
        if (dims[i] == -1 && PyErr_Occurred()) { Py_DECREF(fast); return -1; }
    }
    *ndim = n;
    Py_DECREF(fast);
    return 0;
}

static PyObject *py_pad(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo, *in, *out, *before;
    double value;
    pl_pad p = {0};
    if (!PyArg_ParseTuple(args, "OOOOOd", &xo, &yo, &in, &out, &before, &value)) return NULL;
    if (dims_from(in, p.in, &p.ndim, "the input shape") != 0 || dims_from(out, p.out, &p.ndim, "the output shape") != 0
        || dims_from(before, p.before, &p.ndim, "the padding") != 0)
        return NULL;
    p.value = (float)value;
    Py_buffer x, y;
    if (get_floats(xo, &x, 0, "the input") != 0) return NULL;
    if (get_floats(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    char err[ERR_CAP];
    int ok = 1;
    if (pl_pad_check(&p, floats(&x), floats(&y), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    } else if (overlaps(&x, &y)) {
        PyErr_SetString(PyExc_ValueError, "pad: the output overlaps the input");
        ok = 0;
    } else {
        Py_BEGIN_ALLOW_THREADS
        pl_pad_run(&p, x.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* attention(q, k, v, mask_or_None, y, (b1, b2, l, s, e, ev, causal, ms0, ms1, ms2, ms3), scale): scaled dot-product
 * attention (pl_attention) */
static PyObject *py_attention(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[5];
    pl_attention p;
    double scale;
    if (!PyArg_ParseTuple(args, "OOOOO(LLLLLLLLLLL)d", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &p.b1, &p.b2, &p.l,
                          &p.s, &p.e, &p.ev, &p.causal, &p.ms[0], &p.ms[1], &p.ms[2], &p.ms[3], &scale))
        return NULL;
    p.scale = (float)scale;
    static const char *const names[5] = {"the query", "the key", "the value", "the mask", "the output"};
    Py_buffer v[5];
    int got = 0, ok = 1;
    for (; got < 5; got++) {
        if (got == 3 && obj[3] == Py_None) { memset(&v[3], 0, sizeof v[3]); continue; }
        if (get_floats(obj[got], &v[got], got == 4, names[got]) != 0) { ok = 0; break; }
    }
    char err[ERR_CAP];
    if (ok && v[3].obj && floats(&v[3]) == 0) {
        PyErr_SetString(PyExc_ValueError, "attention: an empty mask");
        ok = 0;
    }
    if (ok && pl_attention_check(&p, floats(&v[0]), floats(&v[1]), floats(&v[2]), v[3].obj ? floats(&v[3]) : 0,
                                 floats(&v[4]), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    }
    for (int i = 0; ok && i < 4; i++)
        if (v[i].obj && overlaps(&v[4], &v[i])) {
            PyErr_Format(PyExc_ValueError, "attention: the output overlaps %s", names[i]);
            ok = 0;
        }
    if (ok) {
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = pl_attention_run(&p, v[0].buf, v[1].buf, v[2].buf, v[3].obj ? v[3].buf : NULL, v[4].buf);
        Py_END_ALLOW_THREADS
        if (status != 0) { PyErr_NoMemory(); ok = 0; }
    }
    for (int i = 0; i < got; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* matmul(a, b, y, (batch, m, k, n, sa_b, sa_m, sb_b, sb_k, sb_n)): batched matrix products (pl_matmul), a and b
 * read at the given strides (in floats) from the start of their buffers */
static PyObject *py_matmul(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[3];
    pl_matmul p;
    if (!PyArg_ParseTuple(args, "OOO(LLLLLLLLL)", &obj[0], &obj[1], &obj[2], &p.batch, &p.m, &p.k, &p.n, &p.sa_b,
                          &p.sa_m, &p.sb_b, &p.sb_k, &p.sb_n))
        return NULL;
    static const char *const names[3] = {"the left operand", "the right operand", "the output"};
    Py_buffer v[3];
    int got = 0, ok = 1;
    for (; got < 3; got++)
        if (get_floats(obj[got], &v[got], got == 2, names[got]) != 0) { ok = 0; break; }
    char err[ERR_CAP];
    if (ok && pl_matmul_check(&p, floats(&v[0]), floats(&v[1]), floats(&v[2]), err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    }
    for (int i = 0; ok && i < 2; i++)
        if (overlaps(&v[2], &v[i])) {
            PyErr_Format(PyExc_ValueError, "matmul: the output overlaps %s", names[i]);
            ok = 0;
        }
    if (ok) {
        int status;
        Py_BEGIN_ALLOW_THREADS
        status = pl_matmul_run(&p, v[0].buf, v[1].buf, v[2].buf);
        Py_END_ALLOW_THREADS
        if (status != 0) { PyErr_NoMemory(); ok = 0; }
    }
    for (int i = 0; i < got; i++) PyBuffer_Release(&v[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* qgemm(x, w, offset, mult, y, (m, k, n, ldx, zy, lo, hi)[, (batch, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho,
 * wo, zx)]): the int8 GEMM with requantization (qgemm.c), its rows x's or, with the second tuple, the patches of the
 * NHWC convolution input x; x and y uint8, w int8, offset int32, mult float32, each C-contiguous (the Python side
 * guarantees the dtypes). */
static int get_bytes(PyObject *obj, Py_buffer *view, int writable, const char *what)
{
    if (PyObject_GetBuffer(obj, view, writable ? (PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) : PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Format(PyExc_ValueError, "%s must be a %sC-contiguous array", what, writable ? "writable " : "");
        return -1;
    }
    return 0;
}

/* The five buffers of the int8 GEMM and depthwise kernels (input, weight, offsets, multipliers, output; the output
 * written, none of it shared with the others) into v, with their lengths in items of item[i] bytes; 0, or -1 with
 * the error set and nothing held. */
static const char *const kernel_buffers[5] = {"the input", "the weight", "the offsets", "the multipliers",
                                              "the output"};

static int take_kernel_buffers(PyObject *const obj[5], Py_buffer v[5], const size_t item[5], size_t len[5],
                               const char *what)
{
    int got = 0;
    for (; got < 5; got++)
        if (get_bytes(obj[got], &v[got], got == 4, kernel_buffers[got]) != 0) break;
    for (int i = 0; got == 5 && i < 4; i++)
        if (overlaps(&v[4], &v[i])) {
            PyErr_Format(PyExc_ValueError, "%s: the output overlaps %s", what, kernel_buffers[i]);
            got = -got;
        }
    if (got != 5) {
        for (int i = 0; i < (got < 0 ? -got : got); i++) PyBuffer_Release(&v[i]);
        return -1;
    }
    for (int i = 0; i < 5; i++) len[i] = (size_t)v[i].len / item[i];
    return 0;
}

static void release_kernel_buffers(Py_buffer v[5])
{
    for (int i = 0; i < 5; i++) PyBuffer_Release(&v[i]);
}

static PyObject *py_qgemm(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[5], *conv = NULL;
    pl_qgemm p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTuple(args, "OOOOO(LLLLLLL)|O!", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &p.m, &p.k, &p.n,
                          &p.ldx, &p.zy, &p.lo, &p.hi, &PyTuple_Type, &conv))
        return NULL;
    if (conv) {
        if (!PyArg_ParseTuple(conv, "LLLLLLLLLLLLLLL;qgemm: the convolution tuple needs 15 integers", &p.batch, &p.h,
                              &p.w, &p.c, &p.kh, &p.kw, &p.sh, &p.sw, &p.dh, &p.dw, &p.top, &p.left, &p.ho, &p.wo,
                              &p.zx))
            return NULL;
        p.conv = 1;
    }
    static const size_t item[5] = {1, 1, 4, 4, 1};
    Py_buffer v[5];
    size_t len[5];
    if (take_kernel_buffers(obj, v, item, len, "qgemm") != 0) return NULL;
    char err[ERR_CAP];
    int ok = pl_qgemm_check(&p, len[0], len[1], len[2], len[3], len[4], err, sizeof err) == 0;
    if (!ok) PyErr_SetString(PyExc_ValueError, err);
    if (ok) {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = pl_qgemm_run(&p, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf);
        Py_END_ALLOW_THREADS
        if (rc != 0) {
            PyErr_SetString(PyExc_MemoryError, "qgemm: out of memory for a convolution's gathered rows");
            ok = 0;
        }
    }
    release_kernel_buffers(v);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* qdepthwise(x, w, offset, mult, y, (batch, h, w, c, kh, kw, sh, sw, dh, dw, top, left, ho, wo, zx, zy, lo, hi)):
 * the int8 depthwise convolution (qdepthwise.c); x and y uint8 NHWC, w int32 (kh * kw, c), offset int32, mult
 * float32, each C-contiguous. */
static PyObject *py_qdepthwise(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[5];
    pl_qdepthwise p;
    if (!PyArg_ParseTuple(args, "OOOOO(LLLLLLLLLLLLLLLLLL)", &obj[0], &obj[1], &obj[2], &obj[3], &obj[4], &p.batch,
                          &p.h, &p.w, &p.c, &p.kh, &p.kw, &p.sh, &p.sw, &p.dh, &p.dw, &p.top, &p.left, &p.ho, &p.wo,
                          &p.zx, &p.zy, &p.lo, &p.hi))
        return NULL;
    static const size_t item[5] = {1, 4, 4, 4, 1};
    Py_buffer v[5];
    size_t len[5];
    if (take_kernel_buffers(obj, v, item, len, "qdepthwise") != 0) return NULL;
    char err[ERR_CAP];
    const int ok = pl_qdepthwise_check(&p, len[0], len[1], len[2], len[3], len[4], err, sizeof err) == 0;
    if (!ok) {
        PyErr_SetString(PyExc_ValueError, err);
    } else {
        Py_BEGIN_ALLOW_THREADS
        pl_qdepthwise_run(&p, v[0].buf, v[1].buf, v[2].buf, v[3].buf, v[4].buf);
        Py_END_ALLOW_THREADS
    }
    release_kernel_buffers(v);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* qelementwise(op, a, b, y, (count, channels, pixels, za, zb, zy, lo, hi), (sa, sb, inv)): the elementwise int8
 * kernels (qelementwise.c); b None except for PL_Q_ADD; each C-contiguous, of the dtypes the operation reads and
 * writes (the Python side guarantees them). */
static PyObject *py_qelementwise(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *obj[3];
    pl_qelementwise p;
    double sa, sb, inv;
    if (!PyArg_ParseTuple(args, "LOOO(LLLLLLLL)(ddd)", &p.op, &obj[0], &obj[1], &obj[2], &p.count, &p.channels,
                          &p.pixels, &p.za, &p.zb, &p.zy, &p.lo, &p.hi, &sa, &sb, &inv))
        return NULL;
    p.sa = (float)sa, p.sb = (float)sb, p.inv = (float)inv;
    static const char *const names[3] = {"the first input", "the second input", "the output"};
    const int quantize = p.op == PL_Q_QUANTIZE || p.op == PL_Q_QUANTIZE_NHWC;
    const size_t item[3] = {quantize ? 4 : 1, 1, p.op == PL_Q_DEQUANTIZE ? 4 : 1};
    Py_buffer v[3];
    memset(v, 0, sizeof v);
    int ok = 1;
    for (int i = 0; ok && i < 3; i++)
        if (obj[i] != Py_None && get_bytes(obj[i], &v[i], i == 2, names[i]) != 0) ok = 0;
    if (ok && (!v[0].obj || !v[2].obj || (p.op == PL_Q_ADD && !v[1].obj))) {
        PyErr_SetString(PyExc_ValueError, "qelementwise: a buffer the operation needs is None");
        ok = 0;
    }
    char err[ERR_CAP];
    if (ok && pl_qelementwise_check(&p, (size_t)v[0].len / item[0], v[1].obj ? (size_t)v[1].len / item[1] : 0,
                                    (size_t)v[2].len / item[2], err, sizeof err) != 0) {
        PyErr_SetString(PyExc_ValueError, err);
        ok = 0;
    }
    /* The output may be an input itself (an in-place addition reads each value before writing it), not part of one */
    for (int i = 0; ok && i < 2; i++)
        if (v[i].obj && overlaps(&v[2], &v[i]) && !(v[i].buf == v[2].buf && item[i] == item[2])) {
            PyErr_Format(PyExc_ValueError, "qelementwise: the output overlaps %s", names[i]);
            ok = 0;
        }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        pl_qelementwise_run(&p, v[0].buf, v[1].obj ? v[1].buf : NULL, v[2].buf);
        Py_END_ALLOW_THREADS
    }
    for (int i = 0; i < 3; i++)
        if (v[i].obj) PyBuffer_Release(&v[i]);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

/* qmaxpool(x, y, (n, h, w, c, kh, kw, sh, sw, pt, pl, dh, dw, ho, wo)): max pooling of uint8 NHWC images (qpool.c). */
static PyObject *py_qmaxpool(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *xo, *yo;
    pl_pool p;
    memset(&p, 0, sizeof p);
    if (!PyArg_ParseTuple(args, "OO(LLLLLLLLLLLLLL)", &xo, &yo, &p.n, &p.h, &p.w, &p.c, &p.kh, &p.kw, &p.sh, &p.sw,
                          &p.pt, &p.pl, &p.dh, &p.dw, &p.ho, &p.wo))
        return NULL;
    p.kind = PL_POOL_MAX;
    Py_buffer x, y;
    if (get_bytes(xo, &x, 0, "the input") != 0) return NULL;
    if (get_bytes(yo, &y, 1, "the output") != 0) { PyBuffer_Release(&x); return NULL; }
    char err[ERR_CAP];
    int ok = pl_pool_check(&p, (size_t)x.len, (size_t)y.len, err, sizeof err) == 0;
    if (!ok) PyErr_SetString(PyExc_ValueError, err);
    else if (overlaps(&x, &y)) { ok = 0; PyErr_SetString(PyExc_ValueError, "qmaxpool: the output overlaps the input"); }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        pl_qmaxpool_run(&p, x.buf, y.buf);
        Py_END_ALLOW_THREADS
    }
    PyBuffer_Release(&y);
    PyBuffer_Release(&x);
    if (!ok) return NULL;
    Py_RETURN_NONE;
}

static PyObject *py_qgemm_kernel(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    static const char *const names[PL_QGEMM_KERNELS] = {"plain C", "AVX-512 VNNI", "AVX-VNNI",
                                                        "AVX-512 VNNI at 256 bits", "NEON dot product",
                                                        "AVX2 (no dot product)"};
    const int kernel = pl_qgemm_kernel();
    return PyUnicode_FromString(kernel >= 0 && kernel < PL_QGEMM_KERNELS ? names[kernel] : "unknown");
}

/* ------------------------------------------------------------------------------------------------ plans */

#define STEP_INTS 40  /* int64 values per step in make_plan's encoding (kernels.py's PlanBuilder writes it) */
#define STEP_FLOATS 3

/* A plan and the buffers it holds between runs (hold_buffer: its weights), so that a run is handed only the rest. */
typedef struct {
    pl_plan plan;
    Py_buffer *held;  /* nbuf entries; obj NULL where the run gives the buffer */
} plan_box;

static void box_free(plan_box *box)
{
    if (box->held)
        for (int64_t i = 0; i < box->plan.nbuf; i++)
            if (box->held[i].obj) PyBuffer_Release(&box->held[i]);
    free(box->held);
    free(box->plan.steps);
    free(box->plan.buf_len);
    free(box->plan.buf_writable);
    free(box);
}

static void plan_free(PyObject *capsule)
{
    plan_box *box = PyCapsule_GetPointer(capsule, "ptlite.native.plan");
    if (box) box_free(box);
}

static pl_ref ref_at(const int64_t *v) { pl_ref r = {v[0], v[1], v[2]}; return r; }

static void decode_step(const int64_t *v, const double *f, pl_step *s)
{
    memset(s, 0, sizeof *s);
    s->kind = (int)v[0];
    s->in0 = ref_at(v + 1);
    s->in1 = ref_at(v + 4);
    s->in2 = ref_at(v + 7);
    s->out = ref_at(v + 10);
    const int64_t *q = v + 13;
    pl_epilogue ep = {0, (float)f[0], (float)f[1]};
    switch (s->kind) {
    case PL_STEP_CONV: {
        pl_conv c = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13], q[14],
                     q[15], q[16], q[17], q[18], ep, 0};
        c.ep.act = (int)q[19];
        c.planar = q[20];
        s->u.conv = c;
        s->res = ref_at(q + 21);
        s->scale = ref_at(q + 24);
        break;
    }
    case PL_STEP_POOL:
    case PL_STEP_QMAXPOOL: {
        pl_pool p = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13],
                     (int)q[14], (float)f[2]};
        s->u.pool = p;
        break;
    }
    case PL_STEP_BINARY:
        s->u.bin.op = (int)q[0];
        s->u.bin.ep = ep;
        s->u.bin.ep.act = (int)q[1];
        s->u.bin.images = q[2];
        break;
    case PL_STEP_UNARY:
        s->u.un.ep = ep;
        s->u.un.ep.act = (int)q[0];
        break;
    case PL_STEP_MEAN:
        s->u.mean.n = q[0];
        s->u.mean.rows = q[1];
        s->u.mean.c = q[2];
        break;
    case PL_STEP_RESIZE: {
        pl_resize r = {q[0], q[1], q[2], q[3], q[4], q[5]};
        s->u.resize = r;
        break;
    }
    case PL_STEP_ROWS:
        s->u.rows.norm = q[0];
        s->u.rows.rows = q[1];
        s->u.rows.n = q[2];
        s->u.rows.eps = (float)f[0];
        break;
    case PL_STEP_COPY:
        s->u.copy.ndim = q[0];
        for (int d = 0; d < PL_COPY_MAX_DIMS; d++) {
            s->u.copy.shape[d] = q[1 + d];
            s->u.copy.stride[d] = q[1 + PL_COPY_MAX_DIMS + d];
        }
        break;
    case PL_STEP_BROADCAST:
        s->u.broadcast.op = q[0];
        s->u.broadcast.ep = ep;
        s->u.broadcast.ep.act = (int)q[1];
        s->u.broadcast.ndim = q[2];
        for (int d = 0; d < PL_COPY_MAX_DIMS; d++) {
            s->u.broadcast.shape[d] = q[3 + d];
            s->u.broadcast.sa[d] = q[3 + PL_COPY_MAX_DIMS + d];
            s->u.broadcast.sb[d] = q[3 + 2 * PL_COPY_MAX_DIMS + d];
        }
        break;
    case PL_STEP_REDUCE:
        s->u.reduce.outer = q[0];
        s->u.reduce.r = q[1];
        s->u.reduce.inner = q[2];
        s->u.reduce.scale = (float)f[0];
        break;
    case PL_STEP_RNN: {
        pl_rnn_stack r = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7]};
        s->u.rnn.r = r;
        s->u.rnn.c0 = ref_at(q + 8);
        break;
    }
    case PL_STEP_PAD:
        s->u.pad.ndim = q[0];
        for (int d = 0; d < PL_COPY_MAX_DIMS; d++) {
            s->u.pad.in[d] = q[1 + d];
            s->u.pad.out[d] = q[1 + PL_COPY_MAX_DIMS + d];
            s->u.pad.before[d] = q[1 + 2 * PL_COPY_MAX_DIMS + d];
        }
        s->u.pad.value = (float)f[0];
        break;
    case PL_STEP_MATMUL: {
        pl_matmul mm = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8]};
        s->u.matmul = mm;
        break;
    }
    case PL_STEP_SLICE: {
        pl_slice sl = {q[0], q[1], q[2], q[3]};
        s->u.slice = sl;
        break;
    }
    case PL_STEP_QGEMM: {
        pl_qgemm g = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13], q[14],
                      q[15], q[16], q[17], q[18], q[19], q[20], q[21], q[22]};
        s->u.qgemm = g;
        break;
    }
    case PL_STEP_QDEPTHWISE: {
        pl_qdepthwise d = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], q[9], q[10], q[11], q[12], q[13],
                           q[14], q[15], q[16], q[17]};
        s->u.qdepthwise = d;
        break;
    }
    case PL_STEP_QELEMENTWISE: {
        pl_qelementwise e = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], q[8], (float)f[0], (float)f[1],
                             (float)f[2]};
        s->u.qel = e;
        break;
    }
    case PL_STEP_ATTENTION: {
        pl_attention a = {q[0], q[1], q[2], q[3], q[4], q[5], q[6], {q[7], q[8], q[9], q[10]}, (float)f[0]};
        s->u.attn.a = a;
        s->u.attn.mask = ref_at(q + 11);
        break;
    }
    }
}

/* make_plan(ints, floats, buf_lens, writable) -> plan: ints int64 (steps x STEP_INTS), floats float64
 * (steps x STEP_FLOATS), buf_lens int64 (floats each buffer holds), writable uint8 per buffer. ValueError naming
 * the first step that does not check out. */
static PyObject *py_make_plan(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer ints, floats, lens, writable;
    if (!PyArg_ParseTuple(args, "y*y*y*y*", &ints, &floats, &lens, &writable)) return NULL;
    PyObject *result = NULL;
    const int64_t nsteps = (int64_t)(ints.len / (Py_ssize_t)(STEP_INTS * sizeof(int64_t)));
    const int64_t nbuf = (int64_t)(lens.len / (Py_ssize_t)sizeof(int64_t));
    if (ints.len != (Py_ssize_t)(nsteps * STEP_INTS * sizeof(int64_t))
        || floats.len != (Py_ssize_t)(nsteps * STEP_FLOATS * sizeof(double)) || writable.len != nbuf || nbuf < 1) {
        PyErr_SetString(PyExc_ValueError, "plan: the step and buffer arrays do not agree in length");
        goto done;
    }
    plan_box *box = calloc(1, sizeof *box);
    if (!box) { PyErr_NoMemory(); goto done; }
    pl_plan *plan = &box->plan;
    plan->nbuf = nbuf;
    plan->nsteps = nsteps;
    plan->buf_len = malloc((size_t)nbuf * sizeof(int64_t));
    plan->buf_writable = malloc((size_t)nbuf);
    plan->steps = calloc((size_t)(nsteps ? nsteps : 1), sizeof(pl_step));
    box->held = calloc((size_t)nbuf, sizeof(Py_buffer));
    if (!plan->buf_len || !plan->buf_writable || !plan->steps || !box->held) {
        box_free(box);
        PyErr_NoMemory();
        goto done;
    }
    memcpy(plan->buf_len, lens.buf, (size_t)nbuf * sizeof(int64_t));
    memcpy(plan->buf_writable, writable.buf, (size_t)nbuf);
    for (int64_t i = 0; i < nsteps; i++)
        decode_step((const int64_t *)ints.buf + i * STEP_INTS, (const double *)floats.buf + i * STEP_FLOATS,
                    &plan->steps[i]);
    char err[ERR_CAP];
    if (pl_plan_check(plan, err, sizeof err) != 0) {
        box_free(box);
        PyErr_SetString(PyExc_ValueError, err);
        goto done;
    }
    result = PyCapsule_New(box, "ptlite.native.plan", plan_free);
    if (!result) box_free(box);
done:
    PyBuffer_Release(&ints);
    PyBuffer_Release(&floats);
    PyBuffer_Release(&lens);
    PyBuffer_Release(&writable);
    return result;
}

/* run_plan(plan, buffers): buffers in the plan's numbering (float32, C-contiguous, each at least as long as the
 * plan says, the writable ones writable); runs every step with the GIL released. */
static PyObject *py_run_plan(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *seq, *times_obj = Py_None;
    if (!PyArg_ParseTuple(args, "OO|O", &capsule, &seq, &times_obj)) return NULL;
    plan_box *box = PyCapsule_GetPointer(capsule, "ptlite.native.plan");
    if (!box) return NULL;
    const pl_plan *plan = &box->plan;
    Py_buffer times = {0};
    if (times_obj != Py_None) {
        if (PyObject_GetBuffer(times_obj, &times, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) != 0)
            return NULL;
        if (times.itemsize != 8 || !times.format || strcmp(times.format, "d") != 0
            || times.len != plan->nsteps * 8) {
            PyBuffer_Release(&times);
            return PyErr_Format(PyExc_ValueError, "run_plan: times must be a float64 array of %lld values",
                                (long long)plan->nsteps);
        }
    }
    PyObject *fast = PySequence_Fast(seq, "run_plan: buffers must be a sequence");
    if (!fast) { if (times.obj) PyBuffer_Release(&times); return NULL; }
    if (PySequence_Fast_GET_SIZE(fast) != plan->nbuf) {
        Py_DECREF(fast);
        if (times.obj) PyBuffer_Release(&times);
        return PyErr_Format(PyExc_ValueError, "run_plan: %zd buffers given, the plan has %lld",
                            PySequence_Fast_GET_SIZE(fast), (long long)plan->nbuf);
    }
    Py_buffer *views = calloc((size_t)plan->nbuf, sizeof(Py_buffer));
    float **bufs = calloc((size_t)plan->nbuf, sizeof(float *));
    int64_t got = 0, rc = 0;
    if (!views || !bufs) { PyErr_NoMemory(); goto done; }
    for (; got < plan->nbuf; got++) {
        PyObject *item = PySequence_Fast_GET_ITEM(fast, got);
        if (item == Py_None && box->held[got].obj) {  /* a buffer the plan holds */
            bufs[got] = box->held[got].buf;
            continue;
        }
        char what[64];
        snprintf(what, sizeof what, "buffer %lld", (long long)got);
        if (get_floats(item, &views[got], plan->buf_writable[got], what) != 0) goto done;
        if ((int64_t)floats(&views[got]) < plan->buf_len[got]) {
            PyErr_Format(PyExc_ValueError, "run_plan: buffer %lld holds %zu floats, the plan needs %lld",
                         (long long)got, floats(&views[got]), (long long)plan->buf_len[got]);
            got++;
            goto done;
        }
        bufs[got] = views[got].buf;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = pl_plan_run(plan, bufs, times.obj ? times.buf : NULL);
    Py_END_ALLOW_THREADS
    if (rc != 0) PyErr_NoMemory();
done:
    for (int64_t i = 0; i < got && views; i++)
        if (views[i].obj) PyBuffer_Release(&views[i]);
    free(views);
    free(bufs);
    Py_DECREF(fast);
    if (times.obj) PyBuffer_Release(&times);
    if (PyErr_Occurred()) return NULL;
    Py_RETURN_NONE;
}

/* hold_buffer(plan, index, array): the plan keeps a read-only buffer (a weight) for its runs, which then pass None
 * at that index */
static PyObject *py_hold_buffer(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *capsule, *obj;
    Py_ssize_t index;
    if (!PyArg_ParseTuple(args, "OnO", &capsule, &index, &obj)) return NULL;
    plan_box *box = PyCapsule_GetPointer(capsule, "ptlite.native.plan");
    if (!box) return NULL;
    if (index < 0 || index >= box->plan.nbuf || box->plan.buf_writable[index])
        return PyErr_Format(PyExc_ValueError, "hold_buffer: %zd is not a read-only buffer of the plan", index);
    Py_buffer view;
    if (get_floats(obj, &view, 0, "the held buffer") != 0) return NULL;
    if ((int64_t)floats(&view) < box->plan.buf_len[index]) {
        PyBuffer_Release(&view);
        return PyErr_Format(PyExc_ValueError, "hold_buffer: %zu floats, the plan needs %lld", floats(&view),
                            (long long)box->plan.buf_len[index]);
    }
    if (box->held[index].obj) PyBuffer_Release(&box->held[index]);
    box->held[index] = view;
    Py_RETURN_NONE;
}

static PyObject *py_set_num_threads(PyObject *self, PyObject *arg)
{
    (void)self;
    long n = PyLong_AsLong(arg);
    if (n == -1 && PyErr_Occurred()) return NULL;
    Py_BEGIN_ALLOW_THREADS
    pl_set_threads((int)(n < 1 ? 1 : (n > 1024 ? 1024 : n)));
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

static PyObject *py_get_num_threads(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    return PyLong_FromLong(pl_get_threads());
}

static PyObject *py_isa(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    return PyUnicode_FromString(pl_isa_current()->name);
}

/* isas() -> [(name, supported by this CPU, vector floats, gemm mr, gemm nr)] */
static PyObject *py_isas(PyObject *self, PyObject *unused)
{
    (void)self; (void)unused;
    size_t n;
    const pl_isa *const *all = pl_isa_all(&n);
    PyObject *list = PyList_New((Py_ssize_t)n);
    if (!list) return NULL;
    for (size_t i = 0; i < n; i++) {
        PyObject *item = Py_BuildValue("(sOiii)", all[i]->name, pl_isa_supported(all[i]) ? Py_True : Py_False,
                                       all[i]->vw, all[i]->mr, all[i]->nr);
        if (!item) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, (Py_ssize_t)i, item);
    }
    return list;
}

static PyObject *py_select_isa(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    if (pl_isa_select(name) != 0)
        return PyErr_Format(PyExc_ValueError, "instruction set %R is unknown or not supported by this CPU", arg);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"conv2d", py_conv2d, METH_VARARGS, "NHWC 2-D convolution (dense or depthwise) with a fused epilogue."},
    {"pool2d", py_pool2d, METH_VARARGS, "NHWC max / average pooling."},
    {"softmax", py_softmax, METH_VARARGS, "Softmax over each row."},
    {"layer_norm", py_layer_norm, METH_VARARGS, "Layer norm over each row, with an optional weight and bias."},
    {"resize", py_resize, METH_VARARGS, "NHWC bilinear resizing by a table of source rows, columns and weights."},
    {"binary", py_binary, METH_VARARGS, "Elementwise add/sub/mul/div with a broadcast row and a fused epilogue."},
    {"unary", py_unary, METH_VARARGS, "An activation, or exp, elementwise."},
    {"mean_rows", py_mean_rows, METH_VARARGS, "Per image, the mean over rows of a (rows, c) matrix."},
    {"rnn", py_rnn, METH_VARARGS, "One direction of an LSTM, GRU or Elman RNN layer."},
    {"broadcast", py_broadcast, METH_VARARGS, "Elementwise arithmetic with broadcasting, by strides."},
    {"reduce", py_reduce, METH_VARARGS, "A scaled sum over the middle dimension of (outer, r, inner)."},
    {"attention", py_attention, METH_VARARGS, "Scaled dot-product attention with an optional additive mask."},
    {"pad", py_pad, METH_VARARGS, "Constant padding (a negative amount crops)."},
    {"qgemm", py_qgemm, METH_VARARGS, "The int8 GEMM with requantization (uint8 x int8 -> uint8)."},
    {"qdepthwise", py_qdepthwise, METH_VARARGS, "The int8 depthwise convolution with requantization (NHWC uint8)."},
    {"qelementwise", py_qelementwise, METH_VARARGS, "Elementwise int8 kernels: add, quantize, dequantize."},
    {"qmaxpool", py_qmaxpool, METH_VARARGS, "Max pooling of uint8 NHWC images."},
    {"qgemm_kernel", py_qgemm_kernel, METH_NOARGS, "The int8 GEMM's micro-kernel here (its instructions)."},
    {"matmul", py_matmul, METH_VARARGS, "Batched matrix products, the right operand read at any strides."},
    {"hold_buffer", py_hold_buffer, METH_VARARGS, "Keep a read-only buffer in a plan for its runs."},
    {"make_plan", py_make_plan, METH_VARARGS, "Validate a planned region's steps; returns the plan."},
    {"run_plan", py_run_plan, METH_VARARGS, "Run a plan's steps over its buffers (the GIL released)."},
    {"set_num_threads", py_set_num_threads, METH_O, "Threads the kernels use (the caller's included)."},
    {"get_num_threads", py_get_num_threads, METH_NOARGS, "Threads the kernels use."},
    {"isa", py_isa, METH_NOARGS, "The instruction set whose kernels run."},
    {"isas", py_isas, METH_NOARGS, "Every instruction set built in: (name, supported, vector floats, mr, nr)."},
    {"select_isa", py_select_isa, METH_O, "Run another supported instruction set's kernels."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_native", "ptlite's native CPU kernels.", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__native(void)
{
    PyObject *m = PyModule_Create(&module);
    if (!m) return NULL;
    if (PyModule_AddIntConstant(m, "ACT_NONE", PL_ACT_NONE) || PyModule_AddIntConstant(m, "ACT_RELU", PL_ACT_RELU)
        || PyModule_AddIntConstant(m, "ACT_CLAMP", PL_ACT_CLAMP)
        || PyModule_AddIntConstant(m, "ACT_HARDSWISH", PL_ACT_HARDSWISH)
        || PyModule_AddIntConstant(m, "ACT_SILU", PL_ACT_SILU)
        || PyModule_AddIntConstant(m, "ACT_SIGMOID", PL_ACT_SIGMOID)
        || PyModule_AddIntConstant(m, "ACT_TANH", PL_ACT_TANH)
        || PyModule_AddIntConstant(m, "ACT_HARDSIGMOID", PL_ACT_HARDSIGMOID)
        || PyModule_AddIntConstant(m, "ACT_GELU", PL_ACT_GELU)
        || PyModule_AddIntConstant(m, "ACT_GELU_TANH", PL_ACT_GELU_TANH)
        || PyModule_AddIntConstant(m, "ACT_ERF", PL_ACT_ERF)
        || PyModule_AddIntConstant(m, "LSTM", PL_LSTM) || PyModule_AddIntConstant(m, "GRU", PL_GRU)
        || PyModule_AddIntConstant(m, "RNN_TANH", PL_RNN_TANH) || PyModule_AddIntConstant(m, "RNN_RELU", PL_RNN_RELU)
        || PyModule_AddIntConstant(m, "POOL_MAX", PL_POOL_MAX) || PyModule_AddIntConstant(m, "POOL_AVG", PL_POOL_AVG)
        || PyModule_AddIntConstant(m, "POOL_AVG_EXCLUDE_PAD", PL_POOL_AVG_EXCLUDE_PAD)
        || PyModule_AddIntConstant(m, "ADD", PL_ADD) || PyModule_AddIntConstant(m, "SUB", PL_SUB)
        || PyModule_AddIntConstant(m, "MUL", PL_MUL) || PyModule_AddIntConstant(m, "DIV", PL_DIV)
        || PyModule_AddIntConstant(m, "ROWS", PL_ROWS) || PyModule_AddIntConstant(m, "PANELS", PL_PANELS)
        || PyModule_AddIntConstant(m, "WINOGRAD", PL_WINOGRAD)
        || PyModule_AddIntConstant(m, "WINOGRAD_2X2", PL_WINOGRAD_2X2)
        || PyModule_AddIntConstant(m, "COPY_ROWS_BELOW_CHANNELS", PL_COPY_ROWS_BELOW_CHANNELS)
        || PyModule_AddIntConstant(m, "COPY_ROWS_MAX_K", PL_COPY_ROWS_MAX_K)
        || PyModule_AddIntConstant(m, "PANEL", PL_PANEL) || PyModule_AddIntConstant(m, "STEP_INTS", STEP_INTS)
        || PyModule_AddIntConstant(m, "STEP_FLOATS", STEP_FLOATS)
        || PyModule_AddIntConstant(m, "STEP_CONV", PL_STEP_CONV) || PyModule_AddIntConstant(m, "STEP_POOL", PL_STEP_POOL)
        || PyModule_AddIntConstant(m, "STEP_BINARY", PL_STEP_BINARY)
        || PyModule_AddIntConstant(m, "STEP_UNARY", PL_STEP_UNARY)
        || PyModule_AddIntConstant(m, "STEP_MEAN", PL_STEP_MEAN)
        || PyModule_AddIntConstant(m, "STEP_RESIZE", PL_STEP_RESIZE)
        || PyModule_AddIntConstant(m, "STEP_ROWS", PL_STEP_ROWS) || PyModule_AddIntConstant(m, "STEP_COPY", PL_STEP_COPY)
        || PyModule_AddIntConstant(m, "STEP_ATTENTION", PL_STEP_ATTENTION)
        || PyModule_AddIntConstant(m, "STEP_BROADCAST", PL_STEP_BROADCAST)
        || PyModule_AddIntConstant(m, "STEP_REDUCE", PL_STEP_REDUCE)
        || PyModule_AddIntConstant(m, "STEP_RNN", PL_STEP_RNN)
        || PyModule_AddIntConstant(m, "STEP_QGEMM", PL_STEP_QGEMM)
        || PyModule_AddIntConstant(m, "STEP_QDEPTHWISE", PL_STEP_QDEPTHWISE)
        || PyModule_AddIntConstant(m, "STEP_QELEMENTWISE", PL_STEP_QELEMENTWISE)
        || PyModule_AddIntConstant(m, "STEP_QMAXPOOL", PL_STEP_QMAXPOOL)
        || PyModule_AddIntConstant(m, "STEP_SLICE", PL_STEP_SLICE)
        || PyModule_AddIntConstant(m, "STEP_MATMUL", PL_STEP_MATMUL)
        || PyModule_AddIntConstant(m, "STEP_PAD", PL_STEP_PAD)
        || PyModule_AddIntConstant(m, "COPY_MAX_DIMS", PL_COPY_MAX_DIMS)) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
