/* sim_compare.c — `specbed simulate --sweep DIR --compare`: the simulator
 * checked against what a sweep measured. Every measured cell (drafter ×
 * depth × workload × concurrency) is simulated with that cell's own
 * settings — a closed loop of its concurrency, as many requests as it
 * completed, the (input, output) token counts its requests really had (each
 * run's requests.csv; the workload file at --chars-per-token when those are
 * missing), and the per-position acceptance, proposal rate and draft fill measured in
 * that very cell — on the cost curve given; measured and simulated output
 * throughput, TPOT, TTFT and accept length are printed side by side with
 * the relative error. Writes compare.csv and compare.md. */
#include "sim.h"
#include "csv_row.h"
#include "errmsg.h"
#include "outfile.h"
#include "strbuf.h"
#include "csv_table.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The server's host time the cost table does not hold: per step, per
 * token a step commits, and per request before its first step. */
typedef struct { double step_s, tok_s, req_s; } host_ov;

typedef struct {
    const sim_sweep_cell *c;
    double think_s;
    host_ov ov;
    int lengths_measured;   /* lengths from requests.csv (1) or the workload file (0) */
    double sim[SIM_N_METRICS], lo[SIM_N_METRICS], hi[SIM_N_METRICS];
    double e_tps, e_tpot, e_ttft;   /* (simulated − measured) ÷ measured */
    double m_lo[2], m_hi[2];        /* measured 95% interval over the cell's repeats: output tok/s, mean TPOT */
    int ok[2];                      /* simulated within 10% of the measured mean, or inside its interval */
} cmp_row;

static double rel(double sim, double meas) { return meas > 0 && !isnan(sim) ? (sim - meas) / meas : NAN; }

/* The closed-loop client's pause the load generator showed in the
 * speculation-off cell at this concurrency: each of its conc clients sent
 * n = completed ÷ conc requests one after another over the run's duration
 * (completed ÷ request_throughput), waiting mean E2E on each and pausing
 * between them — n − 1 pauses, none before the first (with 8 requests at
 * concurrency 1 a pause taken as duration ÷ n − E2E is 1/8 short, and the
 * simulated run 8% fast). The pause is the client's own (HTTP connection,
 * thread wake-up, logging). Measured without speculation, applied to every
 * depth, so it cannot absorb a speculative cell's error. */
static double client_gap(const sim_sweep_cell *cells, int nc, const sim_sweep_cell *c) {
    for (int i = 0; i < nc; i++) {
        const sim_sweep_cell *b = &cells[i];
        if (b->depth == 0 && b->conc == c->conc && !strcmp(b->workload, c->workload) && b->req_tps > 0) {
            double n = b->completed / b->conc, per = b->conc / b->req_tps - b->e2el_mean / 1e3;
            double g = n > 1 ? per * n / (n - 1) : per;
            return g > 0 ? g : 0;
        }
    }
    return 0;
}

/* The token counts of the cell's ok requests, from its runs' requests.csv; 0 found = none. */
static int lengths_from_runs(const char *sweep, const sim_sweep_cell *c, sim_lengths *L) {
    memset(L, 0, sizeof *L);
    int cap = 0;
    for (int d = 0; d < c->n_dir; d++) {
        char p[1200], e[256];
        snprintf(p, sizeof p, "%s/%s/requests.csv", sweep, c->dir[d]);
        csv_table t;
        if (csvt_read(p, &t, e, sizeof e)) continue;
        for (int r = 0; r < t.nrow; r++) {
            double in = csvt_num(&t, r, "input_tokens"), out = csvt_num(&t, r, "output_tokens"), ok = csvt_num(&t, r, "ok");
            if (!(in >= 1) || !(out >= 1) || ok != 1) continue;
            if (L->n == cap) {
                cap = cap ? cap * 2 : 64;
                int *a = realloc(L->prompt, (size_t)cap * sizeof *a), *b = a ? realloc(L->output, (size_t)cap * sizeof *b) : NULL;
                if (a) L->prompt = a;
                if (!a || !b) { csvt_free(&t); sim_lengths_free(L); return -1; }
                L->output = b;
            }
            L->prompt[L->n] = (int)in;
            L->output[L->n++] = (int)out;
        }
        csvt_free(&t);
    }
    return L->n;
}

