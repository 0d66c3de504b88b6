/* report_data.c — loading a sweep directory, the intervals, the decision
 * and the predictions (report.h). Reads files only. */
#include "report.h"
#include "file.h"
#include "csv_table.h"
#include "run_cols.h"
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

static void jstr(const cJSON *o, const char *k, char *dst, size_t n) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (cJSON_IsString(v)) snprintf(dst, n, "%s", v->valuestring);
}

static double jnum(const cJSON *o, const char *k, double dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* A run's ok requests (requests.csv) and its outputs' repetition (outputs.jsonl). */
static void load_run(const char *sweep_dir, const char *rel, rp_run *u) {
    char p[2200], err[512];
    u->rep4 = NAN;
    snprintf(p, sizeof p, "%s/%s/requests.csv", sweep_dir, rel);
    csv_table t;
    if (!csvt_read(p, &t, err, sizeof err)) {
        int n = t.nrow;
        u->n_out = calloc((size_t)(n ? n : 1), sizeof *u->n_out);
        u->ttft = calloc((size_t)(n ? n : 1), sizeof *u->ttft);
        u->e2el = calloc((size_t)(n ? n : 1), sizeof *u->e2el);
        u->tpot = calloc((size_t)(n ? n : 1), sizeof *u->tpot);
        u->id = calloc((size_t)(n ? n : 1), sizeof *u->id);
        if (u->n_out && u->ttft && u->e2el && u->tpot && u->id)
            for (int r = 0; r < n; r++) {
                if (csvt_num(&t, r, "ok") != 1) continue;
                u->n_out[u->n] = csvt_num(&t, r, "output_tokens");
                u->ttft[u->n] = csvt_num(&t, r, "ttft_ms") / 1e3;
                u->e2el[u->n] = csvt_num(&t, r, "e2el_ms") / 1e3;
                u->tpot[u->n] = csvt_num(&t, r, "tpot_ms");
                snprintf(u->id[u->n], sizeof u->id[0], "%s", csvt_get(&t, r, "id"));
                u->n++;
            }
        csvt_free(&t);
    }
    snprintf(p, sizeof p, "%s/%s/outputs.jsonl", sweep_dir, rel);
    char *b = slurp(p);
    if (!b) return;
    double sum = 0;
    int cnt = 0;
    for (char *line = b, *nl; line && *line; line = nl) {
        nl = strchr(line, '\n');
        if (nl) *nl++ = 0;
        cJSON *o = cJSON_Parse(line);
        const cJSON *ok = cJSON_GetObjectItemCaseSensitive(o, "ok"), *tx = cJSON_GetObjectItemCaseSensitive(o, "text");
        if (cJSON_IsTrue(ok) && cJSON_IsString(tx)) {
            double f = st_repeated_ngram_frac(tx->valuestring, 4);
            if (!isnan(f)) { sum += f; cnt++; }
        }
        cJSON_Delete(o);
    }
    free(b);
    if (cnt) u->rep4 = sum / cnt;
}

/* sweep.json's machine, in words: what the report prints beside the load average */
static void machine_words(rp_sweep *s, const cJSON *m) {
    const cJSON *M = cJSON_GetObjectItemCaseSensitive(m, "machine");
    if (!cJSON_IsObject(M)) return;
    char cpu[256] = "unknown", simd[32] = "unknown", omp[32] = "unset", gpu[300] = "none", sk[64] = "";
    jstr(M, "cpu_model", cpu, sizeof cpu);
    jstr(M, "simd", simd, sizeof simd);
    jstr(M, "omp_num_threads", omp, sizeof omp);
    jstr(M, "gpu", gpu, sizeof gpu);
    jstr(M, "server_kernels", sk, sizeof sk);
    snprintf(s->machine, sizeof s->machine, "%s, client SIMD %s, %d CPUs, OMP_NUM_THREADS=%s; server kernels %s; GPU %s",
             cpu, simd, (int)jnum(M, "cpus", 0), omp, sk[0] ? sk : "unknown (the server did not say)", gpu);
}

static void load_manifest(rp_sweep *s, cJSON *m) {
    jstr(m, "launch", s->launch, sizeof s->launch);
    jstr(m, "launch_off", s->launch_off, sizeof s->launch_off);
    if (!s->launch_off[0]) {
        jstr(m, "launch_off_derived", s->launch_off, sizeof s->launch_off);
        s->launch_off_derived = s->launch_off[0] != 0;
    }
    machine_words(s, m);
    const cJSON *dl = cJSON_GetObjectItemCaseSensitive(m, "depths"), *e;
    cJSON_ArrayForEach(e, dl)
        if (cJSON_IsNumber(e) && s->n_planned < RP_MAX_DEPTHS) s->planned_depths[s->n_planned++] = (int)e->valuedouble;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(m, "drafters"))
        if (cJSON_IsString(e) && strstr(e->valuestring, "dspark")) s->has_dspark = 1;
    s->block_size = (int)jnum(m, "block_size", 5);
    jstr(m, "block_size_source", s->block_src, sizeof s->block_src);
    jstr(m, "cost_table", s->cost_table, sizeof s->cost_table);
    jstr(m, "loadavg_start", s->loadavg_start, sizeof s->loadavg_start);
    jstr(m, "loadavg_end", s->loadavg_end, sizeof s->loadavg_end);
    jstr(m, "started", s->started, sizeof s->started);
    s->temperature = jnum(m, "temperature", 0);
    s->top_p = jnum(m, "top_p", 1);
    s->wall_s = jnum(m, "wall_s", NAN);
    s->order_seed = (long long)jnum(m, "order_seed", -1);
    s->seed = (long long)jnum(m, "seed", 0);
    s->repeats_planned = (int)jnum(m, "repeats", 1);
    s->repeats_done = (int)jnum(m, "repeats_completed", -1);
    const cJSON *ct = cJSON_GetObjectItemCaseSensitive(m, "cost_tables"), *c;
    cJSON_ArrayForEach(c, ct)
        if (cJSON_IsString(c) && s->n_cost_tables < 16) {
            snprintf(s->cost_tables[s->n_cost_tables][0], 600, "%s", c->string);
            snprintf(s->cost_tables[s->n_cost_tables++][1], 600, "%s", c->valuestring);
        }
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "budget"), "gave_up");
    size_t o = 0;
    cJSON_ArrayForEach(c, b)
        if (cJSON_IsString(c) && o < sizeof s->gave_up)
            o += (size_t)snprintf(s->gave_up + o, sizeof s->gave_up - o, "%s%s", o ? "; " : "", c->valuestring);
}

