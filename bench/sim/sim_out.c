/* sim_out.c — a grid of simulations (sim.h): running every acceptance set ×
 * replicas × load × depth over seeded repeats, the 95% intervals, the depth
 * decision per load, and the outputs: simulate.csv (one row per cell, the
 * sweep's column names plus _ci95_lo / _ci95_hi), simulate.json (cells,
 * decisions, the load where speculation stops paying) and markdown. */
#include "sim.h"
#include "csv_row.h"
#include "errmsg.h"
#include "outfile.h"
#include "recommend.h"
#include "strbuf.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Student t, 0.975 quantile, df = 1..30; beyond, 1.96 + 2.4/df is within 0.002. */
static double t975(int df) {
    static const double t[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1) return NAN;
    return df <= 30 ? t[df - 1] : 1.96 + 2.4 / df;
}

void sim_interval95(const double *v, int n, double *mean, double *lo, double *hi) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++) if (!isnan(v[i])) { s += v[i]; k++; }
    if (!k) { *mean = *lo = *hi = NAN; return; }
    double m = s / k, ss = 0;
    for (int i = 0; i < n; i++) if (!isnan(v[i])) ss += (v[i] - m) * (v[i] - m);
    double h = k > 1 ? t975(k - 1) * sqrt(ss / (k - 1) / k) : 0;
    *mean = m;
    *lo = m - h;
    *hi = m + h;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The traffic of one load on a fleet of R replicas. */
static void load_profile(const sim_grid *g, const sim_load *L, int R, sim_config *c) {
    double scale = g->per_replica ? R : 1;
    if (L->kind == SIM_LOAD_PROFILE) {
        c->profile = L->profile;
        for (int i = 0; i < c->profile.n; i++) {
            c->profile.ph[i].rate *= scale;
            if (c->profile.ph[i].concurrency > 0) c->profile.ph[i].concurrency = (int)lround(c->profile.ph[i].concurrency * scale);
        }
        return;
    }
    c->profile.n = 1;
    c->profile.ph[0].dur_s = g->base->profile.ph[0].dur_s;
    c->profile.ph[0].concurrency = L->kind == SIM_LOAD_CONCURRENCY ? (int)lround(L->value * scale) : 0;
    c->profile.ph[0].rate = L->kind == SIM_LOAD_RATE ? L->value * scale : 0;
}

/* Latencies are better when lower: the decision maximises −latency. */
static int lower_better(int m) { return m >= SIM_M_MEAN_TTFT && m <= SIM_M_P99_E2EL; }

static void decide(sim_grid *g) {
    int o = g->objective;
    double sg = lower_better(o) ? -1 : 1;
    for (int s = 0; s < g->n_sets; s++)
        for (int r = 0; r < g->n_replicas; r++)
            for (int l = 0; l < g->n_loads; l++) {
                sim_decision *D = &g->dec[(s * g->n_replicas + r) * g->n_loads + l];
                double v[SIM_MAX_DEPTH + 1];
                for (int d = 0; d < g->n_depths; d++) v[d] = sg * g->cells[sim_grid_at(g, s, r, l, d)].mean[o];
                D->best = rc_argmax(v, g->n_depths);
                D->recommended = -1;
                D->off_within = 0;
                D->gain = NAN;
                if (D->best < 0) continue;
                const sim_cell *B = &g->cells[sim_grid_at(g, s, r, l, D->best)];
                double bound = sg > 0 ? B->lo[o] : -B->hi[o];   /* the best's interval, on the maximised scale */
                /* the shallowest depth within the best's interval */
                for (int d = 0; d < g->n_depths; d++)
                    if (!isnan(v[d]) && v[d] >= bound && (D->recommended < 0 || g->depths[d] < g->depths[D->recommended]))
                        D->recommended = d;
                for (int d = 0; d < g->n_depths; d++)
                    if (g->depths[d] == 0 && !isnan(v[d])) {
                        D->off_within = d == D->best || v[d] >= bound;
                        double b = B->mean[o], z = g->cells[sim_grid_at(g, s, r, l, d)].mean[o];
                        D->gain = sg > 0 ? (z > 0 ? b / z : NAN) : (b > 0 ? z / b : NAN);   /* latency: off ÷ best */
                    }
            }
}

