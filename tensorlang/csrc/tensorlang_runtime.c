/* tensorlang runtime for exported kernels: the thread pool behind parallel loops.
 *
 * Kernels that tensorlang compiles call
 *
 *     int32_t tensorlang_parallel_for(int32_t (*fn)(int64_t begin, int64_t end, void *closure),
 *                                     void *closure, int64_t lo, int64_t extent);
 *
 * for each parallel loop. This file provides it for kernels exported with `tensorlang export`, and, built as a
 * shared library with -DTENSORLANG_JIT_RUNTIME (which makes the symbols visible), for the JIT's kernels in the
 * Python process (tensorlang/threadpool.py builds and caches it). It returns the largest status of the calls of
 * `fn` (0: all succeeded, 1: one could not allocate its temporaries).
 *
 * Scheduling (the ideas of LLVM libomp's static-steal schedule and TBB's work stealing). The range is cut into
 * units (its iterations; runs of iterations when it has more than 65535) and each of the loop's n threads (the
 * calling thread is one) owns a contiguous home range of units, [lo + extent*t/n, lo + extent*(t+1)/n) for
 * thread t as before, so that on an idle machine every thread runs the same part of every loop. A thread claims
 * pieces of about 1/8 of its home range from the front with a compare-and-swap on a word of its own; once its
 * home range is empty it steals the back half of the units another thread has not claimed (all of them, in
 * halves, from a thread that has not started; not the last one of a thread that has, unless the caller has
 * waited for it a while, see below) and goes on with that. The
 * loop is over when every unit has been run, counted per thread: a thread that never wakes (its CPU is taken by
 * another process, or by another thread pool's spinning threads) has its whole range run by the others, and the
 * caller waits only for pieces already claimed. Each claim word carries the loop's number (32 bits: a thread
 * would have to stop between reading a word and claiming from it for 2**32 loops to be fooled), so a thread that
 * arrives after its loop ended cannot claim the next loop's units with the old loop's function.
 *
 * Threads: TENSORLANG_NUM_THREADS (read at every call), else the CPUs in this process's affinity mask. The pool
 * grows on demand. Between loops its threads spin for TENSORLANG_SPIN_US microseconds (default 500, at most
 * 1000000; read at every call; 0: sleep at once) before they sleep: waking a sleeping thread costs about 0.1 ms
 * on a virtual machine (OpenMP and OpenBLAS spin for the same reason). A spinning thread yields the CPU every
 * microsecond or so, so that more threads than CPUs do not starve the ones with work. A yield that ran another
 * thread for more than 0.2 ms (the CPU is crowded: another process, or another pool's threads spinning after
 * their own loops, as OpenMP's and onnxruntime's do for milliseconds) ends the spin, and that worker sleeps
 * after each loop, after 30 us of spinning without a yield, for a while (5 ms, doubling while the CPU stays
 * crowded, up to 0.2 s, less once /proc/loadavg shows no more threads ready than CPUs): the next loop's
 * futex wake-up gets it the CPU, where a yielding spinner would wait out the other thread's whole slice and miss
 * the loops meanwhile. The caller, once nothing is left to claim, spins for the claimed pieces at most about
 * twice its own time per piece (at least 50 us, at most TENSORLANG_SPIN_US; less when a yield shows its CPU
 * crowded), then runs the last units the slow threads left unclaimed and sleeps: a thread that holds a piece but
 * lost its CPU then gets the caller's. Sleeping threads are woken with a futex (Linux), by the caller or by the
 * thread that ran the last piece, never through a thread that may not be running.
 * Oversubscription: a wait for claimed pieces longer than 1 ms and 8 times the caller's own time per piece is a
 * stall (a thread that claimed work lost its CPU); after 8 stalls within 10 seconds that took a tenth of the time since
 * the first of them began, one line on stderr (once per process) says that the threads do not get their CPUs and
 * names TENSORLANG_NUM_THREADS.
 * tensorlang_pool_stats() (below) returns the counters behind it.
 * A worker that picks up a loop on the CPU the caller published it from moves itself to another CPU (where the
 * loop has no more threads than CPUs): the two would otherwise run one after the other. The workers are named
 * tensorlang-1, tensorlang-2, ... (Linux).
 * A value of either variable that is not an integer in its range (1 to 1024 threads) is not used: the default is,
 * and one line on stderr (once per variable and process) names the variable and the values it takes.
 * Concurrent callers are safe: parallel regions from different threads take turns (a mutex); a parallel loop
 * reached from inside a piece runs serially on that thread. After fork() the child starts a fresh pool.
 *
 * The symbols have hidden visibility, so a shared library built from it keeps its own copy and never binds to
 * (or exports) another definition. Build: cc -O2 -c tensorlang_runtime.c (link with -lpthread where needed).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity, CPU_COUNT */
