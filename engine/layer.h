/* layer.h — one Qwen3 (Qwen2, Llama) decoder layer over a set of rows, the
 * single implementation the target forward (forward.c) and the drafters
 * whose blocks are decoder layers (MTP, DSpark) share.
 *
 * Rows are independent apart from attention: row i sits at position pos[i]
 * of kv sequence seq[i], its K/V are written to that slot of layer kv_layer
 * of the given cache, and it attends to positions 0..n_ctx[i]-1 of its own
 * sequence (n_ctx NULL = pos+1, causal). Every row's K/V is written before
 * any row attends, so rows of one sequence see each other within n_ctx:
 * causal spans (target, MTP) and a non-causal block (DSpark: n_ctx = a+γ
 * for every block row) are the same call.
 *
 * Arithmetic is the backend's batch-invariant kernels only: a row's result
 * does not depend on the other rows in the call.
 * Owns: the scratch buffers (layer_scratch), sized for max_rows rows and
 * grown for longer contexts by layer_scratch_reserve, so the layer calls
 * themselves never allocate and cannot fail. */
#ifndef SPECBED_LAYER_H
#define SPECBED_LAYER_H
#include "kv_cache.h"
#include "model.h"

typedef struct layer_scratch layer_scratch;

/* cfg gives the layer's shapes (hidden, heads, head_dim, intermediate) and
 * eps / rope_theta; it is copied. */
int  layer_scratch_create(layer_scratch **out, const model_config *cfg, int max_rows, char *err, size_t errlen);
void layer_scratch_free(layer_scratch *s);
/* Makes room for attention over max_ctx positions with the current kernel
 * thread count. 0 ok, -1 out of memory (the old buffers stay usable). */
int  layer_scratch_reserve(layer_scratch *s, int max_ctx);
int  layer_scratch_max_rows(const layer_scratch *s);
/* Tensor parallelism: cfg (above) is this rank's shard, and the outputs of
 * o_proj and down (row-parallel) are summed over the ranks of comm before
 * the residual add (kernels/comm.h: rank order, batch-invariant). A failed
 * collective ends the job (kb_comm_abort): the layer calls cannot fail.
 * NULL (the default) = one process. */
struct kb_comm;
void layer_scratch_set_comm(layer_scratch *s, struct kb_comm *comm);
/* The routing counts of the sparse layers run on this scratch since the
 * last take (moe.h), zeroed; -1 (and zeros) when its layers are dense. */
struct moe_route_count;
int  layer_scratch_route_take(layer_scratch *s, struct moe_route_count *out);

/* A forward's indices in a step buffer (backend.h kb_stepbuf; forward.c
 * fills it): device memory that the kernels read and the host never does,
 * so that the forward's calls repeat exactly from step to step and a
 * recorded graph of them replays. */
typedef struct {
    const int *slot;       /* [n] each row's KV slot (kv_slot) */
    const int *page_cat;   /* the rows' sequences' page lists end to end, n_cat entries */
    const int *page_off;   /* [n] row i's list at page_cat + page_off[i] */
    int n_cat;
    int max_ctx;           /* ≥ every n_ctx: the attention scores' stride */
} layer_dev_idx;

typedef struct {
    int n;              /* rows, ≤ max_rows */
    const int *seq;     /* [n] kv sequence of each row */
    const int *pos;     /* [n] position: RoPE angle and KV slot (< kv_len(seq)) */
    const int *n_ctx;   /* [n] keys attended, positions 0..n_ctx-1; NULL = pos+1 */
    int window;         /* fault injection only (spec/fault.h window): keys more than `window`
                           positions back, rounded down to whole KV pages, are not attended; 0 = all */
    const layer_dev_idx *dev;   /* NULL, or: pos and n_ctx (never NULL then) are step-buffer memory
                                   too, seq is not read, window must be 0 */
} layer_rows;

/* x[n, H], the residual stream, in place:
 *   x += o_proj(attn(rope(q_norm(q)), rope(k_norm(k)), v)) of input_layernorm(x)
 *   x += down(silu(gate(·)) · up(·)) of post_attention_layernorm(x)
 * writing each row's K/V at (kv_layer, seq, pos). Needs layer_scratch_reserve
 * for the longest n_ctx first. */
void layer_forward(layer_scratch *s, const layer_weights *w, kv_cache *kv, int kv_layer,
                   const layer_rows *r, float *x);

/* K/V only, of rows x[n, H] taken as they are (no input_layernorm):
 * k = rope(k_norm(k_proj x)), v = v_proj x, written at (kv_layer, seq, pos).
 * DSpark's context rows enter every draft layer this way. */
void layer_write_kv(layer_scratch *s, const layer_weights *w, kv_cache *kv, int kv_layer,
                    const layer_rows *r, const float *x);

#endif
