/* cuda_backend.cu — CUDA backend: its entry (device_internal.h
 * cuda_backend_init) and its function table.
 * Owns: the table kb_dev_active points at, and the start-up order: the
 * device's checks (cuda_mem.cu cu_start), then the flushes of held calls.
 * Must not: hold state or launch anything itself.
 * The calls between the backend's files run one way, device.c → here →
 * the compute files (cuda_matmul.cu, cuda_ops.cu, cuda_moe.cu) → the stream layer
 * (cuda_mem.cu), and this is the only file that names both sides: the
 * table lists compute and memory entries alike, and the stream layer
 * learns of the compute files' held calls only through cu_on_flush
 * (tests/cycles.sh checks that no file calls back into one that calls it). */
#include "cuda_internal.cuh"

static const kb_cuda_ops OPS = {
    cu_alloc, cu_free_if_ours, cu_copy, cu_weight_upload, cu_weight_release, cu_weight_release_owner,
    cuda_weight_rows, cuda_scatter_rows, cuda_matmul, cuda_rmsnorm, cuda_rope, cuda_swiglu, cuda_add, cuda_attention,
    cuda_attention_spans, cuda_set_matmul, cuda_matmul_mode, cu_set_graphs, cu_graphs, cu_async_begin, cu_async_end,
    cu_wait, cu_counts, cu_set_pdl, cu_pdl_state, cu_stepbuf_create, cu_stepbuf_free, cu_stepbuf_host,
    cu_stepbuf_dev, cu_stepbuf_push, cuda_store_rows, cuda_attention_idx, cu_graph_begin, cu_graph_end,
    cuda_gather_rows, cuda_matmul_grouped, cuda_combine_rows, cuda_set_experts_on_host, cuda_experts_on_host,
    cuda_weight_upload_expert, cuda_expert_release, cuda_expert_release_owner,
};

extern "C" int cuda_backend_init(const kb_cuda_ops **ops, char *err, size_t errlen) {
    if (cu_start(err, errlen)) return -1;
    /* the order cu_flush_held calls them in (at most one holds a call at a
     * time, so it decides nothing; fixed all the same) */
    cu_on_flush(cuda_matmul_flush);
    cu_on_flush(cuda_ops_flush);
    *ops = &OPS;
    return 0;
}
