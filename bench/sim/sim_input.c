/* sim_input.c — what `specbed simulate` reads (sim.h): acceptance rates from
 * a user's JSON or a sweep directory, request lengths from a workload, and
 * phased traffic. Files and parsing only. */
#include "sim.h"
#include "errmsg.h"
#include "file.h"
#include "json_strict.h"
#include "csv_table.h"
#include "run_cols.h"
#include "workload.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_accept_fit_fill(sim_accept *a, int k, double al, double ar_pct) {
    a->proposal_rate = a->draft_fill = 1;
    double s = 0;
    for (int i = 0; i < k && i < a->n_pos; i++) s += a->p[i];
    if (!(s > 0) || k < 1) return;
    /* accept length − 1 = accepted per step = (accepted per proposal = Σ p) × proposals per step */
    if (isfinite(al) && al >= 1) {
        double q = (al - 1) / s;
        a->proposal_rate = q > 1 ? 1 : q < 0.01 ? 0.01 : q;
    }
    /* acceptance rate = accepted ÷ drafted, so drafted per proposal = Σ p ÷ rate */
    if (isfinite(ar_pct) && ar_pct > 0) {
        double f = s / (ar_pct / 100.0) / k;
        a->draft_fill = f > 1 ? 1 : f < 0.05 ? 0.05 : f;
    }
}

/* Rates must be unconditional (non-increasing). strict: refuse a rise; else
 * flatten it (measured averages over runs can rise by noise) and say so. */
static int check_rates(sim_accept *a, int strict, const char *what, char *err, size_t errlen) {
    double worst = 0;
    for (int i = 0; i < a->n_pos; i++) {
        if (!(a->p[i] >= 0 && a->p[i] <= 1))
            return errf(err, errlen, "%s: rate %d is %g, not in [0, 1]", what, i, a->p[i]);
        if (i && a->p[i] > a->p[i - 1]) {
            if (strict && a->p[i] > a->p[i - 1] + 1e-9)
                return errf(err, errlen,
                            "%s: rate %d (%g) exceeds rate %d (%g): per-position rates are unconditional "
                            "(accepted_at[i] / drafts, vLLM's definition) and cannot rise; conditional rates "
                            "alpha_i multiply into them: p_i = alpha_0 * ... * alpha_i",
                            what, i, a->p[i], i - 1, a->p[i - 1]);
            if (a->p[i] - a->p[i - 1] > worst) worst = a->p[i] - a->p[i - 1];
            a->p[i] = a->p[i - 1];
        }
    }
    if (worst > 0.01) fprintf(stderr, "simulate: note: %s: measured rates rose by up to %.3f; flattened\n", what, worst);
    return 0;
}

static int parse_rates(const cJSON *arr, sim_accept *a, const char *what, char *err, size_t errlen) {
    int n = cJSON_GetArraySize(arr);
    if (!cJSON_IsArray(arr) || n < 1 || n > SIM_MAX_POS)
        return errf(err, errlen, "%s: expected an array of 1..%d per-position rates", what, SIM_MAX_POS);
    for (int i = 0; i < n; i++) {
        const cJSON *v = cJSON_GetArrayItem(arr, i);
        if (!cJSON_IsNumber(v)) return errf(err, errlen, "%s: rate %d is not a number", what, i);
        a->p[i] = v->valuedouble;
    }
    a->n_pos = n;
    return 0;
}

static int frac_field(const cJSON *o, const char *key, double *out, const char *what, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return 0;
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0 && v->valuedouble <= 1))
        return errf(err, errlen, "%s: \"%s\" must be a number in (0, 1]", what, key);
    *out = v->valuedouble;
    return 0;
}

