/* engine.h — the engine handle: one loaded target model with everything a
 * forward needs (tokenizer, paged KV cache, forward context). Plain
 * generation (generate.h), the speculative step (spec/) and the server all
 * borrow it; none of them owns a piece of it.
 *
 * Ownership: gen_engine owns the model, tokenizer, KV cache and forward
 * context it creates; gen_engine_free releases all of them. Not thread-safe:
 * one thread drives an engine at a time. */
#ifndef SPECBED_ENGINE_H
#define SPECBED_ENGINE_H
#include <stddef.h>
#include "forward.h"
#include "tokenizer.h"

typedef struct {
    const char *model_dir;
    int max_batch_rows;    /* rows per forward (prefill chunk budget), default 64 */
    int page_size;         /* KV page size in tokens, default 16 */
    int n_pages;           /* KV pool size, default enough for max_seqs × max_seq_len */
    int max_seqs;          /* default 16 */
    int max_seq_len;       /* default min(max_position_embeddings, 2048) */
    struct kb_comm *comm;  /* tensor parallelism: every rank of comm creates the engine with the same
                              options; NULL = one process (see forward.h fwd_create_tp) */
} gen_engine_opts;

typedef struct {
    model *m;
    tokenizer *tok;
    kv_cache *kv;
    fwd_ctx *fwd;
    gen_engine_opts opts;
} gen_engine;

int  gen_engine_create(gen_engine **out, const gen_engine_opts *opts, char *err, size_t errlen);
void gen_engine_free(gen_engine *e);   /* rank 0's also stops the other ranks' gen_engine_serve */

/* Tensor parallelism, ranks > 0: run rank 0's forwards (and the passes of
 * its MTP and DSpark drafters, once a draft_host is installed: spec/
 * drafters.h drafter_tp_host) until it frees its engine. A failure here ends the whole job (kb_comm_abort) with the
 * message: the leader would otherwise wait in a collective forever. */
void gen_engine_serve(gen_engine *e);
int  gen_engine_tp_rank(const gen_engine *e);   /* 0 without tensor parallelism */

double gen_now(void);   /* monotonic seconds */

#endif
