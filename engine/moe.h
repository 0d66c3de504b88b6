/* moe.h — the sparse (mixture-of-experts) MLP of a Qwen3-MoE decoder layer:
 * the router and the experts' weights bound from a checkpoint, and their
 * forward over a set of rows, on the CPU or the CUDA backend (the routing
 * on the host, the rest in backend calls: moe.c).
 *
 * Weights (transformers' names under prefix "model.layers.L."):
 *   mlp.gate.weight                        router [E, H]
 * and the experts in one of two layouts, never both:
 *   per expert, as the released checkpoints store them:
 *     mlp.experts.e.{gate,up}_proj.weight  [I, H],  mlp.experts.e.down_proj.weight [H, I]
 *   fused, as transformers 5 keeps them (conversion_mapping.py "qwen2_moe",
 *   which qwen3_moe copies: the experts stacked on dim 0, gate then up
 *   concatenated on dim 1; MixtralExperts reads gate_up_proj[e] with
 *   linear(...).chunk(2): gate first):
 *     mlp.experts.gate_up_proj             [E, 2·I, H]
 *     mlp.experts.down_proj                [E, H, I]
 * Expert e's matrices are kb_weights pointing into the mapping either way
 * (on a device, at their uploads: device memory, or mapped host memory
 * under backend.h kb_set_experts_on_host), so the two layouts compute
 * bit-identical results.
 *
 * The forward (moe_forward): router logits = x·gateᵀ (kb_matmul); softmax in
 * float32; the top k by probability, the lower expert index winning a tie;
 * with norm_topk_prob the k weights divided by their sum; each expert a
 * SwiGLU MLP over the rows routed to it (kb_matmul_grouped: every active
 * expert in one call, each row with one kb_matmul's bits); each row's
 * output the weighted sum of its experts' outputs added in ascending
 * expert index from zero (the order of HF's index_add_ loop;
 * kb_combine_rows). A row's arithmetic never depends on which other rows
 * share its experts. */
#ifndef SPECBED_MOE_H
#define SPECBED_MOE_H
#include "backend.h"
#include "config.h"
#include "safetensors.h"

typedef struct moe_weights {
    int n_experts, top_k, inter, hidden;
    int fused;               /* 1: bound from the fused 3-D tensors */
    kb_weight router;        /* [E, H] */
    kb_weight *gate, *up;    /* [E] of [I, H] */
    kb_weight *down;         /* [E] of [H, I] */
} moe_weights;

/* Binds the sparse MLP of the layer whose tensors start with prefix
 * ("model.layers.3."). *out is malloc'd; free with moe_weights_free. Errors
 * name the tensor (missing, wrong shape, both layouts present). */
int  moe_weights_bind(moe_weights **out, const st_model *st, const char *prefix, const model_config *c,
                      char *err, size_t errlen);
void moe_weights_free(moe_weights *w);
/* One expert's gate + up + down in bytes (every expert has the same shape):
 * what a step pays per distinct expert it reads. */
size_t moe_expert_bytes(const moe_weights *w);

/* Every tensor under "model.layers.L.mlp." (L < n_layers) must be one that
 * layer's kind reads: a sparse layer's router and experts in one layout, a
 * dense layer's gate/up/down. Anything else (a shared expert, an expert
 * index ≥ num_experts, expert tensors on a dense layer) is refused by name
 * rather than ignored. */
int  moe_check_names(const st_model *st, const model_config *c, char *err, size_t errlen);

typedef struct moe_scratch moe_scratch;
int  moe_scratch_create(moe_scratch **out, const model_config *c, int max_rows, char *err, size_t errlen);
void moe_scratch_free(moe_scratch *s);

/* y[n, H] = the sparse MLP of rows x[n, H] (already post_attention_layernorm'd).
 * n ≤ the scratch's max_rows. On a device it waits once (kb_wait), for the
 * router's logits, which the host reads. */
void moe_forward(moe_scratch *s, const moe_weights *w, const float *x, int n, float *y);

/* What the routing cost: an MoE step reads the weights of the union of the
 * experts its rows chose, so its cost follows that count, not the rows
 * (bench_engine, profile). Counted by every moe_forward since the last
 * moe_route_take, which hands the counts over and zeroes them. */
typedef struct moe_route_count {
    long long calls;      /* sparse-layer forwards (one per sparse layer per step) */
    long long rows;       /* rows routed, summed over the calls */
    long long distinct;   /* distinct experts the calls read, summed over the calls */
} moe_route_count;
void moe_route_take(moe_scratch *s, moe_route_count *out);

#endif
