/* emu.cpp — the emulator behind emu.h: fibers for a block's threads, the
 * fake runtime over host memory, and a reference GEMM standing in for
 * cuBLAS. x86-64 only (the fiber switch is a few lines of assembly: the
 * callee-saved registers and the stack pointer). */
#include "emu.h"

#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>

#include <map>
#include <vector>

/* ---- fibers -------------------------------------------------------------------- */

extern "C" void emu_swap(void **save_sp, void *load_sp);
asm(R"(
    .text
    .globl emu_swap
    .type emu_swap,@function
emu_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_swap, .-emu_swap
)");

namespace {
enum { STACK = 256 << 10, MAX_THREADS = 1024 };
struct fiber {
    void *sp;
    char *stack;
    uint3 tid;
    int done, barriers;
};
fiber g_f[MAX_THREADS];
int g_nf;
fiber *g_cur;
void *g_sched_sp;
const std::function<void()> *g_body;
float g_shfl[MAX_THREADS];
double g_shfl_d[MAX_THREADS];

void trampoline() {
    (*g_body)();
    g_cur->done = 1;
    emu_swap(&g_cur->sp, g_sched_sp);
    abort();   /* never resumed */
}

void fiber_init(fiber *f) {
    if (!f->stack) f->stack = (char *)malloc(STACK);
    uintptr_t top = ((uintptr_t)(f->stack + STACK)) & ~(uintptr_t)15;
    void **sp = (void **)(top - 16);
    *sp = (void *)trampoline;          /* emu_swap's ret goes here, with rsp ≡ 8 (mod 16) as after a call */
    for (int i = 0; i < 6; i++) *--sp = 0;   /* the six callee-saved registers */
    f->sp = sp;
    f->done = 0;
    f->barriers = 0;
}
}  // namespace

uint3 emu_block_idx;
dim3 emu_block_dim, emu_grid_dim;

uint3 emu_thread_idx(void) { return g_cur->tid; }

void __syncthreads(void) {
    g_cur->barriers++;
    emu_swap(&g_cur->sp, g_sched_sp);
}

float __shfl_xor_sync(unsigned mask, float v, int lane_mask) {
    (void)mask;
    int t = (int)(g_cur - g_f);
    g_shfl[t] = v;
    __syncthreads();
    float r = g_shfl[(t & ~31) | ((t & 31) ^ lane_mask)];
    __syncthreads();
    return r;
}

double __shfl_xor_sync(unsigned mask, double v, int lane_mask) {
    (void)mask;
    int t = (int)(g_cur - g_f);
    g_shfl_d[t] = v;
    __syncthreads();
    double r = g_shfl_d[(t & ~31) | ((t & 31) ^ lane_mask)];
    __syncthreads();
    return r;
}

namespace {
struct mma_frag { uint32_t a[4], b[2]; };
mma_frag g_mma[MAX_THREADS];
float bf16_at(uint32_t reg, int half) { return __uint_as_float(half ? reg & 0xffff0000u : reg << 16); }
}  // namespace

/* PTX's m16n8k16 fragments (lane = 4·group + t): A[i][k] in lane
 * 4·(i mod 8) + (k mod 8)/2, register (i ≥ 8) + 2·(k ≥ 8), half k mod 2;
 * B[k][j] in lane 4·j + (k mod 8)/2, register (k ≥ 8), half k mod 2;
 * D[i][j] in lane 4·(i mod 8) + j/2, element 2·(i ≥ 8) + j mod 2. */
void emu_mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
    const int t = (int)(g_cur - g_f), base = t & ~31, lane = t & 31;
    for (int r = 0; r < 4; r++) g_mma[t].a[r] = a[r];
    for (int r = 0; r < 2; r++) g_mma[t].b[r] = b[r];
    __syncthreads();
    for (int e = 0; e < 4; e++) {
        const int i = (lane >> 2) + 8 * (e >> 1), j = 2 * (lane & 3) + (e & 1);
        double s = 0;
        for (int k = 0; k < 16; k++) {
            const mma_frag &fa = g_mma[base + 4 * (i & 7) + ((k & 7) >> 1)];
            const mma_frag &fb = g_mma[base + 4 * j + ((k & 7) >> 1)];
            s += (double)bf16_at(fa.a[(i >= 8) + 2 * (k >= 8)], k & 1) * (double)bf16_at(fb.b[k >= 8], k & 1);
        }
        d[e] = (float)((double)d[e] + s);
    }
    __syncthreads();
}

