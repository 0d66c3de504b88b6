/* drafter_mtp.h — the DeepSeek-V3 multi-token-prediction modules as a
 * drafter (DESIGN §5; reference: scripts/train/tiny_modules.py MTP,
 * scripts/train/eval_drafters.py mtp_drafts, and for several modules
 * scripts/goldens/make_drafter_fixture.py mtp_chain_multi).
 *
 * Weights: the target's own checkpoint (config num_nextn_predict_layers
 * n ≥ 1); module j (0 ≤ j < n) is
 * model.layers.{num_hidden_layers + j}.{enorm,hnorm,eh_proj,<Qwen3 block>}
 * with its own shared_head.norm / shared_head.head when present; embedding,
 * and otherwise final norm and lm_head, are the target's.
 *
 * Rows. MTP row i takes [enorm(Emb(t_{i+1})); hnorm(h_i)] (embedding first),
 * eh_proj, one decoder block at RoPE position i, causal over the module's
 * own rows, then the module's final norm (giving g_i) and head; it predicts
 * t_{i+2}. h_i is the target's hidden state after its final norm (tap
 * FWD_TAP_FINAL_NORM), for the row that produced t_{i+1}.
 *
 * Drafting after x_0..x_N: draft step k (0-based) is computed by module
 * k mod n. Step 0 (d_1) is module 0's true row N-1. Step k ≥ 1 (d_{k+1}) is
 * the chained row N-1+k with input [Emb(d_k); g of step k-1] at position
 * N-1+k. Depth beyond n keeps chaining: module 0 again at step n, etc.
 *
 * KV. One KV layer per module (layer j = module j), one sequence per slot.
 * Every module's layer holds every row of the sequence: the true rows
 * 0..N-1 (each module's own K/V of the row's input pair) and, during a
 * proposal, the chained rows (each module's own K/V of [Emb(d_k); g]),
 * so a module never attends to a position it did not write. Only module
 * k mod n's block runs in full at step k; the others compute K/V only.
 * With n = 1 this is the one-module drafter: the true rows plus the chain.
 * Chained rows are dropped (truncation) after each proposal; true rows are
 * added as the target's hidden states arrive (begin: the prompt's; accept:
 * the verify rows'), and fed lazily at the next propose, batched across
 * sequences.
 *
 * vLLM (vllm/model_executor/models/deepseek_mtp.py, DeepSeekMultiTokenPredictor):
 * forward() and compute_logits() use layers[num_hidden_layers +
 * spec_step_idx % num_mtp_layers], each with its own shared_head; each
 * module's mtp_block is a decoder layer of its own (prefix
 * model.layers.{idx}), so it has its own KV cache layer, written only at
 * the steps that module runs (so module j ≥ 1 never writes the true rows).
 * Step 0's hidden input is the target's hidden states; step k's is the
 * previous step's module output before shared_head.norm. vllm/config/
 * speculative.py wants num_speculative_tokens ≤ n or a multiple of n ("MTP
 * module reuse"). Its V1 proposer (vllm/v1/spec_decode/eagle.py) calls the
 * model without spec_step_idx, so there module 0 drafts every step.
 * specbed: the same k mod n choice and per-module heads and KV layers, at
 * any depth 1..16; differences: every module's KV layer is kept complete
 * (above), and the hidden chained is g after the module's final norm (the
 * one-module convention of tiny_modules.py, kept for every module).
 *
 * Draft vocabulary (optional, draft_vocab.h): a draft_vocab.safetensors in
 * the target's directory, beside the modules it serves (d2t [N]; not listed
 * in model.safetensors.index.json). One top-level map for every module, as
 * EAGLE-3 has one d2t per drafter: the map describes the drafting
 * vocabulary, not a module, and every module's head (its own
 * shared_head.head or the target's lm_head, both [V, H]) has its N rows
 * gathered once at load. Each step scores only those N ids, picks among
 * them and maps the pick to its target id (the id the next step embeds and
 * the verifier checks); a sampled draft's q is zero outside the set. */
#ifndef SPECBED_DRAFTER_MTP_H
#define SPECBED_DRAFTER_MTP_H
#include "drafter.h"
#include "forward.h"
#include "model.h"

typedef struct {
    int max_seqs;       /* sequence slots (default 16) */
    int max_seq_len;    /* context per slot (default min(max_position_embeddings, 2048)) */
    int quiet;          /* no startup messages */
} mtp_opts;

/* target: the loaded target model (borrowed; must outlive the drafter). Fails,
 * naming the checkpoint and tensor, if it has no MTP module or one of its
 * num_nextn_predict_layers modules is missing.
 * tp: the target's forward context when it is tensor parallel (target is
 * then its shard): the modules' blocks and heads are sharded the same way
 * (engine/draft_stack.h) and every pass runs on all ranks; NULL or one
 * rank = whole, here. Every rank creates the drafter (drafters.h). */
int drafter_mtp_create(drafter **out, const mtp_opts *o, const model *target, fwd_ctx *tp, char *err, size_t errlen);

/* Test hook: while set, each propose writes the logits behind every draft of
 * its FIRST request to logits[k * vocab] (k < that request's drafts; with a
 * draft vocabulary, by target id, -INFINITY outside the set). NULL = off. */
void drafter_mtp_set_trace(drafter *d, float *logits);

#endif
