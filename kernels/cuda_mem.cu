/* cuda_mem.cu — CUDA backend: the device's start-up checks (cu_start),
 * memory, weights, and the bracket every compute call runs in
 * (cuda_internal.cuh): the stream layer, below the compute files.
 * Owns: the managed allocations behind kb_alloc (and their sizes), the
 * device copies of weights (cudaMalloc, by owner), the stream, the staging
 * ring for host arguments, the persistent scratch buffers, the async
 * region's depth, the mutex, and the list of flushes of held calls.
 * Must not: be reached before kb_set_device("cuda") succeeded (nothing here
 * runs in a CPU-only process), or take more managed memory than the card
 * has free (an oversubscribed managed pool can hang the GPU): kb_alloc
 * asks cudaMemGetInfo first and returns NULL, which callers report as out
 * of memory. Nor name anything of cuda_matmul.cu or cuda_ops.cu: they call
 * the bracket, so a call back by name would make the layers one circle
 * (tests/cycles.sh); their held calls are flushed through cu_on_flush, and
 * the function table that names both sides is cuda_backend.cu's.
 *
 * Weights are plain device memory, never managed: the kernels read them on
 * every call and the host never does (kb_weight_rows converts on the
 * device). kb_alloc'd activations and KV pages are managed because the
 * engine reads and writes them on the host between calls. */
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.cuh"
#include "errmsg.h"

#ifndef SPECBED_CUDA_ARCHS
#define SPECBED_CUDA_ARCHS "?"
#endif

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static void capture_launch(void);   /* the bracket's section: before what a capture may not do */
static void mem_gone(void);         /* device memory is freed: recorded graphs may point at it */

void cu_check(cudaError_t e, const char *what) {
    if (e == cudaSuccess) return;
    fprintf(stderr, "specbed: CUDA error in %s: %s (%s)\n", what, cudaGetErrorString(e), cudaGetErrorName(e));
    abort();
}

int cu_on_device(const void *p) {
    cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
        cudaGetLastError();   /* clear it: an unknown pointer is host memory */
        return 0;
    }
    return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

/* ---- a growing table of (pointer, bytes, owner) --------------------------- */

typedef struct { void *p; size_t bytes; const void *owner; } entry;
typedef struct { entry *e; int n, cap; } table;

static int table_add(table *t, void *p, size_t bytes, const void *owner) {
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 64;
        entry *e = (entry *)realloc(t->e, (size_t)cap * sizeof *e);
        if (!e) return -1;
        t->e = e;
        t->cap = cap;
    }
    entry x = {p, bytes, owner};
    t->e[t->n++] = x;
    return 0;
}

static int table_find(const table *t, const void *p) {
    for (int i = 0; i < t->n; i++)
        if (t->e[i].p == p) return i;
    return -1;
}

static void table_drop(table *t, int i) { t->e[i] = t->e[--t->n]; }

static table g_managed;   /* kb_alloc */
static table g_weights;   /* kb_weight_upload */

/* ---- kb_alloc / kb_free / copies ------------------------------------------ */

/* Headroom left free on the card beyond what kb_alloc hands out: cuBLAS's
 * workspace, the scratch and staging buffers, the context itself. */
static size_t headroom(size_t total) { return ((size_t)256 << 20) + total / 50; }

void *cu_alloc(size_t bytes) {
    if (!bytes) bytes = 1;
    pthread_mutex_lock(&g_lock);
    capture_launch();   /* allocating and zeroing are not captured */
    void *p = NULL;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess && bytes + headroom(total_b) <= free_b &&
        cudaMallocManaged(&p, bytes, cudaMemAttachGlobal) == cudaSuccess) {
        /* zeroed as backend.h promises; this also places the pages on the
         * device, so cudaMemGetInfo counts them for the next request */
        if (cudaMemset(p, 0, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess ||
            table_add(&g_managed, p, bytes, NULL)) {
            cudaFree(p);
            p = NULL;
        }
    }
    cudaGetLastError();
    pthread_mutex_unlock(&g_lock);
    return p;
}

int cu_free_if_ours(void *p) {
    pthread_mutex_lock(&g_lock);
    int i = table_find(&g_managed, p);
    if (i >= 0) {
        capture_launch();   /* cudaFree waits for the kernels that use it */
        mem_gone();
        table_drop(&g_managed, i);
        cu_check(cudaFree(p), "kb_free");
    }
    pthread_mutex_unlock(&g_lock);
    return i >= 0;
}

/* ---- weights -------------------------------------------------------------- */