#endif
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/resource.h> /* getrusage(RUSAGE_THREAD) */
#include <sys/syscall.h>
#endif

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
#define TL_MAX_UNITS 65535        /* a loop has at most this many units: a claim word holds two 16-bit offsets */
#define TL_PIECES_PER_THREAD 8    /* pieces of a home range: what a thread that stops can leave unclaimed */
#define TL_WAIT_SPIN_MIN_US 50    /* the caller spins at least this long for claimed pieces before it sleeps */
#define TL_STALL_US 1000          /* a wait for claimed pieces this long (and 8 pieces' time) is a stall */
#define TL_STALLS_TO_WARN 8       /* this many stalls ... */
#define TL_STALL_WINDOW_US 10000000 /* ... within this time, */
#define TL_STALL_SHARE 10         /* ... that took at least 1/this of the time since the first of them began: say so */
#define TL_YIELD_CROWDED_US 200   /* a sched_yield this long ran another thread for (most of) its slice */
#define TL_CROWDED_SLEEP_MIN_US 5000  /* after that, a worker sleeps at once after each loop for this long, */
#define TL_CROWDED_SLEEP_MAX_US 200000 /* twice as long each time the CPU is crowded again soon after, up to this */
#define TL_CROWDED_SPIN_US 30      /* ... after a short spin that does not yield, */
#define TL_CROWD_CHECK_US 5000    /* meanwhile it counts the machine's ready threads this often (few: it spins) */

typedef int32_t (*tl_chunk_fn)(int64_t begin, int64_t end, void *closure);

/* One parallel loop as the threads see it. */
struct tl_loop {
    tl_chunk_fn fn;
    void *closure;
    int64_t lo, extent, grain; /* unit u is [lo + u*grain, lo + (u+1)*grain) clipped to the range */
    int32_t n;                 /* threads; thread 0 is the caller, worker i is thread i */
    int32_t units, piece;      /* units in all; units a thread claims at once from its own range */
    int32_t caller_cpu;        /* the CPU the caller ran on when it published the loop; -1: unknown */
};

/* The loop being run: written by the caller (under tl_region_lock) before it publishes `generation`; a worker
 * reads it after reading the generation, and uses what it read only once a claim tagged with that generation
 * succeeded (which proves the loop was still running when it read it, see tl_read_loop). */
static struct {
    uint32_t generation; /* the loop's number (tag of its claim words); workers sleep on it (a futex word) */
    struct tl_loop loop;
} tl_job __attribute__((aligned(64)));

/* Each thread's own cache line: its claim word, the units it finished in the current loop, its counters. */
struct tl_slot {
    uint64_t range; /* generation << 32 | front << 16 | back: units [front, back) not yet claimed */
    uint32_t done;  /* units of the current loop this thread has run */
    int64_t pieces, steals, late; /* totals since the process started (tensorlang_pool_stats) */
    int64_t spins_given_up;        /* spins this thread stopped because another thread wanted its CPU */
    int64_t sleep_at_once_until;   /* a worker's: until then it sleeps after each loop without spinning, */
    int64_t crowded_at, crowded_sleep_us; /* set when it last found its CPU crowded, for so long */
    int64_t crowd_checked_at;      /* when it last read the runnable threads (tl_machine_crowded) */
} __attribute__((aligned(64)));
static struct tl_slot tl_slots[TL_MAX_THREADS];

/* What threads that finish pieces read (the caller waiting) and write (a status other than 0, the wake-up). */
static struct {
    int32_t status;      /* largest status of the current loop's pieces */
    int caller_waiting;  /* the caller sleeps until the loop is over */
    uint32_t wake;       /* futex word the caller sleeps on; bumped by the thread that ends the loop */
    int sleepers;        /* workers asleep (or about to sleep) on tl_job.generation */
} tl_end __attribute__((aligned(64)));

/* Counters only the caller writes (under tl_region_lock). */
static struct {
    int64_t loops, caller_sleeps, stalls;
    int64_t recent[TL_STALLS_TO_WARN]; /* times the last stalls ended, a ring, */
    int64_t lost[TL_STALLS_TO_WARN];   /* and how long each waited */
    int warned;
} tl_stats;

