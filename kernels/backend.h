/* backend.h — the compute interface that engine/ calls; nothing above this
 * header knows which device runs it. The CPU backend (cpu_*.c) implements it
 * with its own thread pool and a SIMD path chosen at run time (AVX-512,
 * AVX2 + FMA, or scalar; the binary itself targets baseline x86-64); a CUDA
 * backend and tensor-parallel sharding (MPI on CPU, NCCL on GPU) implement
 * the same calls.
 *
 * Ownership: kb_alloc'd buffers belong to the caller (kb_free). On the CPU
 * weights are never owned here: a kb_weight points at memory the loader owns
 * (usually an mmap of the safetensors file). On CUDA the loader hands each
 * weight to kb_weight_upload, and the device copy belongs to this layer
 * until kb_weight_release / kb_weight_release_owner.
 *
 * Batch invariance (DESIGN §4): every kernel computes each output element
 * with a reduction order that does not depend on how many rows are in the
 * call, on the thread count, or on where a row lands in a tile. A row's
 * result is bit-identical alone, among verify rows, or beside other
 * sequences. That holds within one SIMD path; different paths may round
 * matmuls differently (8 vs 16 accumulator lanes), so compare bits only
 * between runs on the same path. tests/test_kernels.c checks this for every
 * kernel on every path the CPU has. */
#ifndef SPECBED_BACKEND_H
#define SPECBED_BACKEND_H
#include <stddef.h>
#include <stdint.h>

/* ---- CPU threads and SIMD path (process-wide; set them at startup, never
 * while kernels run) ----------------------------------------------------- */

/* Threads the CPU kernels use: the calling thread plus n − 1 persistent
 * workers. n ≤ 0 picks the default: OMP_NUM_THREADS when set (scripts set it;
 * the first number of a list), else the CPUs in this process's affinity mask.
 * Returns the count now in effect (fewer than n if threads could not be
 * started). Kernels call kb_threads_init(0) themselves on first use. */
int kb_threads_init(int n);
int kb_threads(void);

/* The SIMD path the CPU kernels run: "avx512", "avx2" or "scalar", the
 * best this CPU supports by default; or "avx512bf16" (AVX-512 with bf16
 * weights fed to the BF16 dot-product units, matmul inputs rounded to
 * bf16: faster multi-row matmuls, not the f32 numerics the HF goldens
 * hold to; never the default). The environment variable SPECBED_CPU_PATH
 * may name any supported one, read once.
 * kb_set_cpu_path forces one: 0 ok, -1 unknown name or not supported here. */
const char *kb_cpu_path(void);
int kb_set_cpu_path(const char *name);
int kb_cpu_path_supported(const char *name);   /* 1 yes, 0 no */

/* ---- device (process-wide, like the SIMD path: choose it at startup,
 * before the engine is made) ---------------------------------------------
 * "cpu" (the default) or "cuda" (kernels/cuda_*.cu). On cuda every compute
 * call below runs on the GPU and, outside an async region (below),
 * synchronises before it returns, so the host may read its result at once;
 * kb_alloc gives CUDA managed memory, which the host reads and writes too
 * (between calls, never inside an async region). Index arrays (pos,
 * n_ctx, pages) and norm vectors may be plain host memory: the CUDA
 * backend stages them per call (the host may reuse them on return).
 * Nothing initialises CUDA unless "cuda" is asked for. Switching back to
 * "cpu" is allowed (tests compare the two in one process), but a weight
 * uploaded under cuda is device memory that only the cuda kernels can read.
 * Returns 0, or -1 with a message: a build without CUDA, no device visible,
 * a GPU this build has no code for. */
int kb_set_device(const char *name, char *err, size_t errlen);
const char *kb_device(void);   /* "cpu" or "cuda" */

