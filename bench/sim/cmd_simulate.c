/* cmd_simulate.c — `specbed simulate`: options into a sim_grid (sim.h),
 * then the grid (sim_out.c) or, with --compare, the check against a
 * sweep's measured cells (sim_compare.c). */
#include "args.h"
#include "load_out.h"
#include "sim.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CMD "simulate"
#define MAX_LOADS 64

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed simulate (--accept FILE | --sweep DIR) --cost-table FILE\n"
        "                        (--concurrency LIST | --rate LIST | --profile SPEC...) [options]\n"
        "       specbed simulate --sweep DIR --cost-table FILE --compare [options]\n"
        "\n"
        "Discrete-event simulation of continuous batching with speculative decoding, for\n"
        "fleets and hardware this machine cannot hold: per depth x load x replicas, the\n"
        "throughput, TTFT/TPOT/ITL/E2E (vLLM's names), goodput and accept length, with 95%%\n"
        "intervals over seeded repeats; per load, the depth that maximises the objective\n"
        "and the lowest load at which speculation stops paying. Writes simulate.csv,\n"
        "simulate.json and simulate.md under --out and prints the tables. The model and\n"
        "its validation against measured sweeps: bench/SIMULATE.md.\n"
        "\n"
        "Acceptance (one of):\n"
        "  --accept FILE          JSON {\"WORKLOAD\": [p_0, p_1, ...], ...}: per-position\n"
        "                         UNCONDITIONAL rates (vLLM's accepted_at[i] / drafts,\n"
        "                         non-increasing); or per workload {\"rates\": [...],\n"
        "                         \"proposal_rate\": Q, \"draft_fill\": F}\n"
        "  --sweep DIR            a `specbed sweep --out` directory: the rates measured at\n"
        "                         the deepest depth per drafter x workload\n"
        "  --drafter NAME         --sweep: only this drafter; --accept: its label (default user)\n"
        "  --workloads LIST       only these workloads of the acceptance input\n"
        "Cost:\n"
        "  --cost-table FILE      seconds per step vs rows: `specbed profile` JSON,\n"
        "                         bench_engine CSV, or a JSON in that shape for other\n"
        "                         hardware (required)\n"
        "  --experts-on-host GBPS a mixture-of-experts table (profile --text): the experts\n"
        "                         read across a bus of GBPS GB/s each step (offloaded to\n"
        "                         host memory), every step priced by the distinct experts\n"
        "                         its rows route to (the table's routing curve)\n"
        "  --draft-seconds S      seconds per drafted token (default: the table's, per\n"
        "                         drafting batch when it has draft_by_sequences)\n"
        "  --step-overhead-ms MS  fixed host time per step (default 0); with --compare,\n"
        "                         auto: per workload, fitted with the per-token time to\n"
        "                         its depth-0 cells' mean TPOT (see --token-overhead-ms)\n"
        "  --token-overhead-ms MS host time per token a step commits (default 0; the\n"
        "                         value --compare's auto fit prints, for what-if runs)\n"
        "  --request-overhead-ms MS  server time from a request's arrival to its place\n"
        "                         in the queue (HTTP, tokenising; default 0); with\n"
        "                         --compare, auto: per workload, the lowest-concurrency\n"
        "                         depth-0 cell's mean TTFT less the simulated one\n"
        "Server (per replica; defaults are specbed serve's):\n"
        "  --max-running N        requests batched together (default 16)\n"
        "  --row-budget N         rows per step, verify rows + prompt chunks (default\n"
        "                         max(256, 17 x max-running + 64))\n"
        "  --prefill-chunk N      most prompt rows per request per step (default 0 = no cap)\n"
        "Speculation and fleet:\n"
        "  --depths LIST          drafts per verify step, e.g. 0-7 (default; 0 = off)\n"
        "  --replicas LIST        fleet sizes, e.g. 1,4,16,64 (default 1)\n"
        "  --balance B            round-robin (default) or least-loaded\n"
        "Traffic (the loads; one kind):\n"
        "  --concurrency LIST     closed loop: requests in flight across the fleet\n"
        "  --rate LIST            open loop: requests/s across the fleet\n"
        "  --burstiness B         gamma shape of open-loop gaps (1 = Poisson, default; < 1\n"
        "                         burstier), as vLLM's --burstiness\n"
        "  --profile SPEC         phases, e.g. 60s@r2,60s@r10 or 60:rate=2,60:rate=10 (@N /\n"
        "                         concurrency=N closed loop); repeatable, one load each\n"
        "  --phases SPEC          the same as --profile\n"
        "  --per-replica          loads (and --requests) are per replica: x replicas\n"
        "  --think-ms MS          closed loop: a client's pause between a reply and its\n"
        "                         next request (default 0; --compare: auto = measured from\n"
        "                         the sweep's depth-0 cells)\n"
        "  --duration S           simulated seconds of arrivals (default 600); the fleet\n"
        "                         then drains, so every request finishes\n"
        "  --requests N           stop after N arrivals instead\n"
        "Request lengths:\n"
        "  --prompt-len N         prompt tokens (default 256)\n"
        "  --output-len N         output tokens (default 128; with --lengths-from, for rows\n"
        "                         without max_tokens)\n"
        "  --lengths-from W       draw lengths from a workload: auto (each acceptance set's\n"
        "                         workload) or a NAME / FILE (workload.h); tokens ~\n"
        "                         characters / --chars-per-token\n"
        "  --chars-per-token X    default 4\n"
        "Goodput and the decision:\n"
        "  --slo-ttft-ms MS       a good request's TTFT limit\n"
        "  --slo-tpot-ms MS       a good request's TPOT limit\n"
        "  --objective O          maximise goodput, output_throughput or\n"
        "                         request_throughput; or minimise a latency: mean_tpot_ms,\n"
        "                         p99_ttft_ms, median_e2el_ms, ... ({mean,median,p99}_\n"
        "                         {ttft,tpot,itl,e2el}_ms). Default: goodput when an SLO is\n"
        "                         given; else mean_tpot_ms under an open-loop rate (there\n"
        "                         every depth that keeps up serves the offered load, so\n"
        "                         throughput cannot rank depths); else output_throughput\n"
        "                         (closed loop). The decisions say which was used and why\n"
        "Runs and output:\n"
        "  --seed S               first seed (default 0); repeat r uses S + r\n"
        "  --repeats N            seeded runs per cell (default 5)\n"
        "  --out DIR              default results/simulate-DATE\n"
        "  --quiet                print only the decisions, no progress\n"
        "  --compare              with --sweep: simulate every measured cell with its own\n"
        "                         settings and acceptance; measured vs simulated throughput,\n"
        "                         TPOT, TTFT and accept length per cell (compare.md/.csv)\n"
        "\n"
        "Exit status: 0 ok, 1 outputs not written, 2 bad usage or input.\n");
}

