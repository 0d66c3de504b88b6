/* tp_link.h — the step broadcast of tensor parallelism (tp.c), as
 * forward.c uses it: the leader announces each batch before computing it;
 * the other ranks receive, mirror the leader's KV state and run it.
 * The drafters whose layers are sharded (draft_stack.h) send their passes
 * the same way.
 * Owns: the message buffers (for max_rows rows, and the sequence slots of
 * the KV cache each step names) and, on ranks > 0, the buffer their
 * (discarded) logits rows land in and the drafters opened on the leader's
 * word (their handles, closed on its word or when it stops). */
#ifndef SPECBED_TP_LINK_H
#define SPECBED_TP_LINK_H
#include "comm.h"
#include "draft_pass.h"
#include "fwd_batch.h"
#include "kv_cache.h"
#include "model.h"

/* tp.c calls nothing above itself: what the other ranks run (a batch, a
 * drafter's pass) is handed to it by forward.c and draft_stack.c, which
 * call it (a file pair that calls each other is one module split in two). */
struct fwd_ctx;
struct draft_stack;

typedef struct tp_link tp_link;

int  tp_link_create(tp_link **out, kb_comm *c, const model *m, int max_rows, char *err, size_t errlen);
/* On the leader, first tells every rank to stop serving. */
void tp_link_free(tp_link *t);

/* Leader, inside fwd_run after the K/V slots were appended: the batch, the
 * rows wanted and every sequence's length before this batch. */
int  tp_announce(tp_link *t, const kv_cache *kv, const fwd_batch *b, const fwd_out *o, char *err, size_t errlen);
int  tp_sync(tp_link *t, kv_cache *kv, int *pages_free, char *err, size_t errlen);
/* Ranks > 0: serve the leader's steps until it stops; each batch runs
 * through run(f, ...), which is fwd_run (forward.c passes it). */
typedef int (*tp_run_fn)(struct fwd_ctx *f, kv_cache *kv, const fwd_batch *b, const fwd_out *o, char *err,
                         size_t errlen);
int  tp_serve(tp_link *t, tp_run_fn run, struct fwd_ctx *f, kv_cache *kv, char *err, size_t errlen);

/* A drafter's sharded layers (draft_stack.c). Leader: open announces a new
 * drafter (desc, n bytes, for the other ranks' draft_host) and gives the
 * id its passes name; close frees the other ranks' (a failure is printed:
 * it comes from a free); pass sends one draft_pass of rows H wide with the
 * lengths of every slot of the drafter's KV cache kv (after the pass's
 * appends). Ranks > 0: set_host installs what opens their drafters, and
 * ops, how the serve loop reaches an opened drafter's stack (draft_stack.c's
 * functions; a received pass runs through ops->serve after the stack's KV
 * cache was mirrored, into the stack's own scratch). */
typedef struct {
    kv_cache *(*kv)(struct draft_stack *s);
    int    (*hidden)(const struct draft_stack *s);
    int    (*max_rows)(const struct draft_stack *s);
    int    (*layers)(const struct draft_stack *s);
    float *(*rx)(struct draft_stack *s, size_t floats);   /* a receive buffer of that many floats, NULL = OOM */
    int    (*serve)(struct draft_stack *s, draft_pass *p, char *err, size_t errlen);
} tp_draft_ops;
int  tp_draft_open(tp_link *t, const void *desc, size_t n, int *id, char *err, size_t errlen);
void tp_draft_close(tp_link *t, int id);
int  tp_draft_pass(tp_link *t, int id, const kv_cache *kv, const draft_pass *p, int H, char *err, size_t errlen);
void tp_set_draft_host(tp_link *t, const draft_host *h, const tp_draft_ops *ops);

#endif
