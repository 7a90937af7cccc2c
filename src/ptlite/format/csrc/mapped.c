/* ptlite.format._mapped: model files mapped read-only, guarded against the file changing under the map.
 *
 * Reading a page of a shared file mapping past the file's end (another process truncated or overwrote the file)
 * raises SIGBUS, which ends the process. A MappedFile's pages are registered with a SIGBUS handler that, for a fault
 * inside one of them, maps zeros from that page to the map's end and counts the fault: the access completes and the
 * kernels go on over zeros. MappedFile.changed() then reports the fault, or a file whose size or modification time
 * is no longer what it was when mapped (an overwrite in place, which the map would show), so that ptlite discards
 * the call's results and says why. A fault at an address no MappedFile holds goes to the handler installed before
 * this one, or ends the process as it would have.
 *
 * POSIX only; elsewhere map_file raises OSError and ptlite reads files into memory instead. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if defined(__unix__) || defined(__APPLE__)
#define PL_GUARDED 1
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#else
#define PL_GUARDED 0
#endif

#if PL_GUARDED

/* The maps the handler knows: [start, end) page ranges, a slot free while its start is 0. Written under the GIL
 * (end before start when registering, start cleared first when not), read by the handler in any thread. */
#define SLOTS 1024
static _Atomic uintptr_t slot_start[SLOTS], slot_end[SLOTS];
static atomic_uint slot_faults[SLOTS];
static struct sigaction previous;
static int installed;
static uintptr_t page_size;

/* Whether a SIGBUS comes from an access (a read past a mapped file's end), not from kill / raise (si_code <= 0) or
 * from a hardware memory error, which zeros would hide. */
static int from_access(const siginfo_t *info)
{
#if defined(BUS_MCEERR_AR) && defined(BUS_MCEERR_AO)
    if (info->si_code == BUS_MCEERR_AR || info->si_code == BUS_MCEERR_AO) return 0;
#endif
    return info->si_code > 0;
}

static void on_sigbus(int sig, siginfo_t *info, void *context)
{
    const uintptr_t at = (uintptr_t)info->si_addr;
    for (int i = 0; i < SLOTS && from_access(info); i++) {
        const uintptr_t start = atomic_load(&slot_start[i]);
        if (!start || at < start) continue;
        const uintptr_t end = atomic_load(&slot_end[i]);
        if (at >= end || atomic_load(&slot_start[i]) != start) continue;  /* (a slot freed and taken meanwhile) */
        const uintptr_t page = at & ~(page_size - 1);
        /* the file ends before this page: zeros from here on (mmap is a plain system call, safe here) */
        if (mmap((void *)page, end - page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != MAP_FAILED) {
            atomic_fetch_add(&slot_faults[i], 1);
            return;
        }
        break;
    }
    /* not a guarded map's: what was there before */
    if ((previous.sa_flags & SA_SIGINFO) && previous.sa_sigaction) {
        previous.sa_sigaction(sig, info, context);
        return;
    }
    if (!(previous.sa_flags & SA_SIGINFO) && previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    struct sigaction fallback;  /* the default action: a fault happens again on return, a sent signal is raised */
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(sig, &fallback, NULL);
    if (info->si_code <= 0) raise(sig);
}

static int install(void)
{
    if (installed) return 0;
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_sigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGBUS, &action, &previous) != 0) return -1;
    installed = 1;
    return 0;
}

typedef struct {
    PyObject_HEAD
    void *addr;
    size_t size;    /* the file's bytes when mapped */
    size_t mapped;  /* whole pages */
    int fd;         /* kept open to ask the file's size and time after each call */
    int slot;
    struct stat at_map;
    PyObject *path;
} MappedFile;

static int same_time(const struct stat *a, const struct stat *b)
{
#if defined(__APPLE__)
    return a->st_mtimespec.tv_sec == b->st_mtimespec.tv_sec && a->st_mtimespec.tv_nsec == b->st_mtimespec.tv_nsec;
#else
    return a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec;
#endif
}

/* changed(): None while the file is as mapped; else a sentence saying what changed. */
static PyObject *mapped_changed(MappedFile *self, PyObject *unused)
{
    (void)unused;
    if (self->slot >= 0 && atomic_load(&slot_faults[self->slot]) > 0)
        return PyUnicode_FromString("it was truncated while loaded (its end read as zeros)");
    struct stat now;
    if (fstat(self->fd, &now) != 0) return PyUnicode_FromFormat("its status cannot be read (%s)", strerror(errno));
    if ((size_t)now.st_size != self->size)
        return PyUnicode_FromFormat("its size changed from %zu to %lld bytes while loaded", self->size,
                                    (long long)now.st_size);
    if (!same_time(&now, &self->at_map)) return PyUnicode_FromString("it was modified while loaded");
    Py_RETURN_NONE;
}

static int mapped_getbuffer(MappedFile *self, Py_buffer *view, int flags)
{
    return PyBuffer_FillInfo(view, (PyObject *)self, self->addr, (Py_ssize_t)self->size, 1, flags);
}

static PyBufferProcs mapped_as_buffer = {(getbufferproc)mapped_getbuffer, NULL};

