/* tensorlang runtime for exported kernels: the thread pool behind parallel loops.
 *
 * Kernels that tensorlang compiles call
 *
 *     int32_t tensorlang_parallel_for(int32_t (*fn)(int64_t begin, int64_t end, void *closure),
 *                                     void *closure, int64_t lo, int64_t extent);
 *
 * for each parallel loop. This file provides it for kernels exported with `tensorlang export`, and, built as a
 * shared library with -DTENSORLANG_JIT_RUNTIME (which makes the symbol visible), for the JIT's kernels in the
 * Python process (tensorlang/threadpool.py builds and caches it). It cuts [lo, lo+extent) into one contiguous chunk per thread (chunk i is
 * [lo + extent*i/n, lo + extent*(i+1)/n), as tensorlang/threadpool.py does), runs chunk 0 on the calling thread
 * and the others on a persistent pool of pthreads, waits for all of them and returns the largest status (0: all
 * chunks succeeded, 1: one could not allocate its temporaries).
 *
 * Threads: TENSORLANG_NUM_THREADS (read at every call), else the CPUs in this process's affinity mask. The pool
 * grows on demand. Between calls its threads spin for TENSORLANG_SPIN_US microseconds (default 500, at most
 * 1000000; read at every call; 0: sleep at once) before they sleep, and
 * the caller spins as long for the last chunk: waking a sleeping thread costs about 0.1 ms on a virtual machine
 * (OpenMP and OpenBLAS spin for the same reason). A spinning thread yields the CPU every microsecond or so, so
 * that more threads than CPUs do not starve the ones with work (conv2d on 4 threads and 2 CPUs: 2.6 ms without
 * the yield, 0.92 ms with it).
 * A worker that picks up a job on the CPU the caller published it from moves itself to another CPU (where the
 * job has no more threads than CPUs): the two would otherwise run their chunks one after the other. The
 * workers are named tensorlang-1, tensorlang-2, ... (Linux).
 * A value of either variable that is not an integer in its range (1 to 1024 threads) is not used: the default is,
 * and one line on stderr (once per variable and process) names the variable and the values it takes.
 * Concurrent callers are safe: parallel regions from different threads take turns (a mutex); a parallel loop
 * reached from inside a chunk runs serially on that thread. After fork() the child starts a fresh pool.
 *
 * The symbol has hidden visibility, so a shared library built from it keeps its own copy and never binds to
 * (or exports) another definition. Build: cc -O2 -c tensorlang_runtime.c (link with -lpthread where needed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <time.h>

#if defined(TENSORLANG_JIT_RUNTIME)
#define TL_HIDDEN __attribute__((visibility("default")))
#define TL_THREAD_LOCAL __thread
#elif defined(__GNUC__) || defined(__clang__)
#define TL_HIDDEN __attribute__((visibility("hidden")))
#define TL_THREAD_LOCAL __thread
#else
#define TL_HIDDEN
#define TL_THREAD_LOCAL _Thread_local
#endif

#define TL_MAX_THREADS 1024
#define TL_DEFAULT_SPIN_US 500 /* (the message of tl_env_int says "using 500") */
#define TL_MAX_SPIN_US 1000000

typedef int32_t (*tl_chunk_fn)(int64_t begin, int64_t end, void *closure);

struct tl_job {
    tl_chunk_fn fn;
    void *closure;
    int64_t lo, extent;
    int n;          /* chunks; worker i (1..n-1) runs chunk i */
    int caller_cpu; /* the CPU the caller ran on when it published the job; -1: unknown */
};

static pthread_mutex_t tl_region_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel region at a time */
static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;        /* guards everything below */
static pthread_cond_t tl_work = PTHREAD_COND_INITIALIZER;          /* a new job was published */
static pthread_cond_t tl_done = PTHREAD_COND_INITIALIZER;          /* the last worker finished its chunk */
static struct tl_job tl_current;
static uint64_t tl_generation; /* incremented for each published job (written under tl_lock, read atomically) */
static int tl_workers;         /* worker threads started (ids 1..tl_workers) */
static int tl_pending;         /* workers still running a chunk of the current job (as tl_generation) */
static int32_t tl_status;      /* largest status the workers returned */
static int tl_atfork_done;
static int tl_spin_us = TL_DEFAULT_SPIN_US; /* how long to spin before sleeping (set by each call) */
static TL_THREAD_LOCAL int tl_in_chunk; /* this thread is running a chunk */

struct tl_worker_arg {
    int id;
    uint64_t seen; /* the generation already published when the worker was created */
};