int cu_weight_upload(kb_weight *w, const void *owner, char *err, size_t errlen) {
    size_t bytes = (size_t)w->rows * (size_t)w->cols * kb_dtype_size(w->dt);
    if (!bytes || !w->data) return 0;
    pthread_mutex_lock(&g_lock);
    capture_launch();
    void *d = NULL;
    cudaError_t e = cudaMalloc(&d, bytes);
    if (e == cudaSuccess) e = cudaMemcpy(d, w->data, bytes, cudaMemcpyHostToDevice);
    int rc = 0;
    if (e != cudaSuccess || table_add(&g_weights, d, bytes, owner)) {
        if (d) cudaFree(d);
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        rc = errf(err, errlen, "CUDA: cannot place a [%d, %d] weight (%zu bytes) on the device: %s "
                  "(%zu of %zu bytes free)", w->rows, w->cols, bytes,
                  e != cudaSuccess ? cudaGetErrorString(e) : "out of host memory", free_b, total_b);
    } else {
        w->data = d;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}

void cu_weight_release(kb_weight *w) {
    pthread_mutex_lock(&g_lock);
    int i = table_find(&g_weights, w->data);
    if (i >= 0) {
        capture_launch();
        mem_gone();
        cu_check(cudaFree(g_weights.e[i].p), "kb_weight_release");
        table_drop(&g_weights, i);
        w->data = NULL;
    }
    pthread_mutex_unlock(&g_lock);
}

void cu_weight_release_owner(const void *owner) {
    pthread_mutex_lock(&g_lock);
    capture_launch();
    mem_gone();
    for (int i = g_weights.n - 1; i >= 0; i--)
        if (g_weights.e[i].owner == owner) {
            cu_check(cudaFree(g_weights.e[i].p), "kb_weight_release_owner");
            table_drop(&g_weights, i);
        }
    pthread_mutex_unlock(&g_lock);
}

/* ---- the bracket: stream, staging ring and scratch ------------------------ */

static cudaStream_t g_stream;
static int g_async;   /* depth of kb_async_begin regions */

cudaStream_t cu_stream(void) { return g_stream; }

/* The staging ring (cuda_internal.cuh): pinned host bytes and device bytes
 * at the same offsets; g_ring_used is reset only after the stream was
 * waited for. A call's own staged bytes must survive until its kernel has
 * run, so a call that finds the ring full after it has taken some takes
 * one-off buffers (g_extra, freed at its cu_end) and the ring is regrown to
 * that call's total. */
static char *g_pin, *g_dring;
static size_t g_ring_cap, g_ring_used, g_call_start, g_call_need;
enum { MAX_EXTRA = 16, MAX_OUT = 8 };
typedef struct { char *pin, *dev; } stage_buf;
static stage_buf g_extra[MAX_EXTRA];
static int g_n_extra;
typedef struct { void *host; char *pin, *dev; size_t bytes; } staged_out;
static staged_out g_outs[MAX_OUT];
static int g_n_outs;
static void *g_scratch[CU_SCRATCH_N];
static size_t g_scratch_cap[CU_SCRATCH_N];

static kb_device_counts g_counts;   /* backend.h kb_device_counts_now */
static unsigned long g_ring_epoch;   /* bumped whenever the ring's bytes may be reused (cu_ring_epoch) */
static int g_pending;   /* something was queued since the last wait */

/* ---- CUDA graphs ----------------------------------------------------------
 * Inside an async region the stream is captured (relaxed mode) from the
 * first call on, and the capture is ended and launched as one graph where
 * the host would wait, or where a call must do what a capture may not
 * (allocate, free, copy synchronously). Each capture is turned into an
 * executable graph by updating a cached one of the same node count in place
 * (cudaGraphExecUpdate: new kernel arguments, copy addresses, grid sizes)
 * and only if none takes the update by instantiating a new one, as
 * llama.cpp does per token. What a captured copy reads from the pinned
 * ring is read when the graph runs, so nothing changes for the ring: its
 * bytes are only reused after a wait, and a graph is launched before every
 * wait. The graph takes the per-launch issue cost off the GPU's critical
 * path (one launch per region instead of ~80 per decode step); the host
 * still issues the calls, now into the capture. */
/* A region's capture is also launched every GRAPH_CHUNK calls: the GPU
 * starts on the first part of a forward while the host still captures the
 * rest (the first GPU run: one graph for a whole 0.6B decode step, 540
 * nodes, ran slower than no graphs at all, 358 vs 404 tok/s — the GPU sat
 * idle while the host captured and updated). The parts repeat from step
 * to step, so each is updated in place like a whole forward was. */
enum { GRAPH_CACHE = 64, GRAPH_CHUNK = 64 };
static int g_capture_calls;   /* calls in the running capture */
typedef struct { cudaGraphExec_t exec; size_t nodes; unsigned long long used; } cached_exec;
static cached_exec g_execs[GRAPH_CACHE];
static unsigned long long g_exec_clock;
static int g_graphs;               /* capture regions into graphs (kb_cuda_graphs) */
static const char *g_graphs_why;   /* why not, when the start-up probe failed */
static int g_capturing;

static void capture_begin(void) {
    if (g_capturing || !g_async || !g_graphs) return;
    cu_check(cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed), "starting a CUDA graph capture");
    g_capturing = 1;
    g_capture_calls = 0;
}

