/* sweep.c — `specbed sweep`. An arm is one (drafter, depth) server launch
 * config; depth 0 (speculation off) is one arm, every drafter's baseline.
 *   1. cost tables: --profile-cmd runs once per drafter (OUT/cost/), or
 *      --cost-table names one; recorded in sweep.json for the report;
 *   2. canary pass: every arm launched cold in depth order, canary, stop
 *      (depth order because auto calibration reads the shallower launch);
 *   3. repeats: each repeat visits every arm once, in an order shuffled
 *      from (--order-seed, repeat) so slow drift spreads over all arms; a
 *      visit = launch, warm-up requests (not recorded), the load for each
 *      workload × concurrency, stop. Every run is stored
 *      (OUT/<drafter>-d<depth>/<workload>-c<conc>-r<rep>/, the load's
 *      outputs) and summarised in OUT/runs.csv; OUT/sweep.json is the
 *      manifest `specbed report` reads (orders, seeds, budget, load average).
 * --budget trades prompts, then repeats, for time, and says so. */
#include "args.h"
#include "canary.h"
#include "canary_verdict.h"
#include "csv_row.h"
#include "errmsg.h"
#include "file.h"
#include "httpc.h"
#include "proc_launch.h"
#include "load_cli.h"
#include "launch_off.h"
#include "machine.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "run_cols.h"
#include "stats.h"
#include "sweep.h"

#define SW_MAX 64

typedef struct {
    load_cli lo;
    const char *launch, *launch_off;
    int depths[SW_MAX], n_depths;
    char *workloads[SW_MAX];
    int n_workloads;
    int conc[SW_MAX], n_conc;
    char *drafters[SW_MAX];
    int n_drafters;
    const char *dargs_name[SW_MAX], *dargs_val[SW_MAX];   /* --drafter-args NAME=ARGS */
    char dargs_buf[SW_MAX][512];
    int n_dargs;
    int repeats;
    int canary;
    double canary_duration;
    const char *canary_calibrate;   /* NULL, "auto" or DIR */
    double canary_threshold;        /* <0: per-depth default */
    double min_drafts;              /* verify steps an interval needs to be judged (canary and load runs alike) */
    double boot_timeout;
    int block_size;
    char block_src[600];
    const char *cost_table;
    const char *profile_cmd;        /* template with {drafter}, {drafter_args}, {out} */
    uint64_t order_seed;
    int warmup;                     /* warm-up requests per visit (not recorded) */
    double budget_s;                /* 0 = none */
    int port_base;                  /* 0 = any free port */
    char off_buf[8192];             /* the derived speculation-off template */
    char off_removed[2048];         /* the words taken out of --launch for it */
    const char *out;
    char wbuf[2048], dbuf[1024];
} sweep_opts;

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed sweep --launch \"CMD … --depth {depth} --port {port}\" --depths LIST\n"
        "                     --workloads LIST --concurrency LIST --out DIR [options]\n"
        "\n"
        "Launches the server per (drafter, depth) arm: first a canary pass (every arm\n"
        "cold, in depth order), then --repeats passes that each visit every arm once in\n"
        "a shuffled order: launch, warm-up, the load for every workload × concurrency,\n"
        "stop. Stores every run under DIR (runs.csv, sweep.json, one directory per run).\n"
        "Exits 1 when a launch failed or a run had failed requests or completed none\n"
        "(the summary line counts each). Then: specbed report DIR.\n"
        "\n"
        "Launch templates, one per engine ({port} is required; specbed picks the port):\n"
        "  specbed serve --model M --drafter {drafter} {drafter_args} --depth {depth} --port {port}\n"
        "  vllm serve M --port {port} --speculative-config '{\"method\":\"ngram\",\"num_speculative_tokens\":{depth},\"prompt_lookup_max\":4}'\n"
        "  python -m sglang.launch_server --model-path M --port {port} --speculative-algorithm EAGLE\n"
        "      --speculative-draft-model-path D --speculative-num-steps {depth} --speculative-eagle-topk 1\n"
        "      (with top-k 1 SGLang makes --speculative-num-draft-tokens steps + 1 itself)\n"
        "  llama-server -m M.gguf -md D.gguf --draft-max {depth} --draft-min 0 --port {port}\n"
        "Speculation off (depth 0): --launch-off CMD, or by default --launch with its\n"
        "speculation flags removed: specbed's --drafter/--depth/--draft-model/--ngram-*/\n"
        "--verify-schedule/--p-min/--adaptive-alpha/--cost-table, vLLM's\n"
        "--speculative-config (and its older --speculative-*/--num-speculative-tokens),\n"
        "SGLang's --speculative-*, llama-server's -md/--model-draft/--draft-*/--spec-type/\n"
        "--spec-draft-*/-ngld/... and {drafter_args}. A template that still names {depth}\n"
        "or {drafter} after that is refused at once (give --launch-off). The derived\n"
        "command is printed and kept in sweep.json (launch_off_derived).\n"
        "\n"
        "Sweep options:\n"
        "  --launch CMD          server command; placeholders {port}, {depth}, {drafter},\n"
        "                        {drafter_args}\n"
        "  --launch-off CMD      command for depth 0 (default: derived from --launch, above)\n"
        "  --port-base P         launch on the first free port from P up (P .. P+99);\n"
        "                        default: any free port\n"
        "  --depths LIST         e.g. 0,1,2,4 or 0-7 (0 = speculation off)\n"
        "  --workloads LIST      workload names or files, e.g. code,prose\n"
        "  --concurrency LIST    closed-loop concurrencies, e.g. 1,8\n"
        "  --drafters LIST       values for {drafter}, one sweep each (default: none given)\n"
        "  --drafter-args N=ARGS what {drafter_args} becomes for drafter N (repeatable), e.g.\n"
        "                        \"draft=--draft-model models/tiny-draft\"; empty for others\n"
        "  --repeats R           repeats; each visits every (drafter, depth) arm once, in\n"
        "                        a shuffled order (default 3)\n"
        "  --order-seed S        seed of the shuffled arm orders (default 1; recorded)\n"
        "  --warmup N            warm-up requests per visit before the measured runs, not\n"
        "                        recorded (default: the largest concurrency, at least 2)\n"
        "  --budget S            seconds for the whole sweep: after each repeat, cut the\n"
        "                        prompts per run (down to 2 x concurrency, at least 4),\n"
        "                        then drop repeats, to fit; sweep.json and the report say\n"
        "                        what was given up (default: no budget)\n"
        "  --num-prompts N       requests per run (default 4 × concurrency, at least 8)\n"
        "  --max-tokens N        output tokens per request (default: the row's, else 128)\n"
        "  --no-canary           skip the canary on each launch\n"
        "  --canary-duration S   seconds of canary load per launch (default 10)\n"
        "  --canary-threshold T  accept-length threshold for every launch (default: the\n"
        "                        field's 2.0 at depth >= 4, 1 + depth/4 below; with auto\n"
        "                        calibration, from the drafter's previous depth)\n"
        "  --canary-calibrate X  auto (default when depth 0 is swept): content thresholds\n"
        "                        from the depth-0 canary (no speculation, so no speculation\n"
        "                        corruption), accept-length threshold halfway from 1 to\n"
        "                        the lowest judged interval of the drafter's previous depth\n"
        "                        (E(k) never falls with k) when that launch's content was\n"
        "                        clean; none (default without depth 0); or a DIR of clean\n"
        "                        runs for every threshold\n"
        "  --boot-timeout S      seconds to wait for /health (default 300)\n"
        "  --block-size N        the depth dspark_block_size would impose, compared in the\n"
        "                        report when a dspark drafter is swept (default 5)\n"
        "  --drafter-config F    read dspark_block_size / block_size from a checkpoint config\n"
        "  --cost-table F        cost table for the report (specbed profile JSON or\n"
        "                        bench_engine CSV); recorded in sweep.json (default: none)\n"
        "  --profile-cmd CMD     measure a cost table per drafter before the sweep, e.g.\n"
        "                        \"specbed profile --model M --drafter {drafter} {drafter_args}\n"
        "                        --out {out}\" ({drafter} = none for depth 0); recorded in\n"
        "                        sweep.json, read by the report (default: none)\n"
        "  --out DIR             where the sweep goes (required)\n"
        "\n"
        "Request options for every run (as `specbed load`; each run is a closed loop at\n"
        "one --concurrency, its URL set per launch):\n"
        "  --endpoint E          completions (default) or chat\n"
        "  --model NAME          model field of requests (default: first id of /v1/models)\n"
        "  --api-key KEY         sent as Authorization: Bearer KEY\n"
        "  --temperature T       default 0 (greedy)\n"
        "  --top-p P             nucleus sampling mass in (0, 1] (default 1: not sent)\n"
        "  --seed S              request seed and prompt-order shuffle (default 0; repeat r\n"
        "                        uses S + r)\n"
        "  --no-shuffle          send prompts in file order\n"
        "  --ignore-eos          ask the server to ignore end-of-text\n"
        "  --interval S          metrics interval in seconds (default 5)\n"
        "  --metrics-source K    auto (default), specbed, vllm, llamacpp, sglang, none\n"
        "  --logprobs N          ask for N top logprobs per token (default: none)\n"
        "  --request-timeout S   per request (default 600)\n"
        "  --percentiles LIST    default 50,90,99\n"
        "  --goodput SLOS        e.g. ttft:500,tpot:50,e2el:10000 (ms; default: none)\n");
}

