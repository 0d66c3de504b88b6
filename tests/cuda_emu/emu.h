/* emu.h — the CUDA programming model on the CPU, for running the CUDA
 * backend (kernels/cuda_*.cu) where no GPU is (tests/cuda_emu/run.sh).
 *
 * A launch runs its blocks one after another on the calling thread; a
 * block's threads are fibers (emu.cpp) switched at __syncthreads and at
 * warp shuffles, which are block-wide barriers here (stronger than CUDA's,
 * which is fine for kernels that reach them with every thread, and the
 * emulator aborts on a block whose threads do not all reach the same
 * barriers). __shared__ variables are function statics: one per block,
 * since blocks do not overlap. The runtime API is a fake over host memory
 * that keeps CUDA's distinction between device, managed and unregistered
 * pointers (cudaPointerGetAttributes), so the backend's staging of host
 * arguments runs as it would on a GPU.
 *
 * Stream order (SPECBED_EMU_DEFER=1): launches, cuBLAS calls, memsets and
 * cudaMemcpyAsync are queued, as a GPU queues them (one queue: the
 * backend uses one stream), and run only at what makes the host wait on a
 * real device: cudaDeviceSynchronize, cudaStreamSynchronize, cudaMemcpy,
 * cudaFree, cudaFreeHost. A queued copy reads its source when it runs, as
 * a DMA from pinned memory does; only a copy from pageable host memory
 * takes its bytes at the call (the driver stages them), and one into
 * pageable host memory waits. A host read of a kernel's result, or a host
 * write to memory a queued kernel or copy reads (a pinned staging byte
 * rewritten too soon), that is not behind such a wait then sees (or
 * changes) the data too early, and the comparisons against the CPU fail:
 * the emulator's one window on missing synchronisation. It is more lenient
 * than a GPU in one way: a device-to-device cudaMemcpy waits here too.
 *
 * What it cannot show: the GPU's own arithmetic (the host's IEEE fma, add,
 * divide and sqrt stand in for the GPU's, which are IEEE too; cos/sin/pow
 * are glibc's, not libdevice's), races between threads (fibers never run at
 * once), memory-model or coalescing problems, performance. */
#ifndef SPECBED_CUDA_EMU_H
#define SPECBED_CUDA_EMU_H
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint3 { unsigned x, y, z; };
/* the vector types of 16-byte loads (the matmul's weight and x reads) */
struct uint4 { unsigned x, y, z, w; };
struct float4 { float x, y, z, w; };

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

uint3 emu_thread_idx(void);
extern uint3 emu_block_idx;
extern dim3 emu_block_dim, emu_grid_dim;
#define threadIdx (emu_thread_idx())
#define blockIdx emu_block_idx
#define blockDim emu_block_dim
#define gridDim emu_grid_dim

void __syncthreads(void);
/* a warp's barrier: a block-wide one here (stronger; kernels reach it
 * with every thread of the block) */
static inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)mask; __syncthreads(); }
float __shfl_xor_sync(unsigned mask, float v, int lane_mask);
double __shfl_xor_sync(unsigned mask, double v, int lane_mask);

/* The warp's tensor-core product (cuda_internal.cuh cu_mma_bf16: PTX
 * mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32), a warp-wide
 * collective like the shuffles: each lane gives its fragments (a: 4
 * registers of two bf16, b: 2, d: 4 floats, in PTX's documented layout)
 * and gets its four outputs d += A·B. Each output is its 16 exact products
 * summed in double and added to d with one rounding to float: the layout
 * and the data flow are the GPU's, the accumulation's rounding is not
 * (Hopper's tensor cores truncate; emu.h's header says what the emulator
 * cannot show). */
void emu_mma_bf16(float d[4], const uint32_t a[4], const uint32_t b[2]);
#define CU_MMA_BF16(d, a, b) emu_mma_bf16(d, a, b)

static inline float __uint_as_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t __float_as_uint(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
/* one rounding each, never contracted (the emulator builds with -ffp-contract=off) */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }
static inline float __int_as_float(int32_t u) { float f; memcpy(&f, &u, 4); return f; }

void emu_run(dim3 grid, dim3 block, const std::function<void()> &body);

/* Aborts when a kernel argument points at memory a GPU could not read
 * (not from cudaMalloc / cudaMallocManaged, nor pinned host memory from
 * cudaMallocHost / cudaHostAlloc, which is mapped): an unstaged host
 * argument. */
void emu_check_device_arg(const void *p, int index);
template <class T> void emu_check_arg(T, int) {}
template <class T> void emu_check_arg(T *p, int i) { emu_check_device_arg((const void *)p, i); }

/* Stream order: 1 when SPECBED_EMU_DEFER=1 (read once). emu_enqueue runs
 * op now when not deferring, else queues it for emu_flush; while the stream
 * is being captured it goes into the graph instead. tag names what a graph
 * update must find unchanged at that node (the kernel; a copy's memory
 * types). */
int emu_deferring(void);
void emu_enqueue(const void *tag, std::function<void()> op);
void emu_flush(void);