static cudaGraphExec_t exec_for(cudaGraph_t graph, size_t nodes) {
    for (int i = 0; i < GRAPH_CACHE; i++) {
        cached_exec *c = &g_execs[i];
        if (!c->exec || c->nodes != nodes) continue;
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(c->exec, graph, &info) == cudaSuccess) {
            c->used = ++g_exec_clock;
            return c->exec;
        }
        cudaGetLastError();   /* refused (another shape of the same size): try the next, else instantiate */
    }
    int victim = 0;   /* an empty slot, else the least recently used */
    for (int i = 0; i < GRAPH_CACHE && g_execs[victim].exec; i++)
        if (!g_execs[i].exec || g_execs[i].used < g_execs[victim].used) victim = i;
    cached_exec *c = &g_execs[victim];
    if (c->exec) cu_check(cudaGraphExecDestroy(c->exec), "dropping a cached CUDA graph");
    cu_check(cudaGraphInstantiate(&c->exec, graph, 0), "instantiating a CUDA graph");
    c->nodes = nodes;
    c->used = ++g_exec_clock;
    g_counts.graph_instantiations++;
    return c->exec;
}

/* Recording (backend.h kb_graph_begin): the capture of one keyed forward,
 * kept whole (no GRAPH_CHUNK launches) and instantiated as a graph of its
 * own that later steps launch without issuing the calls. g_rec while one
 * runs; g_rec_ok until something spoils it (a staged host argument, whose
 * pinned bytes a replay would not rewrite; anything that ends the capture
 * early: a wait, an allocation, a free). */
static int g_rec, g_rec_ok;
static unsigned long g_mem_epoch;   /* bumped by mem_gone: recordings older than it are dropped */
static unsigned long g_region;      /* cu_region */

/* Ends the capture (if one runs) and launches what it holds. */
static void capture_launch(void) {
    cu_flush_held();   /* held calls go in first (the lock is held here) */
    if (g_rec) {   /* a recording ended early: its calls so far run as an ordinary graph, nothing kept */
        g_rec = 0;
        g_rec_ok = 0;
    }
    if (!g_capturing) return;
    g_capturing = 0;
    cudaGraph_t graph = NULL;
    cu_check(cudaStreamEndCapture(g_stream, &graph), "ending a CUDA graph capture (SPECBED_CUDA_GRAPHS=0 runs "
             "without graphs)");
    size_t nodes = 0;
    cu_check(cudaGraphGetNodes(graph, NULL, &nodes), "counting a CUDA graph's nodes");
    if (nodes) {
        cu_check(cudaGraphLaunch(exec_for(graph, nodes), g_stream), "launching a CUDA graph");
        g_pending = 1;
        g_counts.graph_launches++;
        g_counts.graph_nodes += (long)nodes;
    }
    cu_check(cudaGraphDestroy(graph), "destroying a captured CUDA graph");
}

/* Waits for everything queued (if anything is); the ring's bytes are free
 * again. */
static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}
static long long g_region_t0;   /* start of the outermost region; 0 outside one */

static void wait_stream(const char *what) {
    capture_launch();   /* and held calls */
    if (g_pending) {
        const long long t0 = g_region_t0 ? now_ns() : 0;
        cu_check(cudaStreamSynchronize(g_stream), what);
        if (g_region_t0) g_counts.wait_ns += now_ns() - t0;
        g_counts.waits++;
        g_pending = 0;
    }
    g_ring_used = 0;
    g_ring_epoch++;
}

unsigned long cu_ring_epoch(void) { return g_ring_epoch; }

/* Only with the stream idle (nothing queued reads the ring). */
static void ring_regrow(size_t need) {
    if (need <= g_ring_cap) return;
    if (g_pin) cu_check(cudaFreeHost(g_pin), "staging ring");
    if (g_dring) cu_check(cudaFree(g_dring), "staging ring");
    size_t cap = 2 * g_ring_cap > need ? 2 * g_ring_cap : need;
    if (cap < ((size_t)1 << 20)) cap = (size_t)1 << 20;
    cu_check(cudaMallocHost((void **)&g_pin, cap), "staging ring (pinned host memory)");
    cu_check(cudaMalloc((void **)&g_dring, cap), "staging ring (device memory)");
    g_ring_cap = cap;
    g_ring_used = 0;
    g_ring_epoch++;
}