/* the sweep's one cell order (run_cell_cmp) */
static int cell_order(const void *pa, const void *pb) {
    const rp_cell *a = pa, *b = pb;
    return run_cell_cmp(a->drafter, a->workload, a->conc, a->depth, b->drafter, b->workload, b->conc, b->depth);
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
    load_manifest(s, m);
    const cJSON *ls = cJSON_GetObjectItemCaseSensitive(m, "launches");
    int nl = cJSON_GetArraySize(ls);
    s->launches = calloc((size_t)(nl ? nl : 1), sizeof *s->launches);
    if (!s->launches) { cJSON_Delete(m); return errf(err, errlen, "out of memory"); }
    const cJSON *L;
    cJSON_ArrayForEach(L, ls) {
        rp_launch *l = &s->launches[s->n_launches++];
        l->first_flag_s = l->threshold = NAN;
        jstr(L, "drafter", l->drafter, sizeof l->drafter);
        l->depth = (int)jnum(L, "depth", 0);
        l->repeat = (int)jnum(L, "repeat", -1);
        jstr(L, "dir", l->dir, sizeof l->dir);
        jstr(L, "error", l->error, sizeof l->error);
        const cJSON *C = cJSON_GetObjectItemCaseSensitive(L, "canary");
        jstr(C, "verdict", l->verdict, sizeof l->verdict);
        l->first_flag_s = jnum(C, "first_flag_s", NAN);
        l->threshold = jnum(C, "threshold", NAN);
        l->findings = (int)jnum(C, "findings", 0);
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
            c->runs = calloc((size_t)t.nrow, sizeof *c->runs);
            if (!c->runs) { csvt_free(&t); return errf(err, errlen, "out of memory"); }
            double *f[] = {&c->n_out, &c->tps, &c->failed, &c->completed, &c->al, &c->ar, &c->min_iv_al, &c->rep4};
            for (size_t k = 0; k < sizeof f / sizeof *f; k++) *f[k] = NAN;
            for (int k = 0; k < RP_MAX_POS; k++) c->pos[k] = NAN;
            add_drafter(s, dr);
        }
        int n = c->n_rep;
        rp_run *u = &c->runs[c->n_rep++];
        u->rep = (int)csvt_num(&t, r, "repeat");
        load_run(dir, csvt_get(&t, r, "dir"), u);
        u->itl_p50 = csvt_num(&t, r, "median_itl_ms");
        u->itl_p99 = csvt_num(&t, r, "p99_itl_ms");
        u->al = depth == 0 ? 1.0 : run_accept_length(&t, r);
        double fr = csvt_num(&t, r, "failed"), cr = csvt_num(&t, r, "completed");
        u->failed = isnan(fr) ? -1 : (int)fr;
        u->completed = isnan(cr) ? -1 : (int)cr;
        if (u->completed == 0 || u->failed > 0) {   /* a run that did not measure what it was sent to */
            if (!c->n_bad++)
                snprintf(c->bad, sizeof c->bad, "repeat %d: %d of %d requests failed%s", u->rep, u->failed < 0 ? 0 : u->failed,
                         (u->failed < 0 ? 0 : u->failed) + (u->completed < 0 ? 0 : u->completed),
                         u->completed == 0 ? ", completed none" : "");
        }
        c->tps = mean_acc(c->tps, csvt_num(&t, r, "output_throughput"), n);
        c->failed = mean_acc(c->failed, csvt_num(&t, r, "failed"), n);
        c->completed = mean_acc(c->completed, csvt_num(&t, r, "completed"), n);
        double comp = csvt_num(&t, r, "completed"), tot = csvt_num(&t, r, "total_output_tokens");
        c->n_out = mean_acc(c->n_out, comp > 0 ? tot / comp : NAN, n);
        c->al = mean_acc(c->al, run_accept_length(&t, r), n);
        c->ar = mean_acc(c->ar, csvt_num(&t, r, "spec_decode_acceptance_rate"), n);
        c->rep4 = mean_acc(c->rep4, u->rep4, n);
        double mi = csvt_num(&t, r, "specbed_min_interval_accept_length");
        if (isnan(mi)) mi = csvt_num(&t, r, "min_interval_accept_length");   /* sweeps written before the specbed_ prefix */
        if (!isnan(mi) && !(mi >= c->min_iv_al)) c->min_iv_al = mi;
        for (int k = 0; k < RP_MAX_POS; k++) {
            char col[16];
            snprintf(col, sizeof col, "pos_%d", k);
            double pv = csvt_num(&t, r, col);
            u->pos[k] = pv;
            if (isnan(pv)) continue;
            c->pos[k] = mean_acc(c->pos[k], pv, n);
            if (k + 1 > c->n_pos) c->n_pos = k + 1;
        }
    }
    csvt_free(&t);
    if (!s->n_cells) return errf(err, errlen, "%s: no runs recorded", p);
    /* runs.csv is in visit order (shuffled per repeat); every table reads in a fixed one */
    qsort(s->cells, (size_t)s->n_cells, sizeof *s->cells, cell_order);
    return 0;
}

