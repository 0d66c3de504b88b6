/* report_data.c — loading a sweep directory and computing the
 * recommendation (report.h). Reads files only. */
#include "report.h"
#include "file.h"
#include "csv_table.h"
#include "errmsg.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file, or NULL if it cannot be read. */
static char *slurp(const char *path) {
    char *b;
    return read_file(path, 256u << 20, &b, NULL, NULL, 0) ? NULL : b;
}

static double mean_acc(double acc, double v, int n) {
    /* running mean that ignores NaN values (n = values folded before v) */
    if (isnan(v)) return acc;
    if (isnan(acc)) return v;
    return acc + (v - acc) / (n + 1);
}

static void add_drafter(rp_sweep *s, const char *d) {
    if (!strcmp(d, "none")) return;
    for (int i = 0; i < s->n_drafters; i++) if (!strcmp(s->drafters[i], d)) return;
    if (s->n_drafters < 16) snprintf(s->drafters[s->n_drafters++], 64, "%s", d);
}

int rp_load(rp_sweep *s, const char *dir, char *err, size_t errlen) {
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    s->block_size = 5;
    snprintf(s->block_src, sizeof s->block_src, "default");
    char p[1200];
    snprintf(p, sizeof p, "%s/sweep.json", dir);
    char *mt = slurp(p);
    cJSON *m = mt ? cJSON_Parse(mt) : NULL;
    free(mt);
    if (!m) return errf(err, errlen, "%s: missing or not JSON (is %s a sweep --out directory?)", p, dir);
    const cJSON *v;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "launch"))) snprintf(s->launch, sizeof s->launch, "%s", v->valuestring);
    if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(m, "block_size"))) s->block_size = (int)v->valuedouble;
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "block_size_source"))) snprintf(s->block_src, sizeof s->block_src, "%s", v->valuestring);
    if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(m, "cost_table"))) snprintf(s->cost_table, sizeof s->cost_table, "%s", v->valuestring);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(m, "launches");
    int nl = cJSON_GetArraySize(ls);
    s->launches = calloc((size_t)(nl ? nl : 1), sizeof *s->launches);
    if (!s->launches) { cJSON_Delete(m); return errf(err, errlen, "out of memory"); }
    const cJSON *L;
    cJSON_ArrayForEach(L, ls) {
        rp_launch *l = &s->launches[s->n_launches++];
        l->first_flag_s = l->threshold = NAN;
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(L, "drafter"))) snprintf(l->drafter, sizeof l->drafter, "%s", v->valuestring);
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(L, "depth"))) l->depth = (int)v->valuedouble;
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(L, "dir"))) snprintf(l->dir, sizeof l->dir, "%s", v->valuestring);
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(L, "error"))) snprintf(l->error, sizeof l->error, "%s", v->valuestring);
        const cJSON *C = cJSON_GetObjectItemCaseSensitive(L, "canary");
        if (cJSON_IsString(v = cJSON_GetObjectItemCaseSensitive(C, "verdict"))) snprintf(l->verdict, sizeof l->verdict, "%s", v->valuestring);
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(C, "first_flag_s"))) l->first_flag_s = v->valuedouble;
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(C, "threshold"))) l->threshold = v->valuedouble;
        if (cJSON_IsNumber(v = cJSON_GetObjectItemCaseSensitive(C, "findings"))) l->findings = (int)v->valuedouble;
        add_drafter(s, l->drafter);
    }
    cJSON_Delete(m);

    snprintf(p, sizeof p, "%s/runs.csv", dir);
    csv_table t;
    if (csvt_read(p, &t, err, errlen)) return -1;
    s->cells = calloc((size_t)(t.nrow ? t.nrow : 1), sizeof *s->cells);
    if (!s->cells) { csvt_free(&t); return errf(err, errlen, "out of memory"); }
    for (int r = 0; r < t.nrow; r++) {
        const char *dr = csvt_get(&t, r, "drafter"), *wl = csvt_get(&t, r, "workload");
        int depth = (int)csvt_num(&t, r, "depth"), conc = (int)csvt_num(&t, r, "concurrency");
        rp_cell *c = NULL;
        for (int i = 0; i < s->n_cells; i++)
            if (!strcmp(s->cells[i].drafter, dr) && !strcmp(s->cells[i].workload, wl) && s->cells[i].depth == depth &&
                s->cells[i].conc == conc) c = &s->cells[i];
        if (!c) {
            c = &s->cells[s->n_cells++];
            snprintf(c->drafter, sizeof c->drafter, "%s", dr);
            snprintf(c->workload, sizeof c->workload, "%s", wl);
            snprintf(c->dir, sizeof c->dir, "%s", csvt_get(&t, r, "dir"));
            c->depth = depth;
            c->conc = conc;
            double *f[] = {&c->ttft_mean, &c->n_out, &c->tps, &c->req_tps, &c->failed, &c->completed, &c->ttft_p50, &c->ttft_p99, &c->itl_p50,
                           &c->itl_p99, &c->tpot_mean, &c->tpot_p50, &c->tpot_p99, &c->e2el_mean, &c->al, &c->ar,
                           &c->min_iv_al};
            for (size_t k = 0; k < sizeof f / sizeof *f; k++) *f[k] = NAN;
            for (int k = 0; k < RP_MAX_POS; k++) c->pos[k] = NAN;
            add_drafter(s, dr);
        }
        int n = c->n_rep;
        c->tps = mean_acc(c->tps, csvt_num(&t, r, "output_throughput"), n);
        c->req_tps = mean_acc(c->req_tps, csvt_num(&t, r, "request_throughput"), n);
        c->failed = mean_acc(c->failed, csvt_num(&t, r, "failed"), n);
        c->completed = mean_acc(c->completed, csvt_num(&t, r, "completed"), n);
        c->ttft_mean = mean_acc(c->ttft_mean, csvt_num(&t, r, "mean_ttft_ms"), n);
        double comp = csvt_num(&t, r, "completed"), tot = csvt_num(&t, r, "total_output_tokens");
        c->n_out = mean_acc(c->n_out, comp > 0 ? tot / comp : NAN, n);
        c->ttft_p50 = mean_acc(c->ttft_p50, csvt_num(&t, r, "median_ttft_ms"), n);
        c->ttft_p99 = mean_acc(c->ttft_p99, csvt_num(&t, r, "p99_ttft_ms"), n);
        c->itl_p50 = mean_acc(c->itl_p50, csvt_num(&t, r, "median_itl_ms"), n);
        c->itl_p99 = mean_acc(c->itl_p99, csvt_num(&t, r, "p99_itl_ms"), n);
        c->tpot_mean = mean_acc(c->tpot_mean, csvt_num(&t, r, "mean_tpot_ms"), n);
        c->tpot_p50 = mean_acc(c->tpot_p50, csvt_num(&t, r, "median_tpot_ms"), n);
        c->tpot_p99 = mean_acc(c->tpot_p99, csvt_num(&t, r, "p99_tpot_ms"), n);
        c->e2el_mean = mean_acc(c->e2el_mean, csvt_num(&t, r, "mean_e2el_ms"), n);
        c->al = mean_acc(c->al, csvt_num(&t, r, "spec_decode_acceptance_length"), n);
        c->ar = mean_acc(c->ar, csvt_num(&t, r, "spec_decode_acceptance_rate"), n);
        double mi = csvt_num(&t, r, "specbed_min_interval_accept_length");
        if (isnan(mi)) mi = csvt_num(&t, r, "min_interval_accept_length");   /* sweeps written before the specbed_ prefix */
        if (!isnan(mi) && !(mi >= c->min_iv_al)) c->min_iv_al = mi;
        for (int k = 0; k < RP_MAX_POS; k++) {
            char col[16];
            snprintf(col, sizeof col, "pos_%d", k);
            double pv = csvt_num(&t, r, col);
            if (isnan(pv)) continue;
            c->pos[k] = mean_acc(c->pos[k], pv, n);
            if (k + 1 > c->n_pos) c->n_pos = k + 1;
        }
        c->n_rep++;
    }
    csvt_free(&t);
    if (!s->n_cells) return errf(err, errlen, "%s: no runs recorded", p);
    return 0;
}