/* load options that make no sense per sweep run (the sweep sets the traffic shape) */
static int refused_load_opt(const char *a) {
    static const char *const NO[] = {"--rate", "--burstiness", "--max-concurrency", "--profile", "--duration",
                                     "--spec-depth", "--sglang-log", "--quiet"};
    for (size_t k = 0; k < sizeof NO / sizeof *NO; k++) if (!strcmp(a, NO[k])) return 1;
    return 0;
}

/* Finds "dspark_block_size" (preferred) or "block_size" anywhere in a JSON tree. */
static const cJSON *find_key(const cJSON *j, const char *key) {
    if (!j) return NULL;
    const cJSON *c;
    cJSON_ArrayForEach(c, j) {
        if (c->string && !strcmp(c->string, key) && cJSON_IsNumber(c)) return c;
        const cJSON *r = (cJSON_IsObject(c) || cJSON_IsArray(c)) ? find_key(c, key) : NULL;
        if (r) return r;
    }
    return NULL;
}

static int read_block_size(const char *path, int *bs, char *src, size_t srclen) {
    char *b, err[1200];
    if (read_file(path, 1u << 20, &b, NULL, err, sizeof err)) {
        fprintf(stderr, "sweep: --drafter-config %s\n", err);
        return -1;
    }
    cJSON *j = cJSON_Parse(b);
    free(b);
    const cJSON *v = find_key(j, "dspark_block_size");
    const char *k = "dspark_block_size";
    if (!v) { v = find_key(j, "block_size"); k = "block_size"; }
    if (!v || v->valuedouble < 1 || v->valuedouble > 64) {
        fprintf(stderr, "sweep: --drafter-config %s: no dspark_block_size or block_size in 1..64\n", path);
        cJSON_Delete(j);
        return -1;
    }
    *bs = (int)v->valuedouble;
    snprintf(src, srclen, "%s from %s", k, path);
    cJSON_Delete(j);
    return 0;
}

static const char *RUN_COLS[] = {
    "drafter", "depth", "workload", "concurrency", "repeat", "dir", "completed", "failed", "duration",
    "request_throughput", "output_throughput", "total_output_tokens", "mean_ttft_ms", "median_ttft_ms", "p99_ttft_ms",
    "mean_itl_ms", "median_itl_ms", "p99_itl_ms", "mean_tpot_ms", "median_tpot_ms", "p99_tpot_ms", "mean_e2el_ms",
    "p99_e2el_ms", "spec_decode_acceptance_length", RUN_COL_ACCEPT_LENGTH, "spec_decode_acceptance_rate", "specbed_min_interval_accept_length",
    "specbed_num_intervals", "specbed_metrics_scrapes_failed"};
enum { N_RUN_COLS = sizeof RUN_COLS / sizeof *RUN_COLS, MAX_POS_COLS = 16 };

/* Columns the sweep computes itself from the run's requests (stats.h). */
static const char *EXTRA_COLS[] = {"decode_throughput", "e2e_throughput", "repeated_4gram_frac", "num_prompts",
                                   "temperature", "seed"};
enum { N_EXTRA_COLS = sizeof EXTRA_COLS / sizeof *EXTRA_COLS };

static void write_run_header(FILE *f) {
    csv_row r = {f, 0};
    for (int i = 0; i < N_RUN_COLS; i++) csv_row_field(&r, RUN_COLS[i]);
    for (int i = 0; i < N_EXTRA_COLS; i++) csv_row_field(&r, EXTRA_COLS[i]);
    for (int p = 0; p < MAX_POS_COLS; p++) csv_row_fieldf(&r, "pos_%d", p);
    csv_row_end(&r);
}

static void write_run_row(FILE *f, const char *drafter, int depth, const char *wl, int conc, int rep, const char *dir,
                          const cJSON *s, const double *extra) {
    csv_row r = {f, 0};
    csv_row_field(&r, drafter);
    csv_row_fieldf(&r, "%d", depth);
    csv_row_field(&r, wl);
    csv_row_fieldf(&r, "%d", conc);
    csv_row_fieldf(&r, "%d", rep);
    csv_row_field(&r, dir);
    for (int i = 6; i < N_RUN_COLS; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, RUN_COLS[i]);
        if (cJSON_IsNumber(v)) csv_row_fieldf(&r, "%.6g", v->valuedouble);
        else csv_row_field(&r, "");
    }
    for (int i = 0; i < N_EXTRA_COLS; i++)
        if (isnan(extra[i])) csv_row_field(&r, "");
        else csv_row_fieldf(&r, "%.6g", extra[i]);
    /* pos_i: specbed's per-position rates (÷ verify steps), what the
     * recommender's E(k) sums; vLLM's (÷ drafts) where a source has no other */
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "specbed_per_position_acceptance_rates");
    if (!pp) pp = cJSON_GetObjectItemCaseSensitive(s, "spec_decode_per_position_acceptance_rates");
    for (int p = 0; p < MAX_POS_COLS; p++) {
        const cJSON *v = cJSON_GetArrayItem(pp, p);
        if (cJSON_IsNumber(v)) csv_row_fieldf(&r, "%.6g", v->valuedouble);
        else csv_row_field(&r, "");
    }
    csv_row_end(&r);
    fflush(f);
}