void rp_free(rp_sweep *s) {
    for (int i = 0; i < s->n_cells; i++) {
        for (int r = 0; r < s->cells[i].n_rep; r++) {
            rp_run *u = &s->cells[i].runs[r];
            free(u->n_out); free(u->ttft); free(u->e2el); free(u->tpot); free(u->id);
        }
        free(s->cells[i].runs);
    }
    free(s->cells);
    free(s->launches);
    free(s->recs);
    memset(s, 0, sizeof *s);
}

/* ---- intervals on one cell ---- */

typedef enum { K_DEC, K_E2E, K_TTFT_MEAN, K_TTFT_P50, K_TTFT_P99, K_TPOT_MEAN, K_TPOT_P99, K_E2EL_MEAN, K_ITL_P50,
               K_ITL_P99 } stat_kind;

typedef struct {
    const rp_cell *c;
    stat_kind k;
} cell_ctx;

static double pick_stat(const rp_run *u, int conc, stat_kind k, const int *idx, int n) {
    double buf[4096], *v = n <= 4096 ? buf : malloc((size_t)n * sizeof *v);
    if (!v) return NAN;
    double r = NAN;
    int m = 0;
    switch (k) {
    case K_DEC: r = st_decode_tps(conc, u->n_out, u->ttft, u->e2el, idx, n); break;
    case K_E2E: r = st_e2e_tps(conc, u->n_out, u->e2el, idx, n); break;
    case K_ITL_P50: r = u->itl_p50; break;
    case K_ITL_P99: r = u->itl_p99; break;
    default:
        for (int i = 0; i < n; i++) {
            double x = k == K_TPOT_MEAN || k == K_TPOT_P99 ? u->tpot[idx[i]]
                     : k == K_E2EL_MEAN ? u->e2el[idx[i]] * 1e3 : u->ttft[idx[i]] * 1e3;
            if (!isnan(x)) v[m++] = x;
        }
        r = k == K_TTFT_P50 ? st_percentile(v, (size_t)m, 50)
          : k == K_TTFT_P99 || k == K_TPOT_P99 ? st_percentile(v, (size_t)m, 99) : st_mean(v, (size_t)m);
    }
    if (v != buf) free(v);
    return r;
}

