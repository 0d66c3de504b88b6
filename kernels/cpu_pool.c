/* cpu_pool.c — CPU backend: the thread pool every parallel kernel uses.
 * Owns: the persistent worker threads, the thread count (kb_threads_init),
 * and how a kernel's work is split among threads (cpu_parallel).
 * Must not: make the caller wait for a thread to arrive. On a shared machine
 * a worker may be descheduled for milliseconds; a pool that hands each
 * thread a fixed share (an OpenMP static schedule and its barrier) then
 * waits that long for every call — measured 204 ms for a 0.31 ms step with
 * 2 threads while another process kept one core busy.
 *
 * How: a call is split into chunks, claimed one at a time through one
 * atomic word (generation << 32 | next chunk). The caller claims chunks
 * itself from the start, and so does every worker that is awake; the call
 * returns when all chunks are done, so it waits only for chunks that some
 * thread has claimed and is running, never for a worker that has not shown
 * up — a late worker finds nothing left (or a newer generation) and goes
 * back to waiting. Workers spin for a bounded time after each call (calls in
 * a forward pass come microseconds apart), then sleep on a futex.
 * Two costs remain when another process wants a core. A worker preempted
 * in the middle of a chunk it claimed holds the call up for a scheduler
 * slice, milliseconds. And with more runnable threads than cores the
 * caller itself waits on the run queue while a worker (spinning between
 * calls, or running a chunk) holds the core it wants: on two cores with
 * `yes` and a training run busy beside a 1-row decode, the caller spent
 * 37–100% of its run time runnable but not running with no chunk wait at
 * all, and the pool never went solo (beside two bursty processes: 10%, and
 * 0.81x of one thread; bench/RECORD.md). So the caller keeps account: over
 * each window of calls (≥ WINDOW_NS and ≥ WINDOW_CALLS, starting at the
 * first call), the workers' chunk time is what the pool saved it; its own
 * waits for claimed chunks plus its run-queue delay (the kernel's
 * schedstat, where Linux reports it) are what the pool cost it. When the
 * cost is larger and material (over 2% of the window) — or one wait is a
 * plain stall, far longer than any chunk — the next calls run on the
 * caller alone (the workers go to sleep,
 * which also leaves the other process its core) for SOLO_MIN_NS, doubling
 * for each bad window up to SOLO_MAX_NS and shrinking by 1/8 for each good
 * one (slowly: under a steady competitor a good window between two stalls
 * is luck, not a change); then the pool is tried again. On a busy machine
 * 2 threads cost about one stall per solo period, never a stall per call;
 * on an idle one the pool stays on (a one-off stall costs 5 ms of 1-thread
 * speed).
 *
 * Determinism: the pool decides only which thread runs a chunk, never what
 * a chunk computes; kernels make each output element one chunk's whole
 * work, so results do not depend on the thread count or on timing. */
#include "backend.h"
#include "cpu_internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#ifdef __linux__
#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define MAX_THREADS 256
#define WORKER_SPIN_NS 50000    /* a worker waits this long for the next call before sleeping */
#define CALLER_SPIN_NS 10000    /* the caller spins this long for claimed chunks, then sleeps */
#define PURE_SPIN_NS 3000       /* spin without yielding this long; then yield between checks */
#define STALL_NS 150000         /* a wait this long (and ≫ the caller's own chunks) means a worker was preempted */
#define SOLO_MIN_NS 5000000     /* calls run on the caller alone for 5 ms after a bad window, */
#define SOLO_MAX_NS 400000000   /* doubling on each bad window, up to 400 ms; ×7/8 per good window */
#define WINDOW_NS 20000000      /* the pool's benefit is judged over calls spanning this long */
#define WINDOW_CALLS 8          /* and at least this many calls */