int sim_accept_load_json(const char *path, const char *drafter, sim_accept **out, int *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    char *text;
    size_t len;
    if (read_file(path, 16u << 20, &text, &len, err, errlen)) return -1;
    cJSON *j;
    int rc = json_parse_strict(&j, text, len, path, 1, err, errlen);
    free(text);
    if (rc) return -1;
    int cnt = cJSON_GetArraySize(j);
    if (!cJSON_IsObject(j) || cnt < 1) {
        cJSON_Delete(j);
        return errf(err, errlen, "%s: expected an object {\"WORKLOAD\": [p_0, p_1, ...], ...}", path);
    }
    sim_accept *a = calloc((size_t)cnt, sizeof *a);
    if (!a) { cJSON_Delete(j); return errf(err, errlen, "out of memory"); }
    const cJSON *w;
    int k = 0;
    cJSON_ArrayForEach(w, j) {
        sim_accept *x = &a[k];
        char what[300];
        snprintf(what, sizeof what, "%.200s: \"%.60s\"", path, w->string);
        snprintf(x->drafter, sizeof x->drafter, "%s", drafter ? drafter : "user");
        snprintf(x->workload, sizeof x->workload, "%s", w->string);
        snprintf(x->source, sizeof x->source, "%.500s", path);
        x->proposal_rate = x->draft_fill = 1;
        const cJSON *arr = cJSON_IsObject(w) ? cJSON_GetObjectItemCaseSensitive(w, "rates") : w;
        if (parse_rates(arr, x, what, err, errlen) || check_rates(x, 1, what, err, errlen) ||
            (cJSON_IsObject(w) && (frac_field(w, "proposal_rate", &x->proposal_rate, what, err, errlen) ||
                                   frac_field(w, "draft_fill", &x->draft_fill, what, err, errlen)))) {
            free(a);
            cJSON_Delete(j);
            return -1;
        }
        k++;
    }
    cJSON_Delete(j);
    *out = a;
    *n = k;
    return 0;
}

static double fold(double acc, double v, int n) {   /* running mean over n values so far, NaN skipped */
    if (isnan(v)) return acc;
    if (isnan(acc)) return v;
    return acc + (v - acc) / (n + 1);
}

static int cell_order(const void *pa, const void *pb) {
    const sim_sweep_cell *a = pa, *b = pb;
    return run_cell_cmp(a->drafter, a->workload, a->conc, a->depth, b->drafter, b->workload, b->conc, b->depth);
}

int sim_sweep_cells(const char *dir, sim_sweep_cell **out, int *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    char p[1200];
    snprintf(p, sizeof p, "%s/runs.csv", dir);
    csv_table t;
    if (csvt_read(p, &t, err, errlen)) return -1;
    if (csvt_col(&t, "drafter") < 0 || csvt_col(&t, "depth") < 0 || csvt_col(&t, "concurrency") < 0) {
        csvt_free(&t);
        return errf(err, errlen, "%s: no drafter/depth/concurrency columns (is %s a sweep --out directory?)", p, dir);
    }
    sim_sweep_cell *c = calloc((size_t)t.nrow + 1, sizeof *c);
    if (!c) { csvt_free(&t); return errf(err, errlen, "out of memory"); }
    int k = 0;
    for (int r = 0; r < t.nrow; r++) {
        const char *dr = csvt_get(&t, r, "drafter"), *wl = csvt_get(&t, r, "workload");
        double dd = csvt_num(&t, r, "depth"), cc = csvt_num(&t, r, "concurrency");
        if (!(dd >= 0) || !(cc >= 1)) continue;
        int depth = (int)dd, conc = (int)cc;
        sim_sweep_cell *x = NULL;
        for (int i = 0; i < k; i++)
            if (!strcmp(c[i].drafter, dr) && !strcmp(c[i].workload, wl) && c[i].depth == depth && c[i].conc == conc) x = &c[i];
        if (!x) {
            x = &c[k++];
            snprintf(x->drafter, sizeof x->drafter, "%s", dr);
            snprintf(x->workload, sizeof x->workload, "%s", wl);
            x->depth = depth;
            x->conc = conc;
            double *f[] = {&x->tps, &x->req_tps, &x->completed, &x->n_out, &x->ttft_mean, &x->tpot_mean, &x->e2el_mean,
                           &x->al, &x->ar};
            for (size_t i = 0; i < sizeof f / sizeof *f; i++) *f[i] = NAN;
            for (int i = 0; i < SIM_MAX_POS; i++) x->pos[i] = NAN;
        }
        int m = x->n_rep;
        double comp = csvt_num(&t, r, "completed"), tot = csvt_num(&t, r, "total_output_tokens"),
               nfail = csvt_num(&t, r, "failed");
        if (comp == 0 || nfail > 0) {
            if (!x->n_bad++)
                snprintf(x->bad, sizeof x->bad, "repeat %.0f: %.0f of %.0f requests failed", csvt_num(&t, r, "repeat"),
                         nfail > 0 ? nfail : 0, (nfail > 0 ? nfail : 0) + (comp > 0 ? comp : 0));
            continue;
        }
        x->tps = fold(x->tps, csvt_num(&t, r, "output_throughput"), m);
        x->req_tps = fold(x->req_tps, csvt_num(&t, r, "request_throughput"), m);
        x->completed = fold(x->completed, comp, m);
        x->n_out = fold(x->n_out, comp > 0 ? tot / comp : NAN, m);
        x->ttft_mean = fold(x->ttft_mean, csvt_num(&t, r, "mean_ttft_ms"), m);
        x->tpot_mean = fold(x->tpot_mean, csvt_num(&t, r, "mean_tpot_ms"), m);
        x->e2el_mean = fold(x->e2el_mean, csvt_num(&t, r, "mean_e2el_ms"), m);
        x->al = fold(x->al, run_accept_length(&t, r), m);
        x->ar = fold(x->ar, csvt_num(&t, r, "spec_decode_acceptance_rate"), m);
        for (int i = 0; i < SIM_MAX_POS; i++) {
            char col[16];
            snprintf(col, sizeof col, "pos_%d", i);
            double v = csvt_num(&t, r, col);
            if (isnan(v)) continue;
            x->pos[i] = fold(x->pos[i], v, m);
            if (i + 1 > x->n_pos) x->n_pos = i + 1;
        }
        if (x->n_dir < 8) snprintf(x->dir[x->n_dir++], sizeof x->dir[0], "%s", csvt_get(&t, r, "dir"));
        if (x->n_vals < SIM_CELL_REPEATS) {
            x->rep_tps[x->n_vals] = csvt_num(&t, r, "output_throughput");
            x->rep_tpot[x->n_vals++] = csvt_num(&t, r, "mean_tpot_ms");
        }
        x->n_rep++;
    }
    csvt_free(&t);
    if (!k) { free(c); return errf(err, errlen, "%s: no runs recorded", p); }
    qsort(c, (size_t)k, sizeof *c, cell_order);
    *out = c;
    *n = k;
    return 0;
}

