/* cost_profile.c — measuring the verify cost curve on this engine (see
 * cost_profile.h); loading, saving and reading curves is common/cost_curve.c. */
#include "cost_profile.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "moe.h"
#include "spec_run.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define PASSES 3      /* the cost table's measurements, each taken this many times (median) */
#define BEGIN_REPS 5  /* runs per prompt length for the drafter's catch-up over the prompt */

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* history tokens into sequence seq, in chunks the context can take. */
static int fill_history(gen_engine *e, int seq, const int *toks, int history, char *err, size_t errlen) {
    for (int done = 0; done < history;) {
        int c = history - done < e->opts.max_batch_rows ? history - done : e->opts.max_batch_rows;
        fwd_span sp = {.seq = seq, .n = c, .tokens = toks + done};
        fwd_batch fb = {.spans = &sp, .n_spans = 1};
        fwd_out fo = {0};
        if (fwd_run(e->fwd, e->kv, &fb, &fo, err, errlen)) return -1;
        done += c;
    }
    return 0;
}

/* The median of `reps` runs of the batch fb (its sequences truncated back
 * to `history` after each), after untimed ones: at least 2 calls and 5 ms,
 * since after a different shape the first calls run up to 4x slow for about
 * a millisecond (measured: a 1-row step after the prefills, 0.68 ms falling
 * to 0.16 over 7 calls). */
static int time_batch(gen_engine *e, const fwd_batch *fb, fwd_out *fo, int history, int reps, double *times,
                      double *median, char *err, size_t errlen) {
    double w0 = gen_now();
    for (int k = 0; k < 2 || gen_now() - w0 < 5e-3; k++) {
        if (fwd_run(e->fwd, e->kv, fb, fo, err, errlen)) return -1;
        for (int s = 0; s < fb->n_spans; s++) kv_truncate(e->kv, fb->spans[s].seq, history);
    }
    for (int k = 0; k < reps; k++) {
        double t0 = gen_now();
        if (fwd_run(e->fwd, e->kv, fb, fo, err, errlen)) return -1;
        times[k] = gen_now() - t0;
        for (int s = 0; s < fb->n_spans; s++) kv_truncate(e->kv, fb->spans[s].seq, history);
    }
    qsort(times, (size_t)reps, sizeof(double), cmp_double);
    *median = times[reps / 2];
    return 0;
}

/* B verify rows spread evenly over the first ns sequences (each holding
 * `history` tokens; sequence s's rows are toks[s·seg + history ..]), every
 * row's logits. */
static int time_step(gen_engine *e, const int *seqs, int ns, int B, const int *toks, int seg, int history, int reps,
                     int *lrows, float *logits, fwd_span *spans, double *times, double *median, char *err,
                     size_t errlen) {
    for (int s = 0; s < ns; s++)
        spans[s] = (fwd_span){.seq = seqs[s], .n = B / ns + (s < B % ns), .tokens = toks + (size_t)s * seg + history};
    for (int r = 0; r < B; r++) lrows[r] = r;
    fwd_batch fb = {.spans = spans, .n_spans = ns};
    fwd_out fo = {.logit_rows = lrows, .n_logit_rows = B, .logits = logits};
    return time_batch(e, &fb, &fo, history, reps, times, median, err, errlen);
}

/* B rows of one sequence with only the last row's logits (a prompt chunk's forward). */
static int time_step_last(gen_engine *e, int seq, int B, const int *tok, int history, int reps, int *lrows,
                          float *logits, double *times, double *median, char *err, size_t errlen) {
    fwd_span sp = {.seq = seq, .n = B, .tokens = tok};
    lrows[0] = B - 1;
    fwd_batch fb = {.spans = &sp, .n_spans = 1};
    fwd_out fo = {.logit_rows = lrows, .n_logit_rows = 1, .logits = logits};
    return time_batch(e, &fb, &fo, history, reps, times, median, err, errlen);
}

/* n greedy sequences (the same history prompt) of max_tokens at `depth`,
 * drafted together: the drafting seconds, drafted tokens and verify steps. */
static int draft_run(gen_engine *e, drafter *d, const int *toks, int history, int n, int depth, int max_tokens,
                     double *sec, double *drafted, double *steps, char *err, size_t errlen) {
    gen_result r[8];
    const int *pp[8];
    int np[8];
    for (int i = 0; i < n; i++) { pp[i] = toks; np[i] = history; }
    spec_params sp = {.gen = {.max_tokens = max_tokens, .ignore_eos = 1}, .depth = depth};
    spec_timing tm;
    if (spec_run(e, d, pp, np, n, &sp, NULL, NULL, r, &tm, err, errlen)) return -1;
    gen_results_free(r, n);
    *sec = tm.counters.draft_s;
    *drafted = (double)tm.counters.drafted_tokens;
    *steps = (double)tm.forward_steps;   /* prefill forwards cancel in the long-minus-short difference */
    return 0;
}