/* "1.23 0.98 0.75" from /proc/loadavg (what uptime prints); -1 elsewhere. */
static int loadavg(char *out, size_t n) {
    FILE *f = fopen("/proc/loadavg", "r");
    double a, b, c;
    int ok = f && fscanf(f, "%lf %lf %lf", &a, &b, &c) == 3;
    if (f) fclose(f);
    if (!ok) return -1;
    snprintf(out, n, "%.2f %.2f %.2f", a, b, c);
    return 0;
}

static cJSON *manifest(const sweep_opts *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "launch", o->launch);
    if (o->launch_off) cJSON_AddStringToObject(j, o->off_buf[0] ? "launch_off_derived" : "launch_off", o->launch_off);
    if (o->off_buf[0]) cJSON_AddStringToObject(j, "launch_off_removed", o->off_removed);
    if (o->port_base) cJSON_AddNumberToObject(j, "port_base", o->port_base);
    cJSON *a = cJSON_AddArrayToObject(j, "depths");
    for (int i = 0; i < o->n_depths; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(o->depths[i]));
    a = cJSON_AddArrayToObject(j, "workloads");
    for (int i = 0; i < o->n_workloads; i++) cJSON_AddItemToArray(a, cJSON_CreateString(o->workloads[i]));
    a = cJSON_AddArrayToObject(j, "concurrency");
    for (int i = 0; i < o->n_conc; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(o->conc[i]));
    a = cJSON_AddArrayToObject(j, "drafters");
    for (int i = 0; i < o->n_drafters; i++) cJSON_AddItemToArray(a, cJSON_CreateString(o->drafters[i]));
    cJSON_AddNumberToObject(j, "repeats", o->repeats);
    cJSON_AddNumberToObject(j, "order_seed", (double)o->order_seed);
    cJSON_AddNumberToObject(j, "warmup_requests", o->warmup);
    cJSON_AddNumberToObject(j, "seed", (double)o->lo.c.seed);
    cJSON_AddBoolToObject(j, "ignore_eos", o->lo.c.ignore_eos);
    if (o->budget_s > 0) cJSON_AddNumberToObject(j, "budget_s", o->budget_s);
    if (o->profile_cmd) cJSON_AddStringToObject(j, "profile_cmd", o->profile_cmd);
    cJSON_AddNumberToObject(j, "num_prompts", o->lo.c.num_prompts);
    if (o->lo.c.max_tokens > 0) cJSON_AddNumberToObject(j, "max_tokens", o->lo.c.max_tokens);
    else cJSON_AddStringToObject(j, "max_tokens_source", "workload rows (128 where a row has none)");
    cJSON_AddNumberToObject(j, "temperature", o->lo.c.temperature);
    cJSON_AddNumberToObject(j, "top_p", o->lo.c.top_p);
    cJSON_AddNumberToObject(j, "block_size", o->block_size);
    cJSON_AddStringToObject(j, "block_size_source", o->block_src);
    if (o->cost_table) cJSON_AddStringToObject(j, "cost_table", o->cost_table);
    cJSON_AddNumberToObject(j, "canary", o->canary);
    char d[32];
    time_t now = time(NULL);
    strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", localtime(&now));
    cJSON_AddStringToObject(j, "started", d);
    char la[128];
    if (!loadavg(la, sizeof la)) cJSON_AddStringToObject(j, "loadavg_start", la);
    machine_info mi;
    machine_probe(&mi);
    cJSON_AddItemToObject(j, "machine", machine_json(&mi));
    cJSON_AddArrayToObject(j, "launches");
    return j;
}

/* One arm: a (drafter, depth) launch config. */
typedef struct {
    int dr;                 /* index into o->drafters; the off arm uses 0 but launches "none" */
    int depth;
    const char *drafter;    /* "none" for depth 0 */
    char label[256];        /* <drafter>-d<depth>, the directory under OUT */
} sw_arm;

typedef struct {
    sweep_opts *o;
    workload *wls[SW_MAX];
    FILE *runs;
    cJSON *man, *launches;
    double t0;
    int n_runs, n_fail_launch, n_canary_fail;
    int n_run_err, n_run_failed_req, n_run_empty;   /* runs that errored, had failed requests, completed none */
    char server_kernels[64];        /* what the first launched server said of its kernels, "" none */
    /* canary calibration state (auto): the depth-0 canary's directory, and
     * per drafter the lowest judged-interval accept length of its previous
     * (shallower) launch whose content checks were clean. E(k) does not
     * decrease with k, so that is a clean floor for the next depth. */
    char calib_dir[1700];
    int auto_cal;
    double prev_min[SW_MAX];
} sw_state;

static void save_manifest(sw_state *S) {
    char p[1200];
    snprintf(p, sizeof p, "%s/sweep.json", S->o->out);
    ld_write_json(p, S->man, NULL, 0);
}

static const char *drafter_args(const sweep_opts *o, const char *drafter) {
    for (int k = 0; k < o->n_dargs; k++) if (!strcmp(o->dargs_name[k], drafter)) return o->dargs_val[k];
    return "";
}

/* Starts the arm's server and waits for /health; records the launch in L. */
static int launch(sw_state *S, const sw_arm *a, const char *logname, proc *s, cJSON *L, double *t_launch) {
    sweep_opts *o = S->o;
    char err[2048], cmd[8192], logp[1600];
    int port;
    const char *tmpl = a->depth == 0 && o->launch_off ? o->launch_off : o->launch;
    memset(s, 0, sizeof *s);
    if (proc_pick_port(o->port_base, &port, err, sizeof err) ||
        proc_expand(tmpl, port, a->depth, a->drafter, drafter_args(o, a->drafter), cmd, sizeof cmd)) {
        fprintf(stderr, "sweep: %s: cannot prepare the launch command\n", a->label);
        cJSON_AddStringToObject(L, "error", "cannot prepare the launch command");
        S->n_fail_launch++;
        return -1;
    }
    cJSON_AddStringToObject(L, "command", cmd);
    snprintf(logp, sizeof logp, "%s/%s/%s", o->out, a->label, logname);
    double tl = http_now();
    *t_launch = tl;
    if (proc_start(s, cmd, port, logp, err, sizeof err) ||
        http_wait_health(s->base, o->boot_timeout, proc_alive, s, err, sizeof err)) {
        fprintf(stderr, "sweep: %s: %s\nsweep: server log tail (%s):\n%s\n", a->label, err, logp, proc_log_tail(s, 1200));
        cJSON_AddStringToObject(L, "error", err);
        proc_stop(s);
        S->n_fail_launch++;
        save_manifest(S);
        return -1;
    }
    cJSON_AddNumberToObject(L, "boot_s", http_now() - tl);
    /* the server's own word on its kernels (specbed serve's startup line); other engines: unknown */
    char kern[64];
    if (!machine_server_kernels(proc_log_tail(s, 4000), kern, sizeof kern)) {
        cJSON_AddStringToObject(L, "server_kernels", kern);
        if (!S->server_kernels[0]) {
            snprintf(S->server_kernels, sizeof S->server_kernels, "%s", kern);
            cJSON *m = cJSON_GetObjectItemCaseSensitive(S->man, "machine");
            if (m) cJSON_AddStringToObject(m, "server_kernels", kern);
        }
    }
    return 0;
}