int sim_accept_load_sweep(const char *dir, const char *drafter, sim_accept **out, int *n, char *err, size_t errlen) {
    *out = NULL;
    *n = 0;
    sim_sweep_cell *cells;
    int nc;
    if (sim_sweep_cells(dir, &cells, &nc, err, errlen)) return -1;
    sim_accept *a = calloc((size_t)nc + 1, sizeof *a);
    if (!a) { free(cells); return errf(err, errlen, "out of memory"); }
    int k = 0;
    for (int i = 0; i < nc; i++) {
        const sim_sweep_cell *c0 = &cells[i];
        if (!strcmp(c0->drafter, "none") || c0->depth < 1 || c0->n_pos < 1) continue;
        if (drafter && strcmp(c0->drafter, drafter)) continue;
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= !strcmp(a[j].drafter, c0->drafter) && !strcmp(a[j].workload, c0->workload);
        if (dup) continue;
        /* the deepest depth this drafter ran on this workload */
        int deep = 0;
        for (int j = 0; j < nc; j++) {
            const sim_sweep_cell *c = &cells[j];
            if (!strcmp(c->drafter, c0->drafter) && !strcmp(c->workload, c0->workload) && c->n_pos > 0 && c->depth > deep)
                deep = c->depth;
        }
        sim_accept *x = &a[k++];
        snprintf(x->drafter, sizeof x->drafter, "%s", c0->drafter);
        snprintf(x->workload, sizeof x->workload, "%s", c0->workload);
        double sum[SIM_MAX_POS] = {0}, al = 0, ar = 0;
        int cnt[SIM_MAX_POS] = {0}, nal = 0, nar = 0, runs = 0, bad = 0;
        char concs[200] = "";
        for (int j = 0; j < nc; j++) {
            const sim_sweep_cell *c = &cells[j];
            if (strcmp(c->drafter, c0->drafter) || strcmp(c->workload, c0->workload) || c->depth != deep) continue;
            for (int p = 0; p < c->n_pos && p < SIM_MAX_POS; p++)
                if (!isnan(c->pos[p])) { sum[p] += c->pos[p] * c->n_rep; cnt[p] += c->n_rep; }
            if (!isnan(c->al)) { al += c->al * c->n_rep; nal += c->n_rep; }
            if (!isnan(c->ar)) { ar += c->ar * c->n_rep; nar += c->n_rep; }
            runs += c->n_rep;
            bad += c->n_bad;
            size_t o = strlen(concs);
            snprintf(concs + o, sizeof concs - o, "%s%d", o ? "," : "", c->conc);
        }
        x->n_pos = 0;
        for (int p = 0; p < deep && p < SIM_MAX_POS && cnt[p]; p++) x->p[x->n_pos++] = sum[p] / cnt[p];
        char what[400];
        snprintf(what, sizeof what, "%.200s: %s on %s", dir, x->drafter, x->workload);
        if (check_rates(x, 0, what, err, errlen)) { free(a); free(cells); return -1; }
        sim_accept_fit_fill(x, deep, nal ? al / nal : NAN, nar ? ar / nar : NAN);
        snprintf(x->source, sizeof x->source, "%.200s: %s on %s at depth %d (concurrency %.60s, %d run(s)%s)", dir,
                 x->drafter, x->workload, deep, concs, runs, bad ? "; runs with failed requests left out" : "");
    }
    free(cells);
    if (!k) {
        free(a);
        return errf(err, errlen, "%s: no speculative run with per-position acceptance%s%s", dir,
                    drafter ? " for drafter " : "", drafter ? drafter : "");
    }
    *out = a;
    *n = k;
    return 0;
}