void cu_begin(void) {
    pthread_mutex_lock(&g_lock);
    g_n_outs = g_n_extra = 0;
    g_call_start = g_ring_used;
    g_call_need = 0;
    capture_begin();
    cu_flush_held();   /* held calls run before this call, in the same capture */
}

/* The flushes of the files that hold calls back (cuda_internal.cuh
 * cu_on_flush), in the order they were registered. */
enum { MAX_FLUSH = 4 };
static void (*g_flush[MAX_FLUSH])(void);
static int g_n_flush;

void cu_on_flush(void (*flush)(void)) {
    pthread_mutex_lock(&g_lock);
    int i = 0;
    while (i < g_n_flush && g_flush[i] != flush) i++;
    /* registered already when start-up runs again (kb_set_device failed
     * after it, on a diagnostic variable, and is asked once more) */
    if (i == g_n_flush) {
        if (g_n_flush == MAX_FLUSH) {
            fprintf(stderr, "specbed: CUDA: more than %d flushes of held calls\n", MAX_FLUSH);
            abort();
        }
        g_flush[g_n_flush++] = flush;
    }
    pthread_mutex_unlock(&g_lock);
}

void cu_flush_held(void) {
    for (int i = 0; i < g_n_flush; i++) g_flush[i]();
}

void cu_lock(void) { pthread_mutex_lock(&g_lock); }
void cu_unlock(void) { pthread_mutex_unlock(&g_lock); }
int cu_async_depth(void) { return g_async; }

/* bytes of staging for this call: the pinned side in *pin, the device side returned */
static char *stage_take(size_t bytes, char **pin) {
    size_t a = (bytes + 255) & ~(size_t)255;
    g_rec_ok = 0;   /* a replay would read these pinned bytes as they are then */
    g_call_need += a;
    if (g_ring_used + a > g_ring_cap && g_ring_used == g_call_start) {   /* nothing of this call in it yet */
        wait_stream("staging host arguments");
        ring_regrow(a);
        g_call_start = 0;
        capture_begin();
    }
    if (g_ring_used + a <= g_ring_cap) {
        size_t off = g_ring_used;
        g_ring_used += a;
        *pin = g_pin + off;
        return g_dring + off;
    }
    if (g_n_extra == MAX_EXTRA) {
        fprintf(stderr, "specbed: CUDA: more than %d staging overflows in one call\n", MAX_EXTRA);
        abort();
    }
    stage_buf *x = &g_extra[g_n_extra++];
    capture_launch();   /* no allocation inside a capture; this call's earlier bytes are in the graph */
    cu_check(cudaMallocHost((void **)&x->pin, a), "staging host arguments (pinned host memory)");
    cu_check(cudaMalloc((void **)&x->dev, a), "staging host arguments");
    capture_begin();
    *pin = x->pin;
    return x->dev;
}

static char *stage_copy_in(const void *p, size_t bytes, char **pin) {
    char *d = stage_take(bytes, pin);
    memcpy(*pin, p, bytes);
    cu_check(cudaMemcpyAsync(d, *pin, bytes, cudaMemcpyHostToDevice, g_stream), "staging a host argument");
    g_pending = 1;
    return d;
}

const void *cu_in(const void *p, size_t bytes) {
    if (!p || !bytes || cu_on_device(p)) return p;
    char *pin;
    return stage_copy_in(p, bytes, &pin);
}

void *cu_out(void *p, size_t bytes, int copy_in) {
    if (!p || !bytes || cu_on_device(p)) return p;
    if (g_n_outs == MAX_OUT) {
        fprintf(stderr, "specbed: CUDA: more than %d staged results in one call\n", MAX_OUT);
        abort();
    }
    char *pin;
    char *d = copy_in ? stage_copy_in(p, bytes, &pin) : stage_take(bytes, &pin);
    staged_out o = {p, pin, d, bytes};
    g_outs[g_n_outs++] = o;
    return d;
}

void *cu_scratch(int slot, size_t bytes) {
    if (bytes > g_scratch_cap[slot]) {
        /* cudaFree waits for the kernels that may still read the old one
         * (launched first if they are in a capture) */
        capture_launch();
        mem_gone();
        if (g_scratch[slot]) cu_check(cudaFree(g_scratch[slot]), "freeing scratch");
        size_t cap = bytes + bytes / 4;
        cu_check(cudaMalloc(&g_scratch[slot], cap), "device scratch");
        g_scratch_cap[slot] = cap;
        capture_begin();
    }
    return g_scratch[slot];
}