int sim_grid_run(sim_grid *g, int progress, char *err, size_t errlen) {
    size_t nc = (size_t)g->n_sets * g->n_replicas * g->n_loads * g->n_depths;
    g->cells = calloc(nc ? nc : 1, sizeof *g->cells);
    g->dec = calloc((size_t)g->n_sets * g->n_replicas * g->n_loads + 1, sizeof *g->dec);
    double *vals = malloc((size_t)g->repeats * SIM_N_METRICS * sizeof *vals);
    if (!g->cells || !g->dec || !vals) { free(vals); return errf(err, errlen, "out of memory"); }
    double t0 = now_s();
    g->sim_requests = 0;
    for (int s = 0; s < g->n_sets; s++)
        for (int r = 0; r < g->n_replicas; r++)
            for (int l = 0; l < g->n_loads; l++)
                for (int d = 0; d < g->n_depths; d++) {
                    sim_config c = *g->base;
                    c.acc = &g->sets[s];
                    if (g->set_lengths) c.lengths = &g->set_lengths[s];
                    c.depth = g->depths[d];
                    c.replicas = g->replicas[r];
                    if (g->per_replica && c.n_requests > 0) c.n_requests *= c.replicas;
                    load_profile(g, &g->loads[l], c.replicas, &c);
                    double tc = now_s();
                    for (int k = 0; k < g->repeats; k++) {
                        c.seed = g->base->seed + (uint64_t)k;
                        sim_result res;
                        if (sim_run(&c, &res, err, errlen)) {
                            char m[600];
                            snprintf(m, sizeof m, "%s", err);
                            free(vals);
                            return errf(err, errlen, "%s / %s, %d replica(s), load %s, depth %d, seed %llu: %s",
                                        g->sets[s].drafter, g->sets[s].workload, c.replicas, g->loads[l].label, c.depth,
                                        (unsigned long long)c.seed, m);
                        }
                        memcpy(vals + (size_t)k * SIM_N_METRICS, res.m, sizeof res.m);
                        g->sim_requests += res.arrivals;
                        sim_result_free(&res);
                    }
                    sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, d)];
                    C->n_rep = g->repeats;
                    double col[4096];
                    for (int m = 0; m < SIM_N_METRICS; m++) {
                        int n = g->repeats < 4096 ? g->repeats : 4096;
                        for (int k = 0; k < n; k++) col[k] = vals[(size_t)k * SIM_N_METRICS + m];
                        sim_interval95(col, n, &C->mean[m], &C->lo[m], &C->hi[m]);
                    }
                    if (progress)
                        fprintf(stderr, "simulate: %s/%s replicas %d load %s depth %d: %.1f tok/s, %.0f requests, %.2f s\n",
                                g->sets[s].drafter, g->sets[s].workload, c.replicas, g->loads[l].label, c.depth,
                                C->mean[SIM_M_OUT_TPUT], C->mean[SIM_M_COMPLETED], now_s() - tc);
                }
    g->wall_s = now_s() - t0;
    free(vals);
    decide(g);
    return 0;
}

void sim_grid_free(sim_grid *g) {
    free(g->cells);
    free(g->dec);
    g->cells = NULL;
    g->dec = NULL;
}

static const sim_decision *dec_at(const sim_grid *g, int s, int r, int l) {
    return &g->dec[(s * g->n_replicas + r) * g->n_loads + l];
}

/* The lowest load where depth 0 is the best or within its interval; -1 none. */
static int stops_paying(const sim_grid *g, int s, int r) {
    int best = -1;
    for (int l = 0; l < g->n_loads; l++)
        if (dec_at(g, s, r, l)->off_within && (best < 0 || g->loads[l].value < g->loads[best].value)) best = l;
    return best;
}

/* Speculation pays at a load when a best depth exists and depth 0 is outside its interval. */
static int pays(const sim_grid *g, int s, int r, int l) {
    const sim_decision *D = dec_at(g, s, r, l);
    return D->best >= 0 && !D->off_within;
}

/* The lowest load above every load where speculation pays (depth 0 outside
 * the best's interval); -1 when it pays at the highest load, -2 when it pays nowhere. */
static int stops_after(const sim_grid *g, int s, int r) {
    int last = -1;   /* loads are ascending by value */
    for (int l = 0; l < g->n_loads; l++)
        if (pays(g, s, r, l) && (last < 0 || g->loads[l].value > g->loads[last].value)) last = l;
    if (last < 0) return -2;
    int next = -1;
    for (int l = 0; l < g->n_loads; l++)
        if (g->loads[l].value > g->loads[last].value && (next < 0 || g->loads[l].value < g->loads[next].value)) next = l;
    return next;
}