static int simulate_cell(const sim_compare_opts *o, const sim_sweep_cell *c, double think_s, const host_ov *ov,
                         cmp_row *row, char *err, size_t errlen) {
    sim_lengths L;
    if (lengths_from_runs(o->sweep_dir, c, &L) <= 0) {
        if (sim_lengths_from_workload(c->workload, o->chars_per_token, &L, err, errlen)) return -1;
        for (int i = 0; i < L.n; i++) L.output[i] = 0;   /* the sweep's --max-tokens ruled, not the rows' */
        row->lengths_measured = 0;
    } else row->lengths_measured = 1;
    sim_accept A;
    memset(&A, 0, sizeof A);
    snprintf(A.drafter, sizeof A.drafter, "%s", c->drafter);
    snprintf(A.workload, sizeof A.workload, "%s", c->workload);
    A.proposal_rate = A.draft_fill = 1;
    if (c->depth > 0) {
        for (int p = 0; p < c->n_pos && p < c->depth && p < SIM_MAX_POS && !isnan(c->pos[p]); p++) A.p[A.n_pos++] = c->pos[p];
        for (int p = 1; p < A.n_pos; p++) if (A.p[p] > A.p[p - 1]) A.p[p] = A.p[p - 1];
        sim_accept_fit_fill(&A, c->depth, c->al, c->ar);
    }
    sim_config cfg;
    sim_config_defaults(&cfg);
    cfg.max_running = o->max_running;
    cfg.row_budget = o->row_budget;
    cfg.cost = o->cost;
    cfg.draft_s_per_token = o->draft_s_per_token;
    cfg.step_overhead_s = ov->step_s;
    cfg.token_overhead_s = ov->tok_s;
    cfg.request_overhead_s = ov->req_s;
    cfg.think_s = think_s;
    cfg.depth = c->depth;
    cfg.acc = &A;
    cfg.profile.n = 1;
    cfg.profile.ph[0].dur_s = INFINITY;
    cfg.profile.ph[0].concurrency = c->conc;
    cfg.profile.ph[0].rate = 0;
    cfg.n_requests = c->completed > 0 ? (int)lround(c->completed) : 8;
    cfg.output_len = c->n_out >= 1 ? (int)lround(c->n_out) : 64;
    cfg.lengths = &L;
    int R = o->repeats;
    double *v = malloc((size_t)R * SIM_N_METRICS * sizeof *v), col[1024];
    if (!v) { sim_lengths_free(&L); return errf(err, errlen, "out of memory"); }
    for (int k = 0; k < R; k++) {
        sim_result res;
        cfg.seed = o->seed + (uint64_t)k;
        if (sim_run(&cfg, &res, err, errlen)) { free(v); sim_lengths_free(&L); return -1; }
        memcpy(v + (size_t)k * SIM_N_METRICS, res.m, sizeof res.m);
        sim_result_free(&res);
    }
    for (int m = 0; m < SIM_N_METRICS; m++) {
        int n = R < 1024 ? R : 1024;
        for (int k = 0; k < n; k++) col[k] = v[(size_t)k * SIM_N_METRICS + m];
        sim_interval95(col, n, &row->sim[m], &row->lo[m], &row->hi[m]);
    }
    free(v);
    sim_lengths_free(&L);
    row->c = c;
    row->e_tps = rel(row->sim[SIM_M_OUT_TPUT], c->tps);
    row->e_tpot = rel(row->sim[SIM_M_MEAN_TPOT], c->tpot_mean);
    /* the bar: within 10%, or within what the measurement itself
     * can tell apart (its repeats' 95% interval) */
    const double *rv[2] = {c->rep_tps, c->rep_tpot}, sv[2] = {row->sim[SIM_M_OUT_TPUT], row->sim[SIM_M_MEAN_TPOT]};
    const double ev[2] = {row->e_tps, row->e_tpot};
    for (int k = 0; k < 2; k++) {
        double mean;
        sim_interval95(rv[k], c->n_vals, &mean, &row->m_lo[k], &row->m_hi[k]);
        row->ok[k] = !isnan(ev[k]) && (fabs(ev[k]) <= 0.10 || (c->n_vals > 1 && sv[k] >= row->m_lo[k] && sv[k] <= row->m_hi[k]));
    }
    row->e_ttft = rel(row->sim[SIM_M_MEAN_TTFT], c->ttft_mean);
    return 0;
}

