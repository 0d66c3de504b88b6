/* cost_profile.c — measuring the verify cost curve on this engine (see
 * cost_profile.h); loading, saving and reading curves is common/cost_curve.c. */
#include "cost_profile.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "spec_run.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int cost_profile(cost_curve *t, gen_engine *e, drafter *d, int max_rows, int history, int reps,
                 char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    double pr[COST_MAX_POINTS], ps[COST_MAX_POINTS];
    int np = 0;
    const int V = e->m->cfg.vocab_size, S = e->opts.max_seqs < 8 ? e->opts.max_seqs : 8;
    if (max_rows > e->opts.max_batch_rows) max_rows = e->opts.max_batch_rows;
    if (history + max_rows > e->opts.max_seq_len) history = e->opts.max_seq_len - max_rows;
    if (history < 1 || max_rows < 1) return errf(err, errlen, "profile: context too small");
    int seqs[8], rc = -1, n_open = 0;
    int *toks = malloc(sizeof(int) * (size_t)(history + max_rows));
    int *lrows = malloc(sizeof(int) * (size_t)max_rows);
    float *logits = malloc(sizeof(float) * (size_t)V * (size_t)max_rows);
    fwd_span *spans = malloc(sizeof(fwd_span) * (size_t)S);
    double *times = malloc(sizeof(double) * (size_t)reps);
    if (!toks || !lrows || !logits || !spans || !times) { errf(err, errlen, "out of memory"); goto out; }
    for (int i = 0; i < history + max_rows; i++) toks[i] = (int)((i * 2654435761u) % (unsigned)V);
    for (int s = 0; s < S; s++) {
        if ((seqs[s] = kv_seq_new(e->kv)) < 0) { errf(err, errlen, "profile: no free KV slot"); goto out; }
        n_open++;
        for (int done = 0; done < history;) {   /* history in chunks the context can take */
            int c = history - done < e->opts.max_batch_rows ? history - done : e->opts.max_batch_rows;
            fwd_span sp = {.seq = seqs[s], .n = c, .tokens = toks + done};
            fwd_batch fb = {.spans = &sp, .n_spans = 1};
            fwd_out fo = {0};
            if (fwd_run(e->fwd, e->kv, &fb, &fo, err, errlen)) goto out;
            done += c;
        }
    }
    /* ladder: 1..8 every row, then roughly ×1.5 */
    for (int B = 1; B <= max_rows && np < COST_MAX_POINTS; B = B < 8 ? B + 1 : B + B / 2) {
        int ns = B < S ? B : S, rows = 0;
        for (int s = 0; s < ns; s++) {
            int n = B / ns + (s < B % ns);
            spans[s] = (fwd_span){.seq = seqs[s], .n = n, .tokens = toks + history};
            rows += n;
        }
        for (int r = 0; r < rows; r++) lrows[r] = r;
        fwd_batch fb = {.spans = spans, .n_spans = ns};
        fwd_out fo = {.logit_rows = lrows, .n_logit_rows = rows, .logits = logits};
        for (int k = 0; k < reps; k++) {
            double t0 = gen_now();
            if (fwd_run(e->fwd, e->kv, &fb, &fo, err, errlen)) goto out;
            times[k] = gen_now() - t0;
            for (int s = 0; s < ns; s++) kv_truncate(e->kv, seqs[s], history);
        }
        qsort(times, (size_t)reps, sizeof(double), cmp_double);
        pr[np] = B;
        ps[np++] = times[reps / 2];
    }
    char src[600];
    snprintf(src, sizeof src, "profiled: %.400s, history %d, %d threads, tp %d", e->opts.model_dir, history,
             kb_threads(), fwd_tp_size(e->fwd));
    cost_curve_from_points(t, pr, ps, np, src);
    snprintf(t->model, sizeof t->model, "%s", e->opts.model_dir);
    t->threads = kb_threads();
    t->history = history;
    t->tp = fwd_tp_size(e->fwd);
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    n_open = 0;
    if (d) {
        /* the drafter's cost per drafted token: one greedy sequence at depth 4 */
        gen_result r;
        spec_params sp = {.gen = {.max_tokens = 32, .ignore_eos = 1}, .depth = 4};
        spec_timing tm;
        const int *pp = toks;
        int n = history;
        if (spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &r, &tm, err, errlen)) goto out;
        gen_results_free(&r, 1);
        t->draft_seconds_per_token =
            tm.counters.drafted_tokens ? tm.counters.draft_s / (double)tm.counters.drafted_tokens : 0.0;
    }
    rc = 0;
out:
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    free(toks); free(lrows); free(logits); free(spans); free(times);
    return rc;
}