/* The drafter's cost with n sequences drafting in each step, as seconds per
 * step = n·F + d·T (d drafted tokens in the step): a drafter catches up on
 * the tokens just committed once per step and sequence (F; a block
 * drafter's one pass is all F) and runs a chained pass per further token
 * (T); n sequences share those passes. Measured at depths 1 and 4, each as
 * the difference of a long and a short run, so the first proposal's
 * catch-up over the whole prompt (an MTP head or draft model prefilling its
 * own cache: ~2 ms here) and the first calls' warm-up cancel out. That
 * catch-up, per prompt token, is *begin_per_token (n = 1 only): the short
 * depth-1 run's drafting time after `history` prompt tokens less the same
 * run's after history / 4 (medians of BEGIN_REPS runs each), over the
 * difference in prompt tokens, so what the two runs share (their steps,
 * the first calls' warm-up) cancels. */
static int draft_fit(gen_engine *e, drafter *d, const int *toks, int history, int n, double *F_out,
                     double *T_out, double *begin_per_token, char *err, size_t errlen) {
    const int depth[2] = {1, 4};
    double per_step[2], dps[2], short_s = 0;
    for (int i = 0; i < 2; i++) {
        double s0, d0, n0, s1, d1, n1;
        if (draft_run(e, d, toks, history, n, depth[i], 16, &s0, &d0, &n0, err, errlen) ||
            draft_run(e, d, toks, history, n, depth[i], 112, &s1, &d1, &n1, err, errlen))
            return -1;
        if (i == 0) short_s = s0;
        if (!(n1 > n0)) { per_step[i] = dps[i] = 0; continue; }
        per_step[i] = (s1 - s0) / (n1 - n0);
        dps[i] = (d1 - d0) / (n1 - n0);
    }
    double T = dps[1] > dps[0] ? (per_step[1] - per_step[0]) / (dps[1] - dps[0]) : NAN, F;
    if (!(T >= 0)) {   /* no spread in drafted tokens (or noise): all per token */
        T = dps[1] > 0 ? per_step[1] / dps[1] : 0;
        F = 0;
    } else {
        F = (per_step[0] - dps[0] * T) / n;
        if (F < 0) { F = 0; T = dps[1] > 0 ? per_step[1] / dps[1] : T; }
    }
    *F_out = F;
    *T_out = T > 0 ? T : 0;
    if (begin_per_token) {   /* medians of BEGIN_REPS alternated pairs: one pair scattered 2x */
        int quarter = history / 4;
        double full[BEGIN_REPS], part[BEGIN_REPS], dq, nq;
        *begin_per_token = 0;
        if (quarter >= 1 && history > quarter) {
            full[0] = short_s;
            for (int k = 0; k < BEGIN_REPS; k++)
                if ((k > 0 && draft_run(e, d, toks, history, n, 1, 16, &full[k], &dq, &nq, err, errlen)) ||
                    draft_run(e, d, toks, quarter, n, 1, 16, &part[k], &dq, &nq, err, errlen))
                    return -1;
            double b = (median_of(full, BEGIN_REPS) - median_of(part, BEGIN_REPS)) / (history - quarter);
            *begin_per_token = b > 0 ? b : 0;
        }
    }
    return 0;
}

/* The draft cost at batch 1 (the table's draft_seconds_per_step/_token and
 * per prompt token) and per drafting batch of 1, 2, 4, 8 sequences (as many
 * as the engine holds): a server drafts for all its decoding requests in
 * one call, which costs less per sequence than that many batch-1 calls. */
static int draft_cost(cost_curve *t, gen_engine *e, drafter *d, const int *toks, int history, char *err,
                      size_t errlen) {
    const int S = e->opts.max_seqs < 8 ? e->opts.max_seqs : 8;
    t->n_draft_by_seqs = 0;
    for (int n = 1; n <= S && t->n_draft_by_seqs < COST_MAX_SEQ_CURVES; n *= 2) {
        double F, T, begin;
        if (draft_fit(e, d, toks, history, n, &F, &T, n == 1 ? &begin : NULL, err, errlen)) return -1;
        if (n == 1) {
            t->draft_seconds_per_step = F;
            t->draft_seconds_per_token = T;
            t->draft_seconds_per_prompt_token = begin;
        }
        t->draft_by_seqs[t->n_draft_by_seqs++] = (cost_draft_point){n, F, T};
    }
    return 0;
}