typedef struct {
    const char *accept, *sweep, *drafter, *workloads, *cost_path, *out, *lengths_from, *objective;
    double experts_gbs;   /* --experts-on-host: bus GB/s, 0 = experts where the table was measured */
    double draft_s, overhead_ms, tok_overhead_ms, req_overhead_ms, think_ms, burstiness, duration, cpt, slo_ttft_ms, slo_tpot_ms;
    int max_running, row_budget, prefill_chunk, requests, repeats, per_replica, quiet, compare, balance;
    int prompt_len, output_len;
    int depths[SIM_MAX_DEPTH + 1], n_depths, replicas[64], n_replicas;
    sim_load loads[MAX_LOADS];
    int n_loads, load_kind;   /* -1 none yet */
    unsigned long long seed;
} opts;

static int add_loads(opts *o, const char *opt, const char *v, sim_load_kind kind) {
    if (o->load_kind >= 0 && o->load_kind != (int)kind) {
        fprintf(stderr, "%s: %s: give one kind of load (--concurrency, --rate or --profile)\n", CMD, opt);
        return -1;
    }
    o->load_kind = kind;
    if (kind == SIM_LOAD_PROFILE) {
        if (o->n_loads == MAX_LOADS) { fprintf(stderr, "%s: more than %d loads\n", CMD, MAX_LOADS); return -1; }
        sim_load *L = &o->loads[o->n_loads];
        char err[256];
        if (sim_phases_parse(v, &L->profile, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); return -1; }
        L->kind = kind;
        L->value = o->n_loads;
        ld_profile_format(&L->profile, L->label, sizeof L->label);
        o->n_loads++;
        return 0;
    }
    char buf[1024], *items[MAX_LOADS];
    int n;
    if (opt_str_list(CMD, opt, v, buf, sizeof buf, items, MAX_LOADS - o->n_loads, &n)) return -1;
    for (int i = 0; i < n; i++) {
        sim_load *L = &o->loads[o->n_loads];
        memset(L, 0, sizeof *L);
        L->kind = kind;
        if (kind == SIM_LOAD_CONCURRENCY) {
            int c;
            if (opt_int(CMD, opt, items[i], 1, 1000000, &c)) return -1;
            L->value = c;
            snprintf(L->label, sizeof L->label, "c=%d", c);
        } else {
            if (opt_double(CMD, opt, items[i], 1e-6, 1e7, &L->value)) return -1;
            snprintf(L->label, sizeof L->label, "r=%g", L->value);
        }
        o->n_loads++;
    }
    /* ascending, so "the lowest load" reads down the table */
    for (int i = 1; i < o->n_loads; i++)
        for (int j = i; j > 0 && o->loads[j].value < o->loads[j - 1].value; j--) {
            sim_load t = o->loads[j]; o->loads[j] = o->loads[j - 1]; o->loads[j - 1] = t;
        }
    return 0;
}