static double cell_stat(void *ctx, int rep, const int *idx, int n) {
    const cell_ctx *x = ctx;
    return pick_stat(&x->c->runs[rep], x->c->conc, x->k, idx, n);
}

static st_ci cell_ci(const rp_cell *c, stat_kind k, int n_boot, unsigned long long seed) {
    int n[256];
    int R = c->n_rep < 256 ? c->n_rep : 256;
    for (int r = 0; r < R; r++) n[r] = k == K_ITL_P50 || k == K_ITL_P99 ? 1 : c->runs[r].n;
    cell_ctx x = {c, k};
    int log_scale = k == K_DEC || k == K_E2E;
    st_ci ci = st_two_level(cell_stat, &x, n, R, k == K_ITL_P50 || k == K_ITL_P99 ? 0 : n_boot, seed + (unsigned)k, log_scale);
    if ((k == K_ITL_P50 || k == K_ITL_P99) && ci.n_rep < 2) ci.lo = ci.hi = NAN;   /* one repeat, no gaps: no interval */
    return ci;
}

/* ---- paired gain A ÷ off ---- */

typedef struct {
    const rp_cell *a, *b;
    int ia[256], ib[256];          /* repeats present in both, paired by repeat index */
    int paired[256];               /* the two runs hold the same prompts in the same order */
    stat_kind k;
    st_rng g;                      /* resamples the baseline's requests when not paired */
} gain_ctx;

static double gain_stat(void *ctx, int r, const int *idx, int n) {
    gain_ctx *x = ctx;
    const rp_run *ua = &x->a->runs[x->ia[r]], *ub = &x->b->runs[x->ib[r]];
    double ta = pick_stat(ua, x->a->conc, x->k, idx, n);
    int identity = 1;
    for (int i = 0; i < n && identity; i++) identity = idx[i] == i;
    /* paired: the same (resampled) prompts on both sides, so their difficulty cancels */
    if (x->paired[r]) return ta / pick_stat(ub, x->b->conc, x->k, idx, n);
    int *j = malloc((size_t)(ub->n ? ub->n : 1) * sizeof *j);
    if (!j) return NAN;
    for (int i = 0; i < ub->n; i++) j[i] = identity ? i : st_rng_below(&x->g, ub->n);
    double tb = pick_stat(ub, x->b->conc, x->k, j, ub->n);
    free(j);
    return ta / tb;
}

static rc_gain gain_ci(const rp_cell *a, const rp_cell *b, stat_kind k, int n_boot, unsigned long long seed) {
    rc_gain out = {NAN, NAN, NAN};
    if (!a || !b) return out;
    if (a == b) { out.est = out.lo = out.hi = 1; return out; }
    gain_ctx *x = calloc(1, sizeof *x);
    if (!x) return out;
    x->a = a;
    x->b = b;
    x->k = k;
    st_rng_seed(&x->g, seed ^ 0xABCDEFull);
    int R = 0, n[256];
    for (int i = 0; i < a->n_rep && R < 256; i++)
        for (int j = 0; j < b->n_rep; j++)
            if (a->runs[i].rep == b->runs[j].rep) {
                /* the same prompts in the same order (a run with fewer prompts, cut by
                 * --budget, holds a prefix of the other's): paired on the common prefix */
                const rp_run *ua = &a->runs[i], *ub = &b->runs[j];
                int m = ua->n < ub->n ? ua->n : ub->n, same = m > 0;
                for (int q = 0; q < m && same; q++) same = !strcmp(ua->id[q], ub->id[q]);
                x->ia[R] = i;
                x->ib[R] = j;
                x->paired[R] = same;
                n[R++] = same ? m : ua->n;
                break;
            }
    st_ci ci = st_two_level(gain_stat, x, n, R, n_boot, seed, 1);
    free(x);
    out.est = ci.est;
    out.lo = ci.lo;
    out.hi = ci.hi;
    return out;
}

