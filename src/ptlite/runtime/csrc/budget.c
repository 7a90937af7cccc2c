/* ptlite.runtime._budget: a cap on the NumPy memory one call of a model holds, checked before each allocation.
 *
 * NumPy lets a program choose, per context, the allocator its arrays' data comes from (NEP 49: a "mem handler", a
 * capsule each array keeps a reference to, so that its data is freed by the allocator that made it). Each Budget has
 * a handler of its own whose context is the Budget's account. While the Budget is entered, NumPy allocates through
 * it: each block carries a small header with its size; an allocation that would take the account's live bytes past
 * its cap is refused (NULL: NumPy raises MemoryError) and the account records the refusal, so that the caller can
 * say which limit refused what. Freeing a block gives its bytes back, whenever and in whichever thread that happens
 * (the account outlives the Budget while blocks charged to it, or arrays holding its handler, live). A context copied
 * while the Budget is entered (contextvars.copy_context) allocates through it too, and is charged.
 *
 * NumPy's C API is reached through its `_ARRAY_API` table, whose entries keep their numbers across releases
 * (PyDataMem_SetHandler is entry 304 and PyDataMem_GetHandler 305 since NumPy 1.22), so no NumPy headers are needed
 * to build this. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <limits.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    atomic_llong live;       /* bytes of the blocks charged to this account and not yet freed */
    atomic_llong peak;
    long long cap;           /* < 0: no cap (counted only) */
    atomic_llong refusals;   /* how many allocations were refused */
    atomic_llong refused;    /* the size of the last one refused */
    atomic_llong held;       /* the live bytes when it was refused */
    atomic_long refs;        /* the Budget's, the handler capsule's, and one per live block */
} Account;

/* What precedes each block: kept to the platform's strictest alignment, so that the data NumPy gets is aligned as
 * malloc's would be. */
typedef union {
    max_align_t align;
    size_t size;
} Header;

static void account_release(Account *a)
{
    if (atomic_fetch_sub(&a->refs, 1) == 1) free(a);
}

/* Charge n bytes, or refuse them (0) where the live bytes would pass the cap; never overflows. */
static int charge(Account *a, size_t size)
{
    const long long n = size > (size_t)LLONG_MAX ? LLONG_MAX : (long long)size;
    long long live = atomic_load(&a->live);
    do {
        if ((a->cap >= 0 && (n > a->cap || live > a->cap - n)) || (a->cap < 0 && live > LLONG_MAX - n)) {
            atomic_store(&a->refused, n);
            atomic_store(&a->held, live);
            atomic_fetch_add(&a->refusals, 1);
            return 0;
        }
    } while (!atomic_compare_exchange_weak(&a->live, &live, live + n));
    const long long now = live + n;
    long long peak = atomic_load(&a->peak);
    while (now > peak && !atomic_compare_exchange_weak(&a->peak, &peak, now)) {
    }
    atomic_fetch_add(&a->refs, 1);
    return 1;
}

static void discharge(Account *a, size_t size)
{
    atomic_fetch_sub(&a->live, (long long)size);
    account_release(a);
}

static void *budget_malloc(void *ctx, size_t size)
{
    Account *a = ctx;
    if (size > SIZE_MAX - sizeof(Header) || !charge(a, size)) return NULL;
    Header *h = malloc(sizeof(Header) + size);
    if (!h) {
        discharge(a, size);
        return NULL;
    }
    h->size = size;
    return h + 1;
}

static void *budget_calloc(void *ctx, size_t nelem, size_t elsize)
{
    Account *a = ctx;
    if (elsize && nelem > (SIZE_MAX - sizeof(Header)) / elsize) return NULL;
    const size_t size = nelem * elsize;
    if (!charge(a, size)) return NULL;
    Header *h = calloc(1, sizeof(Header) + size);
    if (!h) {
        discharge(a, size);
        return NULL;
    }
    h->size = size;
    return h + 1;
}

static void budget_free(void *ctx, void *ptr, size_t size)
{
    (void)size;  /* the header's is the size charged */
    if (!ptr) return;
    Header *h = (Header *)ptr - 1;
    const size_t charged = h->size;
    free(h);
    discharge(ctx, charged);
}