/* Stream order. Between kb_async_begin and kb_async_end the compute calls
 * and the device-to-device copies return before the device has run them,
 * queued in order one behind the other (a forward's kernels then follow one
 * another on the GPU without a round trip each). Inside a region the host
 * must not read or write kb_alloc'd memory a queued call may touch: a call
 * whose result is plain host memory (logits into a malloc'd buffer, a
 * kb_copy_to_host into one) still waits and returns with it; kb_wait waits
 * for everything queued, after which the host may touch kb_alloc'd memory
 * until its next call; kb_async_end waits too. Regions nest (the outermost
 * end waits); one thread issues the calls of a region. On cpu every call
 * has finished when it returns and these do nothing. */
void kb_async_begin(void);
void kb_async_end(void);
void kb_wait(void);
/* What the host has asked of the device so far (all 0 on cpu). waits:
 * every synchronising call, kb_wait and region end included (a forward
 * that keeps its kernels in stream order waits once, for its logits).
 * Inside an async region the queued work is captured into a CUDA graph and
 * launched as one at the next wait (unless SPECBED_CUDA_GRAPHS=0):
 * graph_launches, graph_nodes (the kernels and copies they held), and
 * graph_instantiations (launches that could not update a cached graph of
 * the same shape in place: after warm-up a decode loop instantiates none). */
/* graph_records / graph_replays: whole forwards recorded under a key and
 * replayed without the host issuing their calls (kb_graph_begin, below).
 * region_ns / wait_ns: wall time inside outermost async regions, and of
 * it the time the host spent waiting for the device; their difference is
 * the host's own time (issuing calls, capturing, staging): bench_engine
 * reports both per step. */
typedef struct {
    long waits, graph_launches, graph_nodes, graph_instantiations, graph_records, graph_replays;
    long long region_ns, wait_ns;
} kb_device_counts;
void kb_device_counts_now(kb_device_counts *c);
long kb_device_waits(void);   /* kb_device_counts_now's waits */

/* CUDA matmul mode. "invariant" (the default): each output element has one
 * fixed reduction order that depends on cols only — batch-invariant in m
 * (DESIGN §4) and the CPU AVX2/scalar path's order. "cublas": cublasGemmEx
 * (bf16/f16 weights take the activations rounded to the weight's type),
 * fast but NOT batch-invariant: cuBLAS picks its algorithm by shape, so a
 * row's logits may change with the rows beside it and spec-on vs spec-off
 * greedy output may differ. "tensor": bf16 weights on the tensor cores in
 * their own fixed order (cuda_matmul_tc.cu), batch-invariant like
 * "invariant", the activations exact (three bf16 each); f32/f16 weights as
 * "invariant". The diagnostic environment variable
 * SPECBED_CUDA_MATMUL (read by kb_set_device("cuda")) may name it.
 * Returns 0, or -1 for an unknown mode or cuBLAS that cannot be loaded. */
int kb_set_cuda_matmul(const char *mode);
const char *kb_cuda_matmul(void);

/* CUDA graphs (on by default where the device passes a probe at start-up;
 * the diagnostic SPECBED_CUDA_GRAPHS=0|1, read by kb_set_device("cuda"),
 * turns them off or insists on them). 1 on, 0 turned off, -1 unavailable
 * (*why says why, when why is not NULL; also without a CUDA device). */
int kb_cuda_graphs(const char **why);

typedef enum { KB_F32 = 0, KB_BF16 = 1, KB_F16 = 2 } kb_dtype;

size_t kb_dtype_size(kb_dtype dt);

/* A read-only 2-D weight, row-major [rows, cols]. */
typedef struct {
    kb_dtype dt;
    const void *data;
    int rows, cols;
} kb_weight;

/* Weights resident on the device. On cuda: copies w's rows × cols elements
 * into device memory once and points w->data at the copy (the loader calls
 * it right after binding the weight to its mmap); owner names the copy's
 * lifetime (the loader passes its st_model). On cpu: does nothing. 0 ok, -1
 * with a message (out of device memory). */
int  kb_weight_upload(kb_weight *w, const void *owner, char *err, size_t errlen);
/* Frees w's device copy, if w points at one (else nothing), and clears w->data. */
void kb_weight_release(kb_weight *w);
/* Frees every device copy uploaded with this owner and not yet released. */
void kb_weight_release_owner(const void *owner);

