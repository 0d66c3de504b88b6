/* spec_decode.c — the speculative step loop (see spec_decode.h). Owns the
 * step structure only: drafting is the drafter's, arithmetic the forward's,
 * acceptance verify.c's. */
#include "spec_decode.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "verify.h"

double spec_accept_length(const drafter_counters *c) {
    return c->steps ? (double)c->committed_tokens / c->steps : 0.0;
}
double spec_acceptance_rate(const drafter_counters *c) {
    return c->drafted_tokens ? (double)c->accepted_tokens / c->drafted_tokens : 0.0;
}
double spec_position_rate(const drafter_counters *c, int i) {
    return c->drafts && i >= 0 && i < SPEC_MAX_DEPTH ? (double)c->accepted_at[i] / c->drafts : 0.0;
}

typedef struct {
    int kv_seq;
    int *tokens;        /* prompt + generated [cap] */
    int n_tokens, n_prompt, fed, cap;
    float *prompt_taps; /* [n_prompt, n_taps, H] while prefilling, if the drafter wants taps */
    int done;
    rng_state rng;
} sd_seq;

static int is_eos(const gen_engine *e, int id) {
    return id == e->m->cfg.eos_token_id || id == tok_id(e->tok, "<|endoftext|>") ||
           id == tok_id(e->tok, "<|im_end|>");
}

/* Appends committed tokens, stopping at EOS / max_tokens / context; returns
 * how many were kept. */
static int commit(gen_engine *e, sd_seq *s, const spec_params *p, const int *toks, int n, int seq_i,
                  gen_result *r, gen_token_cb cb, void *user) {
    int kept = 0;
    for (int j = 0; j < n && !s->done; j++) {
        int t = toks[j];
        s->tokens[s->n_tokens++] = t;
        r->tokens[r->n_tokens++] = t;
        kept++;
        if (cb) cb(user, seq_i, t);
        int eos = !p->gen.ignore_eos && is_eos(e, t);
        if (eos) r->hit_eos = 1;
        /* the next step feeds the last token: it needs one more KV row */
        if (eos || r->n_tokens >= p->gen.max_tokens || s->n_tokens + 1 > e->opts.max_seq_len) s->done = 1;
    }
    return kept;
}