void cu_end(const char *what) {
    cu_check(cudaGetLastError(), what);   /* the launch */
    g_pending = 1;
    /* host results: through the pinned side of their staging, after the kernel */
    for (int i = 0; i < g_n_outs; i++)
        cu_check(cudaMemcpyAsync(g_outs[i].pin, g_outs[i].dev, g_outs[i].bytes, cudaMemcpyDeviceToHost, g_stream),
                 what);
    if (g_n_outs || g_n_extra || !g_async) wait_stream(what);
    for (int i = 0; i < g_n_outs; i++) memcpy(g_outs[i].host, g_outs[i].pin, g_outs[i].bytes);
    if (g_n_extra) {
        for (int i = 0; i < g_n_extra; i++) {
            cu_check(cudaFreeHost(g_extra[i].pin), what);
            cu_check(cudaFree(g_extra[i].dev), what);
        }
        ring_regrow(g_call_need + g_call_need / 4);   /* the stream is idle */
    }
    g_n_outs = g_n_extra = 0;
    if (g_capturing && !g_rec && ++g_capture_calls >= GRAPH_CHUNK) capture_launch();
    pthread_mutex_unlock(&g_lock);
}

void cu_async_begin(void) {
    pthread_mutex_lock(&g_lock);
    if (g_async++ == 0) {
        g_region++;
        g_region_t0 = now_ns();
    }
    pthread_mutex_unlock(&g_lock);
}

void cu_async_end(void) {
    pthread_mutex_lock(&g_lock);
    if (g_async > 0 && --g_async == 0) {
        wait_stream("kb_async_end");
        g_counts.region_ns += now_ns() - g_region_t0;
        g_region_t0 = 0;
    }
    pthread_mutex_unlock(&g_lock);
}

unsigned long cu_region(void) { return g_region; }

static void mem_gone(void) { g_mem_epoch++; }

/* ---- step buffers and recorded forwards (backend.h) --------------------------- */

typedef struct { char *pin, *dev; size_t bytes; } cu_stepbuf;

void *cu_stepbuf_create(size_t bytes) {
    cu_stepbuf *b = (cu_stepbuf *)calloc(1, sizeof *b);
    if (!b) return NULL;
    if (!bytes) bytes = 1;
    pthread_mutex_lock(&g_lock);
    capture_launch();   /* allocating is not captured */
    if (cudaMallocHost((void **)&b->pin, bytes) != cudaSuccess || cudaMalloc((void **)&b->dev, bytes) != cudaSuccess ||
        cudaMemset(b->dev, 0, bytes) != cudaSuccess) {
        cudaGetLastError();
        if (b->pin) cudaFreeHost(b->pin);
        if (b->dev) cudaFree(b->dev);
        free(b);
        b = NULL;
    } else {
        memset(b->pin, 0, bytes);
        b->bytes = bytes;
    }
    pthread_mutex_unlock(&g_lock);
    return b;
}

void cu_stepbuf_free(void *p) {
    cu_stepbuf *b = (cu_stepbuf *)p;
    pthread_mutex_lock(&g_lock);
    capture_launch();
    mem_gone();
    cu_check(cudaFreeHost(b->pin), "freeing a step buffer");
    cu_check(cudaFree(b->dev), "freeing a step buffer");
    pthread_mutex_unlock(&g_lock);
    free(b);
}

void *cu_stepbuf_host(void *p) { return ((cu_stepbuf *)p)->pin; }
void *cu_stepbuf_dev(void *p) { return ((cu_stepbuf *)p)->dev; }

/* One copy from the pinned side, queued outside any capture: a recorded
 * graph that follows reads what it brought. */
void cu_stepbuf_push(void *p, size_t bytes) {
    cu_stepbuf *b = (cu_stepbuf *)p;
    if (!bytes) return;
    if (bytes > b->bytes) {
        fprintf(stderr, "specbed: CUDA: a step buffer of %zu bytes pushed with %zu\n", b->bytes, bytes);
        abort();
    }
    pthread_mutex_lock(&g_lock);
    capture_launch();   /* what was captured before it runs before it */
    cu_check(cudaMemcpyAsync(b->dev, b->pin, bytes, cudaMemcpyHostToDevice, g_stream), "pushing a step buffer");
    g_pending = 1;
    g_region++;   /* device indices changed: tables kept per region (RoPE's) are rebuilt */
    if (!g_async) wait_stream("pushing a step buffer");
    pthread_mutex_unlock(&g_lock);
}