/* ---- the decision ---- */

/* A stable number per series, so its seeds do not depend on file order. */
static unsigned long long r_index_hash(const char *a, const char *b, int c) {
    unsigned long long h = 1469598103934665603ull;
    for (; *a; a++) { h ^= (unsigned char)*a; h *= 1099511628211ull; }
    for (; *b; b++) { h ^= (unsigned char)*b; h *= 1099511628211ull; }
    return (h ^ (unsigned long long)c) % 1000003ull;
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

/* Drafted tokens per verify step of a depth-k cell: accepted per step ÷
 * acceptance rate = (accept length − 1) ÷ (rate/100), at most k. k when the
 * counters cannot say (no acceptance, or a server that reports no rate). */
static double drafted_per_step(const rp_cell *c, int k) {
    if (k <= 0) return 0;
    if (isnan(c->al) || isnan(c->ar) || !(c->ar > 0)) return k;
    double d = (c->al - 1) / (c->ar / 100);
    return d < 0 ? 0 : d > k ? k : d;
}

/* Step seconds the sweep measured for one drafter (decode: c·accept length
 * ÷ decode tok/s at rows c(1 + drafted per step); depth 0: c ÷ decode tok/s), fit monotone
 * by weighted least squares (recommend.h rc_fit_monotone). */
static void measured_cost(const rp_sweep *s, const char *dr, cost_curve *t) {
    double rows[COST_MAX_POINTS], sec[COST_MAX_POINTS], w[COST_MAX_POINTS];
    int n = 0;
    for (int i = 0; i < s->n_cells && n < COST_MAX_POINTS; i++) {
        const rp_cell *c = &s->cells[i];
        if (strcmp(c->drafter, dr) && strcmp(c->drafter, "none")) continue;
        double al = c->depth == 0 ? 1.0 : c->al;
        if (isnan(al) || !(c->dec.est > 0)) continue;
        rows[n] = c->conc * (1 + drafted_per_step(c, c->depth));
        w[n] = c->n_rep;
        sec[n++] = c->conc * al / c->dec.est;
    }
    char src[300];
    snprintf(src, sizeof src, "a monotone (isotonic least-squares) fit to this sweep's own step times (%s): "
             "concurrency x accept length / decode tok/s at rows = concurrency x (1 + drafted tokens per step)", dr);
    if (rc_fit_monotone(t, rows, sec, w, n, src)) cost_curve_from_points(t, rows, sec, n, src);
}

/* The deepest speculative cell of a series (its per-position rates extrapolate to unswept depths). */
static const rp_cell *deep_of(const rp_rec *R) {
    for (int j = R->n - 1; j >= 0; j--)
        if (R->depth[j] > 0 && R->cell[j]->n_pos > 0) return R->cell[j];
    return NULL;
}

/* Predicted decode tok/s at every depth of R, with the draft cost in cost's
 * draft_seconds_per_step / _per_token (the fit, when there is one). The acceptance is the arm's own (accept length from its counters:
 * deterministic under greedy, so not a noisy input); what is predicted is
 * the time a step takes, from the cost table. Extrapolating the deepest
 * arm's per-position rates to shallower depths under-reads loop-driven
 * acceptance (a deep arm crosses a loop in few steps, so its steps sample
 * the hard stretches more often); that extrapolation is kept in pred_e_deep
 * and used only where no arm was swept (the block-size depth). */
static void predict(rp_sweep *s, rp_rec *R, const cost_curve *cost) {
    const rp_cell *deep = deep_of(R);
    R->best_pred = -1;
    for (int j = 0; j < R->n; j++) {
        const rp_cell *c = R->cell[j];
        int k = R->depth[j];
        R->pred_inside[j] = -1;
        R->pred_e[j] = R->pred_e_deep[j] = R->pred_rows[j] = R->pred_step[j] = R->pred_dec[j] = NAN;
        if (k > 0 && deep) R->pred_e_deep[j] = rc_expected(deep->pos, deep->n_pos, k);
        R->pred_e[j] = k == 0 ? 1.0 : !isnan(c->al) ? c->al : R->pred_e_deep[j];
        if (isnan(R->pred_e[j])) continue;
        double d = drafted_per_step(c, k);
        R->pred_rows[j] = R->conc * (1 + d);
        R->pred_step[j] = cost_curve_at_seqs(cost, R->conc, R->pred_rows[j]) + rc_draft_seconds(cost, R->conc, d) +
                          R->overhead_s;
        R->pred_dec[j] = R->pred_step[j] > 0 ? R->conc * R->pred_e[j] / R->pred_step[j] : NAN;
        if (!isnan(R->pred_dec[j]) && (R->best_pred < 0 || R->pred_dec[j] > R->pred_dec[R->best_pred])) R->best_pred = j;
        const st_ci *m = &c->dec;
        if (k > 0 && !isnan(R->pred_dec[j]) && !isnan(m->lo)) {
            R->pred_inside[j] = R->pred_dec[j] >= m->lo && R->pred_dec[j] <= m->hi;
            s->n_pred++;
            s->n_pred_inside += R->pred_inside[j];
        }
    }
    R->break_even = deep ? rc_break_even(cost, deep->pos, deep->n_pos, R->conc, R->overhead_s, deep->n_pos) : -1;
    R->block_pred = NAN;
    if (deep) {
        double e = rc_expected(deep->pos, deep->n_pos, s->block_size);
        double st = cost_curve_at_seqs(cost, R->conc, (double)R->conc * (s->block_size + 1)) +
                    rc_draft_seconds(cost, R->conc, s->block_size) + R->overhead_s;
        R->block_pred = st > 0 ? R->conc * e / st : NAN;
    }
}

/* The draft cost in the server, per drafter × concurrency, by weighted
 * least squares over its speculative cells: measured step − table cost −
 * overhead = c·(F + d·T), d drafted tokens per step, F ≥ 0 a drafting step's
 * fixed cost per sequence (catching up on the tokens just committed; a
 * block drafter's one pass), T ≥ 0 per drafted token (a chained pass).
 * `specbed profile` times the drafter alone at batch 1; in the server drafts
 * are batched and interleaved, so the batch-1 figure does not transfer.
 * -1: no cells. */
static int fit_draft_cost(const rp_sweep *s, const char *dr, int conc, const cost_curve *cost, double *F, double *T) {
    double s11 = 0, s12 = 0, s22 = 0, s1y = 0, s2y = 0;
    int n = 0;
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        if (strcmp(R->drafter, dr) || R->conc != conc) continue;
        for (int j = 0; j < R->n; j++) {
            const rp_cell *c = R->cell[j];
            if (R->depth[j] == 0 || isnan(c->al) || !(c->dec.est > 0)) continue;
            double d = drafted_per_step(c, R->depth[j]), step = conc * c->al / c->dec.est, w = c->n_rep;
            double y = step - cost_curve_at_seqs(cost, conc, conc * (1 + d)) - R->overhead_s;
            double x1 = conc, x2 = conc * d;
            s11 += w * x1 * x1; s12 += w * x1 * x2; s22 += w * x2 * x2; s1y += w * x1 * y; s2y += w * x2 * y;
            n++;
        }
    }
    if (!n || !(s11 > 0)) return -1;
    double det = s11 * s22 - s12 * s12, f = NAN, t = NAN;
    if (det > 1e-12 * s11 * s22) {
        f = (s1y * s22 - s2y * s12) / det;
        t = (s2y * s11 - s1y * s12) / det;
    }
    if (!(f >= 0 && t >= 0)) {   /* a bound is active: the better one-parameter fit */
        double t_only = s22 > 0 && s2y > 0 ? s2y / s22 : 0, f_only = s1y > 0 ? s1y / s11 : 0;
        double sse_t = -2 * t_only * s2y + t_only * t_only * s22, sse_f = -2 * f_only * s1y + f_only * f_only * s11;
        if (sse_t <= sse_f) f = 0, t = t_only;
        else f = f_only, t = 0;
    }
    *F = f;
    *T = t;
    return 0;
}

