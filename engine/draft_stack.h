/* draft_stack.h — the decoder layers and output heads of a drafter whose
 * blocks are Qwen3 decoder layers (MTP, DSpark), with the drafter's KV
 * cache: whole in one process, or, under tensor parallelism, sharded
 * across the ranks exactly like the target (model.h: q/k/v and gate/up
 * column-parallel, o_proj and down row-parallel with layer.c's all-reduce,
 * every head vocab-parallel by rows with its logits all-gathered,
 * vocab_par.h).
 *
 * A pass: rows x[n, H] with their sequence, position and (DSpark) keys
 * attended; first K/V only for some layers (of rows taken as they are),
 * then layers l0..l1-1 in full on x, the final norm of output `out` and
 * that output's head for the rows whose logits are wanted. The drafter
 * (spec/) builds the inputs, which are small and replicated, and picks the
 * drafts; only rank 0's drafter does that. Its draft_stack_run broadcasts
 * the pass over the target's step link (tp.c, op TP_DRAFT: the rows'
 * inputs and metadata and every slot's length in the drafter's KV cache)
 * and runs it; every other rank runs the same pass on its shard in tp.c's
 * serve loop, its KV cache brought to the leader's lengths first (free /
 * claim / truncate / append), as for the target.
 *
 * Ranks > 0 get their stacks from the leader's announcement: rank 0's
 * drafter_create calls draft_stack_open with a description of the drafter
 * (its options, bytes only spec/ reads); each other rank's serve loop hands
 * it to the draft_host the program installed (spec/drafters.h
 * drafter_tp_host), which creates the same drafter from the same
 * checkpoint, so its stack is made by the same code in the same order.
 * With one process nothing is broadcast and a pass costs what the layer
 * calls cost.
 * Owns: the row-parallel copies of the sharded layers (the layers
 * themselves stay the drafter's), the head shards' views, the KV cache,
 * the layer scratch and the gather buffers. */
#ifndef SPECBED_DRAFT_STACK_H
#define SPECBED_DRAFT_STACK_H
#include "draft_pass.h"
#include "forward.h"
#include "kv_cache.h"
#include "model.h"

typedef struct draft_stack draft_stack;

#define DRAFT_STACK_MAX_OUT 16

typedef struct {
    const char *what;                /* for messages: the checkpoint */
    const model_config *cfg;         /* the layers' whole shapes, rms_norm_eps and rope_theta */
    layer_weights *const *layers;    /* [n_layers] bound whole; sharded in place under tensor parallelism */
    int n_layers;                    /* = the KV cache's layers: layer l writes KV layer l */
    const kb_weight *const *heads;   /* [n_out] heads, each [N, H] (one N for all) */
    const float *const *norms;       /* [n_out] the final norm [H] before each head */
    int n_out;                       /* ≤ DRAFT_STACK_MAX_OUT */
    kv_config kv;                    /* the drafter's KV cache with the whole kv heads */
    int max_rows;                    /* rows per pass */
} draft_stack_spec;

/* target: the target's forward context, whose communicator and step link
 * the stack shares (tensor parallel when fwd_tp_size > 1), or NULL for one
 * process. Errors name the shape that does not divide by the rank count. */
int  draft_stack_create(draft_stack **out, const draft_stack_spec *sp, fwd_ctx *target, char *err, size_t errlen);
/* Rank 0's tells the other ranks to free theirs (their drafters). */
void draft_stack_free(draft_stack *s);

kv_cache *draft_stack_kv(draft_stack *s);          /* the drafter's KV cache (this rank's kv heads) */
int  draft_stack_reserve(draft_stack *s, int max_ctx);   /* attention over max_ctx keys; -1 = out of memory */
int  draft_stack_tp_size(const draft_stack *s);
/* This rank's rows of the heads (N / tp_size rounded up, or fewer on the
 * last rank; N with one process), and N. */
int  draft_stack_head_rows(const draft_stack *s);
int  draft_stack_vocab(const draft_stack *s);

/* The leader (or the only process): runs p, telling the other ranks first. */
int  draft_stack_run(draft_stack *s, const draft_pass *p, char *err, size_t errlen);

/* Rank 0, after its drafter was created: tells the other ranks to create
 * theirs from desc (n bytes). No-op with one process. */
int  draft_stack_open(draft_stack *s, const void *desc, size_t n, char *err, size_t errlen);

/* Ranks > 0, before fwd_tp_serve: the host their serve loop uses (copied).
 * Without one, a drafter the leader opens ends the job with a message. */
void draft_stack_set_host(fwd_ctx *target, const draft_host *h);

#endif