/* a forward per shape: decode and verify at each row count a server meets, for the target and a draft
 * model; an executable graph is a few hundred kB of host memory */
enum { REC_CACHE = 128 };
typedef struct {
    void *key;
    size_t key_bytes;
    unsigned long epoch;
    cudaGraphExec_t exec;
    size_t nodes;
    unsigned long long used;
} recording;
static recording g_recs[REC_CACHE];
static void *g_rec_key;
static size_t g_rec_key_bytes, g_rec_key_cap;
static int g_replaying;

static void rec_drop(recording *r) {
    if (r->exec) cu_check(cudaGraphExecDestroy(r->exec), "dropping a recorded CUDA graph");
    free(r->key);
    memset(r, 0, sizeof *r);
}

int cu_graph_begin(const void *key, size_t key_bytes) {
    pthread_mutex_lock(&g_lock);
    if (!g_async || !g_graphs || g_rec || g_replaying) {
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    capture_launch();   /* whatever was captured or held before runs first */
    for (int i = 0; i < REC_CACHE; i++) {
        recording *r = &g_recs[i];
        if (!r->exec) continue;
        if (r->epoch != g_mem_epoch) { rec_drop(r); continue; }
        if (r->key_bytes != key_bytes || memcmp(r->key, key, key_bytes)) continue;
        cu_check(cudaGraphLaunch(r->exec, g_stream), "replaying a recorded CUDA graph");
        r->used = ++g_exec_clock;
        g_pending = 1;
        g_counts.graph_launches++;
        g_counts.graph_replays++;
        g_counts.graph_nodes += (long)r->nodes;
        g_replaying = 1;
        pthread_mutex_unlock(&g_lock);
        return 1;
    }
    if (key_bytes > g_rec_key_cap) {
        void *k = realloc(g_rec_key, key_bytes);
        if (!k) {   /* no recording, the calls run as usual */
            pthread_mutex_unlock(&g_lock);
            return 0;
        }
        g_rec_key = k;
        g_rec_key_cap = key_bytes;
    }
    memcpy(g_rec_key, key, key_bytes);
    g_rec_key_bytes = key_bytes;
    g_region++;   /* nothing kept per region from before the recording is used inside it */
    capture_begin();
    g_rec = g_capturing;
    g_rec_ok = g_rec;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

void cu_graph_end(void) {
    pthread_mutex_lock(&g_lock);
    if (g_replaying) {
        g_replaying = 0;
        pthread_mutex_unlock(&g_lock);
        return;
    }
    if (!g_rec) {   /* none, or it ended early: its calls ran (or are captured) as usual */
        pthread_mutex_unlock(&g_lock);
        return;
    }
    cu_flush_held();   /* into the recording */
    if (!g_rec_ok) {
        capture_launch();   /* ordinary graph; clears g_rec */
        pthread_mutex_unlock(&g_lock);
        return;
    }
    g_rec = 0;
    g_capturing = 0;
    cudaGraph_t graph = NULL;
    cu_check(cudaStreamEndCapture(g_stream, &graph), "ending a recorded CUDA graph");
    size_t nodes = 0;
    cu_check(cudaGraphGetNodes(graph, NULL, &nodes), "counting a CUDA graph's nodes");
    int victim = 0;   /* an empty slot, else the least recently used */
    for (int i = 0; i < REC_CACHE && g_recs[victim].exec; i++)
        if (!g_recs[i].exec || g_recs[i].used < g_recs[victim].used) victim = i;
    recording *r = &g_recs[victim];
    rec_drop(r);
    r->key = malloc(g_rec_key_bytes);
    if (nodes && r->key) {
        cu_check(cudaGraphInstantiate(&r->exec, graph, 0), "instantiating a recorded CUDA graph");
        memcpy(r->key, g_rec_key, g_rec_key_bytes);
        r->key_bytes = g_rec_key_bytes;
        r->epoch = g_mem_epoch;
        r->nodes = nodes;
        r->used = ++g_exec_clock;
        cu_check(cudaGraphLaunch(r->exec, g_stream), "launching a recorded CUDA graph");
        g_pending = 1;
        g_counts.graph_launches++;
        g_counts.graph_instantiations++;
        g_counts.graph_records++;
        g_counts.graph_nodes += (long)nodes;
    } else {
        free(r->key);
        r->key = NULL;
        if (nodes) {   /* out of host memory for the key: run it once as an ordinary graph */
            cu_check(cudaGraphLaunch(exec_for(graph, nodes), g_stream), "launching a CUDA graph");
            g_pending = 1;
            g_counts.graph_launches++;
            g_counts.graph_nodes += (long)nodes;
        }
    }
    cu_check(cudaGraphDestroy(graph), "destroying a captured CUDA graph");
    pthread_mutex_unlock(&g_lock);
}

void cu_wait(void) {
    pthread_mutex_lock(&g_lock);
    wait_stream("kb_wait");
    pthread_mutex_unlock(&g_lock);
}

void cu_counts(kb_device_counts *c) {
    pthread_mutex_lock(&g_lock);
    *c = g_counts;
    pthread_mutex_unlock(&g_lock);
}

/* Into device (or managed) memory a copy is a bracket like a kernel's: a
 * host source is staged through the ring, then one device-to-device copy
 * is queued (waited for outside a region). Into host memory the host waits
 * for the stream and copies. */
void cu_copy(void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    if (cu_on_device(dst)) {
        cu_begin();
        const void *s = cu_in(src, bytes);
        cu_check(cudaMemcpyAsync(dst, s, bytes, cudaMemcpyDeviceToDevice, g_stream), "kb_copy");
        cu_end("kb_copy");
        return;
    }
    pthread_mutex_lock(&g_lock);
    wait_stream("kb_copy");
    cu_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDefault), "kb_copy");
    pthread_mutex_unlock(&g_lock);
}