static int planned(const rp_sweep *s, int depth) {
    for (int i = 0; i < s->n_planned; i++) if (s->planned_depths[i] == depth) return 1;
    return 0;
}

/* Appends "depth K: why" to R->missing for a planned cell that is absent
 * (c NULL: why from the sweep's launches) or failed (c's runs). */
static void note_missing(const rp_sweep *s, rp_rec *R, int depth, const rp_cell *c) {
    char why[700];
    if (c) snprintf(why, sizeof why, "%d of %d run(s) failed (%s)", c->n_bad, c->n_rep, c->bad);
    else if (!planned(s, depth)) snprintf(why, sizeof why, "not swept, so there is no baseline to gain over");
    else {
        const char *arm = depth == 0 ? "none" : R->drafter, *first = NULL;
        int nf = 0, nl = 0;
        for (int i = 0; i < s->n_launches; i++) {
            const rp_launch *L = &s->launches[i];
            if (L->depth != depth || strcmp(L->drafter, arm)) continue;
            nl++;
            if (L->error[0]) { nf++; if (!first) first = L->error; }
        }
        if (nf) snprintf(why, sizeof why, "%d of %d launch(es) failed (%.400s)", nf, nl, first);
        else snprintf(why, sizeof why, "no runs recorded (%d launch(es); the sweep may have stopped early)", nl);
    }
    size_t l = strlen(R->missing);
    snprintf(R->missing + l, sizeof R->missing - l, "%sdepth %d%s: %s", l ? "; " : "", depth,
             depth == 0 ? " (speculation off)" : "", why);
}