/* 1 consumed, 0 not an option of ours, -1 bad value */
static int parse_opt(opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
#define VAL() do { if (!(v = opt_value(CMD, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "--accept")) { VAL(); o->accept = v; }
    else if (!strcmp(a, "--sweep")) { VAL(); o->sweep = v; }
    else if (!strcmp(a, "--drafter")) { VAL(); o->drafter = v; }
    else if (!strcmp(a, "--workloads")) { VAL(); o->workloads = v; }
    else if (!strcmp(a, "--cost-table")) { VAL(); o->cost_path = v; }
    else if (!strcmp(a, "--experts-on-host")) { VAL(); if (opt_double(CMD, a, v, 1e-3, 1e6, &o->experts_gbs)) return -1; }
    else if (!strcmp(a, "--draft-seconds")) { VAL(); if (opt_double(CMD, a, v, 0, 10, &o->draft_s)) return -1; }
    else if (!strcmp(a, "--step-overhead-ms")) {
        VAL();
        if (!strcmp(v, "auto")) o->overhead_ms = -1;
        else if (opt_double(CMD, a, v, 0, 1e5, &o->overhead_ms)) return -1;
    }
    else if (!strcmp(a, "--token-overhead-ms")) { VAL(); if (opt_double(CMD, a, v, 0, 1e5, &o->tok_overhead_ms)) return -1; }
    else if (!strcmp(a, "--request-overhead-ms")) {
        VAL();
        if (!strcmp(v, "auto")) o->req_overhead_ms = -1;
        else if (opt_double(CMD, a, v, 0, 1e5, &o->req_overhead_ms)) return -1;
    }
    else if (!strcmp(a, "--think-ms")) {
        VAL();
        if (!strcmp(v, "auto")) o->think_ms = -1;
        else if (opt_double(CMD, a, v, 0, 1e7, &o->think_ms)) return -1;
    }
    else if (!strcmp(a, "--max-running")) { VAL(); if (opt_int(CMD, a, v, 1, 65536, &o->max_running)) return -1; }
    else if (!strcmp(a, "--row-budget")) { VAL(); if (opt_int(CMD, a, v, 1, 1 << 24, &o->row_budget)) return -1; }
    else if (!strcmp(a, "--prefill-chunk")) { VAL(); if (opt_int(CMD, a, v, 0, 1 << 24, &o->prefill_chunk)) return -1; }
    else if (!strcmp(a, "--depths")) { VAL(); if (opt_int_list(CMD, a, v, 0, SIM_MAX_DEPTH, o->depths, SIM_MAX_DEPTH + 1, &o->n_depths)) return -1; }
    else if (!strcmp(a, "--replicas")) { VAL(); if (opt_int_list(CMD, a, v, 1, SIM_MAX_REPLICAS, o->replicas, 64, &o->n_replicas)) return -1; }
    else if (!strcmp(a, "--balance")) {
        VAL();
        if (!strcmp(v, "round-robin")) o->balance = SIM_BAL_ROUND_ROBIN;
        else if (!strcmp(v, "least-loaded")) o->balance = SIM_BAL_LEAST_LOADED;
        else { fprintf(stderr, "%s: --balance '%s' must be round-robin or least-loaded\n", CMD, v); return -1; }
    }
    else if (!strcmp(a, "--concurrency")) { VAL(); if (add_loads(o, a, v, SIM_LOAD_CONCURRENCY)) return -1; }
    else if (!strcmp(a, "--rate")) { VAL(); if (add_loads(o, a, v, SIM_LOAD_RATE)) return -1; }
    else if (!strcmp(a, "--profile") || !strcmp(a, "--phases")) { VAL(); if (add_loads(o, a, v, SIM_LOAD_PROFILE)) return -1; }
    else if (!strcmp(a, "--burstiness")) { VAL(); if (opt_double(CMD, a, v, 0.01, 1000, &o->burstiness)) return -1; }
    else if (!strcmp(a, "--per-replica")) o->per_replica = 1;
    else if (!strcmp(a, "--duration")) { VAL(); if (opt_double(CMD, a, v, 0.001, 1e8, &o->duration)) return -1; }
    else if (!strcmp(a, "--requests")) { VAL(); if (opt_int(CMD, a, v, 1, 100000000, &o->requests)) return -1; }
    else if (!strcmp(a, "--prompt-len")) { VAL(); if (opt_int(CMD, a, v, 1, 10000000, &o->prompt_len)) return -1; }
    else if (!strcmp(a, "--output-len")) { VAL(); if (opt_int(CMD, a, v, 1, 10000000, &o->output_len)) return -1; }
    else if (!strcmp(a, "--lengths-from")) { VAL(); o->lengths_from = v; }
    else if (!strcmp(a, "--chars-per-token")) { VAL(); if (opt_double(CMD, a, v, 0.1, 100, &o->cpt)) return -1; }
    else if (!strcmp(a, "--slo-ttft-ms")) { VAL(); if (opt_double(CMD, a, v, 1e-6, 1e9, &o->slo_ttft_ms)) return -1; }
    else if (!strcmp(a, "--slo-tpot-ms")) { VAL(); if (opt_double(CMD, a, v, 1e-6, 1e9, &o->slo_tpot_ms)) return -1; }
    else if (!strcmp(a, "--objective")) { VAL(); o->objective = v; }
    else if (!strcmp(a, "--seed")) { VAL(); if (opt_u64(CMD, a, v, &o->seed)) return -1; }
    else if (!strcmp(a, "--repeats")) { VAL(); if (opt_int(CMD, a, v, 1, 1000, &o->repeats)) return -1; }
    else if (!strcmp(a, "--out")) { VAL(); o->out = v; }
    else if (!strcmp(a, "--quiet")) o->quiet = 1;
    else if (!strcmp(a, "--compare")) o->compare = 1;
    else return 0;
#undef VAL
    return 1;
}