static int64_t tl_bound(int64_t lo, int64_t extent, int n, int i) {
    /* lo + floor(extent * i / n) without overflow: extent = q*n + r with r < n */
    int64_t q = extent / n, r = extent % n;
    return lo + q * i + (r * i) / n;
}

static void tl_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static int64_t tl_now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000 + t.tv_nsec / 1000;
}

/* Spin for up to tl_spin_us microseconds until *word != value (until_zero = 0) or *word == 0 (until_zero = 1);
 * returns whether that happened. Called without tl_lock. */
static int tl_spin(const void *word, uint64_t value, int until_zero) {
    int limit = __atomic_load_n(&tl_spin_us, __ATOMIC_RELAXED);
    if (limit <= 0)
        return 0;
    int64_t start = tl_now_us();
    for (;;) {
        for (int i = 0; i < 128; i++) {
            if (until_zero ? __atomic_load_n((const int *)word, __ATOMIC_ACQUIRE) == 0
                           : __atomic_load_n((const uint64_t *)word, __ATOMIC_ACQUIRE) != value)
                return 1;
            tl_pause();
        }
        if (tl_now_us() - start >= limit)
            return 0;
        sched_yield(); /* more threads than CPUs: let the thread with work run */
    }
}

/* Move the calling worker off `cpu`, the caller's, where a job of `n` threads finds them both there: onto the
 * `id`-th (counting round) of the other CPUs the worker may use, by narrowing its affinity to that CPU, which
 * migrates it at once, and widening it back, so that the scheduler stays free to place it later. Two threads
 * of one parallel loop on one CPU run one after the other, and on a virtual machine the scheduler can leave
 * them so for hundreds of calls (measured: a two-thread matmul at one-thread speed for 0.3 s). Nothing moves
 * where the job has more threads than the worker has CPUs: some must share. */
static void tl_move_off(int cpu, int id, int n) {
#ifdef __linux__
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || n > CPU_COUNT(&allowed))
        return;
    int others = CPU_COUNT(&allowed) - (CPU_ISSET(cpu, &allowed) ? 1 : 0);
    if (others < 1)
        return;
    int want = (id - 1) % others;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed) || c == cpu || want-- > 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) == 0)
            sched_setaffinity(0, sizeof allowed, &allowed);
        return;
    }
#else
    (void)cpu;
    (void)id;
    (void)n;
#endif
}

/* The CPU the calling thread runs on, or -1 where that is unknown. */
static int tl_current_cpu(void) {
#ifdef __linux__
    return sched_getcpu();
#else
    return -1;
#endif
}

static void *tl_worker_main(void *p) {
    struct tl_worker_arg arg = *(struct tl_worker_arg *)p;
    free(p);
    tl_in_chunk = 1;
#ifdef __linux__
    char name[16]; /* shown by top -H, ps -L, perf and gdb */
    snprintf(name, sizeof name, "tensorlang-%d", arg.id);
    pthread_setname_np(pthread_self(), name);
#endif
    pthread_mutex_lock(&tl_lock);
    for (;;) {
        if (tl_generation == arg.seen) { /* no new job yet: spin a while, then sleep */
            pthread_mutex_unlock(&tl_lock);
            tl_spin(&tl_generation, arg.seen, 0);
            pthread_mutex_lock(&tl_lock);
        }
        while (tl_generation == arg.seen)
            pthread_cond_wait(&tl_work, &tl_lock);
        arg.seen = tl_generation;
        if (arg.id >= tl_current.n)
            continue; /* not needed for this job */
        struct tl_job job = tl_current;
        pthread_mutex_unlock(&tl_lock);
        if (job.caller_cpu >= 0 && tl_current_cpu() == job.caller_cpu)
            tl_move_off(job.caller_cpu, arg.id, job.n);
        int32_t status = job.fn(tl_bound(job.lo, job.extent, job.n, arg.id),
                                tl_bound(job.lo, job.extent, job.n, arg.id + 1), job.closure);
        pthread_mutex_lock(&tl_lock);
        if (status > tl_status)
            tl_status = status;
        if (__atomic_sub_fetch(&tl_pending, 1, __ATOMIC_RELEASE) == 0)
            pthread_cond_signal(&tl_done);
    }
    return NULL;
}

static void tl_after_fork_in_child(void) {
    /* the pool's threads do not exist in the child: start over */
    pthread_mutex_init(&tl_region_lock, NULL);
    pthread_mutex_init(&tl_lock, NULL);
    pthread_cond_init(&tl_work, NULL);
    pthread_cond_init(&tl_done, NULL);
    tl_workers = 0;
    tl_pending = 0;
    tl_in_chunk = 0;
}