/* Device memory (host memory on CPU). */
void *kb_alloc(size_t bytes);               /* zeroed; NULL on failure */
void  kb_free(void *p);
/* Copies between any two of host, kb_alloc'd and device memory (the names
 * say where dst is). Inside an async region a copy into device memory is
 * queued like a kernel (a host source is staged: it may be reused on
 * return); a copy into host memory waits and returns with the bytes. */
void  kb_copy_to_device(void *dst, const void *src, size_t bytes);
void  kb_copy_to_host(void *dst, const void *src, size_t bytes);
/* dst[i][0..row_floats) = src[i, 0..row_floats) for i < n: a forward's rows
 * into their KV slots. dst is a host array of n pointers into kb_alloc'd
 * memory (it may be reused as soon as the call returns). On cpu n memcpys;
 * on cuda one kernel, so the slots are written on the device, in stream
 * order, and the host never touches them between calls. */
void  kb_scatter_rows(float *const dst[], const float *src, int n, int row_floats);

/* Convert n elements of dt at src to f32. */
void kb_to_f32(float *dst, const void *src, kb_dtype dt, size_t n);
/* Row r of w as f32 (embedding lookup): dst[w->cols]. */
void kb_weight_row(float *dst, const kb_weight *w, int r);
/* Rows rows[0..n) of w as f32, dst[n, w->cols] (a batch's embeddings; rows
 * is host memory): n kb_weight_row calls, one launch on cuda. */
void kb_weight_rows(float *dst, const kb_weight *w, const int *rows, int n);

/* y[m, w->rows] = x[m, w->cols] · wᵀ. Batch-invariant in m. */
void kb_matmul(float *y, const float *x, const kb_weight *w, int m);
/* ys[i] = x · ws[i]ᵀ for i < n ≤ KB_MATMUL_N_MAX, every ws[i] with the same
 * cols: the same bits as n kb_matmul calls, in one hand-off to the CPU
 * threads (a layer's q/k/v, gate/up). */
#define KB_MATMUL_N_MAX 4
void kb_matmul_n(int n, float *const ys[], const kb_weight *const ws[], const float *x, int m);

/* y[m, n] = x[m, n] / rms(x row) * g[n]; y may alias x. */
void kb_rmsnorm(float *y, const float *x, const float *g, int m, int n, float eps);

/* In-place rotary embedding, HF "rotate_half" layout (first half / second
 * half of each head), on x[m, n_heads, head_dim] at positions pos[m]. */
void kb_rope(float *x, const int *pos, int m, int n_heads, int head_dim, float theta);
/* kb_rope in two steps, for a caller that rotates several tensors at the
 * same positions (every layer's q and k of a forward): the cos/sin of m rows
 * once (cs, sn [m, head_dim/2], host memory), then each tensor; the same
 * bits as kb_rope. Host (CPU backend) only: under a device, use kb_rope. */
void kb_rope_table(float *cs, float *sn, const int *pos, int m, int head_dim, float theta);
void kb_rope_apply(float *x, const float *cs, const float *sn, int m, int n_heads, int head_dim);

/* out[m, n] = silu(gate[m, n]) * up[m, n]; out may alias gate. */
void kb_swiglu(float *out, const float *gate, const float *up, int m, int n);

/* x[m, n] += y[m, n] */
void kb_add(float *x, const float *y, int m, int n);

/* Numerically stable softmax of one row in place; returns log-sum-exp. */
double kb_softmax(float *x, int n);

/* Attention of one query row over a paged KV history.
 * q[n_heads, head_dim]; out[n_heads, head_dim]. The history has n_ctx
 * positions (0..n_ctx-1, the query's own position included), stored in pages
 * of page_size tokens: position p lives in page pages[p / page_size], slot
 * p % page_size. k_pages/v_pages are the layer's page arrays, each page
 * [page_size, n_kv_heads, head_dim] f32. GQA: head h reads kv head
 * h / (n_heads / n_kv_heads). */
