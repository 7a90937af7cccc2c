/* ptlite.runtime._budget: a cap on the NumPy memory one call of a model holds, checked before each allocation.
 *
 * NumPy lets a program choose, per thread and context, the allocator its arrays' data comes from (NEP 49: a "mem
 * handler"). While a Budget is entered, NumPy allocates through this module's handler: each block carries a small
 * header naming the Budget it was charged to and its size; an allocation that would take the Budget's live bytes
 * past its cap is refused (NULL: NumPy raises MemoryError) and the Budget records the size asked for, so that the
 * caller can say which limit refused it. Freeing a block gives its bytes back to its Budget, whenever and in
 * whichever thread that happens (a Budget outlives its Python object while blocks charged to it live).
 *
 * NumPy's C API is reached through its `_ARRAY_API` table, whose entries keep their numbers across releases
 * (PyDataMem_SetHandler is entry 304 since NumPy 1.22), so no NumPy headers are needed to build this. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdatomic.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    atomic_llong live;     /* bytes of the blocks charged to this budget and not yet freed */
    atomic_llong peak;
    long long cap;         /* < 0: no cap (counted only) */
    atomic_llong refused;  /* the size of the first allocation refused, 0 if none */
    atomic_long refs;      /* the Python object's, and one per live block */
} Account;

/* What precedes each block: kept to the platform's strictest alignment, so that the data NumPy gets is aligned as
 * malloc's would be. */
typedef union {
    max_align_t align;
    struct {
        Account *account;
        size_t size;
    } h;
} Header;

static void account_release(Account *a)
{
    if (a && atomic_fetch_sub(&a->refs, 1) == 1) free(a);
}

static _Thread_local Account *current;  /* the budget entered in this thread, if any */

static int charge(Account *a, size_t size)
{
    if (!a) return 1;
    if (size > (size_t)LLONG_MAX) size = (size_t)LLONG_MAX;
    const long long n = (long long)size;
    long long now = atomic_fetch_add(&a->live, n) + n;
    if (a->cap >= 0 && now > a->cap) {
        atomic_fetch_sub(&a->live, n);
        long long none = 0;
        atomic_compare_exchange_strong(&a->refused, &none, n > 0 ? n : 1);
        return 0;
    }
    long long peak = atomic_load(&a->peak);
    while (now > peak && !atomic_compare_exchange_weak(&a->peak, &peak, now)) {
    }
    atomic_fetch_add(&a->refs, 1);
    return 1;
}

static void discharge(Account *a, size_t size)
{
    if (!a) return;
    atomic_fetch_sub(&a->live, (long long)size);
    account_release(a);
}

static void *finish(Header *h, Account *a, size_t size)
{
    h->h.account = a;
    h->h.size = size;
    return h + 1;
}

static void *budget_malloc(void *ctx, size_t size)
{
    (void)ctx;
    Account *a = current;
    if (size > SIZE_MAX - sizeof(Header) || !charge(a, size)) return NULL;
    Header *h = malloc(sizeof(Header) + size);
    if (!h) {
        discharge(a, size);
        return NULL;
    }
    return finish(h, a, size);
}

static void *budget_calloc(void *ctx, size_t nelem, size_t elsize)
{
    (void)ctx;
    Account *a = current;
    if (elsize && nelem > (SIZE_MAX - sizeof(Header)) / elsize) return NULL;
    const size_t size = nelem * elsize;
    if (!charge(a, size)) return NULL;
    Header *h = calloc(1, sizeof(Header) + size);
    if (!h) {
        discharge(a, size);
        return NULL;
    }
    return finish(h, a, size);
}

static void budget_free(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    (void)size;  /* the header's is the size charged */
    if (!ptr) return;
    Header *h = (Header *)ptr - 1;
    Account *a = h->h.account;
    const size_t charged = h->h.size;
    free(h);
    discharge(a, charged);
}

