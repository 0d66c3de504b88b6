/* cost_table.c — load/save/measure the verify cost curve (see cost_table.h). */
#include "cost_table.h"
#include <cjson/cJSON.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "outfile.h"
#include "spec_decode.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double cost_seconds(const cost_table *t, int rows) {
    if (t->n == 0) return 1.0;
    if (t->n == 1 || rows <= t->rows[0]) return t->seconds[0];
    int i = 1;
    while (i < t->n - 1 && t->rows[i] < rows) i++;
    double r0 = t->rows[i - 1], r1 = t->rows[i], s0 = t->seconds[i - 1], s1 = t->seconds[i];
    double s = s0 + (s1 - s0) * (rows - r0) / (r1 - r0);
    return s > s0 ? s : s0;   /* never cheaper than a smaller batch */
}

int cost_table_load(cost_table *t, const char *path, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    FILE *f = fopen(path, "rb");
    if (!f) return errf(err, errlen, "%s: cannot open", path);
    char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    cJSON *j = cJSON_Parse(buf);
    if (!j) return errf(err, errlen, "%s: not valid JSON", path);
    int rc = 0;
    const cJSON *rows = cJSON_GetObjectItemCaseSensitive(j, "rows");
    const cJSON *secs = cJSON_GetObjectItemCaseSensitive(j, "seconds_per_step");
    if (!cJSON_IsArray(rows) || !cJSON_IsArray(secs) || cJSON_GetArraySize(rows) != cJSON_GetArraySize(secs) ||
        cJSON_GetArraySize(rows) < 1 || cJSON_GetArraySize(rows) > COST_MAX_POINTS) {
        rc = errf(err, errlen, "%s: needs arrays \"rows\" and \"seconds_per_step\" of equal length 1..%d", path,
                  COST_MAX_POINTS);
        goto out;
    }
    t->n = cJSON_GetArraySize(rows);
    for (int i = 0; i < t->n; i++) {
        const cJSON *r = cJSON_GetArrayItem(rows, i), *s = cJSON_GetArrayItem(secs, i);
        if (!cJSON_IsNumber(r) || !cJSON_IsNumber(s) || r->valuedouble < 1 || !(s->valuedouble > 0) ||
            (i && r->valuedouble <= t->rows[i - 1])) {
            rc = errf(err, errlen, "%s: entry %d: rows must ascend from 1 and seconds be > 0", path, i);
            goto out;
        }
        t->rows[i] = (int)r->valuedouble;
        t->seconds[i] = s->valuedouble;
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "draft_seconds_per_token");
    if (cJSON_IsNumber(d)) t->draft_seconds_per_token = d->valuedouble;
    const cJSON *th = cJSON_GetObjectItemCaseSensitive(j, "threads");
    if (cJSON_IsNumber(th)) t->threads = th->valueint;
    const cJSON *h = cJSON_GetObjectItemCaseSensitive(j, "history");
    if (cJSON_IsNumber(h)) t->history = h->valueint;
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "model");
    if (cJSON_IsString(m)) snprintf(t->model, sizeof t->model, "%s", m->valuestring);
out:
    cJSON_Delete(j);
    return rc;
}

int cost_table_save(const cost_table *t, const char *path, char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "model", t->model);
    cJSON_AddNumberToObject(j, "threads", t->threads);
    cJSON_AddNumberToObject(j, "history", t->history);
    cJSON *rows = cJSON_AddArrayToObject(j, "rows"), *secs = cJSON_AddArrayToObject(j, "seconds_per_step");
    for (int i = 0; i < t->n; i++) {
        cJSON_AddItemToArray(rows, cJSON_CreateNumber(t->rows[i]));
        cJSON_AddItemToArray(secs, cJSON_CreateNumber(t->seconds[i]));
    }
    cJSON_AddNumberToObject(j, "draft_seconds_per_token", t->draft_seconds_per_token);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    if (!s) return errf(err, errlen, "out of memory");
    int rc = write_file_atomic(path, s, strlen(s), err, errlen);
    free(s);
    return rc;
}

int cost_table_profile(cost_table *t, gen_engine *e, drafter *d, int max_rows, int history, int reps,
                       char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    snprintf(t->model, sizeof t->model, "%s", e->opts.model_dir);
    t->threads = omp_get_max_threads();
    t->history = history;
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
    for (int B = 1; B <= max_rows && t->n < COST_MAX_POINTS; B = B < 8 ? B + 1 : B + B / 2) {
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
        t->rows[t->n] = B;
        t->seconds[t->n++] = times[reps / 2];
    }
    /* monotone: a bigger batch never costs less (timer noise otherwise
     * makes the scheduler chase phantom savings) */
    for (int i = 1; i < t->n; i++)
        if (t->seconds[i] < t->seconds[i - 1]) t->seconds[i] = t->seconds[i - 1];
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    n_open = 0;
    if (d) {
        /* the drafter's cost per drafted token: one greedy sequence at depth 4 */
        drafter_counters saved = d->counters;
        memset(&d->counters, 0, sizeof d->counters);
        gen_result r;
        spec_params sp = {.gen = {.max_tokens = 32, .ignore_eos = 1}, .depth = 4};
        const int *pp = toks;
        int n = history;
        int src = spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &r, NULL, err, errlen);
        if (!src) gen_results_free(&r, 1);
        t->draft_seconds_per_token =
            d->counters.drafted_tokens ? d->counters.draft_s / (double)d->counters.drafted_tokens : 0.0;
        d->counters = saved;
        if (src) goto out;
    }
    rc = 0;
out:
    for (int s = 0; s < n_open; s++) kv_seq_free(e->kv, seqs[s]);
    free(toks); free(lrows); free(logits); free(spans); free(times);
    return rc;
}
