/* The thread pool: pl_parallel(tasks, fn, ctx) runs fn(ctx, i) for every i < tasks on the calling thread and the
 * pool's workers. The tasks are cut in one contiguous share per thread (the caller first), each claimed from its
 * own counter; a thread done with its share takes what is left of the others'. A kernel's tasks are its output in
 * order (rows of pixels, mostly), so the same part of consecutive layers' images falls to the same thread, whose
 * cache holds what it wrote there (a shared counter handed them out at random). One parallel run at a time: a caller
 * that finds the pool busy (another Python thread's call, with the GIL released) runs its tasks on its own thread
 * instead of waiting, so concurrent calls overlap. Workers spin briefly after a run (the next kernel usually follows
 * within microseconds), then sleep. A forked child starts with no workers and makes new ones on its first run.
 *
 * The caller waits for its tasks to be done, not for every worker to wake: a sleeping worker takes tens of
 * microseconds to wake, and by then the caller may have run every task itself. A run is open from its start until
 * its tasks are done; a worker joins only an open run, counted in `busy` while it looks (busy is raised before open
 * is read, open lowered before busy is read: one of the two sees the other), and the caller returns, free to set up
 * the next run, once no worker is looking. A worker that wakes late finds the run closed and sleeps again. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "native.h"

#define PL_MAX_THREADS 64
/* How long a worker spins for the next run before it sleeps, and a caller for the workers to finish: waking a
 * sleeping thread costs tens of microseconds (more in a virtual machine), as much as a small kernel, and kernels run
 * node by node follow each other within tens of microseconds (an executor's region, within one call). Longer spins
 * take a core from whatever the program does between kernels (a NumPy operator, BLAS's own threads): at 2 ms,
 * DeepLabV3 on two cores ran 3.4x slower than on one. */
#define PL_SPIN_NS 200000L

static struct {
    pthread_mutex_t submit;           /* held by the one caller running in parallel */
    pthread_mutex_t lock;             /* guards the condition variables */
    pthread_cond_t wake, done;
    pthread_t workers[PL_MAX_THREADS];
    int started;                      /* workers running */
    int threads;                      /* wanted, the caller included */
    _Atomic unsigned long generation; /* bumped for each run */
    _Atomic int stop;
    pl_task_fn fn;
    void *ctx;
    size_t tasks;
    int shares;                       /* threads the tasks are shared between (the caller and the workers) */
    size_t share_end[PL_MAX_THREADS]; /* the end of each thread's share (the caller's is 0) */
    _Atomic size_t next[PL_MAX_THREADS]; /* the next task of each share */
    unsigned long born[PL_MAX_THREADS]; /* the generation when each worker was made (a run after it is new) */
    _Atomic size_t completed;         /* tasks of the current run done */
    _Atomic int open;                 /* the current run takes workers */
    _Atomic int busy;                 /* workers looking at the current run */
    _Atomic int sleeping;             /* workers asleep (or about to be) on `wake` */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          {0}, 0, 0, 0, 0, NULL, NULL, 0, 0, {0}, {0}, {0}, 0, 0, 0, 0};

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static inline void relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

/* Spin until done() or PL_SPIN_NS have passed (the clock read every 256 pauses); whether done() came true. */
static int spin_until(int (*done)(void))
{
    long long deadline = 0;
    for (unsigned i = 0;; i++) {
        if (done()) return 1;
        if ((i & 255) == 0) {
            long long t = now_ns();
            if (!deadline) deadline = t + PL_SPIN_NS;
            else if (t > deadline) return 0;
        }
        relax();
    }
}

/* Run the tasks of thread `self`'s share, then what is left of the others' (the next thread's first), until none is
 * left; whoever completes the last task wakes a caller that sleeps on it (self 0: the caller). */
static void drain(int self)
{
    const size_t tasks = pool.tasks;
    const int shares = pool.shares;
    for (int k = 0; k < shares; k++) {
        const int s = (self + k) % shares;
        size_t i;
        while ((i = atomic_fetch_add(&pool.next[s], 1)) < pool.share_end[s]) {
            pool.fn(pool.ctx, i);
            if (atomic_fetch_add(&pool.completed, 1) + 1 == tasks && self != 0) {
                pthread_mutex_lock(&pool.lock);
                pthread_cond_signal(&pool.done);
                pthread_mutex_unlock(&pool.lock);
            }
        }
    }
}

static _Thread_local unsigned long worker_seen;  /* the generation a worker last ran */
static int new_run(void) { return atomic_load(&pool.generation) != worker_seen || atomic_load(&pool.stop); }
static int tasks_done(void) { return atomic_load(&pool.completed) >= pool.tasks; }

static void *worker(void *arg)
{
    const int self = (int)(uintptr_t)arg;  /* its share: 1 for the first worker */
    unsigned long seen = pool.born[self - 1];
    for (;;) {
        worker_seen = seen;
        if (!spin_until(new_run)) {
            pthread_mutex_lock(&pool.lock);
            atomic_fetch_add(&pool.sleeping, 1);  /* before the generation is read: a caller bumping it sees one */
            while (atomic_load(&pool.generation) == seen && !atomic_load(&pool.stop))
                pthread_cond_wait(&pool.wake, &pool.lock);
            atomic_fetch_sub(&pool.sleeping, 1);
            pthread_mutex_unlock(&pool.lock);
        }
        if (atomic_load(&pool.stop)) return NULL;
        seen = atomic_load(&pool.generation);
        atomic_fetch_add(&pool.busy, 1);
        if (atomic_load(&pool.open)) drain(self);
        atomic_fetch_sub(&pool.busy, 1);
    }
}

