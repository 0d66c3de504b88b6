/* dspark_ckpt.h — a DeepSpec-layout Qwen3 DSpark checkpoint: its config
 * fields and its tensors bound to roles, every shape checked, and the
 * checks against the target it drafts for (hidden size, vocabulary, tap
 * layers, mask token). Used by drafter_dspark.c only.
 *
 * config.json: a Qwen3 config (hidden_size, intermediate_size,
 * num_hidden_layers = draft layers, num_attention_heads,
 * num_key_value_heads, head_dim, rms_norm_eps, rope_theta, vocab_size) with
 * DeepSpec's fields block_size, mask_token_id, target_layer_ids,
 * markov_rank, markov_head_type ("vanilla"), enable_confidence_head,
 * confidence_head_with_markov, num_target_layers (optional).
 * Tensors (DeepSpec's state_dict names, no "model." prefix):
 *   layers.N.<Qwen3 decoder layer>, norm.weight, fc.weight [H, n_taps·H],
 *   hidden_norm.weight, markov_head.markov_w1.weight [V, r],
 *   markov_head.markov_w2.weight [V, r], confidence_head.proj.{weight [1, H(+r)], bias [1]},
 *   embed_tokens.weight and lm_head.weight [V, H] — optional: DeepSpec
 *   makes them frozen copies of the target's, so when absent the target's
 *   embedding and lm_head are used (and the message says so).
 *
 * Draft vocabulary (optional, draft_vocab.h): dir/draft_vocab.safetensors
 * with d2t [N]. Then the two vocabulary-wide outputs cover the N draft ids
 * only: lm_head.weight may be stored reduced, [N, H] in draft-id order (as
 * EAGLE-3 stores its lm_head [draft_vocab_size, H]), or full [V, H] (or be
 * absent: the target's), whose N rows are gathered once at load; the
 * Markov head's markov_w2 [V, r] is gathered the same way. markov_w1 and
 * the embedding stay [V, ·]: they are looked up by target id (the anchor
 * and earlier drafts, always target ids). config.json's draft_vocab_size
 * (EAGLE-3's field), when present, must equal N (or V with no map). */
#ifndef SPECBED_DSPARK_CKPT_H
#define SPECBED_DSPARK_CKPT_H
#include "draft_vocab.h"
#include "model.h"

#define DSPARK_MAX_TAPS 8

typedef struct {
    model_config cfg;            /* the draft layers' shapes; n_layers = draft layers */
    int block_size, mask_token_id;
    int target_layer_ids[DSPARK_MAX_TAPS], n_taps;
    int markov_rank;             /* 0 = no Markov head */
    int has_conf, conf_with_markov;
    st_model *st;
    layer_weights *layers;       /* [cfg.n_layers] */
    kb_weight embed;             /* [V, H] the checkpoint's, or the target's */
    kb_weight lm_head;           /* [NV, H], NV = dv.n with a draft vocabulary, else V */
    int own_embed, own_lm_head;  /* bound from the checkpoint (not the target's) */
    int shared_embed, shared_lm_head; /* the checkpoint's copy is the target's bytes: the target's is used */
    int reduced_head;            /* lm_head.weight was stored [N, H] */
    draft_vocab dv;              /* dv.n = 0: none */
    int draft_vocab_size;        /* config.json's, 0 = absent */
    float *norm, *hidden_norm;   /* [H] */
    kb_weight fc;                /* [H, n_taps·H] */
    kb_weight w1, w2;            /* w1 [V, r] an embedding; w2 [NV, r] Linear(r → NV) */
    kb_weight conf_w;            /* [1, H (+ r)] */
    float conf_b;
} dspark_ckpt;

/* Loads dir/config.json and dir's checkpoint for drafting with target.
 * On error nothing needs freeing. */
int  dspark_ckpt_load(dspark_ckpt *c, const char *dir, const model *target, char *err, size_t errlen);
void dspark_ckpt_free(dspark_ckpt *c);

#endif
