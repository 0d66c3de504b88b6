/* config.h — the model hyper-parameters specbed needs, read from an HF
 * config.json. Qwen3 is the reference family; Llama and Qwen2 load through
 * the same struct with the flags below. Unknown architectures, missing
 * required fields, wrong types and unsupported rope_scaling are errors. */
#ifndef SPECBED_CONFIG_H
#define SPECBED_CONFIG_H
#include <stddef.h>

typedef struct {
    char architecture[64];   /* e.g. "Qwen3ForCausalLM" */
    char model_type[32];     /* "qwen3", "qwen2", "llama" */
    int hidden_size;
    int intermediate_size;
    int n_layers;            /* num_hidden_layers */
    int n_heads;             /* num_attention_heads */
    int n_kv_heads;          /* num_key_value_heads (defaults to n_heads) */
    int head_dim;            /* head_dim (defaults to hidden_size / n_heads) */
    int vocab_size;
    int max_position_embeddings;
    float rms_norm_eps;
    float rope_theta;
    int tie_word_embeddings; /* lm_head shares embed_tokens */
    int qk_norm;             /* Qwen3: per-head RMSNorm on q and k */
    int qkv_bias;            /* Qwen2: bias on q/k/v projections */
    int n_mtp_layers;        /* num_nextn_predict_layers (0 if absent) */
    int bos_token_id;        /* -1 if absent */
    int eos_token_id;        /* -1 if absent (first one if a list) */
    /* Mixture of experts (Qwen3MoeForCausalLM); n_experts 0 = every layer dense.
     * Which layers are sparse: config_layer_is_sparse. */
    int n_experts;           /* num_experts */
    int n_experts_per_tok;   /* num_experts_per_tok: experts each row is routed to */
    int moe_intermediate_size;
    int norm_topk_prob;      /* renormalise the top-k router weights to sum 1 */
    int decoder_sparse_step; /* layer l sparse only when (l + 1) % step == 0 */
    unsigned char mlp_only[128]; /* mlp_only_layers as a bitmap over layers 0..1023 */
} model_config;

/* 1 when decoder layer `layer` of c is a sparse (mixture-of-experts) layer,
 * HF's rule (transformers' Qwen3MoeDecoderLayer): not in mlp_only_layers,
 * num_experts > 0 and (layer + 1) % decoder_sparse_step == 0. */
int config_layer_is_sparse(const model_config *c, int layer);
/* 1 when any layer of c is sparse. */
int config_has_experts(const model_config *c);

int config_load(model_config *c, const char *path, char *err, size_t errlen);

/* The RoPE base of a config.json object (`root`, a cJSON object), the one
 * reader for targets and drafters alike: transformers ≥ 5 writes
 * "rope_parameters": {"rope_type": "default", "rope_theta": θ}, earlier
 * versions a top-level "rope_theta" (and "rope_scaling"). Absent: 10000.
 * Any RoPE type other than "default" (yarn, llama3, dynamic, linear, …),
 * per-layer-type parameters, or two θ that disagree are refused by name:
 * specbed implements plain RoPE only, and a wrong θ loads "fine" and then
 * silently changes the output. */
struct cJSON;
int config_rope_theta(const struct cJSON *root, const char *path, double *theta, char *err, size_t errlen);

#endif