/* "r=1, r=2, r=3": the loads where speculation pays, into b. */
static void paying_loads(strbuf *b, const sim_grid *g, int s, int r) {
    int k = 0;
    for (int l = 0; l < g->n_loads; l++)
        if (pays(g, s, r, l)) strbuf_printf(b, "%s%s", k++ ? ", " : "", g->loads[l].label);
    if (!k) strbuf_printf(b, "none");
}

static int has_depth0(const sim_grid *g) {
    for (int d = 0; d < g->n_depths; d++) if (!g->depths[d]) return 1;
    return 0;
}

int sim_default_objective(const sim_load *loads, int n_loads, int any_slo, double slo_ttft_ms, double slo_tpot_ms,
                          char *why, size_t whylen) {
    if (any_slo) {
        char t[64] = "", p[64] = "";
        if (slo_ttft_ms > 0) snprintf(t, sizeof t, "TTFT <= %g ms", slo_ttft_ms);
        if (slo_tpot_ms > 0) snprintf(p, sizeof p, "TPOT <= %g ms", slo_tpot_ms);
        snprintf(why, whylen, "the default with an SLO: requests per second meeting %s%s%s", t, t[0] && p[0] ? " and " : "", p);
        return SIM_M_GOODPUT;
    }
    int open = 0;
    for (int l = 0; l < n_loads; l++) {
        if (loads[l].kind == SIM_LOAD_RATE) open = 1;
        if (loads[l].kind == SIM_LOAD_PROFILE)
            for (int k = 0; k < loads[l].profile.n; k++) open |= loads[l].profile.ph[k].rate > 0;
    }
    if (open) {
        snprintf(why, whylen, "the default under an open-loop rate without an SLO: a server that keeps up serves the "
                 "offered load at every depth, so throughput cannot rank depths and latency does");
        return SIM_M_MEAN_TPOT;
    }
    snprintf(why, whylen, "the default in a closed loop: the clients send as fast as the server answers, so throughput "
             "is what a depth changes");
    return SIM_M_OUT_TPUT;
}

/* ---- markdown ---- */

/* Decimals for a table value: 3 significant digits, at least, and never an
 * exponent (16560 is "16560", not "1.656e+04"). */
static int decimals(double v) {
    double a = fabs(v);
    return a >= 100 || a == 0 ? 0 : a >= 10 ? 1 : a >= 1 ? 2 : a >= 0.1 ? 3 : 4;
}

static void md_val(strbuf *b, double v) {
    if (isnan(v)) strbuf_printf(b, "—");
    else strbuf_printf(b, "%.*f", decimals(v), v);
}

/* " v |", or " v ± h |" (h at v's decimals) when with_half */
static void md_cell(strbuf *b, const sim_cell *C, int m, int with_half) {
    strbuf_printf(b, " ");
    md_val(b, C->mean[m]);
    if (with_half && !isnan(C->mean[m]) && !isnan(C->hi[m]))
        strbuf_printf(b, " ± %.*f", decimals(C->mean[m]), (C->hi[m] - C->lo[m]) / 2);
    strbuf_printf(b, " |");
}

static void md_num(strbuf *b, double v, const char *fmt) {
    if (isnan(v)) strbuf_printf(b, " — |");
    else { strbuf_printf(b, " "); strbuf_printf(b, fmt, v); strbuf_printf(b, " |"); }
}