/* The canary on a cold launch of arm a (the canary pass). */
static void canary_arm(sw_state *S, const sw_arm *a, const proc *s, cJSON *L, double t_launch, double t_health) {
    sweep_opts *o = S->o;
    char err[2048];
    int depth = a->depth, dr = a->dr;
    canary_opts co;
    canary_opts_default(&co);
    co.lo = o->lo;
    co.lo.set_num_prompts = 0;
    co.lo.set_max_tokens = 0;
    co.lo.workload = o->workloads[0];
    co.lo.c.progress = 0;
    co.duration_s = o->canary_duration;
    co.n_probe = 8;
    co.min_drafts = o->min_drafts;
    co.quiet = 1;
    co.t_launch = t_launch;
    co.t_health = t_health;
    /* The field's 2.0 at depth 5 is "a quarter of the possible gain"; the
     * same share at depth k is 1 + k/4 (capped at 2.0). After a drafter's
     * first depth, auto mode calibrates from the previous one. */
    double thr = fmin(2.0, 1.0 + 0.25 * depth);
    const char *thr_src = "the field's 2.0 scaled to this depth, min(2, 1 + depth/4)";
    if (S->auto_cal && depth > 0 && !isnan(S->prev_min[dr]) && S->prev_min[dr] > 1.05) {
        thr = 1.0 + (S->prev_min[dr] - 1.0) / 2.0;
        thr_src = "halfway from 1 to the lowest judged interval of this drafter's previous depth";
    }
    if (o->canary_threshold >= 0) { thr = o->canary_threshold; thr_src = "--canary-threshold"; }
    cc_thresholds_default(&co.thr, thr);
    char explain[4096] = "";
    if (S->calib_dir[0]) {
        cc_observed clean;
        int nr;
        if (canary_calibrate_dir(S->calib_dir, co.min_drafts, &co.thr, &clean, &nr, explain, sizeof explain, err,
                                 sizeof err))
            fprintf(stderr, "sweep: %s: canary calibration: %s (defaults kept)\n", a->label, err);
        if (o->canary_threshold >= 0 || S->auto_cal || !clean.n_intervals) co.thr.accept_len = thr;
    }
    char cdir[1600];
    snprintf(cdir, sizeof cdir, "%s/%s/canary", o->out, a->label);
    canary_result cr;
    const cv_verdict *v = &cr.v;
    cJSON *C = cJSON_AddObjectToObject(L, "canary");
    if (canary_live(&co, s->base, cdir, &cr, err, sizeof err)) {
        fprintf(stderr, "sweep: %s: canary could not run: %s\n", a->label, err);
        cJSON_AddStringToObject(C, "verdict", "error");
        cJSON_AddStringToObject(C, "error", err);
        return;
    }
    int baseline = depth == 0 && S->auto_cal;   /* its scores are the clean level, not a verdict */
    if (baseline)
        fprintf(stderr, "sweep: %s: canary baseline for the content checks (against the defaults: %s)\n", a->label,
                cr.summary);
    else
        fprintf(stderr, "sweep: %s: canary %s\n", a->label, cr.summary);
    if (v->failed && !baseline)
        fprintf(stderr, "sweep: %s: evidence in %s/evidence.txt (a weak drafter can sit at or below the "
                "accept-length threshold while healthy: see --canary-threshold, --canary-calibrate)\n", a->label, cdir);
    cJSON_AddStringToObject(C, "verdict", baseline ? "baseline" : cv_verdict_name(v));
    if (!isnan(v->first_flag_s)) cJSON_AddNumberToObject(C, "first_flag_s", v->first_flag_s);
    cJSON_AddNumberToObject(C, "findings", cr.n_findings);
    cJSON *rs = cJSON_AddArrayToObject(C, "reasons");
    for (int k = 0; k < v->n_reasons; k++) cJSON_AddItemToArray(rs, cJSON_CreateString(cv_check_name(v->reason[k].check)));
    if (depth > 0) {   /* no speculation, no interval check */
        cJSON_AddNumberToObject(C, "threshold", co.thr.accept_len);
        cJSON_AddStringToObject(C, "threshold_source", thr_src);
    }
    cJSON_AddNumberToObject(C, "clean_intervals", v->n_clean);
    S->n_canary_fail += v->failed && !baseline;
    if (depth > 0 && !v->content_failed && !isnan(cr.obs.accept_len_min)) S->prev_min[dr] = cr.obs.accept_len_min;
    if (depth == 0 && S->auto_cal) snprintf(S->calib_dir, sizeof S->calib_dir, "%s", cdir);
}

/* Prompts per run at concurrency c, with the budget's scale applied. */
static int prompts_for(const sweep_opts *o, int c, double scale) {
    int base = o->lo.set_num_prompts ? o->lo.c.num_prompts : (4 * c > 8 ? 4 * c : 8);
    int floor_ = 2 * c > 4 ? 2 * c : 4;
    if (floor_ > base) floor_ = base;
    int n = (int)lround(base * scale);
    return n < floor_ ? floor_ : n;
}

