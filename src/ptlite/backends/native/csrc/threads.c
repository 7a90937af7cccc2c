/* The thread pool: pl_parallel(tasks, fn, ctx) runs fn(ctx, i) for every i < tasks on the calling thread and the
 * pool's workers, which claim tasks from a shared counter. One parallel run at a time: a caller that finds the
 * pool busy (another Python thread's call, with the GIL released) runs its tasks on its own thread instead of
 * waiting, so concurrent calls overlap. Workers spin briefly after a run (the next kernel usually follows within
 * microseconds), then sleep. A forked child starts with no workers and makes new ones on its first run. */
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
    _Atomic size_t next;              /* the next task to claim */
    _Atomic int finished;             /* workers done with the current run */
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          {0}, 0, 0, 0, 0, NULL, NULL, 0, 0, 0};

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

static void drain(void)
{
    size_t i;
    while ((i = atomic_fetch_add(&pool.next, 1)) < pool.tasks) pool.fn(pool.ctx, i);
}

static _Thread_local unsigned long worker_seen;  /* the generation a worker last ran */
static int new_run(void) { return atomic_load(&pool.generation) != worker_seen || atomic_load(&pool.stop); }
static int workers_done(void) { return atomic_load(&pool.finished) >= pool.started; }

static void *worker(void *arg)
{
    unsigned long seen = (unsigned long)(uintptr_t)arg;  /* the generation when it was made: a run after is new */
    for (;;) {
        worker_seen = seen;
        if (!spin_until(new_run)) {
            pthread_mutex_lock(&pool.lock);
            while (atomic_load(&pool.generation) == seen && !atomic_load(&pool.stop))
                pthread_cond_wait(&pool.wake, &pool.lock);
            pthread_mutex_unlock(&pool.lock);
        }
        if (atomic_load(&pool.stop)) return NULL;
        seen = atomic_load(&pool.generation);
        drain();
        if (atomic_fetch_add(&pool.finished, 1) + 1 == pool.started) {
            pthread_mutex_lock(&pool.lock);
            pthread_cond_signal(&pool.done);
            pthread_mutex_unlock(&pool.lock);
        }
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
        void *seen = (void *)(uintptr_t)atomic_load(&pool.generation);
        if (pthread_create(&pool.workers[pool.started], NULL, worker, seen) != 0) break;  /* fewer threads, still right */
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

void pl_parallel_work(size_t tasks, pl_task_fn fn, void *ctx, double work)
{
    if (work < PL_SERIAL_WORK) {
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    pl_parallel(tasks, fn, ctx);
}

void pl_parallel(size_t tasks, pl_task_fn fn, void *ctx)
{
    if (tasks == 0) return;
    if (tasks == 1 || pthread_mutex_trylock(&pool.submit) != 0) {
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    default_threads();
    start_workers();
    if (pool.started == 0) {
        pthread_mutex_unlock(&pool.submit);
        for (size_t i = 0; i < tasks; i++) fn(ctx, i);
        return;
    }
    pool.fn = fn;
    pool.ctx = ctx;
    pool.tasks = tasks;
    atomic_store(&pool.next, 0);
    atomic_store(&pool.finished, 0);
    pthread_mutex_lock(&pool.lock);
    atomic_fetch_add(&pool.generation, 1);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.lock);
    drain();
    if (!spin_until(workers_done)) {
        pthread_mutex_lock(&pool.lock);
        while (atomic_load(&pool.finished) < pool.started) pthread_cond_wait(&pool.done, &pool.lock);
        pthread_mutex_unlock(&pool.lock);
    }
    pthread_mutex_unlock(&pool.submit);
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
}

__attribute__((constructor)) static void pl_threads_init(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
}
