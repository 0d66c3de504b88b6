/* generate.c — plain batched generation (see generate.h). Owns the step
 * loop only; arithmetic lives in forward.c, sampling in sampler.c. */
#include "generate.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"

/* End-of-generation ids: the config's eos plus the tokenizer's turn/text ends. */
static int is_eos(const gen_engine *e, int id) {
    if (id == e->m->cfg.eos_token_id) return 1;
    return id == tok_id(e->tok, "<|endoftext|>") || id == tok_id(e->tok, "<|im_end|>");
}

typedef struct {
    int kv_seq;
    const int *prompt;
    int n_prompt;
    int fed;          /* prompt tokens already in the cache */
    int last;         /* last sampled token, fed on the next decode row */
    int done;
    rng_state rng;
} seq_state;

int gen_run(gen_engine *e, const int *const *prompts, const int *n_prompt, int n,
            const gen_params *gp, gen_token_cb cb, void *user, gen_result *results,
            gen_timing *timing, char *err, size_t errlen) {
    int rc = -1, V = e->m->cfg.vocab_size, budget = e->opts.max_batch_rows, n_open = 0;
    memset(results, 0, sizeof(gen_result) * (size_t)n);
    if (timing) memset(timing, 0, sizeof *timing);
    if (n > budget) return errf(err, errlen, "%d prompts exceed the batch budget of %d rows", n, budget);
    for (int i = 0; i < n; i++) {
        if (n_prompt[i] <= 0) return errf(err, errlen, "prompt %d is empty", i);
        if (n_prompt[i] + 1 > e->opts.max_seq_len)
            return errf(err, errlen, "prompt %d has %d tokens; the context holds %d", i, n_prompt[i],
                        e->opts.max_seq_len);
        for (int j = 0; j < n_prompt[i]; j++)
            if (prompts[i][j] < 0 || prompts[i][j] >= V)
                return errf(err, errlen, "prompt %d: token id %d outside the vocabulary (%d)", i,
                            prompts[i][j], V);
    }
    seq_state *st = calloc((size_t)n, sizeof *st);
    fwd_span *spans = calloc((size_t)n, sizeof *spans);
    int *logit_rows = calloc((size_t)n, sizeof(int)), *logit_seq = calloc((size_t)n, sizeof(int));
    int *dec_tok = calloc((size_t)n, sizeof(int));
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)n), *scratch = malloc(sizeof(float) * (size_t)V);
    if (!st || !spans || !logit_rows || !logit_seq || !dec_tok || !logits || !scratch) {
        errf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        st[i] = (seq_state){.kv_seq = kv_seq_new(e->kv), .prompt = prompts[i], .n_prompt = n_prompt[i]};
        if (st[i].kv_seq < 0) { errf(err, errlen, "no free KV sequence slot for prompt %d", i); goto out; }
        n_open = i + 1;
        rng_seed(&st[i].rng, gp->seed + (uint64_t)i);
        int cap = gp->max_tokens > 0 ? gp->max_tokens : 1;
        results[i].tokens = malloc(sizeof(int) * (size_t)cap);
        results[i].n_prompt = n_prompt[i];
        if (!results[i].tokens) { errf(err, errlen, "out of memory"); goto out; }
    }
    if (gp->max_tokens <= 0) { rc = 0; goto out; }

    for (;;) {
        /* Decode rows first (one each), then prompt chunks with what is left. */
        int ns = 0, rows = 0, nl = 0, prefill_rows = 0;
        for (int i = 0; i < n; i++) {
            if (st[i].done || st[i].fed < st[i].n_prompt) continue;
            dec_tok[i] = st[i].last;
            spans[ns++] = (fwd_span){.seq = st[i].kv_seq, .n = 1, .tokens = &dec_tok[i]};
            logit_seq[nl] = i; logit_rows[nl++] = rows; rows += 1;
        }
        for (int i = 0; i < n && rows < budget; i++) {
            if (st[i].done || st[i].fed >= st[i].n_prompt) continue;
            int chunk = st[i].n_prompt - st[i].fed;
            if (chunk > budget - rows) chunk = budget - rows;
            spans[ns++] = (fwd_span){.seq = st[i].kv_seq, .n = chunk, .tokens = st[i].prompt + st[i].fed};
            st[i].fed += chunk;
            prefill_rows += chunk;
            rows += chunk;
            if (st[i].fed == st[i].n_prompt) { logit_seq[nl] = i; logit_rows[nl++] = rows - 1; }
        }
        if (ns == 0) break;
        /* logit rows must ascend: decode rows come first, prefill ends after. */
        fwd_batch b = {.spans = spans, .n_spans = ns};
        fwd_out o = {.logit_rows = logit_rows, .n_logit_rows = nl, .logits = logits};
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, &b, &o, err, errlen)) goto out;
        for (int k = 0; k < nl; k++) {
            int i = logit_seq[k];
            if (sampler_first_nonfinite(logits + (size_t)k * V, V) >= 0) {
                errf(err, errlen, "prompt %d: the model produced non-finite (NaN/Inf) logits after %d generated tokens",
                     i, results[i].n_tokens);
                goto out;
            }
            int tok = sampler_sample(logits + (size_t)k * V, V, &gp->sp, &st[i].rng, scratch);
            gen_result *r = &results[i];
            r->tokens[r->n_tokens++] = tok;
            st[i].last = tok;
            if (cb) cb(user, i, tok);
            int eos = !gp->ignore_eos && is_eos(e, tok);
            if (eos) r->hit_eos = 1;
            if (eos || r->n_tokens >= gp->max_tokens ||
                kv_len(e->kv, st[i].kv_seq) + 1 > e->opts.max_seq_len)
                st[i].done = 1;
        }
        double dt = gen_now() - t0;
        if (timing) {
            timing->forward_calls++;
            if (prefill_rows) { timing->prefill_s += dt; timing->prefill_tokens += prefill_rows; }
            else { timing->decode_s += dt; timing->decode_tokens += nl; }
        }
    }
    rc = 0;
out:
    /* Every sequence opened here is closed here: no KV page outlives gen_run. */
    for (int i = 0; i < n_open; i++) kv_seq_free(e->kv, st[i].kv_seq);
    if (rc) gen_results_free(results, n);
    free(st); free(spans); free(logit_rows); free(logit_seq); free(dec_tok); free(logits); free(scratch);
    return rc;
}

void gen_results_free(gen_result *r, int n) {
    for (int i = 0; i < n; i++) { free(r[i].tokens); r[i].tokens = NULL; r[i].n_tokens = 0; }
}
