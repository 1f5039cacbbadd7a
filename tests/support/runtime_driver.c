/* Drives tensorlang/csrc/tensorlang_runtime.c as an exported library carries it (built with `cc -O2 -c`, linked
 * in), with no Python: tests/codegen/test_threadpool.py builds it and runs one mode per test. Every mode exits 0 and
 * prints "ok ..." when each parallel loop ran every iteration exactly once; a wrong result prints what and exits
 * 1. An alarm ends a mode that hangs (exit by SIGALRM).
 *
 *   check       extents from 1 to past 2**20 and odd starts: each iteration once, pieces inside the range, the
 *               largest status returned
 *   nested      a parallel loop inside a piece runs serially, and right
 *   concurrent  4 threads call parallel loops at once, 300 each
 *   park        worker 1 is stopped (a signal whose handler blocks) before a loop: loops still complete, its
 *               share run by the others; then it is released and loops go on
 *   stall       a worker stops inside a piece it claimed, loop after loop; each is released once the caller sleeps
 *               waiting for it (then after 20 ms), until the runtime has counted 8 stalls: every loop
 *               completes, and the runtime says so on stderr, once
 *   sparse      the same stalls half a second apart (the process idle between them): counted, and too small a share
 *               of the time to say anything
 *   fork        a forked child runs parallel loops on a pool of its own
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int32_t tensorlang_parallel_for(int32_t (*fn)(int64_t, int64_t, void *), void *closure, int64_t lo,
                                int64_t extent);
int32_t tensorlang_pool_stats(int64_t *out, int32_t n);

#define MAX_EXTENT ((1 << 20) + 7)
#define NONE INT64_MIN

static unsigned char *hits;
static pid_t main_tid;

static pid_t tid(void) { return (pid_t)syscall(SYS_gettid); }

static void pause_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static void fail(const char *what, long a, long b) {
    printf("FAIL %s %ld %ld\n", what, a, b);
    exit(1);
}

struct span {
    int64_t lo, extent;
    unsigned char *hits;
    int64_t fail_at; /* the piece holding this iteration returns 1 (NONE: none) */
};

static int32_t count(int64_t begin, int64_t end, void *closure) {
    struct span *s = closure;
    if (begin < s->lo || end > s->lo + s->extent || begin >= end)
        fail("piece outside the range", (long)begin, (long)end);
    int32_t status = 0;
    for (int64_t i = begin; i < end; i++) {
        __atomic_add_fetch(&s->hits[i - s->lo], 1, __ATOMIC_RELAXED);
        if (i == s->fail_at)
            status = 1;
    }
    return status;
}

static void expect_once(struct span *s) {
    for (int64_t i = 0; i < s->extent; i++)
        if (s->hits[i] != 1)
            fail("iteration run this many times", (long)(s->lo + i), s->hits[i]);
    memset(s->hits, 0, (size_t)s->extent);
}

static void run_span(struct span *s, int32_t want) {
    int32_t got = tensorlang_parallel_for(count, s, s->lo, s->extent);
    if (got != want)
        fail("status", got, want);
    expect_once(s);
}

static void stats(const char *mode) {
    int64_t v[7];
    tensorlang_pool_stats(v, 7);
    printf("ok %s loops %lld caller_pieces %lld worker_pieces %lld steals %lld late %lld caller_sleeps %lld stalls %lld\n",
           mode, (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3], (long long)v[4],
           (long long)v[5], (long long)v[6]);
}

static void mode_check(void) {
    static const int64_t big[] = {100, 255, 1000, 4099, 65535, 65536, 65537, 70001, 200003, MAX_EXTENT};
    struct span s = {0, 0, hits, NONE};
    for (int rep = 0; rep < 3; rep++) {
        for (int64_t e = 1; e <= 70; e++) {
            s.lo = rep * 1000 - 7;
            s.extent = e;
            s.fail_at = NONE;
            run_span(&s, 0);
        }
        for (size_t i = 0; i < sizeof big / sizeof big[0]; i++) {
            s.lo = -3 + rep;
            s.extent = big[i];
            s.fail_at = NONE;
            run_span(&s, 0);
            s.fail_at = s.lo + big[i] - 1 - rep; /* a piece that fails makes the loop return 1 */
            run_span(&s, 1);
        }
    }
    stats("check");
}

static int32_t outer(int64_t begin, int64_t end, void *closure) {
    struct span *rows = closure;
    for (int64_t r = begin; r < end; r++) {
        struct span inner = {r * 50, 50, rows->hits + r * 50, NONE};
        if (tensorlang_parallel_for(count, &inner, inner.lo, inner.extent) != 0)
            return 1;
    }
    return 0;
}

static void mode_nested(void) {
    for (int rep = 0; rep < 20; rep++) {
        struct span rows = {0, 40, hits, NONE};
        if (tensorlang_parallel_for(outer, &rows, 0, 40) != 0)
            fail("nested status", rep, 0);
        struct span all = {0, 40 * 50, hits, NONE};
        expect_once(&all);
    }
    stats("nested");
}

static void *caller(void *arg) {
    long k = (long)arg;
    unsigned char *mine = hits + k * 10000;
    for (int rep = 0; rep < 300; rep++) {
        struct span s = {rep % 7, 1 + (rep * 37 + k) % 9000, mine, NONE};
        run_span(&s, 0);
    }
    return NULL;
}

static void mode_concurrent(void) {
    pthread_t t[4];
    for (long k = 0; k < 4; k++)
        pthread_create(&t[k], NULL, caller, (void *)k);
    for (int k = 0; k < 4; k++)
        pthread_join(t[k], NULL);
    stats("concurrent");
}

/* A worker stopped from outside: its handler for SIGUSR1 blocks until released. */
static volatile sig_atomic_t held, release;