/* Keeps the sets whose workload is in the list; 0 ok. */
static int filter_sets(sim_accept *sets, int *n, const char *list) {
    char buf[1024], *w[64];
    int nw;
    if (opt_str_list(CMD, "--workloads", list, buf, sizeof buf, w, 64, &nw)) return -1;
    for (int j = 0; j < nw; j++) {
        int found = 0;
        for (int i = 0; i < *n; i++) found |= !strcmp(sets[i].workload, w[j]);
        if (!found) { fprintf(stderr, "%s: --workloads: no acceptance rates for workload '%s'\n", CMD, w[j]); return -1; }
    }
    int k = 0;
    for (int i = 0; i < *n; i++) {
        int keep = 0;
        for (int j = 0; j < nw; j++) keep |= !strcmp(sets[i].workload, w[j]);
        if (keep) sets[k++] = sets[i];
    }
    *n = k;
    return 0;
}

int cmd_simulate(int argc, char **argv) {
    opts o;
    memset(&o, 0, sizeof o);
    o.burstiness = 1;
    o.duration = 600;
    o.cpt = 4;
    o.max_running = 16;
    o.repeats = 5;
    o.prompt_len = 256;
    o.output_len = 128;
    o.load_kind = -1;
    o.draft_s = -1;
    o.balance = SIM_BAL_ROUND_ROBIN;
    int set_duration = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) { help(stdout); return 0; }
        if (!strcmp(argv[i], "--duration")) set_duration = 1;
        int r = parse_opt(&o, argc, argv, &i);
        if (r < 0) return 2;
        if (r == 0) { fprintf(stderr, "%s: unknown option '%s' (see specbed simulate --help)\n", CMD, argv[i]); return 2; }
    }
    if (!o.cost_path) { fprintf(stderr, "%s: --cost-table is required (specbed profile --out FILE writes one)\n", CMD); return 2; }
    if (!o.accept == !o.sweep) { fprintf(stderr, "%s: give exactly one of --accept FILE and --sweep DIR\n", CMD); return 2; }
    if (o.compare && !o.sweep) { fprintf(stderr, "%s: --compare needs --sweep DIR\n", CMD); return 2; }
    if (!o.row_budget) o.row_budget = 17 * o.max_running + 64 > 256 ? 17 * o.max_running + 64 : 256;
    if (o.row_budget < o.max_running) {
        fprintf(stderr, "%s: --row-budget %d is below --max-running %d (every running request needs a row per step)\n",
                CMD, o.row_budget, o.max_running);
        return 2;
    }
    char err[2048];
    cost_curve cost;
    if (cost_curve_load(&cost, o.cost_path, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); return 2; }
    if (o.experts_gbs > 0) {
        if (cost_curve_offload_experts(&cost, o.experts_gbs * 1e9, err, sizeof err)) {
            fprintf(stderr, "%s: --experts-on-host: %s: %s\n", CMD, o.cost_path, err);
            return 2;
        }
        fprintf(stderr, "%s: experts on host at %g GB/s: %d sparse layers x %.2f MB per expert; a 1-row step reads "
                "%.1f experts per layer (+%.3f ms), %g rows of one sequence %.1f (+%.3f ms)\n", CMD, o.experts_gbs,
                cost.moe_sparse_layers, cost.moe_expert_bytes / 1e6, cost_curve_experts_at(&cost, 1),
                cost.moe_sparse_layers * cost.moe_expert_bytes * cost_curve_experts_at(&cost, 1) / (o.experts_gbs * 1e6),
                cost.moe_rows[cost.n_moe - 1], cost.moe_distinct[cost.n_moe - 1],
                cost.moe_sparse_layers * cost.moe_expert_bytes * cost.moe_distinct[cost.n_moe - 1] / (o.experts_gbs * 1e6));
    }
    double draft_s = o.draft_s;   /* < 0: the table's, per drafting batch */

    char outdir[1100];
    if (o.out) snprintf(outdir, sizeof outdir, "%s", o.out);
    else {
        char d[32];
        time_t now = time(NULL);
        strftime(d, sizeof d, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(outdir, sizeof outdir, "results/simulate-%s", d);
    }

    if (o.compare) {
        if (o.load_kind >= 0 || o.n_replicas)
            fprintf(stderr, "%s: note: --compare simulates each cell with the sweep's own load; loads and replicas are ignored\n", CMD);
        if (ld_mkdirs(outdir, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); return 2; }
        sim_compare_opts co = {.sweep_dir = o.sweep, .drafter = o.drafter, .out_dir = outdir, .cost = &cost,
                               .draft_s_per_token = draft_s, .step_overhead_s = o.overhead_ms < 0 ? -1 : o.overhead_ms / 1e3,
                               .token_overhead_s = o.tok_overhead_ms / 1e3,
                               .request_overhead_s = o.req_overhead_ms < 0 ? -1 : o.req_overhead_ms / 1e3,
                               .think_s = o.think_ms < 0 ? -1 : o.think_ms / 1e3,
                               .chars_per_token = o.cpt, .repeats = o.repeats, .max_running = o.max_running,
                               .row_budget = o.row_budget, .seed = o.seed};
        if (sim_compare_sweep(&co, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); return 2; }
        return 0;
    }
    if (o.load_kind < 0) {
        fprintf(stderr, "%s: give the load: --concurrency LIST, --rate LIST or --profile SPEC (see --help)\n", CMD);
        return 2;
    }
    if (o.load_kind == SIM_LOAD_PROFILE && (set_duration || o.requests))
        fprintf(stderr, "%s: note: a --profile sets its own duration%s\n", CMD, o.requests ? "; --requests still caps arrivals" : "");
    if (!o.n_depths) { o.n_depths = 8; for (int d = 0; d < 8; d++) o.depths[d] = d; }
    if (!o.n_replicas) { o.n_replicas = 1; o.replicas[0] = 1; }

    sim_accept *sets = NULL;
    int n_sets = 0;
    int rc = o.accept ? sim_accept_load_json(o.accept, o.drafter, &sets, &n_sets, err, sizeof err)
                      : sim_accept_load_sweep(o.sweep, o.drafter, &sets, &n_sets, err, sizeof err);
    if (rc) { fprintf(stderr, "%s: %s\n", CMD, err); return 2; }
    if (o.workloads && filter_sets(sets, &n_sets, o.workloads)) { free(sets); return 2; }
    int max_depth = 0;
    for (int d = 0; d < o.n_depths; d++) if (o.depths[d] > max_depth) max_depth = o.depths[d];
    for (int s = 0; s < n_sets; s++)
        if (max_depth > sets[s].n_pos)
            fprintf(stderr, "%s: note: %s on %s has rates for %d position(s); deeper drafts are taken as never accepted\n",
                    CMD, sets[s].drafter, sets[s].workload, sets[s].n_pos);

    sim_lengths *lens = NULL;
    sim_lengths one;
    memset(&one, 0, sizeof one);
    if (o.lengths_from) {
        lens = calloc((size_t)n_sets, sizeof *lens);
        if (!lens) { free(sets); fprintf(stderr, "%s: out of memory\n", CMD); return 2; }
        if (strcmp(o.lengths_from, "auto") && sim_lengths_from_workload(o.lengths_from, o.cpt, &one, err, sizeof err)) {
            fprintf(stderr, "%s: --lengths-from: %s\n", CMD, err);
            free(lens); free(sets);
            return 2;
        }
        for (int s = 0; s < n_sets; s++) {
            if (strcmp(o.lengths_from, "auto")) { lens[s] = one; continue; }
            if (sim_lengths_from_workload(sets[s].workload, o.cpt, &lens[s], err, sizeof err)) {
                fprintf(stderr, "%s: --lengths-from auto: %s\n", CMD, err);
                for (int k = 0; k < s; k++) sim_lengths_free(&lens[k]);
                free(lens); free(sets);
                return 2;
            }
        }
    }

    sim_config base;
    sim_config_defaults(&base);
    base.max_running = o.max_running;
    base.row_budget = o.row_budget;
    base.prefill_chunk = o.prefill_chunk;
    base.cost = &cost;
    base.draft_s_per_token = draft_s;
    base.step_overhead_s = o.overhead_ms / 1e3;
    base.token_overhead_s = o.tok_overhead_ms / 1e3;
    base.request_overhead_s = o.req_overhead_ms / 1e3;
    base.balance = (sim_balance)o.balance;
    base.burstiness = o.burstiness;
    if (o.think_ms < 0) { fprintf(stderr, "%s: --think-ms auto is for --compare\n", CMD); free(sets); return 2; }
    if (o.overhead_ms < 0) { fprintf(stderr, "%s: --step-overhead-ms auto is for --compare\n", CMD); free(sets); return 2; }
    if (o.req_overhead_ms < 0) {
        fprintf(stderr, "%s: --request-overhead-ms auto is for --compare\n", CMD);
        free(sets);
        return 2;
    }
    base.think_s = o.think_ms / 1e3;
    base.n_requests = o.requests;
    base.profile.ph[0].dur_s = o.requests && !set_duration ? INFINITY : o.duration;
    base.prompt_len = o.prompt_len;
    base.output_len = o.output_len;
    base.slo_ttft_s = o.slo_ttft_ms / 1e3;
    base.slo_tpot_s = o.slo_tpot_ms / 1e3;
    base.seed = o.seed;

    sim_grid g;
    memset(&g, 0, sizeof g);
    g.sets = sets;
    g.n_sets = n_sets;
    g.depths = o.depths;
    g.n_depths = o.n_depths;
    g.replicas = o.replicas;
    g.n_replicas = o.n_replicas;
    g.loads = o.loads;
    g.n_loads = o.n_loads;
    g.per_replica = o.per_replica;
    g.base = &base;
    g.set_lengths = lens;
    g.lengths_source = o.lengths_from;
    g.repeats = o.repeats;
    int any_slo = o.slo_ttft_ms > 0 || o.slo_tpot_ms > 0;
    char why[300];
    g.objective = sim_default_objective(o.loads, o.n_loads, any_slo, o.slo_ttft_ms, o.slo_tpot_ms, why, sizeof why);
    g.objective_why = why;
    if (o.objective) {
        g.objective_why = "--objective";
        if (!strcmp(o.objective, "goodput")) g.objective = SIM_M_GOODPUT;
        else if (!strcmp(o.objective, "output_throughput")) g.objective = SIM_M_OUT_TPUT;
        else if (!strcmp(o.objective, "request_throughput")) g.objective = SIM_M_REQ_TPUT;
        else {
            g.objective = -1;
            for (int m = SIM_M_MEAN_TTFT; m <= SIM_M_P99_E2EL; m++)
                if (!strcmp(o.objective, SIM_METRIC_NAMES[m])) g.objective = m;
            if (g.objective < 0) {
                fprintf(stderr, "%s: --objective '%s' must be goodput, output_throughput, request_throughput or a latency "
                        "to minimise (mean_tpot_ms, p99_ttft_ms, median_e2el_ms, ...)\n", CMD, o.objective);
                rc = 2;
                goto out;
            }
        }
        if (g.objective == SIM_M_GOODPUT && !any_slo)
            fprintf(stderr, "%s: note: goodput without --slo-ttft-ms / --slo-tpot-ms counts every request\n", CMD);
    }
    if (o.per_replica)
        for (int l = 0; l < g.n_loads; l++) {
            size_t n = strlen(o.loads[l].label);
            snprintf(o.loads[l].label + n, sizeof o.loads[l].label - n, "/replica");
        }

    /* a fresh base config must pass the checks before hours of runs */
    {
        sim_config t = base;
        t.acc = &sets[0];
        t.depth = max_depth;
        t.lengths = lens ? &lens[0] : NULL;
        t.profile.ph[0].concurrency = 1;
        if (sim_config_check(&t, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); rc = 2; goto out; }
    }
    if (ld_mkdirs(outdir, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); rc = 2; goto out; }
    if (sim_grid_run(&g, !o.quiet, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); rc = 2; goto out; }
    char *md = sim_grid_markdown(&g);
    if (md) {
        const char *dec = o.quiet ? strstr(md, "### Decision") : md;
        fputs(dec ? dec : md, stdout);
        free(md);
    }
    if (sim_grid_write(&g, outdir, err, sizeof err)) { fprintf(stderr, "%s: %s\n", CMD, err); rc = 1; }
    else fprintf(stderr, "%s: outputs in %s (simulate.csv, simulate.json, simulate.md)\n", CMD, outdir);
out:
    sim_grid_free(&g);
    if (lens) {
        if (o.lengths_from && strcmp(o.lengths_from, "auto")) sim_lengths_free(&one);
        else for (int s = 0; s < n_sets; s++) sim_lengths_free(&lens[s]);
        free(lens);
    }
    free(sets);
    return rc;
}