typedef struct {
    const float *k_pages, *v_pages;  /* [n_pages_total, page_size, n_kv_heads, head_dim] */
    const int *pages;                /* this sequence's page list */
    int page_size, n_kv_heads, head_dim;
} kb_kv_view;
void kb_attention_row(float *out, const float *q, const kb_kv_view *kv, int n_ctx,
                      int n_heads, float scale, float *scratch /* [n_ctx] */);

/* Attention of n_q query rows of ONE sequence (a prefill chunk, verify rows,
 * a DSpark block) over its history: row i attends to positions
 * 0..n_ctx[i]−1 (causal spans: n_ctx[i] = start + i + 1). q, out:
 * [n_q, n_heads, head_dim]. Each K/V slot is loaded once for all rows and
 * all q heads of its kv head; each row's output is bit-identical to
 * kb_attention_row for that row. Runs on the thread pool (over kv heads ×
 * chunks of rows). scratch: scratch_floats floats; kb_attention_span_scratch
 * gives the amount for full speed at the current kb_threads(); less (but at
 * least max n_ctx) only means fewer threads or smaller chunks. */
size_t kb_attention_span_scratch(int n_heads, int n_kv_heads, int max_ctx);
void kb_attention_span(float *out, const float *q, const kb_kv_view *kv, int n_q, const int *n_ctx,
                       int n_heads, float scale, float *scratch, size_t scratch_floats);
/* kb_attention_span over the spans of several sequences in one call (a
 * batch's verify spans or decode rows): span s is the next span_rows[s]
 * rows of q/out/n_ctx, over views[s] (every view of the same layer: the
 * same k/v pools and geometry, its own page list). Each row's bits are
 * kb_attention_span's. On cpu one kb_attention_span per span; on cuda one
 * launch for the whole batch. */
void kb_attention_spans(float *out, const float *q, const kb_kv_view *views, const int *span_rows, int n_spans,
                        const int *n_ctx, int n_heads, float scale, float *scratch, size_t scratch_floats);

/* ---- a step the host does not rebuild --------------------------------------
 * A decode or verify step issues ~300 calls whose arguments repeat from
 * step to step but for a few index arrays (tokens, positions, KV slots,
 * page lists, context lengths). With those arrays at fixed device
 * addresses, a whole forward is one CUDA graph replayed as it stands, as
 * vLLM and SGLang replay theirs per batch size: the host writes the
 * arrays, queues one copy and one graph launch, and issues none of the
 * calls. On cpu: a step buffer is host memory (host = dev), push does
 * nothing, kb_graph_begin returns 0 and kb_graph_end does nothing. */

/* Index memory for one forward: `bytes` the host fills (kb_stepbuf_host)
 * and, on cuda, device memory at a fixed address (kb_stepbuf_dev) that
 * kb_stepbuf_push refreshes in stream order. The calls are given dev
 * pointers; the host never reads them. The host side may be rewritten only
 * after a wait that follows the push (an async region's end). */
typedef struct kb_stepbuf kb_stepbuf;
kb_stepbuf *kb_stepbuf_create(size_t bytes);   /* NULL when out of memory */
void  kb_stepbuf_free(kb_stepbuf *b);
void *kb_stepbuf_host(kb_stepbuf *b);
void *kb_stepbuf_dev(kb_stepbuf *b);
void  kb_stepbuf_push(kb_stepbuf *b, size_t bytes);   /* the first bytes, host → device */

/* dst0[slots[i]·row_floats + j] = src0[i·row_floats + j] for i < n,
 * j < row_floats; and the same from src1 into dst1 unless dst1 is NULL
 * (a layer's K and V rows into their KV slots: one launch). slots is
 * device memory (a step buffer) or host memory, which is staged. */
void kb_store_rows(float *dst0, const float *src0, float *dst1, const float *src1, const int *slots, int n,
                   int row_floats);

/* kb_attention_spans with the page lists in a step buffer: row i of n_q
 * attends to positions 0..n_ctx[i]−1 of the sequence whose page list is
 * page_cat + page_off[i] (the lists laid end to end, n_cat entries in
 * all; rows of one span share an offset). pool gives the layer's K/V pools
 * and geometry (its pages are not read). max_ctx ≥ every n_ctx: the
 * scores' stride, which a replayed graph keeps, so pass a bound that holds
 * for as long as the recording should (forward.c rounds it up). Each
 * row's bits are kb_attention_span's. */
