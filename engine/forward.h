/* forward.h — the target forward pass over one ragged batch (fwd_batch.h).
 * fwd_run appends every row's K/V to the cache, so a caller that rejects
 * some rows calls kv_truncate afterwards.
 *
 * Arithmetic is batch-invariant: a row's logits and hidden states are
 * bit-identical whatever else is in the batch (DESIGN §4).
 * The fwd_ctx owns scratch buffers for up to max_rows rows; one context per
 * thread of control, any number per model. */
#ifndef SPECBED_FORWARD_H
#define SPECBED_FORWARD_H
#include "fwd_batch.h"
#include "kv_cache.h"
#include "model.h"

typedef struct fwd_ctx fwd_ctx;

int  fwd_create(fwd_ctx **out, const model *m, int max_rows, char *err, size_t errlen);
void fwd_free(fwd_ctx *f);
int  fwd_run(fwd_ctx *f, kv_cache *kv, const fwd_batch *b, const fwd_out *o,
             char *err, size_t errlen);
/* A mixture-of-experts target: the routing of the fwd_runs since the last
 * take (moe.h's moe_route_count: the experts the steps read), zeroed; -1
 * for a dense model. */
struct moe_route_count;
int  fwd_route_take(fwd_ctx *f, struct moe_route_count *out);

/* Tensor parallelism (tp.c). m is a shard (model_load_shard) and comm has
 * m->tp_size ranks. Rank 0 is the leader: its fwd_run broadcasts each
 * batch (spans, tokens, the rows wanted, every sequence's length so the
 * ranks mirror its KV truncations and frees) before computing, and gets
 * the whole logits rows (vocab-parallel lm_head, all-gathered); taps and
 * hidden states are replicated, so the leader has them as they are. Every
 * other rank calls fwd_tp_serve, which runs the same batches in lockstep
 * until the leader's context is freed. comm == NULL or size 1 = fwd_create. */
struct kb_comm;
int  fwd_create_tp(fwd_ctx **out, const model *m, int max_rows, struct kb_comm *comm, char *err, size_t errlen);
/* Leader: brings every rank's KV cache to the leader's state without a
 * forward (after frees, so their pages come back everywhere) and returns
 * each rank's free pages in pages_free[tp_size]. */
int  fwd_tp_sync(fwd_ctx *f, kv_cache *kv, int *pages_free, char *err, size_t errlen);
/* Ranks > 0: serve the leader's batches; 0 when the leader stopped. */
int  fwd_tp_serve(fwd_ctx *f, kv_cache *kv, char *err, size_t errlen);
int  fwd_tp_size(const fwd_ctx *f);
/* The communicator and step link the context runs on (NULL with one
 * process): a drafter's sharded layers (draft_stack.h) share them. */
struct kb_comm *fwd_tp_comm(const fwd_ctx *f);
struct tp_link *fwd_tp_link(const fwd_ctx *f);
int  fwd_tp_rank(const fwd_ctx *f);

/* kv_config for this model with the given pool (this rank's kv heads). */
kv_config fwd_kv_config(const model *m, int n_pages, int page_size, int max_seqs);

#endif
