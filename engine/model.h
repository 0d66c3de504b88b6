/* model.h — a loaded target model: config + weights bound to tensors of an
 * mmapped checkpoint. Every tensor's shape is checked against the config at
 * load time, so the forward pass never sees a surprise. The model owns its
 * st_model (the mapping) and the small f32 copies of norm vectors/biases;
 * kb_weight.data points into the mapping. Read-only after load: any number
 * of forward contexts may share one model. */
#ifndef SPECBED_MODEL_H
#define SPECBED_MODEL_H
#include "backend.h"
#include "config.h"
#include "safetensors.h"

struct moe_weights;

typedef struct {
    kb_weight wq, wk, wv, wo;      /* [n_heads*hd, H], [n_kv*hd, H], [n_kv*hd, H], [H, n_heads*hd] */
    kb_weight w_gate, w_up, w_down;/* [I, H], [I, H], [H, I]; unset on a sparse layer */
    struct moe_weights *moe;       /* sparse (mixture-of-experts) layer: router + experts (moe.h), else NULL */
    float *attn_norm;              /* [H]  input_layernorm */
    float *mlp_norm;               /* [H]  post_attention_layernorm */
    float *q_norm, *k_norm;        /* [hd] Qwen3 only, else NULL */
    float *bq, *bk, *bv;           /* Qwen2 only, else NULL */
} layer_weights;

typedef struct {
    model_config cfg;
    st_model *st;
    kb_weight embed;               /* [V, H] */
    kb_weight lm_head;             /* [V, H]; == embed when tied */
    float *final_norm;             /* [H] */
    layer_weights *layers;         /* [n_layers]; this rank's shard under tensor parallelism */
    char dir[4096];
    /* Tensor parallelism (model_shard.c). With tp_size 1, shard == cfg and
     * nothing below is used. Otherwise `layers` hold this rank's slice and
     * shard gives its shapes (n_heads, n_kv_heads, intermediate_size), while
     * cfg, embed, lm_head and final_norm stay whole: the residual stream is
     * replicated (the MTP and DSpark drafters shard their own layers and
     * heads, engine/draft_stack.h). */
    model_config shard;
    int tp_rank, tp_size;
    int kv_head_lo;                /* first global kv head this rank holds */
    kb_weight lm_head_part;        /* rows [vocab_lo, vocab_lo + lm_head_part.rows) of lm_head */
    int vocab_lo, vocab_part;      /* vocab_part = ceil(vocab / tp_size), the padded shard width */
    void **owned;                  /* copied slices (row-parallel matrices), freed with the model */
    int n_owned;
} model;

/* Loads dir/config.json and the checkpoint in dir. */
int  model_load(model **out, const char *dir, char *err, size_t errlen);
/* Loads rank `rank` of a tp_size-way Megatron split (model_shard.c):
 * attention heads (q/k/v column-parallel, o_proj row-parallel; kv heads
 * replicated when there are fewer of them than ranks), MLP gate/up column-
 * and down row-parallel, lm_head vocab-parallel. tp_size 1 = model_load.
 * Errors name the shape that does not divide. */
int  model_load_shard(model **out, const char *dir, int rank, int tp_size, char *err, size_t errlen);
void model_free(model *m);

/* The slicing rules behind model_load_shard, for any set of Qwen3 decoder
 * layers and vocabulary heads (the target's, and the MTP and DSpark
 * drafters' through engine/draft_stack.h).
 * model_shard_config: *shard = c with this rank's n_heads, n_kv_heads and
 * intermediate_size, *kv_head_lo = its first global kv head; an error
 * (prefixed with what) when the shapes do not divide by tp.
 * layer_weights_shard: one layer bound whole with c, sliced in place to
 * rank's part; the row-parallel copies (o_proj, down) are appended to
 * *owned[*n_owned], which the caller frees. -1 = the shapes do not divide
 * or out of memory. tp 1 leaves w as it is.
 * model_head_part: rows [*lo, *lo + rows) of a vocab-parallel head
 * [N, H], *width = ceil(N / tp) the padded shard width (the last rank's
 * part may be shorter, or empty). */
int  model_shard_config(const model_config *c, int rank, int tp, model_config *shard, int *kv_head_lo,
                        const char *what, char *err, size_t errlen);
int  layer_weights_shard(layer_weights *w, const model_config *c, int rank, int tp, void ***owned, int *n_owned);
kb_weight model_head_part(const kb_weight *head, int rank, int tp, int *lo, int *width);

/* Binds one decoder layer whose tensors are named prefix + "self_attn.q_proj.weight"
 * etc. (prefix like "model.layers.3."). Used by model_load and by drafters
 * (MTP, DSpark) whose blocks are Qwen3 decoder layers. lw must be freed with
 * layer_weights_free. */
int  layer_weights_bind(layer_weights *lw, const st_model *st, const char *prefix,
                        const model_config *cfg, char *err, size_t errlen);
void layer_weights_free(layer_weights *lw);

/* Binds a 2-D weight after checking its shape; copies a 1-D tensor to f32
 * (into kb_alloc'd memory, so device kernels read it in place: free it with
 * kb_free). */
int  model_bind_matrix(kb_weight *w, const st_model *st, const char *name, int rows, int cols,
                       char *err, size_t errlen);
int  model_copy_vector(float **out, const st_model *st, const char *name, int n,
                       char *err, size_t errlen);

/* 1 when tensor `name` of st holds exactly the target's embedding
 * (head 0) or lm_head (head 1): same dtype, shape and bytes, compared in
 * the mapped files (so also under cuda, where bound weights live on the
 * device); 0 when it differs or is absent. A drafter checkpoint that
 * carries a frozen copy of one (DeepSpec saves both) then uses the
 * target's weight instead: one copy in the cache, the same numbers. */
int  model_tensor_is_target(const st_model *st, const char *name, const model *target, int head);

#endif