/* Warm-up, then every workload × concurrency run of one visit. */
static void visit_runs(sw_state *S, const sw_arm *a, int rep, double scale, const proc *s) {
    sweep_opts *o = S->o;
    char err[2048];
    int cmax = 1;
    for (int ci = 0; ci < o->n_conc; ci++) if (o->conc[ci] > cmax) cmax = o->conc[ci];
    if (o->warmup > 0) {   /* not recorded: first requests pay for cold caches and page faults */
        ld_config c = o->lo.c;
        c.url = s->base;
        c.wl = S->wls[0];
        c.concurrency = cmax < o->warmup ? cmax : o->warmup;
        c.num_prompts = o->warmup;
        c.max_tokens = 16;
        c.seed = o->lo.c.seed + 1000003u;   /* other prompts than the measured ones */
        c.progress = 0;
        c.interval_s = 1e6;
        ld_result *res;
        if (ld_run(&c, &res, err, sizeof err)) fprintf(stderr, "sweep: %s: warm-up: %s\n", a->label, err);
        else ld_result_free(res);
    }
    for (int wi = 0; wi < o->n_workloads; wi++)
        for (int ci = 0; ci < o->n_conc; ci++) {
            ld_config c = o->lo.c;
            c.url = s->base;
            c.wl = S->wls[wi];
            c.concurrency = o->conc[ci];
            c.num_prompts = prompts_for(o, c.concurrency, scale);
            /* The same prompts for every arm within a repeat (paired), other
             * prompts in the next repeat. */
            c.seed = o->lo.c.seed + (uint64_t)rep;
            c.progress = 0;
            char rdir[1700], rel[600];
            snprintf(rel, sizeof rel, "%s/%s-c%d-r%d", a->label, S->wls[wi]->name, c.concurrency, rep);
            snprintf(rdir, sizeof rdir, "%s/%s", o->out, rel);
            ld_result *res;
            if (ld_run(&c, &res, err, sizeof err)) {
                fprintf(stderr, "sweep: %s: run failed: %s\n", rel, err);
                S->n_run_err++;
                continue;
            }
            if (ld_write_outputs(rdir, &c, res, &o->lo.pcts, err, sizeof err)) fprintf(stderr, "sweep: %s: %s\n", rel, err);
            if (res->n_scrapes_failed)
                fprintf(stderr, "sweep: %s: %d of %d /metrics scrape(s) failed (first: %s)\n", rel, res->n_scrapes_failed,
                        res->n_scrapes, res->scrape_error);
            if (res->spec_depth_ignored) fprintf(stderr, "sweep: %s: WARNING: %s\n", rel, res->note);
            /* decode / end-to-end throughput and repetition, the report's definitions (stats.h) */
            int n = res->n_req, m = 0;
            double *no = calloc((size_t)(n ? n : 1), sizeof *no), *tt = calloc((size_t)(n ? n : 1), sizeof *tt),
                   *ee = calloc((size_t)(n ? n : 1), sizeof *ee), rsum = 0;
            int rn = 0;
            for (int k = 0; no && tt && ee && k < n; k++) {
                const ld_request *q = &res->req[k];
                if (!q->ok) continue;
                no[m] = q->n_out;
                tt[m] = q->ttft;
                ee[m++] = q->e2el;
                double f = st_repeated_ngram_frac(q->text, 4);
                if (!isnan(f)) { rsum += f; rn++; }
            }
            double extra[N_EXTRA_COLS] = {no && tt && ee ? st_decode_tps(c.concurrency, no, tt, ee, NULL, m) : NAN,
                                          no && ee ? st_e2e_tps(c.concurrency, no, ee, NULL, m) : NAN,
                                          rn ? rsum / rn : NAN, c.num_prompts, c.temperature, (double)c.seed};
            free(no);
            free(tt);
            free(ee);
            cJSON *sm = ld_summary_json(&c, res, &o->lo.pcts);
            write_run_row(S->runs, a->drafter, a->depth, S->wls[wi]->name, c.concurrency, rep, rel, sm, extra);
            const cJSON *al = cJSON_GetObjectItemCaseSensitive(sm, RUN_COL_ACCEPT_LENGTH);
            const cJSON *fl = cJSON_GetObjectItemCaseSensitive(sm, "failed");
            fprintf(stderr, "sweep: %-34s decode %8.1f tok/s  e2e %7.1f  accept len %s%.2f  rep4 %.2f  failed %d\n", rel,
                    extra[0], extra[1], cJSON_IsNumber(al) ? "" : "n/a ", cJSON_IsNumber(al) ? al->valuedouble : 0.0,
                    extra[2], cJSON_IsNumber(fl) ? (int)fl->valuedouble : -1);
            const cJSON *cp = cJSON_GetObjectItemCaseSensitive(sm, "completed");
            int n_failed = cJSON_IsNumber(fl) ? (int)fl->valuedouble : 0, n_done = cJSON_IsNumber(cp) ? (int)cp->valuedouble : 0;
            if (n_done == 0) {
                S->n_run_empty++;
                fprintf(stderr, "sweep: %s: FAILED: completed 0 of %d requests (see %s/requests.csv)\n", rel,
                        c.num_prompts, rdir);
            } else if (n_failed > 0) {
                S->n_run_failed_req++;
                fprintf(stderr, "sweep: %s: FAILED: %d of %d requests failed (see %s/requests.csv)\n", rel, n_failed,
                        n_failed + n_done, rdir);
            }
            cJSON_Delete(sm);
            ld_result_free(res);
            S->n_runs++;
        }
}

static void now_str(char *d, size_t n) {
    time_t now = time(NULL);
    strftime(d, n, "%Y-%m-%d %H:%M:%S", localtime(&now));
}

/* --profile-cmd once per drafter (and "none" for depth 0): OUT/cost/<drafter>.json. */
static int run_profiles(sw_state *S, int has_zero, int has_nonzero) {
    sweep_opts *o = S->o;
    char dir[1200], err[1024];
    snprintf(dir, sizeof dir, "%s/cost", o->out);
    if (ld_mkdirs(dir, err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); return -1; }
    cJSON *ct = cJSON_AddObjectToObject(S->man, "cost_tables");
    for (int d = -1; d < o->n_drafters; d++) {
        if ((d < 0 && !has_zero) || (d >= 0 && !has_nonzero)) continue;
        const char *dr = d < 0 ? "none" : o->drafters[d];
        char outp[1400], t1[8192], cmd[8192];
        snprintf(outp, sizeof outp, "%s/%s.json", dir, dr);
        /* {out} first (proc_expand knows the launch placeholders only) */
        size_t w = 0;
        for (const char *t = o->profile_cmd; *t && w + 1 < sizeof t1;) {
            if (!strncmp(t, "{out}", 5)) { w += (size_t)snprintf(t1 + w, sizeof t1 - w, "%s", outp); t += 5; }
            else t1[w++] = *t++;
            if (w >= sizeof t1) w = sizeof t1 - 1;
        }
        t1[w] = 0;
        if (proc_expand(t1, 0, 0, dr, drafter_args(o, dr), cmd, sizeof cmd)) {
            fprintf(stderr, "sweep: --profile-cmd: command too long\n");
            return -1;
        }
        char full[9700];
        snprintf(full, sizeof full, "%s >'%s/%s.log' 2>&1", cmd, dir, dr);
        fprintf(stderr, "sweep: cost table for %s: %s\n", dr, cmd);
        int st = system(full);
        if (st != 0) {
            fprintf(stderr, "sweep: --profile-cmd failed for %s (exit %d; see %s/%s.log); the report falls back to "
                    "the sweep's own step times\n", dr, st, dir, dr);
            continue;
        }
        char rel[300];
        snprintf(rel, sizeof rel, "cost/%s.json", dr);
        cJSON_AddStringToObject(ct, dr, rel);
    }
    save_manifest(S);
    return 0;
}

