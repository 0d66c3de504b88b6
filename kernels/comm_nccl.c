/* comm_nccl.c — the CUDA backend's communicator: NCCL, one GPU per rank,
 * bootstrapped over MPI (rank 0's ncclUniqueId is broadcast to the others).
 * libcudart and libnccl are opened with dlopen when a job asks for NCCL, so
 * the same binary runs on a machine without them; the headers are needed
 * only to compile (CI compiles this file; it has run only where a GPU was).
 * The collectives take host buffers (the CPU backend's memory) and stage
 * them through device buffers on one stream.
 * Owns: the NCCL communicator, the stream, the staging buffers and the
 * dlopen handles. The boot communicator stays the caller's. */
#include "comm_internal.h"
#include "errmsg.h"

#ifdef SPECBED_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <nccl.h>
#include <stdlib.h>

typedef struct {
    void *h_cuda, *h_nccl;
    cudaError_t (*GetDeviceCount)(int *);
    cudaError_t (*SetDevice)(int);
    cudaError_t (*Malloc)(void **, size_t);
    cudaError_t (*Free)(void *);
    cudaError_t (*Memcpy)(void *, const void *, size_t, enum cudaMemcpyKind);
    cudaError_t (*StreamCreate)(cudaStream_t *);
    cudaError_t (*StreamDestroy)(cudaStream_t);
    cudaError_t (*StreamSynchronize)(cudaStream_t);
    const char *(*GetErrorString)(cudaError_t);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRank)(ncclComm_t *, int, ncclUniqueId, int);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t, cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    const char *(*NcclErrorString)(ncclResult_t);
    ncclComm_t comm;
    cudaStream_t stream;
    kb_comm *boot;
    void *d_send, *d_recv;   /* staging, [cap] and [size · cap] bytes */
    size_t cap;
} nccl_impl;

static int load(nccl_impl *n, char *err, size_t errlen) {
    n->h_cuda = dlopen("libcudart.so.13", RTLD_NOW | RTLD_LOCAL);
    if (!n->h_cuda) n->h_cuda = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
    n->h_nccl = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!n->h_cuda || !n->h_nccl)
        return errf(err, errlen, "NCCL: cannot load %s (%s); is the CUDA toolkit's lib folder on LD_LIBRARY_PATH?",
                    n->h_cuda ? "libnccl.so.2" : "libcudart", dlerror());