void emu_run(dim3 grid, dim3 block, const std::function<void()> &body) {
    int n = (int)(block.x * block.y * block.z);
    if (n <= 0 || n > MAX_THREADS) {
        fprintf(stderr, "cuda_emu: block of %d threads\n", n);
        abort();
    }
    emu_grid_dim = grid;
    emu_block_dim = block;
    g_body = &body;
    g_nf = n;
    for (unsigned bz = 0; bz < grid.z; bz++)
        for (unsigned by = 0; by < grid.y; by++)
            for (unsigned bx = 0; bx < grid.x; bx++) {
                emu_block_idx = uint3{bx, by, bz};
                for (int i = 0; i < n; i++) {
                    fiber_init(&g_f[i]);
                    g_f[i].tid = uint3{(unsigned)i % block.x, (unsigned)i / block.x % block.y,
                                       (unsigned)i / (block.x * block.y)};
                }
                /* each pass runs every live thread to its next barrier (or its end) */
                for (int live = n; live > 0;) {
                    int finished = 0, waiting = 0, level = -1;
                    for (int i = 0; i < n; i++) {
                        if (g_f[i].done) continue;
                        g_cur = &g_f[i];
                        emu_swap(&g_sched_sp, g_f[i].sp);
                        if (g_f[i].done) {
                            finished++;
                        } else {
                            waiting++;
                            if (level < 0) level = g_f[i].barriers;
                            if (g_f[i].barriers != level) {
                                fprintf(stderr, "cuda_emu: threads of one block at different barriers\n");
                                abort();
                            }
                        }
                    }
                    if (finished && waiting) {
                        fprintf(stderr, "cuda_emu: %d threads left the kernel while %d wait at a barrier\n",
                                finished, waiting);
                        abort();
                    }
                    live = waiting;
                }
            }
}

/* ---- stream order ------------------------------------------------------------- */

struct emu_graph { std::vector<std::pair<const void *, std::function<void()>>> ops; };

namespace {
std::vector<std::function<void()>> g_queue;
int g_defer = -1;
emu_graph *g_capture;   /* the graph being captured, or NULL */

/* What a capture may not do aborts (emu.h). */
void not_capturing(const char *fn) {
    if (!g_capture) return;
    fprintf(stderr, "cuda_emu: %s while the stream is being captured into a CUDA graph\n", fn);
    abort();
}
}  // namespace

int emu_deferring(void) {
    if (g_defer < 0) {
        const char *e = getenv("SPECBED_EMU_DEFER");
        g_defer = e && !strcmp(e, "1");
    }
    return g_defer;
}
void emu_enqueue(const void *tag, std::function<void()> op) {
    if (g_capture) g_capture->ops.emplace_back(tag, std::move(op));
    else if (emu_deferring()) g_queue.push_back(std::move(op));
    else op();
}
void emu_flush(void) {
    not_capturing("waiting for the device");
    std::vector<std::function<void()>> q;
    q.swap(g_queue);
    for (auto &op : q) op();
}

/* ---- runtime ------------------------------------------------------------------- */

namespace {
struct alloc { size_t bytes; cudaMemoryType type; };
std::map<uintptr_t, alloc> g_mem;
size_t g_used;
const size_t TOTAL = (size_t)8 << 30;
}  // namespace

cudaError_t cudaGetDeviceCount(int *n) { *n = 1; return cudaSuccess; }
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidValue; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d) {
    (void)d;
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuda_emu (CPU)");
    p->major = 9;
    p->managedMemory = 1;
    return cudaSuccess;
}