/* The host time the server added, per workload: each speculation-off
 * cell's mean TPOT less what the simulator gives for it with no overhead
 * (one step per token there, prompt chunks of joining requests included)
 * is the overhead d per step at its concurrency c, and d = step + tok · c
 * is fitted over the workload's concurrencies (least squares, both ≥ 0; one
 * concurrency: all per step). Without speculation a step commits one token
 * per request, so tok is the host time per committed token (detokenising,
 * stop strings, the stream's bytes, and the load generator's client reading
 * them on the same machine), which a speculative step pays E(k) times per
 * request. Measured without speculation and applied to every depth, so,
 * like the client's gap, it cannot absorb a speculative cell's error.
 * ov[i]: cell i's workload's fit. */
static int host_overheads(const sim_compare_opts *o, const sim_sweep_cell *cells, int nc, host_ov *ov, char *err,
                          size_t errlen) {
    double *d = calloc((size_t)nc, sizeof *d);
    if (!d) return errf(err, errlen, "out of memory");
    for (int i = 0; i < nc; i++) {
        const sim_sweep_cell *b = &cells[i];
        d[i] = NAN;
        if (b->depth != 0 || !(b->tpot_mean > 0)) continue;
        cmp_row tmp;
        host_ov none = {0, 0, 0};
        double think = o->think_s >= 0 ? o->think_s : client_gap(cells, nc, b);
        if (simulate_cell(o, b, think, &none, &tmp, err, errlen)) { free(d); return -1; }
        double x = (b->tpot_mean - tmp.sim[SIM_M_MEAN_TPOT]) / 1e3;
        d[i] = x > 0 ? x : 0;
    }
    for (int i = 0; i < nc; i++) {
        double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
        for (int k = 0; k < nc; k++)
            if (!isnan(d[k]) && !strcmp(cells[k].workload, cells[i].workload)) {
                double x = cells[k].conc;
                n++; sx += x; sy += d[k]; sxx += x * x; sxy += x * d[k];
            }
        double det = n * sxx - sx * sx, tok = det > 0 ? (n * sxy - sx * sy) / det : 0, step;
        if (!(tok > 0)) { tok = 0; step = n > 0 ? sy / n : 0; }
        else if ((step = (sy - tok * sx) / n) < 0) { step = 0; tok = sxx > 0 ? sxy / sxx : 0; }
        ov[i].step_s = step;
        ov[i].tok_s = tok;
    }
    free(d);
    return 0;
}

/* The depth-0 cell of c's workload at the lowest concurrency measured, or NULL. */
static const sim_sweep_cell *lowest_conc_off(const sim_sweep_cell *cells, int nc, const sim_sweep_cell *c) {
    const sim_sweep_cell *best = NULL;
    for (int i = 0; i < nc; i++)
        if (cells[i].depth == 0 && !strcmp(cells[i].workload, c->workload) && cells[i].ttft_mean > 0 &&
            (!best || cells[i].conc < best->conc))
            best = &cells[i];
    return best;
}

/* The server's time per request before its first step (HTTP, tokenising,
 * the first token's way out), per workload: its lowest-concurrency depth-0
 * cell's mean TTFT less the simulated one without it (host overheads and
 * client pause applied), at least 0. One figure per workload for every
 * concurrency and depth: at concurrency 1 TTFT is that time plus one
 * prefill, so queueing at higher concurrency stays the simulator's to get
 * right. Sets ov[i].req_s for every cell. */
static int request_overheads(const sim_compare_opts *o, const sim_sweep_cell *cells, int nc, host_ov *ov, char *err,
                             size_t errlen) {
    for (int i = 0; i < nc; i++) {
        const sim_sweep_cell *b = lowest_conc_off(cells, nc, &cells[i]);
        ov[i].req_s = 0;
        if (!b) continue;
        int bi = (int)(b - cells), k = 0;
        while (k < i && strcmp(cells[k].workload, cells[i].workload)) k++;
        if (k < i) { ov[i].req_s = ov[k].req_s; continue; }   /* this workload's done */
        cmp_row tmp;
        host_ov h = ov[bi];
        h.req_s = 0;
        double think = o->think_s >= 0 ? o->think_s : client_gap(cells, nc, b);
        if (simulate_cell(o, b, think, &h, &tmp, err, errlen)) return -1;
        double x = (b->ttft_mean - tmp.sim[SIM_M_MEAN_TTFT]) / 1e3;
        ov[i].req_s = x > 0 ? x : 0;
    }
    return 0;
}