typedef struct {
    int n_threads;                  /* caller + workers */
    pthread_t *workers;             /* [n_threads - 1] */
    pthread_mutex_t submit;         /* held by the thread running a call */
    _Atomic uint64_t state;         /* generation << 32 | next unclaimed chunk */
    atomic_uint gen_word;           /* generation (futex word workers sleep on) */
    atomic_uint done;               /* chunks finished in this generation (futex word of the caller) */
    atomic_int sleepers, caller_sleeps, stop;
    /* The current call. Written by the caller before it publishes a new
     * generation; a worker reads them after seeing that generation and acts
     * only if its claim (a CAS on state) still names it. Atomics so that a
     * worker reading while the next call is being set up is not a race. */
    _Atomic(cpu_task_fn *) fn;
    _Atomic(void *) arg;
    atomic_int n_chunks, max_slots;
    atomic_int next_slot;           /* slots handed to workers in this generation */
    _Atomic int64_t worker_ns;      /* chunk time run by workers since the window began */
    /* The caller's account (under submit): window start (0: none yet), time
     * spent waiting, calls; the next solo period's length. */
    int64_t win_start, win_wait, solo_ns;
    int64_t win_delay0;             /* the caller's run-queue delay at the window's start (-1: unknown) */
    const void *win_owner;          /* the thread that started the window (&t_owner) */
    int win_calls;
} pool;

static pool *g_pool;
static pthread_mutex_t g_init = PTHREAD_MUTEX_INITIALIZER;
static atomic_int g_threads;        /* kb_threads(); 0 before the first init */
static _Thread_local int t_in_pool; /* inside a chunk, or a pool worker */
static _Thread_local char t_owner;  /* its address names the calling thread */
static _Atomic int64_t g_solo_until; /* now_ns() before which calls run on the caller alone */

static inline void cpu_relax(void) {
#if CPU_X86
    __builtin_ia32_pause();
#endif
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The calling thread's run-queue delay so far (ns): the time it was
 * runnable but not running, the second field of the kernel's schedstat;
 * -1 where the kernel does not report it. Read twice per window (a few µs
 * against ≥ 20 ms), so the file is opened each time rather than kept open
 * per thread. */
static int64_t run_delay_ns(void) {
#ifdef __linux__
    int fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char b[128];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) return -1;
    b[n] = 0;
    char *end;
    strtoull(b, &end, 10);   /* time on the CPU */
    if (end == b) return -1;
    char *d = end;
    unsigned long long delay = strtoull(d, &end, 10);
    return end == d ? -1 : (int64_t)delay;
#else
    return -1;
#endif
}

static void futex_wait(atomic_uint *addr, unsigned expect) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAIT_PRIVATE, expect, NULL, NULL, 0);
#else
    (void)addr; (void)expect;
    struct timespec ts = {0, 50000};
    nanosleep(&ts, NULL);
#endif
}