char *sim_grid_markdown(const sim_grid *g) {
    strbuf b = {0};
    const char *obj = SIM_METRIC_NAMES[g->objective];
    for (int s = 0; s < g->n_sets; s++) {
        const sim_accept *A = &g->sets[s];
        strbuf_printf(&b, "### %s on %s\n\nacceptance: %s; E(k) =", A->drafter, A->workload, A->source);
        for (int d = 0; d < g->n_depths; d++) {
            double e = rc_expected(A->p, A->n_pos, g->depths[d]);
            strbuf_printf(&b, "%s%d: %.2f", d ? ", " : " ", g->depths[d], 1 + (e - 1) * A->proposal_rate);
        }
        strbuf_printf(&b, " (proposal rate %.2f, draft fill %.2f)\n\n", A->proposal_rate, A->draft_fill);
        strbuf_printf(&b, "| replicas | load | depth | req/s | out tok/s | mean / p99 TTFT ms | mean / p99 TPOT ms | "
                          "mean ITL ms | p99 E2EL ms | goodput req/s | accept len |\n");
        strbuf_printf(&b, "|---:|---|---:|---:|---:|---|---|---:|---:|---:|---:|\n");
        for (int r = 0; r < g->n_replicas; r++)
            for (int l = 0; l < g->n_loads; l++) {
                const sim_decision *D = dec_at(g, s, r, l);
                for (int d = 0; d < g->n_depths; d++) {
                    const sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, d)];
                    const char *mark = d == D->best ? "**" : "";
                    strbuf_printf(&b, "| %d | %s | %s%d%s |", g->replicas[r], g->loads[l].label, mark, g->depths[d], mark);
                    /* the objective's column carries its interval half-width */
                    md_cell(&b, C, SIM_M_REQ_TPUT, g->objective == SIM_M_REQ_TPUT);
                    md_cell(&b, C, SIM_M_OUT_TPUT, g->objective == SIM_M_OUT_TPUT);
                    const int pairs[2][2] = {{SIM_M_MEAN_TTFT, SIM_M_P99_TTFT}, {SIM_M_MEAN_TPOT, SIM_M_P99_TPOT}};
                    for (int k = 0; k < 2; k++) {
                        strbuf_printf(&b, " ");
                        md_val(&b, C->mean[pairs[k][0]]);
                        if (g->objective == pairs[k][0] && !isnan(C->hi[pairs[k][0]]))
                            strbuf_printf(&b, " ± %.*f", decimals(C->mean[pairs[k][0]]),
                                          (C->hi[pairs[k][0]] - C->lo[pairs[k][0]]) / 2);
                        strbuf_printf(&b, " / ");
                        md_val(&b, C->mean[pairs[k][1]]);
                        strbuf_printf(&b, " |");
                    }
                    md_cell(&b, C, SIM_M_MEAN_ITL, g->objective == SIM_M_MEAN_ITL);
                    md_cell(&b, C, SIM_M_P99_E2EL, g->objective == SIM_M_P99_E2EL);
                    md_cell(&b, C, SIM_M_GOODPUT, g->objective == SIM_M_GOODPUT);
                    md_num(&b, C->mean[SIM_M_ACCEPT_LEN], "%.3f");
                    strbuf_printf(&b, "\n");
                }
            }
        strbuf_printf(&b, "\n");
    }
    strbuf_printf(&b, "### Decision per load (objective: %s, %s; bold above = best mean; recommended = the shallowest "
                      "depth within the best's 95%% interval over %d seeded repeat(s))\n\nObjective %s: %s.\n\n", obj,
                  lower_better(g->objective) ? "minimised" : "maximised", g->repeats, obj,
                  g->objective_why ? g->objective_why : "given");
    strbuf_printf(&b, "| drafter | workload | replicas | load | best depth | %s | recommended | depth 0 within best | gain vs off |\n", obj);
    strbuf_printf(&b, "|---|---|---:|---|---:|---|---:|---|---:|\n");
    for (int s = 0; s < g->n_sets; s++)
        for (int r = 0; r < g->n_replicas; r++)
            for (int l = 0; l < g->n_loads; l++) {
                const sim_decision *D = dec_at(g, s, r, l);
                if (D->best < 0) continue;
                const sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, D->best)];
                int dd = decimals(C->mean[g->objective]);
                strbuf_printf(&b, "| %s | %s | %d | %s | %d | %.*f [%.*f, %.*f] | **%d** | %s |", g->sets[s].drafter,
                              g->sets[s].workload, g->replicas[r], g->loads[l].label, g->depths[D->best], dd,
                              C->mean[g->objective], dd, C->lo[g->objective], dd, C->hi[g->objective],
                              g->depths[D->recommended], has_depth0(g) ? (D->off_within ? "yes" : "no") : "not simulated");
                md_num(&b, D->gain, "%.3fx");
                strbuf_printf(&b, "\n");
            }
    strbuf_printf(&b, "\n");
    if (has_depth0(g))
        for (int s = 0; s < g->n_sets; s++)
            for (int r = 0; r < g->n_replicas; r++) {
                int l = stops_paying(g, s, r), a = stops_after(g, s, r);
                strbuf_printf(&b, "- %s on %s, %d replica(s): ", g->sets[s].drafter, g->sets[s].workload, g->replicas[r]);
                int any = 0;
                for (int k = 0; k < g->n_loads; k++) any |= dec_at(g, s, r, k)->best >= 0;
                if (!any) { strbuf_printf(&b, "no load gave results (no request arrived)\n"); continue; }
                if (l < 0) strbuf_printf(&b, "speculation pays at every load simulated");
                else strbuf_printf(&b, "speculation stops paying at %s (the lowest load where depth 0 is the best or "
                                       "within its interval)", g->loads[l].label);
                strbuf_printf(&b, "; it pays at: ");
                paying_loads(&b, g, s, r);
                strbuf_printf(&b, "; it never pays again from %s\n",
                              a == -2 ? "the lowest load" : a == -1 ? "— (it pays at the highest load)" : g->loads[a].label);
            }
    strbuf_printf(&b, "\n%ld requests simulated in %.2f s (%.0f requests/s of wall time)\n", g->sim_requests, g->wall_s,
                  g->wall_s > 0 ? g->sim_requests / g->wall_s : NAN);
    return strbuf_take(&b, NULL);
}