/* Row i is the first of its workload (for lines printed once per workload). */
static int first_of_workload(const cmp_row *rows, int i) {
    for (int k = 0; k < i; k++)
        if (!strcmp(rows[k].c->workload, rows[i].c->workload)) return 0;
    return 1;
}

static void pct(strbuf *b, double e) {
    if (isnan(e)) strbuf_printf(b, " — |");
    else strbuf_printf(b, " %+.1f%% |", 100 * e);
}

int sim_compare_sweep(const sim_compare_opts *o, char *err, size_t errlen) {
    sim_sweep_cell *cells;
    int nc;
    if (sim_sweep_cells(o->sweep_dir, &cells, &nc, err, errlen)) return -1;
    cmp_row *rows = calloc((size_t)nc, sizeof *rows);
    host_ov *ov = calloc((size_t)nc, sizeof *ov);
    if (!rows || !ov) { free(rows); free(ov); free(cells); return errf(err, errlen, "out of memory"); }
    for (int i = 0; i < nc; i++) ov[i] = (host_ov){o->step_overhead_s, o->token_overhead_s, o->request_overhead_s};
    if ((o->step_overhead_s < 0 && host_overheads(o, cells, nc, ov, err, errlen)) ||
        (o->request_overhead_s < 0 && request_overheads(o, cells, nc, ov, err, errlen))) {
        free(rows); free(ov); free(cells);
        return -1;
    }
    int n = 0;
    strbuf left = {0};   /* cells left out or thinned, each with why */
    for (int i = 0; i < nc; i++) {
        const sim_sweep_cell *c = &cells[i];
        if (o->drafter && strcmp(c->drafter, o->drafter) && strcmp(c->drafter, "none")) continue;
        if (!c->n_rep) {
            strbuf_printf(&left, "- %s depth %d, %s, c=%d: left out, every run failed (%s)\n", c->drafter, c->depth,
                          c->workload, c->conc, c->bad);
            continue;
        }
        if (c->n_bad)
            strbuf_printf(&left, "- %s depth %d, %s, c=%d: %d run(s) with failed requests left out (%s)\n", c->drafter,
                          c->depth, c->workload, c->conc, c->n_bad, c->bad);
        int have_off = 0;   /* the auto calibrations read a measured speculation-off cell */
        for (int k = 0; k < nc; k++)
            have_off |= cells[k].depth == 0 && cells[k].n_rep > 0 && !strcmp(cells[k].workload, c->workload) &&
                        (o->think_s >= 0 || cells[k].conc == c->conc);
        if ((o->think_s < 0 || o->step_overhead_s < 0 || o->request_overhead_s < 0) && !have_off) {
            strbuf_printf(&left, "- %s depth %d, %s, c=%d: left out, no measured speculation-off cell on %s%s for the "
                          "auto calibration\n", c->drafter, c->depth, c->workload, c->conc, c->workload,
                          o->think_s < 0 ? " at this concurrency" : "");
            continue;
        }
        if (c->depth > 0 && c->n_pos < 1) continue;   /* nothing measured to simulate from */
        rows[n].think_s = o->think_s >= 0 ? o->think_s : client_gap(cells, nc, c);
        rows[n].ov = ov[i];
        if (simulate_cell(o, c, rows[n].think_s, &rows[n].ov, &rows[n], err, errlen)) {
            char m[700];
            snprintf(m, sizeof m, "%s", err);
            errf(err, errlen, "cell %s d%d %s c%d: %s", c->drafter, c->depth, c->workload, c->conc, m);
            free(rows);   /* after the message: c points into cells */
            free(left.p);
            free(ov);
            free(cells);
            return -1;
        }
        n++;
    }
    free(ov);
    strbuf b = {0};
    strbuf_printf(&b, "Measured (%s) vs simulated (cost: %s; draft at batch 1 %.3g ms/step + %.3g ms/token",
                  o->sweep_dir, o->cost->source, o->cost->draft_seconds_per_step * 1e3,
                  (o->draft_s_per_token >= 0 ? o->draft_s_per_token : o->cost->draft_seconds_per_token) * 1e3);
    for (int i = 0; i < o->cost->n_draft_by_seqs; i++)
        if (o->cost->draft_by_seqs[i].seqs > 1)
            strbuf_printf(&b, ", at %d: %.3g + %.3g", o->cost->draft_by_seqs[i].seqs,
                          o->cost->draft_by_seqs[i].per_step * 1e3,
                          (o->draft_s_per_token >= 0 ? o->draft_s_per_token : o->cost->draft_by_seqs[i].per_token) * 1e3);
    strbuf_printf(&b, "; %.3g ms per prompt token when a drafter begins; %d seeded repeat(s) per cell)\n\n",
                  o->cost->draft_seconds_per_prompt_token * 1e3, o->repeats);
    if (o->step_overhead_s < 0) {
        strbuf_printf(&b, "host overhead, per workload, fitted to its depth-0 cells (measured mean TPOT - simulated "
                          "with no overhead = per step + per token x concurrency):");
        for (int i = 0; i < n; i++)
            if (first_of_workload(rows, i))
                strbuf_printf(&b, " %s: %.3f ms per step + %.3f ms per token;", rows[i].c->workload,
                              rows[i].ov.step_s * 1e3, rows[i].ov.tok_s * 1e3);
        strbuf_printf(&b, "\n\n");
    } else
        strbuf_printf(&b, "host overhead %.3g ms per step + %.3g ms per token\n\n", o->step_overhead_s * 1e3,
                      o->token_overhead_s * 1e3);
    if (o->request_overhead_s < 0) {
        strbuf_printf(&b, "server time per request before its first step, per workload (its lowest-concurrency "
                          "depth-0 cell's measured mean TTFT - simulated without it):");
        for (int i = 0; i < n; i++)
            if (first_of_workload(rows, i)) strbuf_printf(&b, " %s: %.3f ms;", rows[i].c->workload, rows[i].ov.req_s * 1e3);
        strbuf_printf(&b, "\n\n");
    } else strbuf_printf(&b, "server time per request before its first step %.3g ms\n\n", o->request_overhead_s * 1e3);
    if (o->think_s < 0) {
        strbuf_printf(&b, "client think time per concurrency, from the depth-0 cells ((concurrency / request_throughput "
                          "- mean E2E) x n / (n - 1), n requests per client):");
        int seen[64], ns = 0;
        for (int i = 0; i < n; i++) {
            int dup = 0;
            for (int k = 0; k < ns; k++) dup |= seen[k] == rows[i].c->conc;
            if (dup || ns == 64) continue;
            seen[ns++] = rows[i].c->conc;
            strbuf_printf(&b, " c=%d: %.1f ms;", rows[i].c->conc, rows[i].think_s * 1e3);
        }
        strbuf_printf(&b, "\n\n");
    } else strbuf_printf(&b, "client think time %.3g ms\n\n", o->think_s * 1e3);
    strbuf_printf(&b, "| drafter | depth | workload | conc | out tok/s meas [95%%] | sim | err | mean TPOT ms meas [95%%] | "
                      "sim | err | mean TTFT ms meas | sim | err | accept len meas | sim |\n");
    strbuf_printf(&b, "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int in_tps = 0, in_tpot = 0, n_tps = 0, n_tpot = 0, ok_tps = 0, ok_tpot = 0;
    double sum_tps = 0, sum_tpot = 0;
    for (int i = 0; i < n; i++) {
        const cmp_row *r = &rows[i];
        const sim_sweep_cell *c = r->c;
        strbuf_printf(&b, "| %s | %d | %s | %d | %.1f [%.0f, %.0f] | %.1f |", c->drafter, c->depth, c->workload, c->conc,
                      c->tps, r->m_lo[0], r->m_hi[0], r->sim[SIM_M_OUT_TPUT]);
        pct(&b, r->e_tps);
        strbuf_printf(&b, " %.3f [%.3f, %.3f] | %.3f |", c->tpot_mean, r->m_lo[1], r->m_hi[1], r->sim[SIM_M_MEAN_TPOT]);
        pct(&b, r->e_tpot);
        strbuf_printf(&b, " %.2f | %.2f |", c->ttft_mean, r->sim[SIM_M_MEAN_TTFT]);
        pct(&b, r->e_ttft);
        if (c->depth > 0) strbuf_printf(&b, " %.2f | %.2f |\n", c->al, r->sim[SIM_M_ACCEPT_LEN]);
        else strbuf_printf(&b, " 1 | 1 |\n");
        if (!isnan(r->e_tps)) { n_tps++; in_tps += fabs(r->e_tps) <= 0.10; sum_tps += fabs(r->e_tps); }
        if (!isnan(r->e_tpot)) { n_tpot++; in_tpot += fabs(r->e_tpot) <= 0.10; sum_tpot += fabs(r->e_tpot); }
        ok_tps += r->ok[0];
        ok_tpot += r->ok[1];
    }
    if (left.n) strbuf_printf(&b, "\nLeft out of the comparison (measured cells only, never a failure's numbers):\n%s",
                                left.p);
    free(left.p);
    int nm = 0;
    for (int i = 0; i < n; i++) nm += rows[i].lengths_measured;
    strbuf_printf(&b, "\nrequest lengths: the measured (input, output) tokens of each cell's requests in %d of %d cells, "
                      "else the workload at %.3g characters per token\n", nm, n, o->chars_per_token);
    strbuf_printf(&b, "within 10%%: output throughput %d of %d cells (mean |error| %.1f%%), mean TPOT %d of %d (mean "
                      "|error| %.1f%%)\n", in_tps, n_tps, n_tps ? 100 * sum_tps / n_tps : NAN, in_tpot, n_tpot,
                  n_tpot ? 100 * sum_tpot / n_tpot : NAN);
    strbuf_printf(&b, "within 10%% or inside the measured 95%% interval (over the cell's repeats): output throughput "
                      "%d of %d cells, mean TPOT %d of %d\n", ok_tps, n_tps, ok_tpot, n_tpot);

    char *csv = NULL;
    size_t clen = 0;
    FILE *f = open_memstream(&csv, &clen);
    if (f) {
        csv_row w = {f, 0};
        const char *h[] = {"drafter", "depth", "workload", "concurrency", "measured_output_throughput",
                           "simulated_output_throughput", "output_throughput_error", "measured_mean_tpot_ms",
                           "simulated_mean_tpot_ms", "mean_tpot_error", "measured_mean_ttft_ms", "simulated_mean_ttft_ms",
                           "mean_ttft_error", "measured_acceptance_length", "simulated_acceptance_length",
                           "measured_output_throughput_ci95_lo", "measured_output_throughput_ci95_hi",
                           "measured_mean_tpot_ms_ci95_lo", "measured_mean_tpot_ms_ci95_hi", "output_throughput_agrees",
                           "mean_tpot_agrees"};
        for (size_t i = 0; i < sizeof h / sizeof *h; i++) csv_row_field(&w, h[i]);
        csv_row_end(&w);
        for (int i = 0; i < n; i++) {
            const cmp_row *r = &rows[i];
            const sim_sweep_cell *c = r->c;
            csv_row_field(&w, c->drafter);
            csv_row_fieldf(&w, "%d", c->depth);
            csv_row_field(&w, c->workload);
            csv_row_fieldf(&w, "%d", c->conc);
            double v[] = {c->tps, r->sim[SIM_M_OUT_TPUT], r->e_tps, c->tpot_mean, r->sim[SIM_M_MEAN_TPOT], r->e_tpot,
                          c->ttft_mean, r->sim[SIM_M_MEAN_TTFT], r->e_ttft, c->depth > 0 ? c->al : 1,
                          c->depth > 0 ? r->sim[SIM_M_ACCEPT_LEN] : 1, r->m_lo[0], r->m_hi[0], r->m_lo[1], r->m_hi[1],
                          r->ok[0], r->ok[1]};
            for (size_t k = 0; k < sizeof v / sizeof *v; k++)
                if (isnan(v[k])) csv_row_field(&w, ""); else csv_row_fieldf(&w, "%.6g", v[k]);
            csv_row_end(&w);
        }
        if (fclose(f)) { free(csv); csv = NULL; }
    }
    char *md = strbuf_take(&b, NULL);
    if (!md || !csv) { free(md); free(csv); free(rows); free(cells); return errf(err, errlen, "out of memory"); }
    fputs(md, stdout);
    int rc = 0;
    if (o->out_dir) {
        char p[1200];
        snprintf(p, sizeof p, "%s/compare.csv", o->out_dir);
        rc = write_file_atomic(p, csv, clen, err, errlen);
        snprintf(p, sizeof p, "%s/compare.md", o->out_dir);
        if (!rc) rc = write_file_atomic(p, md, strlen(md), err, errlen);
        if (!rc) fprintf(stderr, "simulate: comparison in %s/compare.md and compare.csv\n", o->out_dir);
    }
    free(md);
    free(csv);
    free(rows);
    free(cells);
    return rc;
}