int cost_profile(cost_curve *t, gen_engine *e, drafter *d, int max_rows, int history, int reps, const int *text,
                 long n_text, const char *text_name, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    double pr[COST_MAX_POINTS], ps[COST_MAX_POINTS];
    int np = 0;
    const int V = e->m->cfg.vocab_size, S = e->opts.max_seqs < 8 ? e->opts.max_seqs : 8;
    if (max_rows > e->opts.max_batch_rows) max_rows = e->opts.max_batch_rows;
    if (history + max_rows > e->opts.max_seq_len) history = e->opts.max_seq_len - max_rows;
    if (history < 1 || max_rows < 1) return errf(err, errlen, "profile: context too small");
    const int moe = config_has_experts(&e->m->cfg), seg = history + max_rows;
    if (moe && !text)
        return errf(err, errlen, "profile: %s is a mixture of experts: a verify step's cost follows the experts its "
                    "rows route to, and hashed token ids route as no text does; measure it on real text (specbed "
                    "profile --text WORKLOAD) and give the table with --cost-table", e->opts.model_dir);
    if (text && n_text < (long)S * seg)
        return errf(err, errlen, "profile: text %s holds %ld tokens; %d sequences of %d history + %d rows need %ld",
                    text_name ? text_name : "", n_text, S, history, max_rows, (long)S * seg);
    int seqs[8], rc = -1, n_open = 0;
    int *toks = malloc(sizeof(int) * (size_t)S * (size_t)seg);
    int *lrows = malloc(sizeof(int) * (size_t)max_rows);
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)max_rows);
    fwd_span *spans = malloc(sizeof(fwd_span) * (size_t)S);
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (!toks || !lrows || !logits || !spans || !times) { errf(err, errlen, "out of memory"); goto out; }
    for (long i = 0; i < (long)S * seg; i++) toks[i] = text ? text[i] : (int)((i * 2654435761u) % (unsigned)V);
    for (int s = 0; s < S; s++) {
        if ((seqs[s] = kv_seq_new(e->kv)) < 0) { errf(err, errlen, "profile: no free KV slot"); goto out; }
        n_open++;
        if (fill_history(e, seqs[s], toks + (size_t)s * seg, history, err, errlen)) goto out;
    }
    /* ladder: 1..8 every row, then roughly ×1.5; B rows spread over min(B, 8)
     * sequences (the main curve), then the same ladder in exactly 1, 2, 4 and
     * 8 sequences (the per-sequence-count curves: the same rows cost less in
     * fewer sequences); then one row's lm_head and the attention per context
     * token. The whole set is measured PASSES times and each figure is the
     * median of its passes: a point's reps run back to back, so a slow spell
     * of the machine (seen: one pass's 4-sequence curve 25% above three
     * others) would otherwise stay in the table. */
    double ps_p[PASSES][COST_MAX_POINTS], qs_p[PASSES][4][COST_SEQ_POINTS], lm_p[PASSES], cx_p[PASSES];
    double qr[4][COST_SEQ_POINTS];
    double mr[COST_SEQ_POINTS], md[COST_SEQ_POINTS];   /* the MoE routing curve: one sequence, pass 0 */
    int nm = 0;
    int nq[4] = {0};
    for (int pass = 0; pass < PASSES; pass++) {
        np = 0;
        for (int B = 1; B <= max_rows && np < COST_MAX_POINTS; B = B < 8 ? B + 1 : B + B / 2) {
            pr[np] = B;
            if (time_step(e, seqs, B < S ? B : S, B, toks, seg, history, reps, lrows, logits, spans, times,
                          &ps_p[pass][np], err, errlen))
                goto out;
            np++;
        }
        for (int ns = 1, c = 0; ns <= S && c < 4; ns *= 2, c++) {
            nq[c] = 0;
            for (int B = 1; B <= max_rows && nq[c] < COST_SEQ_POINTS; B = B < 8 ? B + 1 : B + B / 2) {
                if (B < ns) continue;
                qr[c][nq[c]] = B;
                /* one sequence's B consecutive rows (a verify step at batch
                 * 1, the seeds' regime), counted in the first pass: every
                 * run of a point routes alike */
                const int count = moe && ns == 1 && pass == 0;
                moe_route_count rc0;
                if (count) fwd_route_take(e->fwd, &rc0);   /* from here on: this point's runs */
                if (time_step(e, seqs, ns, B, toks, seg, history, reps, lrows, logits, spans, times,
                              &qs_p[pass][c][nq[c]], err, errlen))
                    goto out;
                if (count && !fwd_route_take(e->fwd, &rc0) && rc0.calls) {
                    mr[nm] = B;
                    md[nm++] = (double)rc0.distinct / (double)rc0.calls;
                }
                nq[c]++;
            }
        }
        /* one B-row prompt chunk (last row's logits only) after `history`
         * tokens, against: the same rows with every row's logits (what the
         * curves count) — one row's lm_head; and the same chunk as a fresh
         * prompt, whose rows attend to `history` fewer positions each — the
         * attention per token of context. seqs[0] then gets its history
         * back for the next pass. */
        int B = max_rows < 64 ? max_rows : 64;
        double last, at_0;
        lm_p[pass] = 0;
        if (time_step_last(e, seqs[0], B, toks + history, history, reps, lrows, logits, times, &last, err, errlen))
            goto out;
        if (B >= 2) {
            double all;
            if (time_step(e, seqs, 1, B, toks, seg, history, reps, lrows, logits, spans, times, &all, err, errlen))
                goto out;
            lm_p[pass] = all > last ? (all - last) / (B - 1) : 0;
        }
        kv_truncate(e->kv, seqs[0], 0);
        if (time_step_last(e, seqs[0], B, toks, 0, reps, lrows, logits, times, &at_0, err, errlen) ||
            fill_history(e, seqs[0], toks, history, err, errlen))
            goto out;
        cx_p[pass] = last > at_0 ? (last - at_0) / ((double)B * history) : 0;
    }
    for (int i = 0; i < np; i++) {
        double v[PASSES];
        for (int k = 0; k < PASSES; k++) v[k] = ps_p[k][i];
        ps[i] = median_of(v, PASSES);
    }
    char src[600];
    snprintf(src, sizeof src, "profiled: %.400s, history %d, %d threads, tp %d, median of %d passes", e->opts.model_dir,
             history, kb_threads(), fwd_tp_size(e->fwd), PASSES);
    cost_curve_from_points(t, pr, ps, np, src);
    if (moe && nm) {
        const model_config *c = &e->m->cfg;
        t->moe_experts = c->n_experts;
        t->moe_top_k = c->n_experts_per_tok;
        for (int l = 0; l < c->n_layers; l++) t->moe_sparse_layers += e->m->layers[l].moe != NULL;
        for (int l = 0; l < c->n_layers && !t->moe_expert_bytes; l++)
            if (e->m->layers[l].moe) t->moe_expert_bytes = (double)moe_expert_bytes(e->m->layers[l].moe);
        memcpy(t->moe_rows, mr, sizeof(double) * (size_t)nm);
        memcpy(t->moe_distinct, md, sizeof(double) * (size_t)nm);
        t->n_moe = nm;
        snprintf(t->moe_text, sizeof t->moe_text, "%s", text_name ? text_name : "");
    }
    for (int ns = 1, c = 0; ns <= S && c < 4; ns *= 2, c++) {
        double qs[COST_SEQ_POINTS];
        for (int i = 0; i < nq[c]; i++) {
            double v[PASSES];
            for (int k = 0; k < PASSES; k++) v[k] = qs_p[k][c][i];
            qs[i] = median_of(v, PASSES);
        }
        if (nq[c]) cost_curve_add_seqs(t, ns, qr[c], qs, nq[c]);
    }
    t->logits_seconds_per_row = median_of(lm_p, PASSES);
    t->context_seconds_per_row_token = median_of(cx_p, PASSES);
    snprintf(t->model, sizeof t->model, "%s", e->opts.model_dir);
    t->threads = kb_threads();
    t->history = history;
    t->tp = fwd_tp_size(e->fwd);
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    n_open = 0;
    if (d) {
        if (draft_cost(t, e, d, toks, history, err, errlen)) goto out;
        snprintf(t->drafter, sizeof t->drafter, "%s", d->ops->name);
    }
    rc = 0;
out:
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    free(toks); free(lrows); free(logits); free(spans); free(times);
    return rc;
}

void cost_profile_print_draft(FILE *f, const cost_curve *t) {
    if (t->drafter[0])
        fprintf(f, "drafter %s: %.3f ms per drafting step + %.3f ms per drafted token (batch 1)\n", t->drafter,
                t->draft_seconds_per_step * 1e3, t->draft_seconds_per_token * 1e3);
}