int sim_lengths_from_workload(const char *name, double cpt, sim_lengths *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    workload *w;
    if (workload_load(&w, name, err, errlen)) return -1;
    if (w->n < 1) { workload_free(w); return errf(err, errlen, "%s: no rows", name); }
    out->prompt = malloc((size_t)w->n * sizeof(int));
    out->output = malloc((size_t)w->n * sizeof(int));
    if (!out->prompt || !out->output) { workload_free(w); sim_lengths_free(out); return errf(err, errlen, "out of memory"); }
    for (int i = 0; i < w->n; i++) {
        double t = (double)strlen(w->items[i].prompt) / cpt;
        out->prompt[i] = t < 1 ? 1 : (int)lround(t);
        out->output[i] = w->items[i].max_tokens > 0 ? w->items[i].max_tokens : 0;
    }
    out->n = w->n;
    workload_free(w);
    return 0;
}

void sim_lengths_free(sim_lengths *l) {
    free(l->prompt);
    free(l->output);
    memset(l, 0, sizeof *l);
}

/* "60:rate=2,30s:concurrency=8" (also r=, c=): the form. */
static int phases_colon(const char *s, ld_profile *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        if (out->n == LD_MAX_PHASES) return errf(err, errlen, "--phases: more than %d phases", LD_MAX_PHASES);
        const char *seg = p;
        char *e;
        double d = strtod(p, &e);
        if (e == p || !(d > 0) || !isfinite(d)) return errf(err, errlen, "--phases: phase '%.20s' must start with a positive duration", seg);
        p = e;
        if (!strncmp(p, "ms", 2)) { d /= 1000; p += 2; }
        else if (*p == 's') p++;
        else if (*p == 'm') { d *= 60; p++; }
        if (*p++ != ':') return errf(err, errlen, "--phases: phase '%.20s': expected DURATION:rate=R or DURATION:concurrency=N", seg);
        ld_phase *ph = &out->ph[out->n];
        ph->dur_s = d;
        size_t kl = strcspn(p, "=");
        if (p[kl] != '=') return errf(err, errlen, "--phases: phase '%.20s': expected rate=R or concurrency=N", seg);
        double v = strtod(p + kl + 1, &e);
        if (e == p + kl + 1 || !(v > 0) || !isfinite(v)) return errf(err, errlen, "--phases: phase '%.20s' has a bad value", seg);
        if ((kl == 4 && !strncmp(p, "rate", 4)) || (kl == 1 && *p == 'r')) ph->rate = v;
        else if ((kl == 11 && !strncmp(p, "concurrency", 11)) || (kl == 1 && *p == 'c')) {
            if (v != floor(v) || v > 1e6) return errf(err, errlen, "--phases: phase '%.20s': concurrency must be a whole number", seg);
            ph->concurrency = (int)v;
        } else return errf(err, errlen, "--phases: phase '%.20s': unknown key (rate or concurrency)", seg);
        p = e;
        if (*p && *p != ',') return errf(err, errlen, "--phases: unexpected '%.10s' after phase '%.20s'", p, seg);
        out->n++;
    }
    if (!out->n) return errf(err, errlen, "--phases: no phases (expected e.g. \"60:rate=2,60:rate=10\")");
    return 0;
}

int sim_phases_parse(const char *s, ld_profile *out, char *err, size_t errlen) {
    return strchr(s, ':') ? phases_colon(s, out, err, errlen) : ld_profile_parse(s, out, err, errlen);
}