/* The integer in environment variable `name` if it is set to one from `lo` to `hi` (blanks around it allowed);
 * `fallback` when it is unset or empty. Any other value also gives `fallback`, after one line on stderr (once per
 * variable and process, `*warned` remembers) that names the variable, the values it takes and what is used
 * instead: a library linked into a C program has no other way to say so. (The JIT refuses such a value with a
 * UsageError when it starts; this line is for a value set later, or for exported libraries.) */
static int tl_env_int(const char *name, long lo, long hi, int fallback, const char *instead, int *warned) {
    const char *text = getenv(name);
    if (!text || !*text)
        return fallback;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    int digits = end != text;
    while (*end == ' ' || *end == '\t' || *end == '\n')
        end++;
    if (digits && *end == '\0' && errno == 0 && v >= lo && v <= hi)
        return (int)v;
    if (!__atomic_exchange_n(warned, 1, __ATOMIC_RELAXED))
        fprintf(stderr, "tensorlang: %s=\"%s\" is not an integer from %ld to %ld; using %s\n", name, text, lo, hi,
                instead);
    return fallback;
}

static int tl_warned_threads, tl_warned_spin;

static int tl_num_threads(void) {
    int n = tl_env_int("TENSORLANG_NUM_THREADS", 1, TL_MAX_THREADS, 0, "the CPU count", &tl_warned_threads);
    if (n >= 1)
        return n;
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0) {
        n = CPU_COUNT(&set);
        if (n >= 1)
            return n > TL_MAX_THREADS ? TL_MAX_THREADS : n;
    }
#endif
    long online = sysconf(_SC_NPROCESSORS_ONLN);
    return online < 1 ? 1 : online > TL_MAX_THREADS ? TL_MAX_THREADS : (int)online;
}

/* Start workers until there are `want` (called with tl_lock held); returns how many there are. */
static int tl_grow(int want) {
    if (!tl_atfork_done) {
        pthread_atfork(NULL, NULL, tl_after_fork_in_child);
        tl_atfork_done = 1;
    }
    while (tl_workers < want) {
        struct tl_worker_arg *arg = malloc(sizeof *arg);
        if (!arg)
            break;
        arg->id = tl_workers + 1;
        arg->seen = tl_generation;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        pthread_t thread;
        int err = pthread_create(&thread, &attr, tl_worker_main, arg);
        pthread_attr_destroy(&attr);
        if (err) {
            free(arg);
            break; /* run with the threads there are */
        }
        tl_workers++;
    }
    return tl_workers;
}

TL_HIDDEN int32_t tensorlang_parallel_for(tl_chunk_fn fn, void *closure, int64_t lo, int64_t extent) {
    if (extent <= 0)
        return 0;
    int n = tl_num_threads();
    if ((int64_t)n > extent)
        n = (int)extent;
    if (n == 1 || tl_in_chunk)
        return fn(lo, lo + extent, closure);
    __atomic_store_n(&tl_spin_us, tl_env_int("TENSORLANG_SPIN_US", 0, TL_MAX_SPIN_US, TL_DEFAULT_SPIN_US, "500",
                                             &tl_warned_spin), __ATOMIC_RELAXED);
    pthread_mutex_lock(&tl_region_lock);
    pthread_mutex_lock(&tl_lock);
    int workers = tl_grow(n - 1);
    if (workers < n - 1)
        n = workers + 1;
    tl_current.fn = fn;
    tl_current.closure = closure;
    tl_current.lo = lo;
    tl_current.extent = extent;
    tl_current.n = n;
    tl_current.caller_cpu = tl_current_cpu();
    __atomic_store_n(&tl_pending, n - 1, __ATOMIC_RELAXED);
    tl_status = 0;
    __atomic_add_fetch(&tl_generation, 1, __ATOMIC_RELEASE); /* spinning workers start here */
    pthread_cond_broadcast(&tl_work);
    pthread_mutex_unlock(&tl_lock);

    tl_in_chunk = 1;
    int32_t status = fn(tl_bound(lo, extent, n, 0), tl_bound(lo, extent, n, 1), closure);
    tl_in_chunk = 0;

    tl_spin(&tl_pending, 0, 1);
    pthread_mutex_lock(&tl_lock);
    while (tl_pending > 0)
        pthread_cond_wait(&tl_done, &tl_lock);
    if (tl_status > status)
        status = tl_status;
    pthread_mutex_unlock(&tl_lock);
    pthread_mutex_unlock(&tl_region_lock);
    return status;
}

#ifdef TENSORLANG_LIBRARY_KERNEL
/* Shared libraries made by `tensorlang export --format so` name their kernel here, for tensorlang.load(). */
const char *tensorlang_library_kernel(void) { return TENSORLANG_LIBRARY_KERNEL; }
#endif