static void *budget_realloc(void *ctx, void *ptr, size_t new_size)
{
    if (!ptr) return budget_malloc(ctx, new_size);
    Account *a = ctx;
    Header *h = (Header *)ptr - 1;
    const size_t old = h->size;
    if (new_size > SIZE_MAX - sizeof(Header)) return NULL;
    if (new_size > old) {  /* the growth charged like an allocation (the block keeps its one reference) */
        if (!charge(a, new_size - old)) return NULL;
        account_release(a);
    }
    Header *moved = realloc(h, sizeof(Header) + new_size);
    if (!moved) {
        if (new_size > old) atomic_fetch_sub(&a->live, (long long)(new_size - old));
        return NULL;
    }
    if (new_size < old) atomic_fetch_sub(&a->live, (long long)(old - new_size));
    moved->size = new_size;
    return moved + 1;
}

/* NumPy's PyDataMem_Handler, version 1, as its headers declare it. */
typedef struct {
    void *ctx;
    void *(*malloc)(void *ctx, size_t size);
    void *(*calloc)(void *ctx, size_t nelem, size_t elsize);
    void *(*realloc)(void *ctx, void *ptr, size_t new_size);
    void (*free)(void *ctx, void *ptr, size_t size);
} Allocator;

typedef struct {
    char name[127];
    uint8_t version;
    Allocator allocator;
} Handler;

static PyObject *(*set_handler)(PyObject *);
static PyObject *(*get_handler)(void);

static void handler_destroy(PyObject *capsule)
{
    Handler *h = PyCapsule_GetPointer(capsule, "mem_handler");
    if (!h) {
        PyErr_Clear();
        return;
    }
    account_release(h->allocator.ctx);
    free(h);
}

/* ------------------------------------------------------------------------------------------------- Budget */

typedef struct {
    PyObject_HEAD
    Account *account;
    PyObject *handler;   /* this budget's NumPy handler (a capsule holding a reference to the account) */
    PyObject *previous;  /* NumPy's handler when it was entered, NULL while not entered */
} Budget;