static cudaError_t track(void **p, size_t bytes, cudaMemoryType t) {
    not_capturing("allocating memory");
    *p = calloc(1, bytes ? bytes : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    if (t == cudaMemoryTypeDevice) memset(*p, 0xa5, bytes);   /* cudaMalloc does not zero */
    g_mem[(uintptr_t)*p] = alloc{bytes, t};
    g_used += bytes;
    return cudaSuccess;
}
cudaError_t cudaMalloc(void **p, size_t bytes) { return track(p, bytes, cudaMemoryTypeDevice); }
cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return track(p, bytes, cudaMemoryTypeManaged);
}
static cudaError_t untrack(void *p, cudaMemoryType t, const char *fn) {
    not_capturing(fn);
    emu_flush();   /* cudaFree and cudaFreeHost wait for the device */
    if (!p) return cudaSuccess;
    auto it = g_mem.find((uintptr_t)p);
    if (it == g_mem.end() || (it->second.type == cudaMemoryTypeHost) != (t == cudaMemoryTypeHost)) {
        fprintf(stderr, "cuda_emu: %s of a pointer it did not allocate that way\n", fn);
        abort();
    }
    if (t != cudaMemoryTypeHost) g_used -= it->second.bytes;
    g_mem.erase(it);
    free(p);
    return cudaSuccess;
}
cudaError_t cudaFree(void *p) { return untrack(p, cudaMemoryTypeDevice, "cudaFree"); }
cudaError_t cudaMallocHost(void **p, size_t bytes) {
    cudaError_t e = track(p, bytes, cudaMemoryTypeHost);
    if (e == cudaSuccess) g_used -= bytes;   /* pinned host memory is not the device's */
    return e;
}
cudaError_t cudaFreeHost(void *p) { return untrack(p, cudaMemoryTypeHost, "cudaFreeHost"); }
/* Pinned memory is host memory a kernel may read (emu_check_device_arg
 * accepts it); mapped, its device pointer is its host pointer (unified
 * addressing, every 64-bit CUDA platform). */
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags) {
    (void)flags;
    return cudaMallocHost(p, bytes);
}
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags) {
    (void)flags;
    *d = NULL;
    cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, h);
    if (a.type != cudaMemoryTypeHost) return cudaErrorInvalidValue;
    *d = h;
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k) {
    (void)k;
    not_capturing("cudaMemcpy");
    emu_flush();   /* after the queued work, and the host waits (see emu.h) */
    memmove(d, s, bytes);
    return cudaSuccess;
}
static char g_tag_memset, g_tag_copy[4][4];   /* update tags: a memset; a copy by memory types */
cudaError_t cudaMemset(void *d, int v, size_t bytes) {
    not_capturing("cudaMemset (the legacy stream)");
    emu_enqueue(&g_tag_memset, [d, v, bytes] { memset(d, v, bytes); });   /* stream-ordered, the host does not wait */
    return cudaSuccess;
}
cudaError_t cudaMemsetAsync(void *d, int v, size_t bytes, cudaStream_t) {
    emu_enqueue(&g_tag_memset, [d, v, bytes] { memset(d, v, bytes); });
    return cudaSuccess;
}
static cudaMemoryType mem_type(const void *p) {
    cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, p);
    return a.type;
}
static int pageable(const void *p) { return mem_type(p) == cudaMemoryTypeUnregistered; }
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k, cudaStream_t) {
    if (pageable(d) || pageable(s)) not_capturing("cudaMemcpyAsync to or from pageable host memory");
    if (pageable(d)) return cudaMemcpy(d, s, bytes, k);   /* into pageable memory the call waits */
    if (pageable(s)) {                                    /* the driver takes the bytes now */
        std::vector<char> b((const char *)s, (const char *)s + bytes);
        emu_enqueue(&g_tag_copy[0][mem_type(d)], [d, b] { memcpy(d, b.data(), b.size()); });
        return cudaSuccess;
    }
    emu_enqueue(&g_tag_copy[mem_type(s)][mem_type(d)], [d, s, bytes] { memmove(d, s, bytes); });   /* read when it runs */
    return cudaSuccess;
}
static char g_stream_tag;
cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = (cudaStream_t)&g_stream_tag; return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { emu_flush(); return cudaSuccess; }

cudaError_t cudaStreamBeginCapture(cudaStream_t, enum cudaStreamCaptureMode) {
    not_capturing("cudaStreamBeginCapture");
    g_capture = new emu_graph;
    return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t *g) {
    if (!g_capture) return cudaErrorInvalidValue;
    *g = g_capture;
    g_capture = NULL;
    return cudaSuccess;
}
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n) {
    if (nodes) return cudaErrorInvalidValue;   /* the backend only counts */
    *n = g->ops.size();
    return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long) {
    *x = new emu_graph(*g);
    return cudaSuccess;
}
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info) {
    int same = x->ops.size() == g->ops.size();
    for (size_t i = 0; same && i < g->ops.size(); i++) same = x->ops[i].first == g->ops[i].first;
    if (info) memset(info, 0, sizeof *info), info->result = same ? 0 : 2;
    if (!same) return cudaErrorGraphExecUpdateFailure;
    x->ops = g->ops;
    return cudaSuccess;
}
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t) {
    not_capturing("cudaGraphLaunch");
    for (auto &op : x->ops) emu_enqueue(op.first, op.second);
    return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete g; return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x) { delete x; return cudaSuccess; }