#define SYM(h, field, name) \
    if (!(*(void **)&n->field = dlsym(n->h_##h, name))) return errf(err, errlen, "NCCL: symbol %s missing", name)
    SYM(cuda, GetDeviceCount, "cudaGetDeviceCount");
    SYM(cuda, SetDevice, "cudaSetDevice");
    SYM(cuda, Malloc, "cudaMalloc");
    SYM(cuda, Free, "cudaFree");
    SYM(cuda, Memcpy, "cudaMemcpy");
    SYM(cuda, StreamCreate, "cudaStreamCreate");
    SYM(cuda, StreamDestroy, "cudaStreamDestroy");
    SYM(cuda, StreamSynchronize, "cudaStreamSynchronize");
    SYM(cuda, GetErrorString, "cudaGetErrorString");
    SYM(nccl, GetUniqueId, "ncclGetUniqueId");
    SYM(nccl, CommInitRank, "ncclCommInitRank");
    SYM(nccl, AllGather, "ncclAllGather");
    SYM(nccl, Broadcast, "ncclBroadcast");
    SYM(nccl, CommDestroy, "ncclCommDestroy");
    SYM(nccl, NcclErrorString, "ncclGetErrorString");
#undef SYM
    return 0;
}

#define CUDA_OK(n, call, what) \
    do { cudaError_t e_ = (call); \
         if (e_ != cudaSuccess) return errf(err, errlen, "CUDA: %s: %s", what, (n)->GetErrorString(e_)); } while (0)
#define NCCL_OK(n, call, what) \
    do { ncclResult_t r_ = (call); \
         if (r_ != ncclSuccess) return errf(err, errlen, "NCCL: %s: %s", what, (n)->NcclErrorString(r_)); } while (0)

static int stage(kb_comm *c, size_t bytes, char *err, size_t errlen) {
    nccl_impl *n = c->impl;
    if (bytes <= n->cap) return 0;
    if (n->d_send) n->Free(n->d_send);
    if (n->d_recv) n->Free(n->d_recv);
    n->d_send = n->d_recv = NULL;
    n->cap = 0;
    CUDA_OK(n, n->Malloc(&n->d_send, bytes), "staging buffer");
    CUDA_OK(n, n->Malloc(&n->d_recv, bytes * (size_t)c->size), "staging buffer");
    n->cap = bytes;
    return 0;
}

static int nccl_allgather(kb_comm *c, const void *send, void *recv, size_t bytes, char *err, size_t errlen) {
    nccl_impl *n = c->impl;
    if (stage(c, bytes, err, errlen)) return -1;
    CUDA_OK(n, n->Memcpy(n->d_send, send, bytes, cudaMemcpyHostToDevice), "copy to device");
    NCCL_OK(n, n->AllGather(n->d_send, n->d_recv, bytes, ncclUint8, n->comm, n->stream), "ncclAllGather");
    CUDA_OK(n, n->StreamSynchronize(n->stream), "stream synchronize");
    CUDA_OK(n, n->Memcpy(recv, n->d_recv, bytes * (size_t)c->size, cudaMemcpyDeviceToHost), "copy to host");
    return 0;
}

static int nccl_bcast(kb_comm *c, void *buf, size_t bytes, int root, char *err, size_t errlen) {
    nccl_impl *n = c->impl;
    if (stage(c, bytes, err, errlen)) return -1;
    CUDA_OK(n, n->Memcpy(n->d_send, buf, bytes, cudaMemcpyHostToDevice), "copy to device");
    NCCL_OK(n, n->Broadcast(n->d_send, n->d_send, bytes, ncclUint8, root, n->comm, n->stream), "ncclBroadcast");
    CUDA_OK(n, n->StreamSynchronize(n->stream), "stream synchronize");
    CUDA_OK(n, n->Memcpy(buf, n->d_send, bytes, cudaMemcpyDeviceToHost), "copy to host");
    return 0;
}

/* NCCL has no barrier; the boot communicator's is the job's. */
static int nccl_barrier(kb_comm *c, char *err, size_t errlen) {
    return kb_comm_barrier(((nccl_impl *)c->impl)->boot, err, errlen);
}

static void nccl_abort(kb_comm *c, int code) { kb_comm_abort(((nccl_impl *)c->impl)->boot, code, NULL); }

static void release(nccl_impl *n) {
    if (n->comm) n->CommDestroy(n->comm);
    if (n->d_send) n->Free(n->d_send);
    if (n->d_recv) n->Free(n->d_recv);
    if (n->stream) n->StreamDestroy(n->stream);
    if (n->h_nccl) dlclose(n->h_nccl);
    if (n->h_cuda) dlclose(n->h_cuda);
    free(n);
}

static void nccl_free(kb_comm *c) { release(c->impl); }

static const comm_ops nccl_ops = {nccl_allgather, nccl_bcast, nccl_barrier, nccl_abort, nccl_free};

static int open_on(nccl_impl *n, kb_comm *boot, char *err, size_t errlen) {
    if (load(n, err, errlen)) return -1;
    int devices = 0;
    if (n->GetDeviceCount(&devices) != cudaSuccess || devices <= 0)
        return errf(err, errlen, "NCCL: no CUDA device is visible to rank %d", kb_comm_rank(boot));
    int rank = kb_comm_rank(boot), local = kb_comm_local_size(boot);
    CUDA_OK(n, n->SetDevice((rank % local) % devices), "cudaSetDevice");
    CUDA_OK(n, n->StreamCreate(&n->stream), "cudaStreamCreate");
    ncclUniqueId id;
    if (rank == 0) NCCL_OK(n, n->GetUniqueId(&id), "ncclGetUniqueId");
    if (kb_comm_bcast(boot, &id, sizeof id, 0, err, errlen)) return -1;
    NCCL_OK(n, n->CommInitRank(&n->comm, kb_comm_size(boot), id, rank), "ncclCommInitRank");
    return 0;
}

int kb_comm_open_nccl(kb_comm **out, kb_comm *boot, char *err, size_t errlen) {
    *out = NULL;
    nccl_impl *n = calloc(1, sizeof *n);
    if (!n) return errf(err, errlen, "out of memory");
    n->boot = boot;
    if (open_on(n, boot, err, errlen)) {
        release(n);
        return -1;
    }
    kb_comm *c = comm_new(&nccl_ops, "nccl", kb_comm_rank(boot), kb_comm_size(boot), kb_comm_local_size(boot), n);
    if (!c) {
        release(n);
        return errf(err, errlen, "out of memory");
    }
    *out = c;
    return 0;
}

#else

int kb_comm_open_nccl(kb_comm **out, kb_comm *boot, char *err, size_t errlen) {
    (void)boot;
    *out = NULL;
    return errf(err, errlen, "this specbed was built without NCCL (no nccl.h / cuda_runtime_api.h at build time)");
}

#endif