static void mapped_dealloc(MappedFile *self)
{
    if (self->slot >= 0) {  /* unregistered before the pages go: a later map may take the addresses */
        atomic_store(&slot_start[self->slot], 0);
        atomic_store(&slot_end[self->slot], 0);
        atomic_store(&slot_faults[self->slot], 0);
    }
    if (self->addr) munmap(self->addr, self->mapped);
    if (self->fd >= 0) close(self->fd);
    Py_XDECREF(self->path);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *mapped_size(MappedFile *self, void *unused)
{
    (void)unused;
    return PyLong_FromSize_t(self->size);
}

static PyObject *mapped_path(MappedFile *self, void *unused)
{
    (void)unused;
    Py_INCREF(self->path);
    return self->path;
}

static PyMethodDef mapped_methods[] = {
    {"changed", (PyCFunction)mapped_changed, METH_NOARGS,
     "changed() -> str | None: what happened to the file since it was mapped (None: nothing)"},
    {NULL, NULL, 0, NULL}};

static PyGetSetDef mapped_getset[] = {
    {"size", (getter)mapped_size, NULL, "the file's size in bytes when mapped", NULL},
    {"path", (getter)mapped_path, NULL, "the path it was mapped from", NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyTypeObject MappedFileType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "ptlite.format._mapped.MappedFile",
    .tp_basicsize = sizeof(MappedFile),
    .tp_dealloc = (destructor)mapped_dealloc,
    .tp_as_buffer = &mapped_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A file mapped read-only, its pages guarded against the file shrinking (see map_file).",
    .tp_methods = mapped_methods,
    .tp_getset = mapped_getset,
};

/* map_file(path) -> MappedFile: the whole file mapped read-only and guarded. OSError where it cannot be (not a
 * regular file, an empty one, no room for another guarded map: ptlite then reads the file instead). */
static PyObject *map_file(PyObject *module, PyObject *arg)
{
    (void)module;
    PyObject *encoded = NULL;
    if (!PyUnicode_FSConverter(arg, &encoded)) return NULL;
    const char *name = PyBytes_AS_STRING(encoded);
    if (install() != 0) {
        Py_DECREF(encoded);
        return PyErr_Format(PyExc_OSError, "no SIGBUS handler could be installed for %s", name);
    }
    int fd;
    Py_BEGIN_ALLOW_THREADS
    fd = open(name, O_RDONLY | O_CLOEXEC);
    Py_END_ALLOW_THREADS
    if (fd < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        Py_DECREF(encoded);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) {
        close(fd);
        Py_DECREF(encoded);
        return PyErr_Format(PyExc_OSError, "%s is not a non-empty regular file: it is read, not mapped", name);
    }
    const size_t size = (size_t)st.st_size, mapped = (size + page_size - 1) & ~(size_t)(page_size - 1);
    void *addr = mmap(NULL, mapped, PROT_READ, MAP_SHARED, fd, 0);
    if (addr == MAP_FAILED) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, arg);
        close(fd);
        Py_DECREF(encoded);
        return NULL;
    }
    /* a free slot, taken with the GIL held from here to its registration (another thread's map_file may have
     * released it around open) */
    int slot = -1;
    for (int i = 0; i < SLOTS && slot < 0; i++)
        if (atomic_load(&slot_start[i]) == 0 && atomic_load(&slot_end[i]) == 0) slot = i;
    if (slot < 0) {
        munmap(addr, mapped);
        close(fd);
        PyErr_Format(PyExc_OSError, "no guarded map is left for %s", name);
        Py_DECREF(encoded);
        return NULL;
    }
    Py_DECREF(encoded);
    MappedFile *self = PyObject_New(MappedFile, &MappedFileType);
    if (!self) {
        munmap(addr, mapped);
        close(fd);
        return NULL;
    }
    self->addr = addr;
    self->size = size;
    self->mapped = mapped;
    self->fd = fd;
    self->at_map = st;
    self->path = arg;
    Py_INCREF(arg);
    self->slot = slot;
    atomic_store(&slot_faults[slot], 0);
    atomic_store(&slot_end[slot], (uintptr_t)addr + mapped);
    atomic_store(&slot_start[slot], (uintptr_t)addr);
    return (PyObject *)self;
}

#else

static PyObject *map_file(PyObject *module, PyObject *arg)
{
    (void)module;
    (void)arg;
    return PyErr_Format(PyExc_OSError, "guarded maps need a POSIX system: the file is read instead");
}

#endif

static PyMethodDef functions[] = {
    {"map_file", map_file, METH_O, "map_file(path) -> MappedFile: the file mapped read-only, guarded"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_mapped",
                                        "Model files mapped read-only and guarded against changing under the map.",
                                        -1, functions, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__mapped(void)
{
#if PL_GUARDED
    if (PyType_Ready(&MappedFileType) < 0) return NULL;
#endif
    PyObject *m = PyModule_Create(&module_def);
#if PL_GUARDED
    if (m) {
        Py_INCREF(&MappedFileType);
        if (PyModule_AddObject(m, "MappedFile", (PyObject *)&MappedFileType) < 0) {
            Py_DECREF(&MappedFileType);
            Py_DECREF(m);
            return NULL;
        }
    }
#endif
    return m;
}