cudaError_t cudaDeviceSynchronize(void) { emu_flush(); return cudaSuccess; }
cudaError_t cudaGetLastError(void) { return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b) {
    *total_b = TOTAL;
    *free_b = TOTAL - g_used;
    return cudaSuccess;
}
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p) {
    memset(a, 0, sizeof *a);
    a->type = cudaMemoryTypeUnregistered;
    auto it = g_mem.upper_bound((uintptr_t)p);
    if (it != g_mem.begin()) {
        --it;
        if ((uintptr_t)p < it->first + (it->second.bytes ? it->second.bytes : 1)) a->type = it->second.type;
    }
    return cudaSuccess;
}
void emu_check_device_arg(const void *p, int index) {
    cudaPointerAttributes a;
    cudaPointerGetAttributes(&a, p);
    if (p && a.type == cudaMemoryTypeUnregistered) {
        fprintf(stderr, "cuda_emu: kernel argument %d (%p) is host memory the GPU cannot read\n", index, p);
        abort();
    }
}

const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }

/* ---- half / bf16 ----------------------------------------------------------------- */

float __half2float(__half h) { return _cvtsh_ss(h.x); }
__half __float2half_rn(float f) { __half h; h.x = (uint16_t)_cvtss_sh(f, 0); return h; }
__nv_bfloat16 __float2bfloat16_rn(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);   /* round to nearest even (inputs here are finite) */
    __nv_bfloat16 b;
    b.x = (uint16_t)(u >> 16);
    return b;
}

/* ---- "cuBLAS": dlopen/dlsym hand out a reference GEMM ------------------------------ */

#include "include/cublas_v2.h"

static float load_as(const void *p, size_t i, cudaDataType t) {
    if (t == CUDA_R_32F) return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    if (t == CUDA_R_16F) return _cvtsh_ss(h);
    return __uint_as_float((uint32_t)h << 16);
}

static cublasStatus_t ref_create(cublasHandle_t *h) { *h = (cublasHandle_t)&g_used; return CUBLAS_STATUS_SUCCESS; }
static cublasStatus_t ref_set_stream(cublasHandle_t, cudaStream_t) { return CUBLAS_STATUS_SUCCESS; }

/* column-major C[m, n] = op(A)[m, k] · op(B)[k, n], f32 accumulation in increasing k */
static cublasStatus_t ref_gemm(cublasHandle_t, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               const void *alpha, const void *A, cudaDataType at, int lda, const void *B,
                               cudaDataType bt, int ldb, const void *beta, void *C, cudaDataType ct, int ldc,
                               cublasComputeType_t, cublasGemmAlgo_t) {
    if (ct != CUDA_R_32F || *(const float *)beta != 0.0f) return CUBLAS_STATUS_NOT_SUPPORTED;
    const float al = *(const float *)alpha;   /* host scalars: read at the call, as cuBLAS does */
    static char tag;
    emu_enqueue(&tag, [=] {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                float s = 0;
                for (int l = 0; l < k; l++) {
                    float a = load_as(A, ta == CUBLAS_OP_T ? (size_t)i * lda + l : (size_t)l * lda + i, at);
                    float b = load_as(B, tb == CUBLAS_OP_T ? (size_t)l * ldb + j : (size_t)j * ldb + l, bt);
                    s += a * b;
                }
                ((float *)C)[(size_t)j * ldc + i] = al * s;
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}

extern "C" void *emu_dlopen(const char *name, int mode) {
    (void)mode;
    return name && strstr(name, "libcublas") ? (void *)&g_used : NULL;
}
extern "C" void *emu_dlsym(void *h, const char *name) {
    (void)h;
    if (!strcmp(name, "cublasCreate_v2")) return (void *)ref_create;
    if (!strcmp(name, "cublasSetStream_v2")) return (void *)ref_set_stream;
    if (!strcmp(name, "cublasGemmEx")) return (void *)ref_gemm;
    return NULL;
}
extern "C" char *emu_dlerror(void) { return (char *)"cuda_emu: no such library"; }