/* ---- start-up --------------------------------------------------------------- */

__global__ void probe_kernel(int *flag) { CU_PDL_ENTRY(); *flag = 42; }
__global__ void probe_add(int *f) { CU_PDL_ENTRY(); f[1] = f[0] + 35; }

/* A captured copy from pinned memory reads it when the graph runs, not
 * when it was captured: the staging ring depends on that. Checked once on
 * the real device (a copy of a pinned int, a kernel, a copy back; the
 * graph launched twice with the pinned input changed in between). 0 ok. */
static int graph_probe(const char **why) {
    int *d = NULL, *h = NULL, ok = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaMalloc(&d, 2 * sizeof *d);
    if (e == cudaSuccess) e = cudaMallocHost((void **)&h, 2 * sizeof *h);
    if (e == cudaSuccess) {
        h[0] = 7;
        e = cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed);
        if (e == cudaSuccess) {
            cudaMemcpyAsync(d, h, sizeof *h, cudaMemcpyHostToDevice, g_stream);
            CU_LAUNCH(probe_add, 1, 1)(d);
            cudaMemcpyAsync(h + 1, d + 1, sizeof *h, cudaMemcpyDeviceToHost, g_stream);
            e = cudaStreamEndCapture(g_stream, &g);
        }
        if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
        if (e == cudaSuccess) e = cudaGraphLaunch(x, g_stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
        int first = h[1];
        h[0] = 8;
        if (e == cudaSuccess) e = cudaGraphLaunch(x, g_stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
        ok = e == cudaSuccess && first == 42 && h[1] == 43;
        if (e == cudaSuccess && !ok) *why = "a graph's copy from pinned memory did not read it at launch";
    }
    if (e != cudaSuccess) *why = cudaGetErrorString(e);
    cudaGetLastError();
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
    if (h) cudaFreeHost(h);
    if (d) cudaFree(d);
    return ok ? 0 : -1;
}

/* Programmatic dependent launch (cuda_internal.cuh): two dependent kernels
 * launched with it, on the stream and inside a captured graph when graphs
 * work, must give the dependent's result. 0 ok. */
static int g_pdl;
static const char *g_pdl_why;
int cu_pdl(void) { return g_pdl; }

static cudaError_t pdl_pair(int *d) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(1);
    cfg.stream = g_stream;
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t e = cudaLaunchKernelEx(&cfg, probe_kernel, d);
    if (e == cudaSuccess) e = cudaLaunchKernelEx(&cfg, probe_add, d);
    return e;
}