static PyObject *budget_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"cap", NULL};
    long long cap = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|L", names, &cap)) return NULL;
    Budget *self = (Budget *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    Account *a = calloc(1, sizeof(Account));
    Handler *h = malloc(sizeof(Handler));
    if (!a || !h) {
        free(a);
        free(h);
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    a->cap = cap < 0 ? -1 : cap;
    atomic_store(&a->refs, 2);  /* this object's and the handler's */
    memset(h, 0, sizeof *h);
    strcpy(h->name, "ptlite_budget");
    h->version = 1;
    h->allocator = (Allocator){a, budget_malloc, budget_calloc, budget_realloc, budget_free};
    self->account = a;
    self->handler = PyCapsule_New(h, "mem_handler", handler_destroy);
    if (!self->handler) {
        free(h);
        account_release(a);
        Py_DECREF(self);
        return NULL;
    }
    return (PyObject *)self;
}

static void budget_dealloc(Budget *self)
{
    Py_XDECREF(self->previous);
    Py_XDECREF(self->handler);
    if (self->account) account_release(self->account);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *budget_enter(Budget *self, PyObject *unused)
{
    (void)unused;
    if (self->previous) {
        PyErr_SetString(PyExc_RuntimeError, "this Budget is already entered");
        return NULL;
    }
    PyObject *previous = set_handler(self->handler);
    if (!previous) return NULL;
    self->previous = previous;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *budget_exit(Budget *self, PyObject *args)
{
    (void)args;
    if (!self->previous) Py_RETURN_FALSE;
    PyObject *now = get_handler();
    if (!now) return NULL;
    const int ours = now == self->handler;
    Py_DECREF(now);
    if (!ours) {  /* another budget entered after this one is still entered: leave the handlers as they are */
        PyErr_SetString(PyExc_RuntimeError, "Budgets must be exited in the reverse order of entering");
        return NULL;
    }
    PyObject *mine = set_handler(self->previous);
    if (!mine) return NULL;
    Py_DECREF(mine);
    Py_CLEAR(self->previous);
    Py_RETURN_FALSE;
}

static PyObject *get_ll(atomic_llong *v) { return PyLong_FromLongLong(atomic_load(v)); }
static PyObject *get_live(Budget *self, void *c) { (void)c; return get_ll(&self->account->live); }
static PyObject *get_peak(Budget *self, void *c) { (void)c; return get_ll(&self->account->peak); }
static PyObject *get_refusals(Budget *self, void *c) { (void)c; return get_ll(&self->account->refusals); }
static PyObject *get_refused(Budget *self, void *c) { (void)c; return get_ll(&self->account->refused); }
static PyObject *get_held(Budget *self, void *c) { (void)c; return get_ll(&self->account->held); }
static PyObject *get_cap(Budget *self, void *c)
{
    (void)c;
    if (self->account->cap < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->account->cap);
}

static PyMethodDef budget_methods[] = {
    {"__enter__", (PyCFunction)budget_enter, METH_NOARGS, "Charge this context's NumPy allocations to the budget."},
    {"__exit__", (PyCFunction)budget_exit, METH_VARARGS, "Stop charging them; blocks already charged stay so."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef budget_getset[] = {
    {"live", (getter)get_live, NULL, "Bytes of NumPy data charged to the budget and not freed yet.", NULL},
    {"peak", (getter)get_peak, NULL, "The most bytes live at once.", NULL},
    {"cap", (getter)get_cap, NULL, "The most bytes it lets live at once (None: no cap).", NULL},
    {"refusals", (getter)get_refusals, NULL, "How many allocations it refused.", NULL},
    {"refused", (getter)get_refused, NULL, "The size of the last allocation refused (0: none was).", NULL},
    {"held", (getter)get_held, NULL, "The live bytes when it refused that one.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BudgetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ptlite.runtime._budget.Budget",
    .tp_basicsize = sizeof(Budget),
    .tp_dealloc = (destructor)budget_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Budget(cap=-1): while entered (`with`), the NumPy data this context allocates is charged to it, and "
              "an allocation that would take the live bytes past cap fails with MemoryError (cap < 0: none does). "
              "Budgets entered one inside another must be exited in the reverse order.",
    .tp_new = budget_new,
    .tp_methods = budget_methods,
    .tp_getset = budget_getset,
};

/* ------------------------------------------------------------------------------------------------- module */

static int find_numpy_api(void)
{
    PyObject *numpy = PyImport_ImportModule("numpy._core._multiarray_umath");
    if (!numpy && PyErr_ExceptionMatches(PyExc_ModuleNotFoundError)) {
        PyErr_Clear();
        numpy = PyImport_ImportModule("numpy.core._multiarray_umath");
    }
    if (!numpy) return -1;
    PyObject *capsule = PyObject_GetAttrString(numpy, "_ARRAY_API");
    Py_DECREF(numpy);
    if (!capsule) return -1;
    void **api = PyCapsule_IsValid(capsule, NULL) ? PyCapsule_GetPointer(capsule, NULL) : NULL;
    Py_DECREF(capsule);
    if (!api) {
        PyErr_SetString(PyExc_ImportError, "NumPy's C API table is not where it should be");
        return -1;
    }
    unsigned int (*feature_version)(void) = (unsigned int (*)(void))api[211];
    if (feature_version() < 0x0f) {  /* NPY_1_22_API_VERSION: memory handlers */
        PyErr_SetString(PyExc_ImportError, "NumPy is older than 1.22: it has no memory handlers");
        return -1;
    }
    set_handler = (PyObject * (*)(PyObject *)) api[304];
    get_handler = (PyObject * (*)(void)) api[305];
    return 0;
}

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_budget",
                                        "A cap on the NumPy memory one call holds (see ptlite.runtime.limits).", -1,
                                        NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__budget(void)
{
    if (find_numpy_api() < 0) return NULL;
    if (PyType_Ready(&BudgetType) < 0) return NULL;
    PyObject *m = PyModule_Create(&module_def);
    if (!m) return NULL;
    Py_INCREF(&BudgetType);
    if (PyModule_AddObject(m, "Budget", (PyObject *)&BudgetType) < 0) {
        Py_DECREF(&BudgetType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