const char *rp_decision_word(const rp_rec *R) {
    static char buf[4][64];
    static int slot;
    char *b = buf[slot++ & 3];
    if (R->undecided) snprintf(b, 64, "no decision");
    else if (R->rec < 0) snprintf(b, 64, "speculation off");
    else snprintf(b, 64, "depth %d", R->depth[R->rec]);
    return b;
}

int rp_recommend(rp_sweep *s, const char *cost_path, int n_boot, unsigned long long seed, char *err, size_t errlen) {
    if (n_boot <= 0) n_boot = 1000;
    s->n_boot = n_boot;
    for (int i = 0; i < s->n_cells; i++) {
        rp_cell *c = &s->cells[i];
        unsigned long long sd = seed + 1000ull * (unsigned long long)i;
        c->dec = cell_ci(c, K_DEC, n_boot, sd);
        c->e2e = cell_ci(c, K_E2E, n_boot, sd);
        c->ttft_mean = cell_ci(c, K_TTFT_MEAN, n_boot, sd);
        c->ttft_p50 = cell_ci(c, K_TTFT_P50, n_boot, sd);
        c->ttft_p99 = cell_ci(c, K_TTFT_P99, n_boot, sd);
        c->tpot_mean = cell_ci(c, K_TPOT_MEAN, n_boot, sd);
        c->tpot_p99 = cell_ci(c, K_TPOT_P99, n_boot, sd);
        c->e2el_mean = cell_ci(c, K_E2EL_MEAN, n_boot, sd);
        c->itl_p50 = cell_ci(c, K_ITL_P50, n_boot, sd);
        c->itl_p99 = cell_ci(c, K_ITL_P99, n_boot, sd);
    }
    cost_curve global;
    int have_global = 0;
    const char *cp = cost_path ? cost_path : s->cost_table[0] ? s->cost_table : NULL;
    if (cp) {
        if (cost_curve_load(&global, cp, err, errlen)) return -1;
        have_global = 1;
    }
    int cap = s->n_cells + 1;
    s->recs = calloc((size_t)cap, sizeof *s->recs);
    if (!s->recs) return errf(err, errlen, "out of memory");
    for (int d = 0; d < s->n_drafters; d++) {
        const char *dr = s->drafters[d];
        cost_curve cost;
        int table = 0;
        if (have_global) { cost = global; table = 1; }
        else {
            for (int k = 0; k < s->n_cost_tables && !table; k++)
                if (!strcmp(s->cost_tables[k][0], dr)) {
                    char p[1700], e2[600];
                    snprintf(p, sizeof p, "%s/%s", s->dir, s->cost_tables[k][1]);
                    if (!cost_curve_load(&cost, p, e2, sizeof e2)) {
                        table = 1;
                        /* a label: a path past 500 bytes is shown cut (".500s" keeps -Wformat-truncation quiet) */
                        snprintf(cost.source, sizeof cost.source, "measured in-process by --profile-cmd (%.500s)",
                                 s->cost_tables[k][1]);
                    }
                }
            if (!table) measured_cost(s, dr, &cost);
        }
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
            R->conc = c0->conc;
            for (int k = 0; k < RP_MAX_DEPTHS && R->n < RP_MAX_DEPTHS; k++) {
                const rp_cell *c = cell(s, dr, k, R->workload, R->conc);
                if (c && !c->n_bad) { R->depth[R->n] = k; R->cell[R->n++] = c; }
                else if (c || planned(s, k) || k == 0) note_missing(s, R, k, c);
            }
            /* a decision needs the baseline and at least one speculative depth, each measured */
            R->undecided = !(R->n && R->depth[0] == 0) || R->n < 2;
            const rp_cell *off = R->n && R->depth[0] == 0 ? R->cell[0] : NULL;
            R->max_rep4 = NAN;
            for (int j = 0; j < R->n; j++) {
                unsigned long long sd = seed + 7777ull * (unsigned long long)(r_index_hash(R->drafter, R->workload, R->conc) + j);
                R->gain[j] = gain_ci(R->cell[j], off, K_DEC, n_boot, sd);
                R->gain_e2e[j] = gain_ci(R->cell[j], off, K_E2E, n_boot, sd + 1);
                R->verdict[j] = R->depth[j] == 0 ? 0 : rc_verdict(&R->gain[j]);
                if (R->depth[j] > 0 && !isnan(R->cell[j]->rep4) && !(R->cell[j]->rep4 <= R->max_rep4)) R->max_rep4 = R->cell[j]->rep4;
            }
            R->rec = rc_choose(R->depth, R->gain, R->n, &R->best);
            if (R->undecided) R->rec = -1;
            /* per-position rates from the deepest speculative cell */
            const rp_cell *deep = NULL;
            for (int j = R->n - 1; j >= 0 && !deep; j--)
                if (R->depth[j] > 0 && R->cell[j]->n_pos > 0) deep = R->cell[j];
            R->pos_from_depth = deep ? deep->depth : -1;
            /* a cost table measured in-process leaves out what the server adds per step (HTTP, SSE,
             * scheduling, prefill chunks of joining requests): anchor it at depth 0 */
            R->overhead_s = 0;
            if (table && off && off->dec.est > 0) R->overhead_s = R->conc / off->dec.est - cost_curve_at_seqs(&cost, R->conc, R->conc);
            snprintf(R->cost_source, sizeof R->cost_source, "%s%s", cost.source,
                     table ? "; plus a per-step overhead anchored at depth 0 (decode step of speculation off − table cost)" : "");
            R->block_depth = s->block_size;
            R->block_idx = -1;
            for (int j = 0; j < R->n; j++) if (R->depth[j] == s->block_size) R->block_idx = j;
            R->lost_block = R->rec >= 0 ? R->cell[R->rec]->dec.est : off ? off->dec.est : NAN;   /* finished below */
        }
        /* predictions for this drafter's series */
        for (int r = 0; r < s->n_recs; r++) {
            rp_rec *R = &s->recs[r];
            if (strcmp(R->drafter, dr)) continue;
            cost_curve cr = cost;
            double F, T;
            if (table && !fit_draft_cost(s, dr, R->conc, &cost, &F, &T)) {
                size_t l = strlen(R->cost_source);
                snprintf(R->cost_source + l, sizeof R->cost_source - l, "; draft cost %.3f ms per drafting step and "
                         "sequence + %.3f ms per drafted token at concurrency %d, fitted to the sweep (the profile's "
                         "batch-1 figures: %.3f + %.3f ms)", F * 1e3, T * 1e3, R->conc,
                         cost.draft_seconds_per_step * 1e3, cost.draft_seconds_per_token * 1e3);
                cr.draft_seconds_per_step = F;
                cr.draft_seconds_per_token = T;
            }
            predict(s, R, &cr);
            double rec_tps = R->lost_block;
            double blk = R->block_idx >= 0 ? R->cell[R->block_idx]->dec.est : R->block_pred;
            R->lost_block = rec_tps > 0 && !isnan(blk) ? 1 - blk / rec_tps : NAN;
        }
    }
    return 0;
}