static pthread_mutex_t tl_region_lock = PTHREAD_MUTEX_INITIALIZER; /* one parallel region at a time */
static pthread_mutex_t tl_lock = PTHREAD_MUTEX_INITIALIZER;        /* guards starting workers */
static int tl_workers; /* worker threads started (ids 1..tl_workers) */
static int tl_atfork_done;
static int tl_spin_us = TL_DEFAULT_SPIN_US; /* how long to spin before sleeping (set by each call) */
static TL_THREAD_LOCAL int tl_in_chunk;     /* this thread is running a piece */

struct tl_worker_arg {
    int id;
    uint32_t seen; /* the generation already published when the worker was created */
};

#define TL_LOAD(p) __atomic_load_n(p, __ATOMIC_RELAXED)
#define TL_STORE(p, v) __atomic_store_n(p, v, __ATOMIC_RELAXED)
#define TL_TAG(w) ((uint32_t)((w) >> 32))
#define TL_FRONT(w) ((uint32_t)((w) >> 16) & 0xffffu)
#define TL_BACK(w) ((uint32_t)(w) & 0xffffu)

static uint64_t tl_word(uint32_t tag, uint32_t front, uint32_t back) {
    return (uint64_t)tag << 32 | (uint64_t)front << 16 | back;
}

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

/* Times this thread was switched out while it could run (another thread took its CPU); -1 where unknown. */
static long tl_involuntary_switches(void) {
#if defined(__linux__) && defined(RUSAGE_THREAD)
    struct rusage use;
    if (getrusage(RUSAGE_THREAD, &use) == 0)
        return use.ru_nivcsw;
#endif
    return -1;
}

/* Whether the machine has more threads ready to run (the count in /proc/loadavg, which includes the calling
 * thread) than this thread may use CPUs: 1 or 0; -1 where that cannot be read. Where other CPUs than this
 * thread's are busy it says 1 when its own may be free: then the crowded state lasts its set time. */
static int tl_machine_crowded(void) {
#ifdef __linux__
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[128];
    ssize_t got = read(fd, text, sizeof text - 1);
    close(fd);
    if (got <= 0)
        return -1;
    text[got] = '\0';
    const char *p = text; /* "0.70 1.48 1.67 3/109 673": the fourth field is running/total */
    for (int field = 0; field < 3 && p; field++) {
        p = strchr(p, ' ');
        if (p)
            p++;
    }
    if (!p)
        return -1;
    char *end;
    long running = strtol(p, &end, 10);
    cpu_set_t mine;
    long cpus = sched_getaffinity(0, sizeof mine, &mine) == 0 ? CPU_COUNT(&mine) : sysconf(_SC_NPROCESSORS_ONLN);
    if (end == p || *end != '/' || cpus < 1)
        return -1;
    return running > cpus;
#else
    return -1;
#endif
}

/* sched_yield() for a spinning thread; returns whether the CPU is crowded: the yield ran another thread for more
 * than TL_YIELD_CROWDED_US (its scheduler slice, often milliseconds, is then lost to the spin). `*switches`
 * holds this thread's involuntary switches before its spin's first yield (-2: not read yet; read then, so that a
 * spin that ends before it costs no system call): a new switch tells a yield that ran another thread apart
 * from the host pausing a virtual CPU. */
static int tl_yield_was_crowded(long *switches) {
    if (*switches == -2)
        *switches = tl_involuntary_switches();
    int64_t before = tl_now_us();
    sched_yield();
    if (tl_now_us() - before <= TL_YIELD_CROWDED_US)
        return 0;
    long now = tl_involuntary_switches();
    return now < 0 || now != *switches;
}

/* Sleep while *word == value; tl_wake_all(word) wakes the sleepers. Linux: a futex, so that waking takes no
 * lock a descheduled thread could hold. Elsewhere: a condition variable. */
#ifdef __linux__
static void tl_sleep_while(uint32_t *word, uint32_t value) {
    while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == value)
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, value, NULL, NULL, 0);
}

static void tl_wake_all(uint32_t *word) { syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0); }
#else
static pthread_cond_t tl_wake_cond = PTHREAD_COND_INITIALIZER;

static void tl_sleep_while(uint32_t *word, uint32_t value) {
    pthread_mutex_lock(&tl_lock);
    while (__atomic_load_n(word, __ATOMIC_SEQ_CST) == value)
        pthread_cond_wait(&tl_wake_cond, &tl_lock);
    pthread_mutex_unlock(&tl_lock);
}

static void tl_wake_all(uint32_t *word) {
    (void)word;
    pthread_mutex_lock(&tl_lock);
    pthread_cond_broadcast(&tl_wake_cond);
    pthread_mutex_unlock(&tl_lock);
}
#endif

