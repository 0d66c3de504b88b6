/* engine.c — loading and freeing the engine handle (see engine.h): the
 * model, its tokenizer, the KV pool sized from the options, the forward
 * context. Validates that the pieces fit together before anything runs. */
#include "engine.h"
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "comm.h"
#include "errmsg.h"

double gen_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int gen_engine_create(gen_engine **out, const gen_engine_opts *opts, char *err, size_t errlen) {
    *out = NULL;
    gen_engine *e = calloc(1, sizeof *e);
    if (!e) return errf(err, errlen, "out of memory");
    e->opts = *opts;
    gen_engine_opts *o = &e->opts;
    if (o->max_batch_rows <= 0) o->max_batch_rows = 64;
    if (o->page_size <= 0) o->page_size = 16;
    if (o->max_seqs <= 0) o->max_seqs = 16;

    int tp = o->comm ? kb_comm_size(o->comm) : 1, rank = o->comm ? kb_comm_rank(o->comm) : 0;
    /* the shard copies row-parallel slices on the host (model_shard.c), which
     * device-resident weights do not allow yet */
    if (tp > 1 && !strcmp(kb_device(), "cuda")) {
        errf(err, errlen, "tensor parallelism (--tp %d) does not run on --device cuda yet", tp);
        goto fail;
    }
    if (model_load_shard(&e->m, o->model_dir, rank, tp, err, errlen)) goto fail;
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", o->model_dir);
    if (tok_load(&e->tok, path, err, errlen)) goto fail;
    if (tok_vocab_size(e->tok) > e->m->cfg.vocab_size) {
        errf(err, errlen, "%s: tokenizer has %d tokens but config.json vocab_size is %d", path,
             tok_vocab_size(e->tok), e->m->cfg.vocab_size);
        goto fail;
    }
    int ctx = e->m->cfg.max_position_embeddings;
    if (o->max_seq_len <= 0) o->max_seq_len = ctx < 2048 ? ctx : 2048;
    if (o->max_seq_len > ctx) {
        errf(err, errlen, "context %d exceeds the model's max_position_embeddings %d",
             o->max_seq_len, ctx);
        goto fail;
    }
    int pages_per_seq = (o->max_seq_len + o->page_size - 1) / o->page_size;
    if (o->n_pages <= 0) o->n_pages = pages_per_seq * o->max_seqs;
    kv_config kc = fwd_kv_config(e->m, o->n_pages, o->page_size, o->max_seqs);
    kc.max_seq_len = o->max_seq_len;
    if (kv_cache_create(&e->kv, &kc, err, errlen)) goto fail;
    if (fwd_create_tp(&e->fwd, e->m, o->max_batch_rows, o->comm, err, errlen)) goto fail;
    *out = e;
    return 0;
fail:
    gen_engine_free(e);
    return -1;
}

void gen_engine_free(gen_engine *e) {
    if (!e) return;
    fwd_free(e->fwd);
    kv_cache_free(e->kv);
    tok_free(e->tok);
    model_free(e->m);
    free(e);
}

int gen_engine_tp_rank(const gen_engine *e) { return fwd_tp_rank(e->fwd); }

void gen_engine_serve(gen_engine *e) {
    char err[1024];
    if (fwd_tp_serve(e->fwd, e->kv, err, sizeof err)) kb_comm_abort(e->opts.comm, 1, err);
}