static int run_sweep(sweep_opts *o) {
    char err[2048], p[4200];
    sw_state S;
    memset(&S, 0, sizeof S);
    S.o = o;
    if (ld_mkdirs(o->out, err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); return 2; }
    /* Every workload must load before any server starts. */
    for (int i = 0; i < o->n_workloads; i++)
        if (workload_load(&S.wls[i], o->workloads[i], err, sizeof err)) {
            fprintf(stderr, "sweep: %s\n", err);
            for (int k = 0; k < i; k++) workload_free(S.wls[k]);
            return 2;
        }
    snprintf(p, sizeof p, "%s/runs.csv", o->out);
    S.runs = fopen(p, "w");
    if (!S.runs) { fprintf(stderr, "sweep: %s: %s\n", p, strerror(errno)); return 2; }
    write_run_header(S.runs);
    S.man = manifest(o);
    S.launches = cJSON_GetObjectItemCaseSensitive(S.man, "launches");
    save_manifest(&S);
    proc_guard_signals();
    S.auto_cal = o->canary_calibrate && !strcmp(o->canary_calibrate, "auto");
    if (o->canary_calibrate && strcmp(o->canary_calibrate, "auto") && strcmp(o->canary_calibrate, "none"))
        snprintf(S.calib_dir, sizeof S.calib_dir, "%s", o->canary_calibrate);
    for (int k = 0; k < SW_MAX; k++) S.prev_min[k] = NAN;
    S.t0 = http_now();

    /* The arms, in depth order (the canary pass's order). */
    sw_arm arms[SW_MAX * SW_MAX];
    int n_arms = 0, has_zero = 0, has_nonzero = 0;
    for (int di = 0; di < o->n_depths; di++) {
        int depth = o->depths[di];
        has_zero |= depth == 0;
        has_nonzero |= depth > 0;
        for (int dr = 0; dr < (depth == 0 ? 1 : o->n_drafters); dr++) {
            sw_arm *a = &arms[n_arms++];
            a->dr = dr;
            a->depth = depth;
            a->drafter = depth == 0 ? "none" : o->drafters[dr];
            snprintf(a->label, sizeof a->label, "%s-d%d", a->drafter, depth);
            snprintf(p, sizeof p, "%s/%s", o->out, a->label);
            if (ld_mkdirs(p, err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); n_arms--; }
        }
    }
    if (o->profile_cmd && run_profiles(&S, has_zero, has_nonzero)) {
        fclose(S.runs);
        cJSON_Delete(S.man);
        for (int i = 0; i < o->n_workloads; i++) workload_free(S.wls[i]);
        return 2;
    }

    /* 2. the canary pass, in depth order */
    if (o->canary)
        for (int ai = 0; ai < n_arms; ai++) {
            const sw_arm *a = &arms[ai];
            cJSON *L = cJSON_CreateObject();
            cJSON_AddItemToArray(S.launches, L);
            cJSON_AddStringToObject(L, "drafter", a->drafter);
            cJSON_AddNumberToObject(L, "depth", a->depth);
            cJSON_AddStringToObject(L, "dir", a->label);
            cJSON_AddStringToObject(L, "pass", "canary");
            fprintf(stderr, "sweep: canary pass [%d/%d] %s (elapsed %.0f s)\n", ai + 1, n_arms, a->label, http_now() - S.t0);
            proc s;
            double tl;
            if (launch(&S, a, "server-canary.log", &s, L, &tl)) continue;
            canary_arm(&S, a, &s, L, tl, http_now());
            proc_stop(&s);
            cJSON_AddNumberToObject(L, "server_exit", s.exit_status);
            save_manifest(&S);
        }
    double t_canary = http_now() - S.t0;

    /* 3. repeats, each in its own shuffled order */
    cJSON *orders = cJSON_AddArrayToObject(S.man, "orders");
    cJSON *budget = o->budget_s > 0 ? cJSON_AddObjectToObject(S.man, "budget") : NULL;
    cJSON *gave_up = budget ? cJSON_AddArrayToObject(budget, "gave_up") : NULL;
    int R = o->repeats, done_reps = 0;
    double scale = 1.0, lowest_scale = 1.0;   /* prompts per run relative to the requested */
    double fixed_sum = 0, var_sum = 0;  /* per visit: launch + warm-up, and the runs (at scale 1) */
    int n_visits = 0;
    for (int rep = 0; rep < R; rep++) {
        if (budget && rep > 0 && n_visits) {
            /* re-plan: what the remaining repeats need at the current scale */
            double fixed = fixed_sum / n_visits, var = var_sum / n_visits, left = o->budget_s - (http_now() - S.t0);
            double need = (R - rep) * n_arms * (fixed + var * scale);
            if (need > left) {
                double s2 = (left / ((R - rep) * n_arms) - fixed) / var;
                s2 = floor(s2 * 20) / 20;   /* steps of 5%, so the message matches what runs */
                double smin = 0;   /* the floor: every run at its minimum prompts */
                for (int ci = 0; ci < o->n_conc; ci++) {
                    double base = prompts_for(o, o->conc[ci], 1.0), fl = prompts_for(o, o->conc[ci], 0.0);
                    if (fl / base > smin) smin = fl / base;
                }
                char msg[512];
                if (s2 >= smin) {
                    snprintf(msg, sizeof msg, "repeats %d-%d: prompts per run cut to %.0f%% of the requested to fit "
                             "--budget %.0f s", rep, R - 1, 100 * s2, o->budget_s);
                    scale = fmin(scale, s2);
                    lowest_scale = fmin(lowest_scale, scale);
                } else {
                    int fit = (int)floor(left / (n_arms * (fixed + var * smin)));
                    scale = lowest_scale = smin;
                    if (fit < 1) fit = 0;
                    snprintf(msg, sizeof msg, "repeats %d-%d dropped%s (%.0f s left of --budget %.0f s, a repeat takes "
                             "~%.0f s at the fewest prompts)", rep + fit, R - 1, fit ? ", prompts cut to the minimum" : "",
                             left, o->budget_s, n_arms * (fixed + var * smin));
                    R = rep + fit;
                }
                fprintf(stderr, "sweep: budget: %s\n", msg);
                cJSON_AddItemToArray(gave_up, cJSON_CreateString(msg));
                save_manifest(&S);
                if (rep >= R) break;
            }
        }
        int order[SW_MAX * SW_MAX];
        st_arm_order(o->order_seed, rep, n_arms, order);
        cJSON *oj = cJSON_CreateArray();
        for (int k = 0; k < n_arms; k++) cJSON_AddItemToArray(oj, cJSON_CreateString(arms[order[k]].label));
        cJSON_AddItemToArray(orders, oj);
        int stopped = 0;
        for (int k = 0; k < n_arms; k++) {
            const sw_arm *a = &arms[order[k]];
            double tv = http_now();
            if (budget && n_visits && tv - S.t0 + fixed_sum / n_visits + var_sum / n_visits * scale > 1.05 * o->budget_s) {
                char msg[300];
                snprintf(msg, sizeof msg, "repeat %d stopped after %d of %d arms: --budget %.0f s spent", rep, k, n_arms,
                         o->budget_s);
                fprintf(stderr, "sweep: budget: %s\n", msg);
                cJSON_AddItemToArray(gave_up, cJSON_CreateString(msg));
                stopped = 1;
                break;
            }
            cJSON *L = cJSON_CreateObject();
            cJSON_AddItemToArray(S.launches, L);
            cJSON_AddStringToObject(L, "drafter", a->drafter);
            cJSON_AddNumberToObject(L, "depth", a->depth);
            cJSON_AddStringToObject(L, "dir", a->label);
            cJSON_AddNumberToObject(L, "repeat", rep);
            char logname[64];
            snprintf(logname, sizeof logname, "server-r%d.log", rep);
            proc s;
            double tl;
            if (launch(&S, a, logname, &s, L, &tl)) continue;
            double tr = http_now();
            visit_runs(&S, a, rep, scale, &s);
            double te = http_now();
            proc_stop(&s);
            cJSON_AddNumberToObject(L, "server_exit", s.exit_status);
            save_manifest(&S);
            /* the warm-up is inside visit_runs; charge it to the fixed part by its share of requests */
            fixed_sum += tr - tv;
            var_sum += (te - tr) / scale;
            n_visits++;
            if (budget) {
                /* re-plan within the repeat too: the rest of this repeat and the
                 * remaining ones at one scale (a run with fewer prompts holds a
                 * prefix of the others' prompts, so arms stay paired) */
                double fixed = fixed_sum / n_visits, var = var_sum / n_visits, left = o->budget_s - (http_now() - S.t0);
                int vis = (R - rep - 1) * n_arms + (n_arms - k - 1);
                double smin = 0;
                for (int ci = 0; ci < o->n_conc; ci++) {
                    double base = prompts_for(o, o->conc[ci], 1.0), fl = prompts_for(o, o->conc[ci], 0.0);
                    if (fl / base > smin) smin = fl / base;
                }
                /* not before 3 visits (one slow arm is not the average), and back up
                 * (never past the requested) when the sweep runs ahead of the plan */
                if (vis > 0 && n_visits >= 3) {
                    double s2 = floor((left / vis - fixed) / var * 20) / 20;
                    s2 = s2 < smin ? smin : s2 > 1 ? 1 : s2;
                    if (s2 < lowest_scale - 0.049) {
                        char msg[300];
                        snprintf(msg, sizeof msg, "from repeat %d arm %d on: prompts per run cut to %.0f%% of the "
                                 "requested to fit --budget %.0f s", rep, k + 2, 100 * s2, o->budget_s);
                        fprintf(stderr, "sweep: budget: %s\n", msg);
                        cJSON_AddItemToArray(gave_up, cJSON_CreateString(msg));
                        lowest_scale = s2;
                    }
                    scale = s2;
                }
            }
            int left_visits = (R - rep - 1) * n_arms + (n_arms - k - 1);
            double eta = left_visits * (fixed_sum / n_visits + var_sum / n_visits * scale);
            fprintf(stderr, "sweep: repeat %d/%d, arm %d/%d (%s) done: elapsed %.0f s, about %.0f s left\n", rep + 1, R,
                    k + 1, n_arms, a->label, http_now() - S.t0, eta);
        }
        if (stopped) break;
        done_reps++;
    }
    fclose(S.runs);
    char d[32];
    now_str(d, sizeof d);
    cJSON_AddStringToObject(S.man, "finished", d);
    cJSON_AddNumberToObject(S.man, "wall_s", http_now() - S.t0);
    cJSON_AddNumberToObject(S.man, "canary_pass_s", t_canary);
    cJSON_AddNumberToObject(S.man, "repeats_completed", done_reps);
    cJSON_AddNumberToObject(S.man, "prompt_scale_final", scale);
    cJSON_AddNumberToObject(S.man, "prompt_scale_lowest", lowest_scale);
    cJSON *fj = cJSON_AddObjectToObject(S.man, "failures");
    cJSON_AddNumberToObject(fj, "launches", S.n_fail_launch);
    cJSON_AddNumberToObject(fj, "runs_not_run", S.n_run_err);
    cJSON_AddNumberToObject(fj, "runs_with_failed_requests", S.n_run_failed_req);
    cJSON_AddNumberToObject(fj, "runs_completed_none", S.n_run_empty);
    char la[128];
    if (!loadavg(la, sizeof la)) cJSON_AddStringToObject(S.man, "loadavg_end", la);
    save_manifest(&S);
    cJSON_Delete(S.man);
    for (int i = 0; i < o->n_workloads; i++) workload_free(S.wls[i]);
    int n_bad = S.n_run_err + S.n_run_failed_req + S.n_run_empty;
    fprintf(stderr, "sweep: %d run(s), %d complete repeat(s) in %.0f s; %d launch(es) failed; %d run(s) failed (%d could "
            "not run, %d with failed requests, %d completed none); %d canary failure(s); results in %s\n",
            S.n_runs + S.n_run_err, done_reps, http_now() - S.t0, S.n_fail_launch, n_bad, S.n_run_err,
            S.n_run_failed_req, S.n_run_empty, S.n_canary_fail, o->out);
    fprintf(stderr, "sweep: next: specbed report %s%s\n", o->out,
            S.n_fail_launch || n_bad ? " (it names the cells that are missing or failed and decides none of them)" : "");
    /* a sweep with a failed launch or run is not a success, whatever else it measured */
    return S.n_runs && !S.n_fail_launch && !n_bad ? 0 : 1;
}

