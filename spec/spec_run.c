/* spec_run.c — spec_run: a fixed set of prompts driven through a
 * spec_batch to completion (see spec_run.h). */
#include "spec_run.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "spec_batch.h"

/* spec_run drives a spec_batch to completion, collecting each request's
 * tokens into its gen_result. */
typedef struct {
    gen_result *results;
    int *slot_to_index;   /* [max_seqs] */
    gen_token_cb cb;
    void *user;
    int cap;
    int bad, bad_at;      /* first prompt whose logits went non-finite (-1 none), after bad_at tokens */
} run_ctx;

static void run_on_token(void *user, int slot, int token, const float *logits) {
    (void)logits;
    run_ctx *c = user;
    int i = c->slot_to_index[slot];
    gen_result *r = &c->results[i];
    if (r->n_tokens < c->cap) r->tokens[r->n_tokens++] = token;
    if (c->cb) c->cb(c->user, i, token);
}

static void run_on_finish(void *user, int slot, spec_finish why, int n) {
    run_ctx *c = user;
    if (why == SPEC_FINISH_STOP) c->results[c->slot_to_index[slot]].hit_eos = 1;
    if (why == SPEC_FINISH_NONFINITE && c->bad < 0) {
        c->bad = c->slot_to_index[slot];
        c->bad_at = n;
    }
}

int spec_run(gen_engine *e, drafter *d, const int *const *prompts, const int *n_prompt, int n,
             const spec_params *p, gen_token_cb cb, void *user, gen_result *results,
             spec_timing *timing, char *err, size_t errlen) {
    memset(results, 0, sizeof(gen_result) * (size_t)n);
    if (timing) memset(timing, 0, sizeof *timing);
    if (d && (p->depth < 1 || p->depth > SPEC_MAX_DEPTH))
        return errf(err, errlen, "depth %d outside 1..%d", p->depth, SPEC_MAX_DEPTH);
    if (n > e->opts.max_seqs) return errf(err, errlen, "%d prompts exceed %d sequence slots", n, e->opts.max_seqs);
    if (p->gen.max_tokens <= 0) return 0;
    int cap = p->gen.max_tokens;
    run_ctx rc_ = {.results = results, .cb = cb, .user = user, .cap = cap, .bad = -1,
                   .slot_to_index = calloc((size_t)e->opts.max_seqs, sizeof(int))};
    if (!rc_.slot_to_index) return errf(err, errlen, "out of memory");
    spec_callbacks cbs = {.user = &rc_, .on_token = run_on_token, .on_finish = run_on_finish};
    spec_batch *b = NULL;
    int rc = -1;
    double t_start = gen_now(), prefill_s = 0;
    if (spec_batch_create(&b, e, d, d ? p->depth : 0, &cbs, err, errlen)) goto out;
    spec_batch_set_verify_hook(b, &p->verify);
    if (p->fault) spec_batch_set_fault(b, p->fault);
    for (int i = 0; i < n; i++) {
        results[i].tokens = malloc(sizeof(int) * (size_t)cap);
        results[i].n_prompt = n_prompt[i];
        if (!results[i].tokens) { errf(err, errlen, "out of memory"); goto out; }
        spec_req_params rp = {.max_tokens = p->gen.max_tokens, .sp = p->gen.sp, .seed = p->gen.seed + (uint64_t)i,
                              .ignore_eos = p->gen.ignore_eos, .depth = -1};
        int slot;
        if (spec_batch_add(b, prompts[i], n_prompt[i], &rp, &slot, err, errlen)) {
            char tmp[512];
            snprintf(tmp, sizeof tmp, "prompt %d: %s", i, err);
            snprintf(err, errlen, "%s", tmp);
            goto out;
        }
        rc_.slot_to_index[slot] = i;
    }
    while (spec_batch_running(b)) {
        int prefilling = spec_batch_prefilling(b);
        double t0 = gen_now();
        if (spec_batch_step(b, err, errlen)) goto out;
        if (prefilling) prefill_s += gen_now() - t0;
    }
    if (rc_.bad >= 0) {
        errf(err, errlen, "prompt %d: the model produced non-finite (NaN/Inf) logits after %d generated tokens",
             rc_.bad, rc_.bad_at);
        goto out;
    }
    rc = 0;
    if (timing) {
        const spec_batch_stats *st = spec_batch_get_stats(b);
        timing->prefill_s = prefill_s;
        timing->counters = *spec_batch_counters(b);
        timing->draft_s = timing->counters.draft_s;
        timing->verify_s = st->forward_s + st->verify_s - prefill_s;
        if (timing->verify_s < 0) timing->verify_s = 0;
        timing->prefill_tokens = st->prefill_tokens;
        timing->forward_steps = st->steps;
        timing->verify_steps = st->verify_seq_steps;
        for (int i = 0; i < n; i++) timing->generated_tokens += results[i].n_tokens;
    }
out:
    spec_batch_free(b);
    free(rc_.slot_to_index);
    if (rc) gen_results_free(results, n);
    if (timing) timing->total_s = gen_now() - t_start;
    return rc;
}