int spec_run(gen_engine *e, drafter *d, const int *const *prompts, const int *n_prompt, int n,
             const spec_params *p, gen_token_cb cb, void *user, gen_result *results,
             spec_timing *timing, char *err, size_t errlen) {
    const int V = e->m->cfg.vocab_size, H = e->m->cfg.hidden_size, budget = e->opts.max_batch_rows;
    const int depth = d ? p->depth : 0, n_taps = d ? d->n_taps : 0;
    const int greedy = p->gen.sp.temperature <= 0.0f;
    int rc = -1, n_open = 0;
    spec_timing tm = {0};
    double t_start = gen_now();
    memset(results, 0, sizeof(gen_result) * (size_t)n);
    if (d && (depth < 1 || depth > SPEC_MAX_DEPTH))
        return errf(err, errlen, "depth %d outside 1..%d", depth, SPEC_MAX_DEPTH);
    if (n * (depth + 1) > budget)
        return errf(err, errlen, "%d sequences × %d verify rows exceed the batch budget of %d rows", n,
                    depth + 1, budget);
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
    size_t rows_max = (size_t)budget;
    sd_seq *st = calloc((size_t)n, sizeof *st);
    fwd_span *spans = calloc((size_t)n, sizeof *spans);
    int *span_seq = calloc((size_t)n, sizeof(int)), *span_row0 = calloc((size_t)n, sizeof(int));
    int *logit_rows = calloc(rows_max, sizeof(int));
    int *rowtok = calloc(rows_max, sizeof(int));
    float *logits = malloc(sizeof(float) * V * rows_max);
    float *probs = malloc(sizeof(float) * V * (SPEC_MAX_DEPTH + 1));
    float *scratch = malloc(sizeof(float) * V);
    float *taps = n_taps ? malloc(sizeof(float) * rows_max * n_taps * H) : NULL;
    spec_proposal *props = calloc((size_t)n, sizeof *props);
    spec_accept *accs = calloc((size_t)n, sizeof *accs);
    float *qbuf = d ? malloc(sizeof(float) * (size_t)n * SPEC_MAX_DEPTH * V) : NULL;
    int *committed = malloc(sizeof(int) * (size_t)n * (SPEC_MAX_DEPTH + 1));
    if (!st || !spans || !span_seq || !span_row0 || !logit_rows || !rowtok || !logits || !probs ||
        !scratch || (n_taps && !taps) || !props || !accs || (d && !qbuf) || !committed) {
        errf(err, errlen, "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        sd_seq *s = &st[i];
        s->kv_seq = kv_seq_new(e->kv);
        if (s->kv_seq < 0) { errf(err, errlen, "no free KV sequence slot for prompt %d", i); goto out; }
        n_open = i + 1;
        s->n_prompt = n_prompt[i];
        s->cap = n_prompt[i] + (p->gen.max_tokens > 0 ? p->gen.max_tokens : 0) + SPEC_MAX_DEPTH + 1;
        s->tokens = malloc(sizeof(int) * (size_t)s->cap);
        results[i].tokens = malloc(sizeof(int) * (size_t)(p->gen.max_tokens + SPEC_MAX_DEPTH + 1));
        results[i].n_prompt = n_prompt[i];
        if (n_taps) s->prompt_taps = malloc(sizeof(float) * (size_t)n_prompt[i] * n_taps * H);
        if (!s->tokens || !results[i].tokens || (n_taps && !s->prompt_taps)) {
            errf(err, errlen, "out of memory");
            goto out;
        }
        memcpy(s->tokens, prompts[i], sizeof(int) * (size_t)n_prompt[i]);
        s->n_tokens = n_prompt[i];
        rng_seed(&s->rng, p->gen.seed + (uint64_t)i);
        s->done = p->gen.max_tokens <= 0;
    }

    /* Prefill: prompt chunks within the row budget; the last prompt row's
     * logits give the first token, as in the plain loop. */
    for (;;) {
        int ns = 0, rows = 0, nl = 0;
        for (int i = 0; i < n && rows < budget; i++) {
            sd_seq *s = &st[i];
            if (s->done || s->fed >= s->n_prompt) continue;
            int chunk = s->n_prompt - s->fed;
            if (chunk > budget - rows) chunk = budget - rows;
            spans[ns] = (fwd_span){.seq = s->kv_seq, .n = chunk, .tokens = s->tokens + s->fed};
            span_seq[ns] = i; span_row0[ns] = rows;
            s->fed += chunk;
            rows += chunk;
            if (s->fed == s->n_prompt) logit_rows[nl++] = rows - 1;
            ns++;
        }
        if (ns == 0) break;
        fwd_batch b = {.spans = spans, .n_spans = ns};
        fwd_out o = {.logit_rows = logit_rows, .n_logit_rows = nl, .logits = logits,
                     .tap_layers = n_taps ? d->tap_layers : NULL, .n_taps = n_taps, .taps = taps};
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, &b, &o, err, errlen)) goto out;
        tm.prefill_s += gen_now() - t0;
        tm.prefill_tokens += rows;
        int li = 0;
        for (int k = 0; k < ns; k++) {
            sd_seq *s = &st[span_seq[k]];
            int i = span_seq[k];
            if (n_taps) {
                int first = s->fed - spans[k].n;
                memcpy(s->prompt_taps + (size_t)first * n_taps * H, taps + (size_t)span_row0[k] * n_taps * H,
                       sizeof(float) * (size_t)spans[k].n * n_taps * H);
            }
            if (s->fed < s->n_prompt) continue;
            int tok = sampler_sample(logits + (size_t)li++ * V, V, &p->gen.sp, &s->rng, scratch);
            commit(e, s, p, &tok, 1, i, &results[i], cb, user);
            if (d && !s->done) {
                double td = gen_now();
                int brc = d->ops->begin(d, i, s->tokens, s->n_tokens, s->prompt_taps, err, errlen);
                d->counters.draft_s += gen_now() - td;
                if (brc) goto out;
            }
            free(s->prompt_taps);
            s->prompt_taps = NULL;
        }
    }

    /* Speculative steps. */
    for (;;) {
        int np = 0;
        for (int i = 0; i < n; i++) {
            sd_seq *s = &st[i];
            if (s->done) continue;
            int room = p->gen.max_tokens - results[i].n_tokens - 1;          /* bonus takes one */
            int ctx_room = e->opts.max_seq_len - (s->n_tokens + 1);
            if (ctx_room < room) room = ctx_room;
            int k = depth < room ? depth : room;
            props[np] = (spec_proposal){.slot = i, .tokens = s->tokens, .n_tokens = s->n_tokens,
                                        .max_k = k > 0 ? k : 0, .sp = &p->gen.sp, .rng = &s->rng,
                                        .q = qbuf ? qbuf + (size_t)np * SPEC_MAX_DEPTH * V : NULL};
            np++;
        }
        if (np == 0) break;
        if (d) {
            double td = gen_now();
            int prc = d->ops->propose(d, props, np, err, errlen);
            d->counters.draft_s += gen_now() - td;
            if (prc) goto out;
        }
        int rows = 0;
        for (int j = 0; j < np; j++) {
            spec_proposal *pr = &props[j];
            sd_seq *s = &st[pr->slot];
            if (!d) pr->k = 0;
            if (pr->k > pr->max_k) {
                errf(err, errlen, "drafter %s proposed %d tokens, more than the %d asked", d->ops->name,
                     pr->k, pr->max_k);
                goto out;
            }
            for (int r = 0; r < pr->k; r++)
                if (pr->draft[r] < 0 || pr->draft[r] >= V) {
                    errf(err, errlen, "drafter %s proposed token id %d outside the vocabulary (%d)",
                         d->ops->name, pr->draft[r], V);
                    goto out;
                }
            span_row0[j] = rows;
            rowtok[rows] = s->tokens[s->n_tokens - 1];
            memcpy(rowtok + rows + 1, pr->draft, sizeof(int) * (size_t)pr->k);
            spans[j] = (fwd_span){.seq = s->kv_seq, .n = pr->k + 1, .tokens = rowtok + rows};
            for (int r = 0; r <= pr->k; r++) logit_rows[rows + r] = rows + r;
            rows += pr->k + 1;
        }
        fwd_batch b = {.spans = spans, .n_spans = np};
        fwd_out o = {.logit_rows = logit_rows, .n_logit_rows = rows, .logits = logits,
                     .tap_layers = n_taps ? d->tap_layers : NULL, .n_taps = n_taps, .taps = taps};
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, &b, &o, err, errlen)) goto out;
        for (int j = 0; j < np; j++) {
            spec_proposal *pr = &props[j];
            int i = pr->slot;
            sd_seq *s = &st[i];
            const float *lg = logits + (size_t)span_row0[j] * V;
            int next, a;
            if (greedy) {
                a = verify_greedy(pr->draft, pr->k, lg, V, &next);
            } else {
                for (int r = 0; r <= pr->k; r++)
                    sampler_probs(probs + (size_t)r * V, lg + (size_t)r * V, V, &p->gen.sp);
                a = verify_sample(pr->draft, pr->k, probs, pr->q_valid ? pr->q : NULL, V, &s->rng, scratch,
                                  &next);
            }
            /* keep KV rows for [last, d_1..d_a]; d_{a+1}.. vanish */
            int keep = s->n_tokens + a;
            kv_truncate(e->kv, s->kv_seq, keep);
            int *ct = committed + (size_t)j * (SPEC_MAX_DEPTH + 1);
            memcpy(ct, pr->draft, sizeof(int) * (size_t)a);
            ct[a] = next;
            commit(e, s, p, ct, a + 1, i, &results[i], cb, user);
            if (d) {
                drafter_counters *c = &d->counters;
                c->steps++;
                c->committed_tokens += a + 1;
                if (pr->k > 0) {
                    c->drafts++;
                    c->drafted_tokens += pr->k;
                    c->accepted_tokens += a;
                    for (int r = 0; r < pr->k; r++) c->drafted_at[r]++;
                    for (int r = 0; r < a; r++) c->accepted_at[r]++;
                } else if (pr->max_k > 0) {
                    c->empty_proposals++;
                }
            }
            accs[j] = (spec_accept){.slot = i, .n_accepted = a, .committed = ct, .n_committed = a + 1,
                                    .tokens = s->tokens, .n_tokens = s->n_tokens,
                                    .hidden = n_taps ? taps + (size_t)span_row0[j] * n_taps * H : NULL};
        }
        tm.verify_s += gen_now() - t0;
        tm.steps++;
        if (d) {
            double td = gen_now();
            d->ops->accept(d, accs, np);
            for (int j = 0; j < np; j++)
                if (st[props[j].slot].done) d->ops->release(d, props[j].slot);
            d->counters.draft_s += gen_now() - td;
        }
    }
    rc = 0;
out:
    for (int i = 0; i < n_open; i++) {
        kv_seq_free(e->kv, st[i].kv_seq);
        if (d && rc) d->ops->release(d, i);
    }
    if (st)
        for (int i = 0; i < n; i++) { free(st[i].tokens); free(st[i].prompt_taps); }
    for (int i = 0; i < n && !rc; i++) tm.generated_tokens += results[i].n_tokens;
    if (rc) gen_results_free(results, n);
    tm.total_s = gen_now() - t_start;
    if (d) tm.draft_s = d->counters.draft_s;
    if (timing) *timing = tm;
    free(st); free(spans); free(span_seq); free(span_row0); free(logit_rows); free(rowtok); free(logits);
    free(probs); free(scratch); free(taps); free(props); free(accs); free(qbuf); free(committed);
    return rc;
}