void rp_free(rp_sweep *s) {
    free(s->cells);
    free(s->launches);
    free(s->recs);
    memset(s, 0, sizeof *s);
}

/* The cell for (drafter, depth, workload, conc); depth 0 falls back to "none". */
static const rp_cell *cell(const rp_sweep *s, const char *dr, int depth, const char *wl, int conc) {
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < s->n_cells; i++) {
            const rp_cell *c = &s->cells[i];
            if (c->depth == depth && c->conc == conc && !strcmp(c->workload, wl) &&
                !strcmp(c->drafter, pass == 0 ? dr : "none"))
                return c;
        }
    return NULL;
}

/* Step seconds measured by the sweep for one drafter: accept length × mean
 * TPOT at rows = c(k+1) (depth 0: TPOT at rows = c). */
static void measured_cost(const rp_sweep *s, const char *dr, cost_curve *t) {
    double rows[COST_MAX_POINTS], sec[COST_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < s->n_cells && n < COST_MAX_POINTS; i++) {
        const rp_cell *c = &s->cells[i];
        if (strcmp(c->drafter, dr) && strcmp(c->drafter, "none")) continue;
        double al = c->depth == 0 ? 1.0 : c->al;
        if (isnan(al) || isnan(c->tpot_mean)) continue;
        rows[n] = (double)c->conc * (c->depth + 1);
        sec[n++] = al * c->tpot_mean / 1e3;
    }
    char src[200];
    snprintf(src, sizeof src, "measured by this sweep (%s): accept length x mean TPOT at rows = concurrency x (depth+1)", dr);
    cost_curve_from_points(t, rows, sec, n, src);
}

