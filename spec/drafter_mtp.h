/* drafter_mtp.h — the DeepSeek-V3 multi-token-prediction module as a
 * drafter (DESIGN §5; reference: scripts/tiny_modules.py MTP and
 * scripts/eval_drafters.py mtp_drafts).
 *
 * Weights: the first MTP module of the target's own checkpoint,
 * model.layers.{num_hidden_layers}.{enorm,hnorm,eh_proj,<Qwen3 block>}
 * (config num_nextn_predict_layers ≥ 1); embedding, final norm and lm_head
 * are the target's. Further modules (num_nextn_predict_layers > 1) are not
 * used: depth beyond one chains the first module, as with one module.
 *
 * Rows. MTP row i takes [enorm(Emb(t_{i+1})); hnorm(h_i)] (embedding first),
 * eh_proj, one decoder block at RoPE position i, causal over the module's
 * own rows, then the target's final norm (giving g_i) and lm_head; it
 * predicts t_{i+2}. h_i is the target's hidden state after its final norm
 * (tap FWD_TAP_FINAL_NORM), for the row that produced t_{i+1}.
 *
 * Drafting after x_0..x_N: the module's own KV cache holds the true rows
 * 0..N-1 (each needs h_i, known once the target has run row i, and
 * t_{i+1}); d_1 comes from row N-1. Draft j+1 (chaining) is row N-1+j with
 * input [Emb(d_j); g of the previous row] at position N-1+j, attending the
 * true rows 0..N-1 and the earlier chained rows. Chained rows are dropped
 * (truncation) after each proposal; true rows are added as the target's
 * hidden states arrive (begin: the prompt's; accept: the verify rows'),
 * and fed lazily at the next propose, batched across sequences. */
#ifndef SPECBED_DRAFTER_MTP_H
#define SPECBED_DRAFTER_MTP_H
#include "drafter.h"
#include "model.h"

typedef struct {
    int max_seqs;       /* sequence slots (default 16) */
    int max_seq_len;    /* context per slot (default min(max_position_embeddings, 2048)) */
    int quiet;          /* no startup messages */
} mtp_opts;

/* target: the loaded target model (borrowed; must outlive the drafter). Fails,
 * naming the checkpoint, if it has no MTP module. */
int drafter_mtp_create(drafter **out, const mtp_opts *o, const model *target, char *err, size_t errlen);

/* Test hook: while set, each propose writes the logits behind every draft of
 * its FIRST request to logits[k * vocab] (k < that request's drafts). NULL = off. */
void drafter_mtp_set_trace(drafter *d, float *logits);

#endif