/* Whether every unit of the loop has been run. */
static int tl_finished(int n, int32_t units) {
    uint32_t done = 0;
    for (int t = 0; t < n; t++)
        done += __atomic_load_n(&tl_slots[t].done, __ATOMIC_SEQ_CST);
    return done == (uint32_t)units;
}

/* Run units [f, b) of the loop as thread `me` and count them; wake the caller if it sleeps and they were the
 * last. */
static void tl_run(const struct tl_loop *L, struct tl_slot *me, uint32_t f, uint32_t b) {
    int64_t begin = L->lo + (int64_t)f * L->grain;
    int64_t end = b >= (uint32_t)L->units ? L->lo + L->extent : L->lo + (int64_t)b * L->grain;
    int32_t status = L->fn(begin, end, L->closure);
    if (status > 0) {
        int32_t cur = __atomic_load_n(&tl_end.status, __ATOMIC_RELAXED);
        while (status > cur && !__atomic_compare_exchange_n(&tl_end.status, &cur, status, 0, __ATOMIC_RELAXED,
                                                            __ATOMIC_RELAXED))
            ;
    }
    TL_STORE(&me->pieces, TL_LOAD(&me->pieces) + 1);
    /* seq_cst store, then seq_cst load of caller_waiting: the caller stores that, then reads every `done` */
    __atomic_store_n(&me->done, TL_LOAD(&me->done) + (b - f), __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&tl_end.caller_waiting, __ATOMIC_SEQ_CST) && tl_finished(L->n, L->units)) {
        __atomic_add_fetch(&tl_end.wake, 1, __ATOMIC_SEQ_CST);
        tl_wake_all(&tl_end.wake);
    }
}

/* Take the back half of the units another thread of loop `tag` has not claimed: 1 and the units in [*f, *b), or 0
 * when there are none to take. From a thread that has not claimed any yet (asleep, or without a CPU), or when
 * `greedy`, half rounded up, so that its last unit is taken too; from one that has, half rounded down: it is
 * running, and would have started its last unit before the thief finished it (with a loop of 4 units on 2
 * threads, a caller that took a running worker's 4th unit ran 3). */