int cmd_sweep(int argc, char **argv) {
    sweep_opts o;
    memset(&o, 0, sizeof o);
    load_cli_defaults(&o.lo);
    o.repeats = 3;
    o.order_seed = 1;
    o.warmup = -1;
    o.canary = 1;
    o.canary_duration = 10;
    o.canary_threshold = -1;
    o.min_drafts = CV_MIN_DRAFTS_DEFAULT;
    o.boot_timeout = 300;
    o.block_size = 5;
    snprintf(o.block_src, sizeof o.block_src, "default (--block-size)");
    const char *dcfg = NULL;
    int bs_set = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(stdout); return 0; }
#define VAL() do { if (!(v = opt_value("sweep", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--launch")) { VAL(); o.launch = v; }
        else if (!strcmp(a, "--launch-off")) { VAL(); o.launch_off = v; }
        else if (!strcmp(a, "--depths")) { VAL(); if (opt_int_list("sweep", a, v, 0, 64, o.depths, SW_MAX, &o.n_depths)) return 2; }
        else if (!strcmp(a, "--workloads")) { VAL(); if (opt_str_list("sweep", a, v, o.wbuf, sizeof o.wbuf, o.workloads, SW_MAX, &o.n_workloads)) return 2; }
        else if (!strcmp(a, "--concurrency")) { VAL(); if (opt_int_list("sweep", a, v, 1, 100000, o.conc, SW_MAX, &o.n_conc)) return 2; }
        else if (!strcmp(a, "--drafters")) { VAL(); if (opt_str_list("sweep", a, v, o.dbuf, sizeof o.dbuf, o.drafters, SW_MAX, &o.n_drafters)) return 2; }
        else if (!strcmp(a, "--drafter-args")) {
            VAL();
            const char *eq = strchr(v, '=');
            if (!eq || eq == v || o.n_dargs == SW_MAX || (size_t)(eq - v) >= sizeof o.dargs_buf[0]) {
                fprintf(stderr, "sweep: --drafter-args '%s' must be NAME=ARGS\n", v);
                return 2;
            }
            snprintf(o.dargs_buf[o.n_dargs], sizeof o.dargs_buf[0], "%.*s", (int)(eq - v), v);
            o.dargs_name[o.n_dargs] = o.dargs_buf[o.n_dargs];
            o.dargs_val[o.n_dargs++] = eq + 1;
        }
        else if (!strcmp(a, "--repeats")) { VAL(); if (opt_int("sweep", a, v, 1, 1000, &o.repeats)) return 2; }
        else if (!strcmp(a, "--order-seed")) { VAL(); double x; if (opt_double("sweep", a, v, 0, 9007199254740992.0, &x)) return 2; o.order_seed = (uint64_t)x; }
        else if (!strcmp(a, "--warmup")) { VAL(); if (opt_int("sweep", a, v, 0, 100000, &o.warmup)) return 2; }
        else if (!strcmp(a, "--budget")) { VAL(); if (opt_double("sweep", a, v, 1, 1e7, &o.budget_s)) return 2; }
        else if (!strcmp(a, "--profile-cmd")) { VAL(); o.profile_cmd = v; }
        else if (!strcmp(a, "--no-canary")) o.canary = 0;
        else if (!strcmp(a, "--canary-duration")) { VAL(); if (opt_double("sweep", a, v, 1, 86400, &o.canary_duration)) return 2; }
        else if (!strcmp(a, "--canary-threshold")) { VAL(); if (opt_double("sweep", a, v, 0, 1000, &o.canary_threshold)) return 2; }
        else if (!strcmp(a, "--canary-calibrate")) { VAL(); o.canary_calibrate = v; }
        else if (!strcmp(a, "--boot-timeout")) { VAL(); if (opt_double("sweep", a, v, 1, 86400, &o.boot_timeout)) return 2; }
        else if (!strcmp(a, "--block-size")) { VAL(); if (opt_int("sweep", a, v, 1, 64, &o.block_size)) return 2; bs_set = 1; }
        else if (!strcmp(a, "--drafter-config")) { VAL(); dcfg = v; }
        else if (!strcmp(a, "--cost-table")) { VAL(); o.cost_table = v; }
        else if (!strcmp(a, "--port-base")) { VAL(); if (opt_int("sweep", a, v, 1024, 65535, &o.port_base)) return 2; }
        else if (refused_load_opt(a)) {
            fprintf(stderr, "sweep: %s is not a sweep option: each run is a closed loop at one --concurrency on the "
                    "launch's own depth (see specbed sweep --help)\n", a);
            return 2;
        }
        else if (!strcmp(a, "--workload") || !strcmp(a, "--url")) {
            fprintf(stderr, "sweep: use --workloads (a list); the URL is set per launch\n");
            return 2;
        } else {
            int r = load_cli_opt("sweep", argc, argv, &i, &o.lo);
            if (r < 0) return 2;
            if (r == 0) { fprintf(stderr, "sweep: unknown option '%s' (see specbed sweep --help)\n", a); return 2; }
        }