template <class K> struct emu_launcher {
    K k;
    dim3 g, b;
    template <class... A> void operator()(A... a) {
        int i = 0;
        (emu_check_arg(a, i++), ...);
        /* the arguments by value, as a launch copies its parameters */
        K kk = k;
        dim3 gg = g, bb = b;
        emu_enqueue(reinterpret_cast<const void *>(kk), [kk, gg, bb, a...] {
            std::function<void()> body = [&] { kk(a...); };
            emu_run(gg, bb, body);
        });
    }
};
template <class K> emu_launcher<K> emu_launch(K k, dim3 g, dim3 b) { return emu_launcher<K>{k, g, b}; }
#define CU_LAUNCH(kernel, grid, block) emu_launch(kernel, dim3(grid), dim3(block))

/* ---- runtime API (the subset the backend uses) ---------------------------- */
typedef enum {
    cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2, cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100, cudaErrorGraphExecUpdateFailure = 910
} cudaError_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice,
                      cudaMemcpyDefault };
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2,
                      cudaMemoryTypeManaged = 3 };
struct cudaPointerAttributes { enum cudaMemoryType type; int device; void *devicePointer, *hostPointer; };
struct cudaDeviceProp { char name[256]; int major, minor, managedMemory; };
#define cudaMemAttachGlobal 1
typedef struct emu_stream *cudaStream_t;   /* one queue stands for every stream */
/* cudaLaunchKernelEx (programmatic dependent launch, the start-up probe):
 * the attributes change nothing here, the launch is emu_launch's */
enum cudaLaunchAttributeID { cudaLaunchAttributeProgrammaticStreamSerialization = 5 };
union cudaLaunchAttributeValue { unsigned programmaticStreamSerializationAllowed; };
struct cudaLaunchAttribute { enum cudaLaunchAttributeID id; union cudaLaunchAttributeValue val; };
struct cudaLaunchConfig_t {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    cudaStream_t stream;
    cudaLaunchAttribute *attrs;
    unsigned numAttrs;
};

cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaMalloc(void **p, size_t bytes);
template <class T> cudaError_t cudaMalloc(T **p, size_t bytes) { return cudaMalloc((void **)p, bytes); }
cudaError_t cudaMallocManaged(void **p, size_t bytes, unsigned flags = cudaMemAttachGlobal);
cudaError_t cudaFree(void *p);
cudaError_t cudaMemcpy(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k);
cudaError_t cudaMemset(void *d, int v, size_t bytes);
cudaError_t cudaMemsetAsync(void *d, int v, size_t bytes, cudaStream_t s);
cudaError_t cudaMemcpyAsync(void *d, const void *s, size_t bytes, enum cudaMemcpyKind k, cudaStream_t st);
cudaError_t cudaMallocHost(void **p, size_t bytes);
cudaError_t cudaFreeHost(void *p);
/* pinned host memory that kernels may read (mapped: its device pointer is
 * the host pointer, as with unified addressing); freed by cudaFreeHost */
#define cudaHostAllocDefault 0u
#define cudaHostAllocPortable 1u
#define cudaHostAllocMapped 2u
#define cudaHostAllocWriteCombined 4u
cudaError_t cudaHostAlloc(void **p, size_t bytes, unsigned flags);
cudaError_t cudaHostGetDevicePointer(void **d, void *h, unsigned flags);
cudaError_t cudaStreamCreate(cudaStream_t *s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaDeviceSynchronize(void);
cudaError_t cudaGetLastError(void);
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total_b);
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes *a, const void *p);
/* CUDA graphs by stream capture: a capture collects what emu_enqueue is
 * given; a launch enqueues it again. An update succeeds when the node count
 * and every node's tag match (a GPU accepts some changes this refuses, such
 * as a kernel's function, and refuses some it takes, such as a memset's new
 * size; a refused update costs only an instantiation). What a
 * capture may not do (synchronise, allocate, free, copy from or into
 * pageable memory, launch a graph) aborts: the GPU would invalidate the
 * capture (the emulator is stricter about allocation, which relaxed mode
 * allows). */
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal = 0, cudaStreamCaptureModeThreadLocal = 1,
                             cudaStreamCaptureModeRelaxed = 2 };
typedef struct emu_graph *cudaGraph_t;
typedef struct emu_graph *cudaGraphExec_t;
typedef struct emu_graph_node *cudaGraphNode_t;
struct cudaGraphExecUpdateResultInfo { int result; cudaGraphNode_t errorNode, errorFromNode; };
cudaError_t cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g);
cudaError_t cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *x, cudaGraph_t g, unsigned long long flags = 0);
cudaError_t cudaGraphExecUpdate(cudaGraphExec_t x, cudaGraph_t g, cudaGraphExecUpdateResultInfo *info);
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x);
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);

template <class... P, class... A>
cudaError_t cudaLaunchKernelEx(const cudaLaunchConfig_t *c, void (*k)(P...), A... a) {
    emu_launch(k, c->gridDim, c->blockDim)(((P)a)...);
    return cudaSuccess;
}

/* ---- half and bfloat16 ------------------------------------------------------ */
struct __half { uint16_t x; };
struct __nv_bfloat16 { uint16_t x; };
static inline __half __ushort_as_half(uint16_t u) { __half h; h.x = u; return h; }
float __half2float(__half h);
__half __float2half_rn(float f);
__nv_bfloat16 __float2bfloat16_rn(float f);
#endif