int rp_recommend(rp_sweep *s, const char *cost_path, char *err, size_t errlen) {
    cost_curve given;
    int have_given = 0;
    const char *cp = cost_path ? cost_path : s->cost_table[0] ? s->cost_table : NULL;
    if (cp) {
        if (cost_curve_load(&given, cp, err, errlen)) return -1;
        have_given = 1;
    }
    int cap = s->n_cells + 1;
    s->recs = calloc((size_t)cap, sizeof *s->recs);
    if (!s->recs) return errf(err, errlen, "out of memory");
    for (int d = 0; d < s->n_drafters; d++) {
        const char *dr = s->drafters[d];
        cost_curve meas;
        measured_cost(s, dr, &meas);
        const cost_curve *cost = have_given ? &given : &meas;
        /* one recommendation per (workload, conc) that this drafter ran */
        for (int i = 0; i < s->n_cells; i++) {
            const rp_cell *c0 = &s->cells[i];
            if (strcmp(c0->drafter, dr)) continue;
            int dup = 0;
            for (int r = 0; r < s->n_recs; r++)
                if (!strcmp(s->recs[r].drafter, dr) && !strcmp(s->recs[r].workload, c0->workload) && s->recs[r].conc == c0->conc) dup = 1;
            if (dup || s->n_recs == cap) continue;
            rp_rec *R = &s->recs[s->n_recs++];
            snprintf(R->drafter, sizeof R->drafter, "%s", dr);
            snprintf(R->workload, sizeof R->workload, "%s", c0->workload);
            snprintf(R->cost_source, sizeof R->cost_source, "%s", cost->source);
            R->conc = c0->conc;
            /* depths in order, depth 0 from the baseline */
            int depths[64], nd = 0;
            for (int k = 0; k <= 64 && nd < 64; k++)
                if (cell(s, dr, k, R->workload, R->conc)) depths[nd++] = k;
            /* per-position rates from the deepest speculative run */
            const rp_cell *deep = NULL;
            for (int j = nd - 1; j >= 0 && !deep; j--) {
                const rp_cell *c = cell(s, dr, depths[j], R->workload, R->conc);
                if (depths[j] > 0 && c->n_pos > 0) deep = c;
            }
            R->pos_from_depth = deep ? deep->depth : -1;
            /* end-to-end terms from the speculation-off run (or the shallowest) */
            const rp_cell *base = nd ? cell(s, dr, depths[0], R->workload, R->conc) : NULL;
            double n_out = base ? base->n_out : NAN, t0 = base ? base->ttft_mean / 1e3 : NAN;
            R->n_out = n_out;
            R->overhead_s = t0;
            R->n = nd;
            for (int j = 0; j < nd; j++) {
                const rp_cell *c = cell(s, dr, depths[j], R->workload, R->conc);
                R->depth[j] = depths[j];
                R->meas_tps[j] = c->tps;
                R->meas_al[j] = depths[j] == 0 ? 1.0 : c->al;
                if (deep || depths[j] == 0) {
                    rc_pred pr = rc_predict(cost, deep ? deep->pos : NULL, deep ? deep->n_pos : 0, depths[j], R->conc, n_out, t0);
                    R->pred_e[j] = pr.e_k;
                    R->pred_step[j] = pr.step_s;
                    R->pred_tps[j] = pr.tps;
                } else R->pred_e[j] = R->pred_step[j] = R->pred_tps[j] = NAN;
            }
            R->best_meas = rc_argmax(R->meas_tps, nd);
            R->best_pred = rc_argmax(R->pred_tps, nd);
            R->block_depth = s->block_size;
            R->block_swept = 0;
            R->block_tps = NAN;
            for (int j = 0; j < nd; j++)
                if (depths[j] == s->block_size) { R->block_swept = 1; R->block_tps = R->meas_tps[j]; }
            if (!R->block_swept && deep) R->block_tps = rc_predict(cost, deep->pos, deep->n_pos, s->block_size, R->conc, n_out, t0).tps;
            /* Like with like: measured best vs measured block depth; when the
             * block depth was not swept, predicted best vs predicted block. */
            double best = R->block_swept ? (R->best_meas >= 0 ? R->meas_tps[R->best_meas] : NAN)
                                         : (R->best_pred >= 0 ? R->pred_tps[R->best_pred] : NAN);
            if (!R->block_swept && !isnan(R->block_tps) && R->block_tps > best) best = R->block_tps;
            R->loss_frac = best > 0 && !isnan(R->block_tps) ? (best - R->block_tps) / best : NAN;
        }
    }
    return 0;
}