#undef VAL
    }
    o.out = o.lo.out;
    if (!o.launch || !o.n_depths || !o.n_workloads || !o.n_conc || !o.out) {
        fprintf(stderr, "sweep: --launch, --depths, --workloads, --concurrency and --out are required (see --help)\n");
        return 2;
    }
    char perr[1024];
    if (proc_template_check(o.launch, "--launch", perr, sizeof perr) ||
        (o.launch_off && proc_template_check(o.launch_off, "--launch-off", perr, sizeof perr))) {
        fprintf(stderr, "sweep: %s\n", perr);
        return 2;
    }
    int has_nonzero = 0, has_zero = 0;
    for (int i = 0; i < o.n_depths; i++) { has_nonzero |= o.depths[i] > 0; has_zero |= o.depths[i] == 0; }
    if (has_zero && !o.launch_off) {
        /* --depth 0 is not speculation off for every server (specbed serve refuses it): take the flags out */
        if (launch_off_derive(o.launch, o.off_buf, sizeof o.off_buf, o.off_removed, sizeof o.off_removed, perr,
                              sizeof perr)) {
            fprintf(stderr, "sweep: %s\n", perr);
            return 2;
        }
        o.launch_off = o.off_buf;
        fprintf(stderr, "sweep: speculation off (depth 0) launches: %s\nsweep:   (removed from --launch: %s; "
                "--launch-off CMD to choose)\n", o.launch_off, o.off_removed);
    }
    if (has_nonzero && !strstr(o.launch, "{depth}")) {
        fprintf(stderr, "sweep: --launch needs a {depth} placeholder\n");
        return 2;
    }
    if (o.n_drafters && !strstr(o.launch, "{drafter}")) {
        fprintf(stderr, "sweep: --drafters given but --launch has no {drafter} placeholder\n");
        return 2;
    }
    if (!o.n_drafters) { o.drafters[0] = "default"; o.n_drafters = 1; o.dbuf[0] = 0; }
    if (o.warmup < 0) {
        o.warmup = 2;
        for (int i = 0; i < o.n_conc; i++) if (o.conc[i] > o.warmup) o.warmup = o.conc[i];
    }
    if (o.profile_cmd && o.cost_table) {
        fprintf(stderr, "sweep: give --profile-cmd or --cost-table, not both\n");
        return 2;
    }
    /* Depth 0 first: its canary calibrates the others (auto) and it is the baseline. */
    for (int i = 1; i < o.n_depths; i++)
        for (int j = i; j > 0 && o.depths[j] < o.depths[j - 1]; j--) { int t = o.depths[j]; o.depths[j] = o.depths[j - 1]; o.depths[j - 1] = t; }
    if (!o.canary_calibrate) o.canary_calibrate = has_zero ? "auto" : "none";
    if (dcfg) {
        if (read_block_size(dcfg, &o.block_size, o.block_src, sizeof o.block_src)) return 2;
        if (bs_set) fprintf(stderr, "sweep: note: --drafter-config overrides --block-size\n");
    } else if (bs_set)
        snprintf(o.block_src, sizeof o.block_src, "--block-size");
    o.lo.c.url = "http://127.0.0.1:0";   /* set per launch */
    o.lo.workload = o.workloads[0];
    if (load_cli_check("sweep", &o.lo)) return 2;
    o.lo.c.progress = 0;
    char err[512];
    if (http_init(err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); return 2; }
    int rc = run_sweep(&o);
    http_cleanup();
    return rc;
}