void kb_attention_idx(float *out, const float *q, const kb_kv_view *pool, const int *page_cat, int n_cat,
                      const int *page_off, const int *n_ctx, int n_q, int max_ctx, int n_heads, float scale,
                      float *scratch, size_t scratch_floats);

/* Record once, replay after. Inside an async region, key[0..key_bytes)
 * names everything the calls up to kb_graph_end depend on other than the
 * contents of device memory (shapes, buffers, the rows wanted). Returns 1
 * when a graph recorded under an equal key is launched now: the caller
 * skips its calls and goes on to kb_graph_end. Returns 0: the caller issues
 * its calls, recorded under key when every one reads only device memory;
 * a call that stages a host argument, waits, allocates or frees spoils
 * the recording, whose calls then run as usual and are not kept. Any
 * kb_free, weight release or scratch growth drops every recording (their
 * addresses may have gone). On cpu, and with graphs off, always 0. */
int  kb_graph_begin(const void *key, size_t key_bytes);
void kb_graph_end(void);
/* ---- mixture of experts (engine/moe.c): a step's experts on any device ----
 * The router's logits are read on the host (the routing's exact f32 softmax
 * and top-k stay there, after a kb_wait); everything over activations runs
 * where the kernels do: the rows gathered by expert, every active expert's
 * matmuls in one call, each row's experts summed back. Index and weight
 * arrays (idx, start, slots, w) are host memory, staged per call like
 * kb_rope's positions. */

/* dst[i, 0..row_floats) = src[idx[i], 0..row_floats) for i < n. */
void kb_gather_rows(float *dst, const float *src, const int *idx, int n, int row_floats);

/* The experts of one step: x's rows in n_groups consecutive groups (group
 * g = rows [start[g], start[g + 1]), start[0] = 0), and for each set
 * s < n_sets ≤ 2 and group g, ys[s][start[g].., rows] = x[start[g].., cols]
 * · ws[s·n_groups + g]ᵀ (every weight the same rows, cols and dtype). The
 * same bits as one kb_matmul per set and group (on cuda as kb_matmul's
 * invariant mode, or the tensor mode's for bf16 in it; cuBLAS's never): a row's result does
 * not depend on its group's size. On cpu one kb_matmul_n per group; on
 * cuda one launch for all of them. */
void kb_matmul_grouped(int n_sets, float *const ys[], const kb_weight *const ws[], const float *x,
                       const int *start, int n_groups);

/* y[r, j] = Σ_{i<k} src[slots[r·k + i], j] · w[r·k + i] for r < n, summed
 * from zero in i order, each product rounded before it is added (t = s·w;
 * acc += t: HF's expert(x) * weight, then index_add_). One thread of work
 * per output element, so a row's sum never depends on the other rows. */
void kb_combine_rows(float *y, const float *src, const int *slots, const float *w, int n, int k, int row_floats);

/* Where MoE expert weights live on cuda (kb_weight_upload_expert): 0 (the
 * default) device memory like every other weight; 1 pinned, mapped host
 * memory that the kernels read across the bus (a model whose experts do not
 * fit the GPU; each step then pays the bus for the experts its rows chose).
 * Attention, the router and the dense parts stay on the device either way.
 * Process-wide, set before a model is loaded (a loaded model keeps where its
 * experts went). Returns 0, or -1 with a message when the device is not
 * cuda (on the CPU every weight is in host memory already). */
int  kb_set_experts_on_host(int on, char *err, size_t errlen);
int  kb_experts_on_host(void);   /* 1 when set (cuda only) */
/* kb_weight_upload for an expert's matrix: to the device, or to mapped host
 * memory as kb_set_experts_on_host says; released like any upload
 * (kb_weight_release, kb_weight_release_owner). On cpu does nothing. */
int  kb_weight_upload_expert(kb_weight *w, const void *owner, char *err, size_t errlen);

#endif