static void *budget_realloc(void *ctx, void *ptr, size_t new_size)
{
    if (!ptr) return budget_malloc(ctx, new_size);
    Header *h = (Header *)ptr - 1;
    Account *a = h->h.account;
    const size_t old = h->h.size;
    if (new_size > SIZE_MAX - sizeof(Header)) return NULL;
    if (new_size > old) {  /* the growth charged like an allocation (the block keeps its budget) */
        if (!charge(a, new_size - old)) return NULL;
        account_release(a);  /* charge took a reference the block already holds */
    }
    Header *moved = realloc(h, sizeof(Header) + new_size);
    if (!moved) {
        if (new_size > old && a) atomic_fetch_sub(&a->live, (long long)(new_size - old));
        return NULL;
    }
    if (new_size < old && a) atomic_fetch_sub(&a->live, (long long)(old - new_size));
    moved->h.size = new_size;
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

static Handler handler = {"ptlite_budget", 1, {NULL, budget_malloc, budget_calloc, budget_realloc, budget_free}};
static PyObject *handler_capsule;
static PyObject *(*set_handler)(PyObject *);

/* ------------------------------------------------------------------------------------------------- Budget */

typedef struct {
    PyObject_HEAD
    Account *account;
    Account *outer;       /* the thread's budget when this one was entered */
    PyObject *previous;   /* NumPy's handler then */
    int entered;
} Budget;

static PyObject *budget_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    static char *names[] = {"cap", NULL};
    long long cap = -1;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "|L", names, &cap)) return NULL;
    Budget *self = (Budget *)type->tp_alloc(type, 0);
    if (!self) return NULL;
    self->account = calloc(1, sizeof(Account));
    if (!self->account) {
        Py_DECREF(self);
        return PyErr_NoMemory();
    }
    self->account->cap = cap < 0 ? -1 : cap;
    atomic_store(&self->account->refs, 1);
    return (PyObject *)self;
}

static void budget_dealloc(Budget *self)
{
    if (self->entered) {  /* left without __exit__ (cannot happen through `with`): put the thread back */
        current = self->outer;
        Py_XDECREF(self->previous);
    }
    account_release(self->account);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *budget_enter(Budget *self, PyObject *unused)
{
    (void)unused;
    if (self->entered) {
        PyErr_SetString(PyExc_RuntimeError, "this Budget is already entered");
        return NULL;
    }
    PyObject *previous = set_handler(handler_capsule);
    if (!previous) return NULL;
    self->previous = previous;
    self->outer = current;
    current = self->account;
    self->entered = 1;
    Py_INCREF(self);
    return (PyObject *)self;
}

static PyObject *budget_exit(Budget *self, PyObject *args)
{
    (void)args;
    if (!self->entered) Py_RETURN_FALSE;
    current = self->outer;
    self->entered = 0;
    PyObject *mine = set_handler(self->previous);
    Py_CLEAR(self->previous);
    if (!mine) return NULL;
    Py_DECREF(mine);
    Py_RETURN_FALSE;
}

static PyObject *get_live(Budget *self, void *c) { (void)c; return PyLong_FromLongLong(atomic_load(&self->account->live)); }
static PyObject *get_peak(Budget *self, void *c) { (void)c; return PyLong_FromLongLong(atomic_load(&self->account->peak)); }
static PyObject *get_cap(Budget *self, void *c)
{
    (void)c;
    if (self->account->cap < 0) Py_RETURN_NONE;
    return PyLong_FromLongLong(self->account->cap);
}
static PyObject *get_refused(Budget *self, void *c)
{
    (void)c;
    return PyLong_FromLongLong(atomic_load(&self->account->refused));
}

static PyMethodDef budget_methods[] = {
    {"__enter__", (PyCFunction)budget_enter, METH_NOARGS, "Charge this thread's NumPy allocations to the budget."},
    {"__exit__", (PyCFunction)budget_exit, METH_VARARGS, "Stop charging them; blocks already charged stay so."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef budget_getset[] = {
    {"live", (getter)get_live, NULL, "Bytes of NumPy data charged to the budget and not freed yet.", NULL},
    {"peak", (getter)get_peak, NULL, "The most bytes live at once.", NULL},
    {"cap", (getter)get_cap, NULL, "The most bytes it lets live at once (None: no cap).", NULL},
    {"refused", (getter)get_refused, NULL, "The size of the first allocation refused (0: none was).", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BudgetType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ptlite.runtime._budget.Budget",
    .tp_basicsize = sizeof(Budget),
    .tp_dealloc = (destructor)budget_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Budget(cap=-1): while entered (`with`), the NumPy data this thread allocates is charged to it, and an "
              "allocation that would take the live bytes past cap fails with MemoryError (cap < 0: none does).",
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
    return 0;
}

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_budget",
                                        "A cap on the NumPy memory one call holds (see ptlite.runtime.limits).", -1,
                                        NULL, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__budget(void)
{
    if (find_numpy_api() < 0) return NULL;
    if (PyType_Ready(&BudgetType) < 0) return NULL;
    handler_capsule = PyCapsule_New(&handler, "mem_handler", NULL);
    if (!handler_capsule) return NULL;
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