static void stop_workers(void)  /* with submit held */
{
    if (!pool.started) return;
    pthread_mutex_lock(&pool.lock);
    atomic_store(&pool.stop, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    for (int i = 0; i < pool.started; i++) pthread_join(pool.workers[i], NULL);
    pool.started = 0;
    atomic_store(&pool.stop, 0);
}

static void start_workers(void)  /* with submit held */
{
    int want = pool.threads - 1;
    while (pool.started < want) {
        pool.born[pool.started] = atomic_load(&pool.generation);
        if (pthread_create(&pool.workers[pool.started], NULL, worker, (void *)(uintptr_t)(pool.started + 1)) != 0)
            break;  /* fewer threads, still right */
        pool.started++;
    }
}

static void default_threads(void)
{
    if (pool.threads > 0) return;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    pool.threads = n < 1 ? 1 : (n > PL_MAX_THREADS ? PL_MAX_THREADS : (int)n);
}

void pl_set_threads(int n)
{
    pthread_mutex_lock(&pool.submit);
    if (n < 1) n = 1;
    if (n > PL_MAX_THREADS) n = PL_MAX_THREADS;
    if (n != pool.threads) {
        stop_workers();
        pool.threads = n;
    }
    pthread_mutex_unlock(&pool.submit);
}

int pl_get_threads(void)
{
    pthread_mutex_lock(&pool.submit);
    default_threads();
    int n = pool.threads;
    pthread_mutex_unlock(&pool.submit);
    return n;
}

/* Run the tasks on the pool, or all on the caller where the pool is busy, has no workers, or its workers sleep
 * and the job is too small to wake them for. */
static void run(size_t tasks, pl_task_fn fn, void *ctx, double work)
{
    if (tasks == 0) return;
    if (tasks == 1 || pthread_mutex_trylock(&pool.submit) != 0) {
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    default_threads();
    start_workers();
    if (pool.started == 0 || (work < PL_WAKE_WORK && atomic_load(&pool.sleeping) == pool.started)) {
        pthread_mutex_unlock(&pool.submit);
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.tasks = tasks;
    pool.shares = pool.started + 1;
    for (int k = 0; k < pool.shares; k++) {
        atomic_store(&pool.next[k], tasks * (size_t)k / (size_t)pool.shares);
        pool.share_end[k] = tasks * (size_t)(k + 1) / (size_t)pool.shares;
    }
    atomic_store(&pool.completed, 0);
    atomic_store(&pool.open, 1);
    atomic_fetch_add(&pool.generation, 1);
    if (atomic_load(&pool.sleeping)) {  /* spinning workers see the generation; only sleepers need the call */
        pthread_mutex_lock(&pool.lock);
        pthread_cond_broadcast(&pool.wake);
        pthread_mutex_unlock(&pool.lock);
    }
    drain(0);
    if (!spin_until(tasks_done)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.completed) < tasks) pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    atomic_store(&pool.open, 0);
    for (unsigned i = 1; atomic_load(&pool.busy); i++) {  /* a worker still looking finds no task: brief */
        if (i % 1024 == 0) sched_yield();
        else relax();
    }
    pthread_mutex_unlock(&pool.submit);
}

void pl_parallel_work(size_t tasks, pl_task_fn fn, void *ctx, double work)
{
    if (work < PL_SERIAL_WORK) {
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    run(tasks, fn, ctx, work);
}

void pl_parallel(size_t tasks, pl_task_fn fn, void *ctx)
{
    run(tasks, fn, ctx, PL_WAKE_WORK);
}

static void after_fork_child(void)
{
    /* The workers did not survive the fork; the locks are re-made (another thread may have held them). */
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
    pool.submit = fresh;
    pool.lock = fresh;
    pool.wake = cond;
    pool.done = cond;
    pool.started = 0;
    atomic_store(&pool.stop, 0);
    atomic_store(&pool.open, 0);
    atomic_store(&pool.busy, 0);
    atomic_store(&pool.sleeping, 0);
}

__attribute__((constructor)) static void pl_threads_init(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}

/* ---------------------------------------------------------------------------------------------- per-thread scratch */

typedef struct {
    void *buf[PL_SCRATCH_SLOTS];
    size_t cap[PL_SCRATCH_SLOTS];
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ready;

static void free_scratch(void *ptr)
{
    scratch *s = ptr;
    for (int i = 0; i < PL_SCRATCH_SLOTS; i++) free(s->buf[i]);
    free(s);
}

static void make_scratch_key(void) { scratch_ready = pthread_key_create(&scratch_key, free_scratch) == 0; }

void *pl_thread_scratch(int slot, size_t bytes)
{
    if (slot < 0 || slot >= PL_SCRATCH_SLOTS) return NULL;
    pthread_once(&scratch_once, make_scratch_key);
    if (!scratch_ready) return NULL;
    scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof *s);
        if (!s) return NULL;
        if (pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (s->cap[slot] < bytes) {
        void *grown = realloc(s->buf[slot], bytes);
        if (!grown) return NULL;
        s->buf[slot] = grown;
        s->cap[slot] = bytes;
    }
    return s->buf[slot];
}