static int pdl_probe(const char **why) {
    int *d = NULL, h[2] = {0, 0}, ok = 0;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    cudaError_t e = cudaMalloc(&d, 2 * sizeof *d);
    if (e == cudaSuccess) e = cudaMemsetAsync(d, 0, 2 * sizeof *d, g_stream);
    if (e == cudaSuccess) e = pdl_pair(d);
    if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
    if (e == cudaSuccess) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
    ok = e == cudaSuccess && h[1] == 77;
    if (ok && !g_graphs_why) {   /* and as graph nodes, as every forward runs */
        ok = 0;
        e = cudaMemsetAsync(d, 0, 2 * sizeof *d, g_stream);
        if (e == cudaSuccess) e = cudaStreamBeginCapture(g_stream, cudaStreamCaptureModeRelaxed);
        if (e == cudaSuccess) {
            cudaError_t e2 = pdl_pair(d);
            e = cudaStreamEndCapture(g_stream, &g);
            if (e == cudaSuccess) e = e2;
        }
        if (e == cudaSuccess) e = cudaGraphInstantiate(&x, g, 0);
        if (e == cudaSuccess) e = cudaGraphLaunch(x, g_stream);
        if (e == cudaSuccess) e = cudaStreamSynchronize(g_stream);
        if (e == cudaSuccess) e = cudaMemcpy(h, d, sizeof h, cudaMemcpyDeviceToHost);
        ok = e == cudaSuccess && h[1] == 77;
    }
    if (e != cudaSuccess) *why = cudaGetErrorString(e);
    else if (!ok) *why = "the dependent kernel did not see its predecessor's write";
    cudaGetLastError();
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
    if (d) cudaFree(d);
    return ok ? 0 : -1;
}

int cu_set_pdl(int on) {
    if (on && g_pdl_why) return -1;
    pthread_mutex_lock(&g_lock);
    wait_stream("switching programmatic dependent launch");
    g_pdl = on;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int cu_pdl_state(const char **why) {
    if (why) *why = g_pdl_why;
    return g_pdl_why ? -1 : g_pdl;
}

int cu_set_graphs(int on) {
    if (on && g_graphs_why) return -1;
    pthread_mutex_lock(&g_lock);
    wait_stream("switching CUDA graphs");   /* no capture may be running */
    g_graphs = on;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int cu_graphs(const char **why) {
    if (why) *why = g_graphs_why;
    return g_graphs_why ? -1 : g_graphs;
}

int cu_start(char *err, size_t errlen) {
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        return errf(err, errlen, "no CUDA device is visible (%s)",
                    e == cudaSuccess || e == cudaErrorNoDevice ? "the driver lists none; check CUDA_VISIBLE_DEVICES"
                    : e == cudaErrorInsufficientDriver ? "no NVIDIA driver is loaded, or it is older than this "
                                                         "build's CUDA runtime"
                                                       : cudaGetErrorString(e));
    }
    cudaDeviceProp p;
    if ((e = cudaSetDevice(0)) != cudaSuccess || (e = cudaGetDeviceProperties(&p, 0)) != cudaSuccess)
        return errf(err, errlen, "CUDA device 0: %s", cudaGetErrorString(e));
    if (p.major < 8)
        return errf(err, errlen, "CUDA device 0 (%s) has compute capability %d.%d; this build carries code for "
                    "sm_%s (and PTX for newer GPUs) only", p.name, p.major, p.minor, SPECBED_CUDA_ARCHS);
    if (!p.managedMemory)
        return errf(err, errlen, "CUDA device 0 (%s) does not support managed memory", p.name);
    /* one launch now, so that a missing kernel image or a broken driver is
     * reported here and not from inside the first forward */
    int *flag = NULL, got = 0;
    if ((e = cudaMalloc(&flag, sizeof *flag)) == cudaSuccess) {
        CU_LAUNCH(probe_kernel, 1, 1)(flag);
        if ((e = cudaGetLastError()) == cudaSuccess && (e = cudaDeviceSynchronize()) == cudaSuccess)
            e = cudaMemcpy(&got, flag, sizeof got, cudaMemcpyDeviceToHost);
        cudaFree(flag);
    }
    if (e != cudaSuccess || got != 42) {
        cudaGetLastError();
        return errf(err, errlen, "CUDA device 0 (%s, sm_%d%d) cannot run this build's kernels (built for sm_%s): %s",
                    p.name, p.major, p.minor, SPECBED_CUDA_ARCHS,
                    e != cudaSuccess ? cudaGetErrorString(e) : "the probe kernel wrote nothing");
    }
    /* a blocking stream: the legacy default stream's calls (cudaMemcpy of
     * weights, cudaMemset of new allocations) stay ordered with it */
    if (!g_stream && (e = cudaStreamCreate(&g_stream)) != cudaSuccess)
        return errf(err, errlen, "CUDA device 0 (%s): cannot create a stream: %s", p.name, cudaGetErrorString(e));
    const char *why = NULL;
    if (graph_probe(&why)) {
        fprintf(stderr, "specbed: CUDA graphs do not work on %s (%s); running without them\n", p.name, why);
        g_graphs_why = why;
    }
    g_graphs = !g_graphs_why;
    if (pdl_probe(&why)) {
        fprintf(stderr, "specbed: programmatic dependent launch does not work on %s (%s); running without it\n",
                p.name, why);
        g_pdl_why = why;
    }
    g_pdl = !g_pdl_why;
    return 0;
}