/* ---- CSV and JSON ---- */

static const char *kind_name(sim_load_kind k) {
    return k == SIM_LOAD_CONCURRENCY ? "concurrency" : k == SIM_LOAD_RATE ? "rate" : "profile";
}

static char *grid_csv(const sim_grid *g, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) return NULL;
    csv_row w = {f, 0};
    const char *head[] = {"drafter", "workload", "replicas", "balance", "load", "load_kind", "concurrency",
                          "request_rate", "burstiness", "depth", "repeats"};
    for (size_t i = 0; i < sizeof head / sizeof *head; i++) csv_row_field(&w, head[i]);
    for (int m = 0; m < SIM_N_METRICS; m++) {
        char lo[96], hi[96];   /* quoted like the other names (csv_row_fieldf leaves numbers bare) */
        snprintf(lo, sizeof lo, "%s_ci95_lo", SIM_METRIC_NAMES[m]);
        snprintf(hi, sizeof hi, "%s_ci95_hi", SIM_METRIC_NAMES[m]);
        csv_row_field(&w, SIM_METRIC_NAMES[m]);
        csv_row_field(&w, lo);
        csv_row_field(&w, hi);
    }
    csv_row_end(&w);
    for (int s = 0; s < g->n_sets; s++)
        for (int r = 0; r < g->n_replicas; r++)
            for (int l = 0; l < g->n_loads; l++)
                for (int d = 0; d < g->n_depths; d++) {
                    const sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, d)];
                    const sim_load *L = &g->loads[l];
                    double sc = g->per_replica ? g->replicas[r] : 1;
                    csv_row_field(&w, g->sets[s].drafter);
                    csv_row_field(&w, g->sets[s].workload);
                    csv_row_fieldf(&w, "%d", g->replicas[r]);
                    csv_row_field(&w, g->base->balance == SIM_BAL_LEAST_LOADED ? "least-loaded" : "round-robin");
                    csv_row_field(&w, L->label);
                    csv_row_field(&w, kind_name(L->kind));
                    if (L->kind == SIM_LOAD_CONCURRENCY) csv_row_fieldf(&w, "%.0f", L->value * sc); else csv_row_field(&w, "");
                    if (L->kind == SIM_LOAD_RATE) csv_row_fieldf(&w, "%.6g", L->value * sc); else csv_row_field(&w, "");
                    csv_row_fieldf(&w, "%.6g", g->base->burstiness);
                    csv_row_fieldf(&w, "%d", g->depths[d]);
                    csv_row_fieldf(&w, "%d", C->n_rep);
                    for (int m = 0; m < SIM_N_METRICS; m++) {
                        const double v[3] = {C->mean[m], C->lo[m], C->hi[m]};
                        for (int k = 0; k < 3; k++)
                            if (isnan(v[k])) csv_row_field(&w, ""); else csv_row_fieldf(&w, "%.6g", v[k]);
                    }
                    csv_row_end(&w);
                }
    if (fclose(f)) { free(buf); return NULL; }
    return buf;
}

static void add_num(cJSON *o, const char *k, double v) {
    if (isnan(v) || isinf(v)) cJSON_AddNullToObject(o, k);
    else cJSON_AddNumberToObject(o, k, v);
}