static int tl_steal(const struct tl_loop *L, uint32_t tag, int t, int greedy, uint32_t *f_out, uint32_t *b_out) {
    for (int k = 1; k < L->n; k++) {
        int v = (t + k) % L->n;
        struct tl_slot *victim = &tl_slots[v];
        uint32_t home = (uint32_t)tl_bound(0, L->units, L->n, v);
        uint64_t w = __atomic_load_n(&victim->range, __ATOMIC_ACQUIRE);
        for (;;) {
            if (TL_TAG(w) != tag)
                return 0; /* the loop is over */
            uint32_t f = TL_FRONT(w), b = TL_BACK(w);
            uint32_t c = greedy || f == home ? (b - f + 1) / 2 : (b - f) / 2;
            if (f >= b || c == 0)
                break;
            if (__atomic_compare_exchange_n(&victim->range, &w, tl_word(tag, f, b - c), 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                *f_out = b - c;
                *b_out = b;
                return 1;
            }
        }
    }
    return 0;
}

/* Run pieces of loop `tag` as thread `t` until no unit is left to claim (see tl_steal for `greedy`); returns how
 * many it ran. */
static int tl_participate(const struct tl_loop *L, uint32_t tag, int t, int greedy) {
    struct tl_slot *me = &tl_slots[t];
    uint32_t piece = (uint32_t)L->piece;
    int pieces = 0;
    for (;;) {
        uint64_t w = __atomic_load_n(&me->range, __ATOMIC_ACQUIRE);
        if (TL_TAG(w) != tag)
            return pieces; /* the loop is over (a worker that arrived late) */
        uint32_t f = TL_FRONT(w), b = TL_BACK(w);
        if (f < b) {
            uint32_t c = b - f < piece ? b - f : piece;
            if (__atomic_compare_exchange_n(&me->range, &w, tl_word(tag, f + c, b), 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE)) {
                tl_run(L, me, f, f + c);
                pieces++;
            }
            continue;
        }
        if (!tl_steal(L, tag, t, greedy, &f, &b))
            return pieces;
        TL_STORE(&me->steals, TL_LOAD(&me->steals) + 1);
        uint32_t c = b - f < piece ? b - f : piece;
        if (f + c < b) /* the rest becomes this thread's range, which others may steal from in turn */
            __atomic_store_n(&me->range, tl_word(tag, f + c, b), __ATOMIC_RELEASE);
        tl_run(L, me, f, f + c);
        pieces++;
    }
}

/* Copy the published loop, field by field (relaxed atomic loads: the caller may be writing the next one). The
 * copy may mix two loops when the one of `generation` ended meanwhile; it is used only after a claim tagged
 * with that generation succeeds: the caller writes a loop after a release fence that follows its seeing the
 * previous loop over, and the reader's acquire fence (below, in the worker) then makes any claim of the old loop
 * fail. Returns whether the copy is one the claim code can work on without faulting. */
static int tl_read_loop(struct tl_loop *L) {
    L->fn = TL_LOAD(&tl_job.loop.fn);
    L->closure = TL_LOAD(&tl_job.loop.closure);
    L->lo = TL_LOAD(&tl_job.loop.lo);
    L->extent = TL_LOAD(&tl_job.loop.extent);
    L->grain = TL_LOAD(&tl_job.loop.grain);
    L->n = TL_LOAD(&tl_job.loop.n);
    L->units = TL_LOAD(&tl_job.loop.units);
    L->piece = TL_LOAD(&tl_job.loop.piece);
    L->caller_cpu = TL_LOAD(&tl_job.loop.caller_cpu);
    return L->n >= 2 && L->n <= TL_MAX_THREADS && L->piece >= 1;
}

static void tl_write_loop(const struct tl_loop *L) {
    TL_STORE(&tl_job.loop.fn, L->fn);
    TL_STORE(&tl_job.loop.closure, L->closure);
    TL_STORE(&tl_job.loop.lo, L->lo);
    TL_STORE(&tl_job.loop.extent, L->extent);
    TL_STORE(&tl_job.loop.grain, L->grain);
    TL_STORE(&tl_job.loop.n, L->n);
    TL_STORE(&tl_job.loop.units, L->units);
    TL_STORE(&tl_job.loop.piece, L->piece);
    TL_STORE(&tl_job.loop.caller_cpu, L->caller_cpu);
}

/* Move the calling worker off `cpu`, the caller's, where a job of `n` threads finds them both there: onto the
 * `id`-th (counting round) of the other CPUs the worker may use, by narrowing its affinity to that CPU, which
 * migrates it at once, and widening it back, so that the scheduler stays free to place it later. Two threads
 * of one parallel loop on one CPU run one after the other, and on a virtual machine the scheduler can leave
 * them so for hundreds of calls (measured: a two-thread matmul at one-thread speed for 0.3 s). Nothing moves
 * where the job has more threads than the worker has CPUs: some must share. */
static int tl_move_off(int cpu, int id, int n) {
#ifdef __linux__
    cpu_set_t allowed, one;
    if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || n > CPU_COUNT(&allowed))
        return 0;
    int others = CPU_COUNT(&allowed) - (CPU_ISSET(cpu, &allowed) ? 1 : 0);
    if (others < 1)
        return 0;
    int want = (id - 1) % others;
    for (int c = 0; c < CPU_SETSIZE; c++) {
        if (!CPU_ISSET(c, &allowed) || c == cpu || want-- > 0)
            continue;
        CPU_ZERO(&one);
        CPU_SET(c, &one);
        if (sched_setaffinity(0, sizeof one, &one) != 0)
            return 0;
        sched_setaffinity(0, sizeof allowed, &allowed);
        return 1;
    }
    return 0;
#else
    (void)cpu;
    (void)id;
    (void)n;
    return 0;
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

/* Worker `me` found its CPU crowded at `now`: it sleeps at once after its loops for a while, TL_CROWDED_SLEEP_MIN_US
 * at first and twice as long each time it finds the CPU crowded again within 4 such times (up to
 * TL_CROWDED_SLEEP_MAX_US): a kernel thread's short burst costs a few milliseconds of sleeping, while a
 * competitor that stays is probed (a lost slice each time) about every 0.2 s. Meanwhile, every
 * TL_CROWD_CHECK_US, it reads how many threads the machine has ready to run, and spins again as soon as they
 * are no more than its CPUs (tl_next_loop), so that the end of the crowding costs no more than that. */
static void tl_note_crowded(struct tl_slot *me, int64_t now) {
    int64_t sleep_us = me->crowded_sleep_us;
    if (sleep_us > 0 && now - me->crowded_at < 4 * sleep_us)
        sleep_us = 2 * sleep_us < TL_CROWDED_SLEEP_MAX_US ? 2 * sleep_us : TL_CROWDED_SLEEP_MAX_US;
    else
        sleep_us = TL_CROWDED_SLEEP_MIN_US;
    me->crowded_at = now;
    me->crowded_sleep_us = sleep_us;
    me->sleep_at_once_until = now + sleep_us;
    TL_STORE(&me->spins_given_up, TL_LOAD(&me->spins_given_up) + 1);
}

/* Wait until a loop other than `seen` is published: spin up to `spin_us` microseconds (yielding the CPU every
 * microsecond or so), then sleep. Returns its generation. A yield that shows the CPU crowded (another process, or
 * another thread pool spinning, wants it) ends the spin, and worker `id` (slot `me`) sleeps at once after its
 * loops for a while (tl_note_crowded): a spinning thread that yields hands its CPU over for the other thread's
 * whole slice and misses the loops published meanwhile, while a sleeping one is woken by the next loop and the
 * scheduler gives it the CPU then. Where the crowded CPU is the one the caller of the `last` loop ran on (most
 * likely crowded by that caller), the worker moves off it and spins on instead; where the machine has no more
 * threads ready to run than CPUs right after (the thread it yielded to came and went: a kernel thread's
 * burst), it spins on. */
static uint32_t tl_next_loop(struct tl_slot *me, uint32_t seen, int64_t spin_us, const struct tl_loop *last,
                             int id) {
    int64_t start = tl_now_us();
    if (start < me->sleep_at_once_until && start - me->crowd_checked_at >= TL_CROWD_CHECK_US) {
        me->crowd_checked_at = start;
        if (tl_machine_crowded() == 0)
            me->sleep_at_once_until = 0; /* the threads that crowded it are gone: spin again */
    }
    if (start < me->sleep_at_once_until) { /* spin a moment without yielding: the next loop of a call comes soon */
        int64_t brief = spin_us < TL_CROWDED_SPIN_US ? spin_us : TL_CROWDED_SPIN_US;
        spin_us = 0;
        while (tl_now_us() - start < brief)
            for (int i = 0; i < 128; i++) {
                if (__atomic_load_n(&tl_job.generation, __ATOMIC_ACQUIRE) != seen)
                    return __atomic_load_n(&tl_job.generation, __ATOMIC_ACQUIRE);
                tl_pause();
            }
    }
    if (spin_us > 0) {
        long switches = -2;
        for (;;) {
            for (int i = 0; i < 128; i++) {
                if (__atomic_load_n(&tl_job.generation, __ATOMIC_ACQUIRE) != seen)
                    return __atomic_load_n(&tl_job.generation, __ATOMIC_ACQUIRE);
                tl_pause();
            }
            if (tl_now_us() - start >= spin_us)
                break;
            if (tl_yield_was_crowded(&switches)) { /* more threads than CPUs: let the thread with work run */
                if ((last->caller_cpu >= 0 && tl_current_cpu() == last->caller_cpu &&
                     tl_move_off(last->caller_cpu, id, last->n)) || /* the caller's CPU: spin on another one */
                    tl_machine_crowded() == 0) {                    /* a thread that came and went: spin on */
                    switches = -2;
                    continue;
                }
                tl_note_crowded(me, tl_now_us());
                break;
            }
        }
    }
    __atomic_add_fetch(&tl_end.sleepers, 1, __ATOMIC_SEQ_CST); /* then reads the generation (the caller: the */
    tl_sleep_while(&tl_job.generation, seen);                  /* other way round) */
    __atomic_sub_fetch(&tl_end.sleepers, 1, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&tl_job.generation, __ATOMIC_ACQUIRE);
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
    struct tl_slot *me = &tl_slots[arg.id];
    struct tl_loop last = {.caller_cpu = -1}; /* the last loop this worker was needed for */
    for (;;) {
        uint32_t tag = tl_next_loop(me, arg.seen, TL_LOAD(&tl_spin_us), &last, arg.id);
        arg.seen = tag;
        struct tl_loop L;
        int usable = tl_read_loop(&L);
        __atomic_thread_fence(__ATOMIC_ACQUIRE); /* see tl_read_loop */
        if (!usable || arg.id >= L.n)
            continue; /* not needed for this loop (or it is over already) */
        last = L;
        if (L.caller_cpu >= 0 && tl_current_cpu() == L.caller_cpu)
            tl_move_off(L.caller_cpu, arg.id, L.n);
        if (tl_participate(&L, tag, arg.id, 0) == 0)
            TL_STORE(&me->late, TL_LOAD(&me->late) + 1);
    }
    return NULL;
}

static void tl_after_fork_in_child(void) {
    /* the pool's threads do not exist in the child: start over */
    pthread_mutex_init(&tl_region_lock, NULL);
    pthread_mutex_init(&tl_lock, NULL);
#ifndef __linux__
    pthread_cond_init(&tl_wake_cond, NULL);
#endif
    tl_workers = 0;
    tl_end.sleepers = 0;
    tl_end.caller_waiting = 0;
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
        arg->seen = __atomic_load_n(&tl_job.generation, __ATOMIC_RELAXED);
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

/* A wait for claimed pieces that took `lost` microseconds until `now` was a stall: count it, and say so once
 * per process after TL_STALLS_TO_WARN of them within TL_STALL_WINDOW_US that took at least 1/TL_STALL_SHARE of
 * the time since the first of them began (a host that takes a virtual CPU away for a millisecond now and then
 * costs a fraction of a percent: no reason to run on fewer threads). Called by the caller, under
 * tl_region_lock. */
static void tl_note_stall(int64_t now, int64_t lost, int n) {
    tl_stats.recent[tl_stats.stalls % TL_STALLS_TO_WARN] = now;
    tl_stats.lost[tl_stats.stalls % TL_STALLS_TO_WARN] = lost;
    TL_STORE(&tl_stats.stalls, tl_stats.stalls + 1);
    int oldest = (int)(tl_stats.stalls % TL_STALLS_TO_WARN); /* of the last TL_STALLS_TO_WARN */
    int64_t first = tl_stats.recent[oldest], began = first - tl_stats.lost[oldest], waited = 0;
    for (int i = 0; i < TL_STALLS_TO_WARN; i++)
        waited += tl_stats.lost[i];
    if (tl_stats.stalls >= TL_STALLS_TO_WARN && now - first < TL_STALL_WINDOW_US &&
        waited * TL_STALL_SHARE >= now - began && !tl_stats.warned) {
        TL_STORE(&tl_stats.warned, 1);
        fprintf(stderr,
                "tensorlang: parallel loops keep waiting for threads that do not get a CPU (%d threads; other "
                "programs, or another thread pool in this process, use the CPUs); fewer threads may be faster: set "
                "TENSORLANG_NUM_THREADS (e.g. to 1)\n",
                n);
    }
}

/* The caller ran its `pieces` pieces of loop `tag` since `t0` and nothing is left to claim: wait until the pieces
 * other threads claimed are done. Spin about twice the caller's time per piece (within [TL_WAIT_SPIN_MIN_US, spin
 * limit]); then take the last units the slow threads left, and sleep, so that a thread holding a piece that lost
 * its CPU can get this one. */
static void tl_wait(const struct tl_loop *L, uint32_t tag, int64_t t0, int pieces) {
    if (tl_finished(L->n, L->units))
        return;
    int64_t start = tl_now_us();
    int64_t per_piece = pieces > 0 ? (start - t0) / pieces : 0;
    int64_t spin = 2 * per_piece > TL_WAIT_SPIN_MIN_US ? 2 * per_piece : TL_WAIT_SPIN_MIN_US;
    int64_t limit = TL_LOAD(&tl_spin_us);
    if (spin > limit)
        spin = limit;
    int over = 0;
    long switches = -2;
    for (;;) {
        for (int i = 0; i < 128 && !over; i++) {
            over = tl_finished(L->n, L->units);
            tl_pause();
        }
        if (over || tl_now_us() - start >= spin)
            break;
        if (tl_yield_was_crowded(&switches)) { /* the CPU is wanted: stop spinning (sleep below) */
            TL_STORE(&tl_slots[0].spins_given_up, TL_LOAD(&tl_slots[0].spins_given_up) + 1);
            break;
        }
    }
    if (!over) {
        tl_in_chunk = 1;
        if (tl_participate(L, tag, 0, 1) > 0)
            start = tl_now_us(); /* from here on it waits for claimed pieces only */
        tl_in_chunk = 0;
    }
    if (!over && !tl_finished(L->n, L->units)) {
        TL_STORE(&tl_stats.caller_sleeps, tl_stats.caller_sleeps + 1);
        __atomic_store_n(&tl_end.caller_waiting, 1, __ATOMIC_SEQ_CST);
        for (;;) {
            uint32_t wake = __atomic_load_n(&tl_end.wake, __ATOMIC_SEQ_CST);
            if (tl_finished(L->n, L->units))
                break;
            tl_sleep_while(&tl_end.wake, wake);
        }
        __atomic_store_n(&tl_end.caller_waiting, 0, __ATOMIC_RELAXED);
    }
    int64_t now = tl_now_us();
    if (now - start >= TL_STALL_US && now - start >= 8 * per_piece)
        tl_note_stall(now, now - start, L->n);
}

TL_HIDDEN int32_t tensorlang_parallel_for(tl_chunk_fn fn, void *closure, int64_t lo, int64_t extent) {
    if (extent <= 0)
        return 0;
    int n = tl_num_threads();
    if ((int64_t)n > extent)
        n = (int)extent;
    if (n == 1 || tl_in_chunk)
        return fn(lo, lo + extent, closure);
    TL_STORE(&tl_spin_us, tl_env_int("TENSORLANG_SPIN_US", 0, TL_MAX_SPIN_US, TL_DEFAULT_SPIN_US, "500",
                                     &tl_warned_spin));
    pthread_mutex_lock(&tl_region_lock);
    pthread_mutex_lock(&tl_lock);
    int workers = tl_grow(n - 1);
    pthread_mutex_unlock(&tl_lock);
    if (workers < n - 1)
        n = workers + 1;
    if (n == 1) {
        pthread_mutex_unlock(&tl_region_lock);
        return fn(lo, lo + extent, closure);
    }
    struct tl_loop L;
    L.fn = fn;
    L.closure = closure;
    L.lo = lo;
    L.extent = extent;
    L.grain = (extent + TL_MAX_UNITS - 1) / TL_MAX_UNITS;
    L.units = (int32_t)((extent + L.grain - 1) / L.grain);
    L.n = n;
    L.piece = (L.units + TL_PIECES_PER_THREAD * n - 1) / (TL_PIECES_PER_THREAD * n);
    L.caller_cpu = tl_current_cpu();
    uint32_t tag = TL_LOAD(&tl_job.generation) + 1; /* only callers write it, one at a time */
    __atomic_thread_fence(__ATOMIC_RELEASE); /* see tl_read_loop */
    tl_write_loop(&L);
    for (int t = 0; t < n; t++) {
        TL_STORE(&tl_slots[t].range, tl_word(tag, (uint32_t)tl_bound(0, L.units, n, t),
                                             (uint32_t)tl_bound(0, L.units, n, t + 1)));
        TL_STORE(&tl_slots[t].done, 0);
    }
    TL_STORE(&tl_end.status, 0);
    __atomic_store_n(&tl_job.generation, tag, __ATOMIC_SEQ_CST); /* spinning workers start here */
    if (__atomic_load_n(&tl_end.sleepers, __ATOMIC_SEQ_CST) > 0)
        tl_wake_all(&tl_job.generation);
    TL_STORE(&tl_stats.loops, tl_stats.loops + 1);

    int64_t t0 = tl_now_us();
    tl_in_chunk = 1;
    int pieces = tl_participate(&L, tag, 0, 0);
    tl_in_chunk = 0;
    tl_wait(&L, tag, t0, pieces);
    int32_t status = __atomic_load_n(&tl_end.status, __ATOMIC_ACQUIRE);
    pthread_mutex_unlock(&tl_region_lock);
    return status;
}

/* The pool's counters since the process started, for tests and benchmarks: writes up to `n` of them to `out`
 * in this order and returns how many there are (8):
 *   0 parallel loops run on the pool, 1 pieces the callers ran, 2 pieces the workers ran, 3 steals,
 *   4 times a worker arrived after all the work was taken, 5 times the caller slept waiting for claimed pieces,
 *   6 stalls (see the top of the file), 7 spins given up because another thread wanted the CPU.
 * Each is read without stopping the pool. */
TL_HIDDEN int32_t tensorlang_pool_stats(int64_t *out, int32_t n) {
    int64_t v[8] = {TL_LOAD(&tl_stats.loops), TL_LOAD(&tl_slots[0].pieces), 0, 0, 0,
                    TL_LOAD(&tl_stats.caller_sleeps), TL_LOAD(&tl_stats.stalls), 0};
    for (int t = 0; t < TL_MAX_THREADS; t++) {
        if (t > 0)
            v[2] += TL_LOAD(&tl_slots[t].pieces);
        v[3] += TL_LOAD(&tl_slots[t].steals);
        v[4] += TL_LOAD(&tl_slots[t].late);
        v[7] += TL_LOAD(&tl_slots[t].spins_given_up);
    }
    for (int i = 0; i < n && i < 8; i++)
        out[i] = v[i];
    return 8;
}

#ifdef TENSORLANG_LIBRARY_KERNEL
/* Shared libraries made by `tensorlang export --format so` name their kernel here, for tensorlang.load(). */
const char *tensorlang_library_kernel(void) { return TENSORLANG_LIBRARY_KERNEL; }
#endif
