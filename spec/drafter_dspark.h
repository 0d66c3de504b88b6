/* drafter_dspark.h — the DSpark drafter (DeepSpec Qwen3 layout; DESIGN §5;
 * reference: scripts/train/tiny_modules.py DSpark, scripts/train/eval_drafters.py
 * dspark_drafts; checkpoint format: dspark_ckpt.h).
 *
 * Context. ctx_j = hidden_norm(fc([tap_{L1}(j); tap_{L2}(j); ...])) for every
 * committed position j whose target taps are known (layer id L = the output
 * of target decoder layer L, in target_layer_ids order; the final layer's
 * only with dspark_opts.final_tap saying which state, see below). Each draft layer
 * keeps, in this drafter's paged KV cache, k = rope(k_norm(k_proj(ctx_j)))
 * and v = v_proj(ctx_j) at position j — ctx is NOT passed through the
 * layer's input_layernorm. This context cache only ever grows with
 * committed tokens (begin: the prompt's taps; accept: the taps of the
 * verify rows that produced the committed tokens), fed lazily at the next
 * propose, batched across sequences.
 *
 * Block. With x_0..x_a committed (anchor x_a at position a; the context
 * holds positions 0..a-1), the block is [x_a, MASK × (γ−1)] at positions
 * a..a+γ−1, γ = block_size from the checkpoint. Each draft layer runs the
 * block rows as a Qwen3 decoder layer whose queries attend to context
 * positions 0..a-1 and to every row of the block (non-causal). Slot k
 * (0-based) predicts the token at position a+k+1:
 *   U_k = lm_head(norm(h_k)),  logits_k = U_k + W2(W1[x_{k-1}])  (Markov,
 *   sequential: x_{-1}... i.e. the previous token of slot 0 is the anchor,
 *   of slot k the token drafted at slot k−1),
 *   c_k = sigmoid(w · [norm(h_k); W1[x_{k-1}]] + b) → spec_proposal.conf[k].
 * Greedy drafts argmax(logits_k); a sampling request draws from
 * q = sampler_probs(logits_k) with its RNG and reports q.
 *
 * Depth K is the serving setting, independent of γ:
 *   K ≤ γ: one full block of γ rows runs (the rows attend to one another,
 *          so the block is never shortened); only slots 0..K-1 are read.
 *   K > γ: blocks are chained. Block b (b = 1, 2, ...) is [d_{bγ}, MASK ×
 *          (γ−1)] at positions a+bγ .. a+bγ+γ−1, its first row holding the
 *          last token drafted by block b−1. Its queries attend to context
 *          positions 0..a−1, to the rows of every earlier block of this
 *          proposal (their keys/values as computed in those blocks' own
 *          passes, at their own positions a..a+bγ−1) and to all rows of
 *          block b. Its Markov chain starts from d_{bγ}. No block ever sees
 *          target features for drafted positions (there are none); earlier
 *          blocks' rows carry the anchor token and what those blocks
 *          inferred. scripts/goldens/make_drafter_fixture.py (dspark_chain) is the
 *          PyTorch reference of this rule, checked by tests/test_drafter_dspark.c.
 * All block rows are temporary: the KV cache is truncated back to the
 * context after every proposal.
 *
 * Draft vocabulary (optional; dspark_ckpt.h, draft_vocab.h): with a d2t
 * map of N ids in the checkpoint, U_k and the Markov term are computed for
 * those N rows only; the pick is made among them and mapped to its target
 * id (what the block, the Markov chain and the verifier see), and a
 * sampled draft's q is zero outside the set. */
#ifndef SPECBED_DRAFTER_DSPARK_H
#define SPECBED_DRAFTER_DSPARK_H
#include "drafter.h"
#include "forward.h"
#include "model.h"
#include "tokenizer.h"

/* Which target state a checkpoint's tap of the target's FINAL decoder layer
 * was trained on. DeepSpec's evaluator refuses such a checkpoint
 * (assert_no_final_target_layer, deepspec/eval/base_evaluator.py): its
 * target cache hooks the raw decoder-layer output, while its evaluation reads
 * HF's output_hidden_states, whose entry for the final layer is the state
 * after the final norm; so the checkpoint alone does not say which state it
 * saw. specbed refuses it too unless told (--dspark-final-tap). Taps of
 * earlier layers are the raw layer outputs in both, and need no option. */
typedef enum {
    DSPARK_FINAL_TAP_REFUSE = 0,   /* not given: a final-layer tap is refused */
    DSPARK_FINAL_TAP_RAW,          /* the final decoder layer's output, before the final norm */
    DSPARK_FINAL_TAP_NORMED        /* after the final norm (what the lm_head reads) */
} dspark_final_tap;

#define DSPARK_FINAL_TAP_NAMES "raw|normed"

/* "raw" / "normed" → *out; -1 for anything else. */
int dspark_final_tap_parse(const char *s, dspark_final_tap *out);

typedef struct {
    const char *model_dir;   /* the DSpark checkpoint directory (--draft-model) */
    dspark_final_tap final_tap;   /* --dspark-final-tap; an error when given for a checkpoint without one */
    int max_seqs;            /* sequence slots (default 16) */
    int max_seq_len;         /* context per slot (default min(target max_position_embeddings, 2048)) */
    int depth;               /* serving depth, for the startup message only (0 = not known yet) */
    int quiet;               /* no startup message */
} dspark_opts;

/* target and target_tok are borrowed and must outlive the drafter. If the
 * checkpoint directory has a tokenizer.json it must equal the target's.
 * tp: the target's forward context when it is tensor parallel: the draft
 * layers and lm_head are sharded like the target's (engine/draft_stack.h)
 * and every pass runs on all ranks; NULL or one rank = whole, here. Every
 * rank creates the drafter (drafters.h). */
int drafter_dspark_create(drafter **out, const dspark_opts *o, const model *target, const tokenizer *target_tok,
                          fwd_ctx *tp, char *err, size_t errlen);

/* The checkpoint's block_size γ (0 if d is not a DSpark drafter). */
int drafter_dspark_block_size(const drafter *d);

/* Test hook: while set, each propose writes, for its FIRST request, the
 * Markov-corrected logits (and, if base is not NULL, U_k) behind every draft
 * to corrected[k * vocab] / base[k * vocab] (with a draft vocabulary, by
 * target id, -INFINITY outside the set). NULL = off. */
void drafter_dspark_set_trace(drafter *d, float *corrected, float *base);

#endif