static void futex_wake_all(atomic_uint *addr) {
#ifdef __linux__
    syscall(SYS_futex, (unsigned *)addr, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#else
    (void)addr;
#endif
}

/* Claim and run chunks of generation gen until none is left. slot: the
 * caller passes 0; a worker takes a slot number on its first claim. */
static int64_t run_chunks(pool *p, uint32_t gen, int slot, int timed) {
    int64_t longest = 0;
    cpu_task_fn *fn = NULL;
    void *arg = NULL;
    int n = 0;
    uint64_t s = atomic_load_explicit(&p->state, memory_order_acquire);
    for (;;) {
        if ((uint32_t)(s >> 32) != gen) return longest;
        if (!fn) {   /* fields of generation gen (validated by the CAS below) */
            fn = atomic_load_explicit(&p->fn, memory_order_relaxed);
            arg = atomic_load_explicit(&p->arg, memory_order_relaxed);
            n = atomic_load_explicit(&p->n_chunks, memory_order_relaxed);
        }
        uint32_t c = (uint32_t)s;
        if ((int)c >= n) return longest;
        if (slot < 0) {   /* a worker: may this call use one more thread? */
            int ms = atomic_load_explicit(&p->max_slots, memory_order_relaxed);
            /* Re-check the generation after reading max_slots: both belong to it. */
            if ((uint32_t)(atomic_load_explicit(&p->state, memory_order_acquire) >> 32) != gen) return longest;
            slot = atomic_fetch_add(&p->next_slot, 1);
            if (slot >= ms) return longest;
        }
        if (!atomic_compare_exchange_weak_explicit(&p->state, &s, s + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;   /* s reloaded: someone claimed first, or a new generation */
        int64_t t0 = now_ns();
        fn(arg, (int)c, slot);
        int64_t dt = now_ns() - t0;
        if (timed) longest = dt > longest ? dt : longest;
        else atomic_fetch_add_explicit(&p->worker_ns, dt, memory_order_relaxed);
        if (atomic_fetch_add(&p->done, 1) + 1 == (unsigned)n && atomic_load(&p->caller_sleeps))
            futex_wake_all(&p->done);
        s = atomic_load_explicit(&p->state, memory_order_acquire);
    }
}

static void *worker_main(void *vp) {
    pool *p = vp;
    t_in_pool = 1;
    unsigned seen = atomic_load(&p->gen_word);
    for (;;) {
        int64_t t0 = 0;
        unsigned g;
        for (int spins = 0;; spins++) {
            g = atomic_load_explicit(&p->gen_word, memory_order_acquire);
            if (g != seen || atomic_load_explicit(&p->stop, memory_order_relaxed)) break;
            cpu_relax();
            if ((spins & 63) != 63) continue;
            int64_t t = now_ns();
            if (!t0) t0 = t;
            /* After a short pure spin, yield between checks: if this worker
             * shares a core with its caller (or with anything else), the
             * other thread runs instead of waiting for our slice to end. */
            if (t - t0 > PURE_SPIN_NS) sched_yield();
            if (t - t0 < WORKER_SPIN_NS) continue;
            atomic_fetch_add(&p->sleepers, 1);
            if (atomic_load(&p->gen_word) == seen && !atomic_load(&p->stop)) futex_wait(&p->gen_word, seen);
            atomic_fetch_sub(&p->sleepers, 1);
            t0 = 0;
        }
        if (atomic_load(&p->stop)) return NULL;
        seen = g;
        run_chunks(p, g, -1, 0);
    }
}

static void pool_stop(pool *p) {
    if (!p) return;
    atomic_store(&p->stop, 1);
    atomic_fetch_add(&p->gen_word, 1);
    futex_wake_all(&p->gen_word);
    for (int i = 0; i < p->n_threads - 1; i++) pthread_join(p->workers[i], NULL);
    pthread_mutex_destroy(&p->submit);
    free(p->workers);
    free(p);
}

static pool *pool_start(int n) {
    pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n_threads = 1;
    p->solo_ns = SOLO_MIN_NS;
    pthread_mutex_init(&p->submit, NULL);
    if (n > 1 && (p->workers = calloc((size_t)n - 1, sizeof(pthread_t)))) {
        for (int i = 0; i < n - 1; i++) {
            if (pthread_create(&p->workers[i], NULL, worker_main, p)) break;
            p->n_threads++;
        }
    }
    return p;
}

/* The default: OMP_NUM_THREADS when set (scripts set it to mean "threads
 * for the compute"; the first number of a list), else the CPUs this process
 * may run on. */
static int default_threads(void) {
    const char *s = getenv("OMP_NUM_THREADS");
    if (s && *s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end != s && v >= 1) return v > MAX_THREADS ? MAX_THREADS : (int)v;
    }
#ifdef __linux__
    cpu_set_t set;
    if (!sched_getaffinity(0, sizeof set, &set)) {
        int c = CPU_COUNT(&set);
        if (c >= 1) return c > MAX_THREADS ? MAX_THREADS : c;
    }
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    if (c >= 1) return c > MAX_THREADS ? MAX_THREADS : (int)c;
#endif
    return 1;
}

int kb_threads_init(int n) {
    pthread_mutex_lock(&g_init);
    if (n <= 0) n = default_threads();
    if (n > MAX_THREADS) n = MAX_THREADS;
    if (!g_pool || g_pool->n_threads != n) {
        pool_stop(g_pool);
        g_pool = pool_start(n);
    }
    int got = g_pool ? g_pool->n_threads : 1;
    atomic_store(&g_threads, got);
    pthread_mutex_unlock(&g_init);
    return got;
}

int kb_threads(void) {
    int n = atomic_load_explicit(&g_threads, memory_order_relaxed);
    return n > 0 ? n : kb_threads_init(0);
}

static void run_inline(cpu_task_fn *fn, void *arg, int n_chunks) {
    int was = t_in_pool;
    t_in_pool = 1;
    for (int c = 0; c < n_chunks; c++) fn(arg, c, 0);
    t_in_pool = was;
}

void cpu_parallel(cpu_task_fn *fn, void *arg, int n_chunks, int max_slots) {
    if (n_chunks <= 0) return;
    if (n_chunks == 1 || max_slots == 1 || t_in_pool || kb_threads() == 1 ||
        now_ns() < atomic_load_explicit(&g_solo_until, memory_order_relaxed)) {
        run_inline(fn, arg, n_chunks);
        return;
    }
    pool *p = g_pool;
    if (!p || p->n_threads == 1 || pthread_mutex_trylock(&p->submit)) {
        run_inline(fn, arg, n_chunks);   /* another thread is using the pool */
        return;
    }
    t_in_pool = 1;
    int64_t t_call = now_ns();
    if (!p->win_start) {
        p->win_start = t_call;
        p->win_owner = &t_owner;
        p->win_delay0 = run_delay_ns();
    }
    atomic_store_explicit(&p->fn, fn, memory_order_relaxed);
    atomic_store_explicit(&p->arg, arg, memory_order_relaxed);
    atomic_store_explicit(&p->n_chunks, n_chunks, memory_order_relaxed);
    atomic_store_explicit(&p->max_slots, max_slots > 0 ? max_slots : p->n_threads, memory_order_relaxed);
    atomic_store_explicit(&p->next_slot, 1, memory_order_relaxed);
    atomic_store_explicit(&p->done, 0, memory_order_relaxed);
    uint32_t gen = (uint32_t)(atomic_load_explicit(&p->state, memory_order_relaxed) >> 32) + 1;
    atomic_store_explicit(&p->state, (uint64_t)gen << 32, memory_order_release);
    atomic_store(&p->gen_word, gen);
    if (atomic_load(&p->sleepers)) futex_wake_all(&p->gen_word);

    int64_t longest = run_chunks(p, gen, 0, 1);

    /* Every chunk is claimed; wait for the ones still running elsewhere. */
    int64_t t0 = now_ns();
    for (int spins = 0; atomic_load_explicit(&p->done, memory_order_acquire) < (unsigned)n_chunks; spins++) {
        cpu_relax();
        if ((spins & 63) != 63) continue;
        int64_t t = now_ns();
        if (t - t0 > PURE_SPIN_NS) sched_yield();   /* a preempted worker may be waiting for this core */
        if (t - t0 < CALLER_SPIN_NS) continue;
        atomic_store(&p->caller_sleeps, 1);
        unsigned d = atomic_load(&p->done);
        if (d < (unsigned)n_chunks) futex_wait(&p->done, d);
        atomic_store(&p->caller_sleeps, 0);
    }
    int64_t t1 = now_ns(), waited = t1 - t0;
    int bad = waited > STALL_NS && waited > 8 * longest, judged = bad;
    p->win_wait += waited;
    p->win_calls++;
    if (!bad && t1 - p->win_start > WINDOW_NS && p->win_calls >= WINDOW_CALLS) {
        int64_t saved = atomic_load_explicit(&p->worker_ns, memory_order_relaxed), cost = p->win_wait;
        if (p->win_owner == &t_owner && p->win_delay0 >= 0) {   /* the same thread's counter at both ends */
            int64_t d1 = run_delay_ns();
            if (d1 >= p->win_delay0) cost += d1 - p->win_delay0;
        }
        bad = cost > saved && cost > (t1 - p->win_start) / 50;
        judged = 1;
        if (!bad) p->solo_ns = p->solo_ns - p->solo_ns / 8 > SOLO_MIN_NS ? p->solo_ns - p->solo_ns / 8 : SOLO_MIN_NS;
    }
    if (bad) {
        atomic_store_explicit(&g_solo_until, t1 + p->solo_ns, memory_order_relaxed);
        p->solo_ns = 2 * p->solo_ns < SOLO_MAX_NS ? 2 * p->solo_ns : SOLO_MAX_NS;
    }
    if (judged) {   /* a new window starts with the next call */
        atomic_store_explicit(&p->worker_ns, 0, memory_order_relaxed);
        p->win_start = 0;
        p->win_wait = 0;
        p->win_calls = 0;
    }
    t_in_pool = 0;
    pthread_mutex_unlock(&p->submit);
}