static void hold(int sig) {
    (void)sig;
    held = 1;
    while (!release)
        pause_us(100);
    held = 0;
}

static pid_t worker_tid(int id) {
    char want[32], path[300], name[64];
    snprintf(want, sizeof want, "tensorlang-%d\n", id);
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    pid_t found = 0;
    while (d && (e = readdir(d))) {
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (f && fgets(name, sizeof name, f) && strcmp(name, want) == 0)
            found = (pid_t)atoi(e->d_name);
        if (f)
            fclose(f);
    }
    if (d)
        closedir(d);
    return found;
}

static void mode_park(void) {
    struct span s = {5, 4099, hits, NONE};
    run_span(&s, 0); /* starts the pool */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = hold;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pid_t w = 0;
    for (int i = 0; i < 10000 && !w; i++) { /* a worker names itself once it runs */
        w = worker_tid(1);
        if (!w)
            pause_us(1000);
    }
    if (!w)
        fail("no thread tensorlang-1", 0, 0);
    syscall(SYS_tgkill, getpid(), w, SIGUSR1);
    while (!held)
        pause_us(100);
    for (int rep = 0; rep < 200; rep++) {
        s.extent = 1 + rep * 41;
        run_span(&s, 0);
    }
    int64_t v[7];
    tensorlang_pool_stats(v, 7);
    if (v[3] == 0)
        fail("nobody took the stopped worker's share", 0, 0);
    release = 1;
    while (held)
        pause_us(100);
    for (int rep = 0; rep < 50; rep++) {
        s.extent = 1 + rep * 83;
        run_span(&s, 0);
    }
    stats("park");
}

/* A worker stops inside a piece: the piece a worker runs while `stop_next` is set waits for `go`. */
static int stop_next, stopped, go;

static int32_t count_or_stop(int64_t begin, int64_t end, void *closure) {
    if (tid() != main_tid && __atomic_exchange_n(&stop_next, 0, __ATOMIC_ACQ_REL)) {
        while (__atomic_load_n(&go, __ATOMIC_ACQUIRE)) /* the releaser is not done with the last stop */
            pause_us(50);
        __atomic_store_n(&stopped, 1, __ATOMIC_RELEASE);
        while (!__atomic_load_n(&go, __ATOMIC_ACQUIRE))
            pause_us(50);
        __atomic_store_n(&stopped, 0, __ATOMIC_RELEASE);
    }
    volatile double sink = 0;
    for (int64_t i = begin; i < end; i++) /* about a microsecond an iteration */
        for (int j = 0; j < 300; j++)
            sink += j * 0.5;
    return count(begin, end, closure);
}

static char state_of(pid_t t) {
    char path[128], text[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", (int)t);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f)
        fclose(f);
    text[n] = 0;
    char *p = strrchr(text, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* Release a stopped worker once the caller has gone to sleep waiting for it, 20 ms later. */
static void *releaser(void *arg) {
    (void)arg;
    for (;;) {
        while (!__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))
            pause_us(50);
        while (state_of(main_tid) != 'S')
            pause_us(50);
        pause_us(20000);
        __atomic_store_n(&go, 1, __ATOMIC_RELEASE);
        while (__atomic_load_n(&stopped, __ATOMIC_ACQUIRE))
            pause_us(50);
        __atomic_store_n(&go, 0, __ATOMIC_RELEASE);
    }
    return NULL;
}

/* Loops in which a worker stops inside its piece, `between` seconds apart (the process sleeps in between: loops
 * there could stall for real on a machine that runs other tests meanwhile). */
static void stall_loops(const char *mode, double between) {
    pthread_t r;
    pthread_create(&r, NULL, releaser, NULL);
    struct span s = {0, 64, hits, NONE};
    int stops = 0;
    int64_t v[7] = {0};
    for (int attempt = 0; attempt < 2000 && stops < 100 && v[6] < 8; attempt++) {
        if (between > 0)
            pause_us((long)(between * 1e6));
        __atomic_store_n(&stop_next, 1, __ATOMIC_RELEASE);
        if (tensorlang_parallel_for(count_or_stop, &s, s.lo, s.extent) != 0)
            fail("status", 0, 0);
        expect_once(&s);
        if (!__atomic_exchange_n(&stop_next, 0, __ATOMIC_ACQ_REL))
            stops++; /* a worker took a piece (else the caller ran them all: try again) */
        tensorlang_pool_stats(v, 7);
    }
    if (v[6] < 8)
        fail("stalls counted (of this many loops where a worker took a piece)", (long)v[6], stops);
    fflush(stderr);
    stats(mode);
}

static void mode_fork(void) {
    struct span s = {0, 1000, hits, NONE};
    run_span(&s, 0);
    pid_t child = fork();
    if (child == 0) {
        for (int rep = 0; rep < 20; rep++)
            run_span(&s, 0);
        _exit(0);
    }
    int status;
    waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fail("child", status, 0);
    run_span(&s, 0);
    stats("fork");
}

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    main_tid = tid();
    hits = calloc(MAX_EXTENT, 1);
    alarm(30);
    const char *m = argv[1];
    if (!strcmp(m, "check"))
        mode_check();
    else if (!strcmp(m, "nested"))
        mode_nested();
    else if (!strcmp(m, "concurrent"))
        mode_concurrent();
    else if (!strcmp(m, "park"))
        mode_park();
    else if (!strcmp(m, "stall"))
        stall_loops("stall", 0);
    else if (!strcmp(m, "sparse"))
        stall_loops("sparse", 0.5);
    else if (!strcmp(m, "fork"))
        mode_fork();
    else
        return 2;
    fflush(stdout);
    return 0;
}