static cJSON *grid_json(const sim_grid *g) {
    const sim_config *b = g->base;
    cJSON *j = cJSON_CreateObject(), *cfg = cJSON_AddObjectToObject(j, "config");
    cJSON_AddStringToObject(cfg, "cost_source", b->cost->source);
    add_num(cfg, "draft_seconds_per_token", b->draft_s_per_token >= 0 ? b->draft_s_per_token : b->cost->draft_seconds_per_token);
    add_num(cfg, "step_overhead_ms", b->step_overhead_s * 1e3);
    add_num(cfg, "token_overhead_ms", b->token_overhead_s * 1e3);
    add_num(cfg, "request_overhead_ms", b->request_overhead_s * 1e3);
    cJSON_AddNumberToObject(cfg, "max_running", b->max_running);
    cJSON_AddNumberToObject(cfg, "row_budget", b->row_budget);
    cJSON_AddNumberToObject(cfg, "prefill_chunk", b->prefill_chunk);
    cJSON_AddStringToObject(cfg, "balance", b->balance == SIM_BAL_LEAST_LOADED ? "least-loaded" : "round-robin");
    cJSON_AddBoolToObject(cfg, "per_replica", g->per_replica);
    add_num(cfg, "burstiness", b->burstiness);
    add_num(cfg, "duration", b->profile.ph[0].dur_s);
    cJSON_AddNumberToObject(cfg, "requests", b->n_requests);
    if (g->lengths_source) cJSON_AddStringToObject(cfg, "lengths", g->lengths_source);
    else { cJSON_AddNumberToObject(cfg, "prompt_len", b->prompt_len); cJSON_AddNumberToObject(cfg, "output_len", b->output_len); }
    if (g->lengths_source) cJSON_AddNumberToObject(cfg, "output_len_default", b->output_len);
    add_num(cfg, "slo_ttft_ms", b->slo_ttft_s > 0 ? b->slo_ttft_s * 1e3 : NAN);
    add_num(cfg, "slo_tpot_ms", b->slo_tpot_s > 0 ? b->slo_tpot_s * 1e3 : NAN);
    cJSON_AddNumberToObject(cfg, "seed", (double)b->seed);
    cJSON_AddNumberToObject(cfg, "repeats", g->repeats);
    cJSON_AddStringToObject(cfg, "objective", SIM_METRIC_NAMES[g->objective]);
    if (g->objective_why) cJSON_AddStringToObject(cfg, "objective_why", g->objective_why);
    cJSON_AddNumberToObject(cfg, "wall_seconds", g->wall_s);
    cJSON_AddNumberToObject(cfg, "simulated_requests", (double)g->sim_requests);

    cJSON *acc = cJSON_AddArrayToObject(j, "acceptance");
    for (int s = 0; s < g->n_sets; s++) {
        const sim_accept *A = &g->sets[s];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "drafter", A->drafter);
        cJSON_AddStringToObject(o, "workload", A->workload);
        cJSON_AddItemToObject(o, "per_position_acceptance_rates", cJSON_CreateDoubleArray(A->p, A->n_pos));
        cJSON_AddNumberToObject(o, "proposal_rate", A->proposal_rate);
        cJSON_AddNumberToObject(o, "draft_fill", A->draft_fill);
        cJSON_AddStringToObject(o, "source", A->source);
        cJSON_AddItemToArray(acc, o);
    }
    cJSON *res = cJSON_AddArrayToObject(j, "results");
    cJSON *dec = cJSON_AddArrayToObject(j, "decisions");
    cJSON *stop = cJSON_AddArrayToObject(j, "speculation_stops_paying");
    for (int s = 0; s < g->n_sets; s++)
        for (int r = 0; r < g->n_replicas; r++) {
            for (int l = 0; l < g->n_loads; l++) {
                const sim_load *L = &g->loads[l];
                for (int d = 0; d < g->n_depths; d++) {
                    const sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, d)];
                    cJSON *o = cJSON_CreateObject();
                    cJSON_AddStringToObject(o, "drafter", g->sets[s].drafter);
                    cJSON_AddStringToObject(o, "workload", g->sets[s].workload);
                    cJSON_AddNumberToObject(o, "replicas", g->replicas[r]);
                    cJSON_AddStringToObject(o, "load", L->label);
                    cJSON_AddNumberToObject(o, "depth", g->depths[d]);
                    cJSON_AddNumberToObject(o, "repeats", C->n_rep);
                    for (int m = 0; m < SIM_N_METRICS; m++) {
                        add_num(o, SIM_METRIC_NAMES[m], C->mean[m]);
                        char k[96];
                        snprintf(k, sizeof k, "%s_ci95", SIM_METRIC_NAMES[m]);
                        if (isnan(C->mean[m])) cJSON_AddNullToObject(o, k);
                        else {
                            double iv[2] = {C->lo[m], C->hi[m]};
                            cJSON_AddItemToObject(o, k, cJSON_CreateDoubleArray(iv, 2));
                        }
                    }
                    cJSON_AddItemToArray(res, o);
                }
                const sim_decision *D = dec_at(g, s, r, l);
                cJSON *o = cJSON_CreateObject();
                cJSON_AddStringToObject(o, "drafter", g->sets[s].drafter);
                cJSON_AddStringToObject(o, "workload", g->sets[s].workload);
                cJSON_AddNumberToObject(o, "replicas", g->replicas[r]);
                cJSON_AddStringToObject(o, "load", L->label);
                cJSON_AddStringToObject(o, "objective", SIM_METRIC_NAMES[g->objective]);
                if (D->best >= 0) {
                    const sim_cell *C = &g->cells[sim_grid_at(g, s, r, l, D->best)];
                    cJSON_AddNumberToObject(o, "best_depth", g->depths[D->best]);
                    add_num(o, "best_value", C->mean[g->objective]);
                    double iv[2] = {C->lo[g->objective], C->hi[g->objective]};
                    cJSON_AddItemToObject(o, "best_ci95", cJSON_CreateDoubleArray(iv, 2));
                    cJSON_AddNumberToObject(o, "recommended_depth", g->depths[D->recommended]);
                } else cJSON_AddNullToObject(o, "best_depth");
                if (has_depth0(g)) cJSON_AddBoolToObject(o, "depth0_within_best", D->off_within);
                add_num(o, "gain_vs_off", D->gain);
                cJSON_AddItemToArray(dec, o);
            }
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "drafter", g->sets[s].drafter);
            cJSON_AddStringToObject(o, "workload", g->sets[s].workload);
            cJSON_AddNumberToObject(o, "replicas", g->replicas[r]);
            int l = has_depth0(g) ? stops_paying(g, s, r) : -1, a = has_depth0(g) ? stops_after(g, s, r) : -1;
            if (l >= 0) cJSON_AddStringToObject(o, "load", g->loads[l].label);
            else cJSON_AddNullToObject(o, "load");
            /* the more robust reading when ties at light load (every depth meets the SLOs) come first */
            if (a >= 0) cJSON_AddStringToObject(o, "load_above_last_gain", g->loads[a].label);
            else if (a == -2 && g->n_loads) cJSON_AddStringToObject(o, "load_above_last_gain", g->loads[0].label);
            else cJSON_AddNullToObject(o, "load_above_last_gain");
            cJSON *pl = cJSON_AddArrayToObject(o, "pays_at");
            for (int k = 0; k < g->n_loads && has_depth0(g); k++)
                if (pays(g, s, r, k)) cJSON_AddItemToArray(pl, cJSON_CreateString(g->loads[k].label));
            cJSON_AddStringToObject(o, "note", !has_depth0(g) ? "depth 0 was not simulated"
                                               : l < 0 ? "speculation pays at every load simulated"
                                                       : "the lowest load where depth 0 is the best or within its 95% interval");
            cJSON_AddItemToArray(stop, o);
        }
    return j;
}

int sim_grid_write(const sim_grid *g, const char *dir, char *err, size_t errlen) {
    char p[1200];
    size_t len;
    char *csv = grid_csv(g, &len);
    if (!csv) return errf(err, errlen, "out of memory");
    snprintf(p, sizeof p, "%s/simulate.csv", dir);
    int rc = write_file_atomic(p, csv, len, err, errlen);
    free(csv);
    if (rc) return -1;
    cJSON *j = grid_json(g);
    char *s = j ? cJSON_Print(j) : NULL;
    cJSON_Delete(j);
    if (!s) return errf(err, errlen, "out of memory");
    snprintf(p, sizeof p, "%s/simulate.json", dir);
    rc = write_file_atomic(p, s, strlen(s), err, errlen);
    free(s);
    if (rc) return -1;
    char *md = sim_grid_markdown(g);
    if (!md) return errf(err, errlen, "out of memory");
    snprintf(p, sizeof p, "%s/simulate.md", dir);
    rc = write_file_atomic(p, md, strlen(md), err, errlen);
    free(md);
    return rc;
}
