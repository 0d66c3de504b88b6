/* tp_link.h — the step broadcast of tensor parallelism (tp.c), as
 * forward.c uses it: the leader announces each batch before computing it;
 * the other ranks receive, mirror the leader's KV state and run it.
 * Owns: the message buffers (for max_rows rows, and the sequence slots of
 * the KV cache each step names) and, on
 * ranks > 0, the buffer their (discarded) logits rows land in. */
#ifndef SPECBED_TP_LINK_H
#define SPECBED_TP_LINK_H
#include "comm.h"
#include "forward.h"

typedef struct tp_link tp_link;

int  tp_link_create(tp_link **out, kb_comm *c, const model *m, int max_rows, char *err, size_t errlen);
/* On the leader, first tells every rank to stop serving. */
void tp_link_free(tp_link *t);

/* Leader, inside fwd_run after the K/V slots were appended: the batch, the
 * rows wanted and every sequence's length before this batch. */
int  tp_announce(tp_link *t, const kv_cache *kv, const fwd_batch *b, const fwd_out *o, char *err, size_t errlen);
int  tp_sync(tp_link *t, kv_cache *kv, int *pages_free, char *err, size_t errlen);
int  tp_serve(tp_link *t, fwd_ctx *f, kv_cache *kv, char *err, size_t errlen);

#endif
