/* sweep.c — `specbed sweep`: for each drafter and depth, launch the server
 * from a command template, run the canary on the cold launch, run the load
 * for each workload × concurrency × repeat, stop the server; every run is
 * stored (OUT/<drafter>-d<depth>/<workload>-c<conc>-r<rep>/, the load's
 * outputs) and summarised in OUT/runs.csv; OUT/sweep.json is the manifest
 * `specbed report` reads. Depth 0 (speculation off) is launched once and
 * serves as every drafter's baseline. */
#include "args.h"
#include "canary.h"
#include "canary_verdict.h"
#include "commands.h"
#include "csv_row.h"
#include "errmsg.h"
#include "file.h"
#include "httpc.h"
#include "proc_launch.h"
#include "load_cli.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    const char *out;
    char wbuf[2048], dbuf[1024];
} sweep_opts;

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed sweep --launch \"CMD … --depth {depth} --port {port}\" --depths LIST\n"
        "                     --workloads LIST --concurrency LIST --out DIR [options]\n"
        "\n"
        "Relaunches the server per draft depth (and per drafter), runs the canary on\n"
        "each cold launch, runs the load for every workload × concurrency × repeat, and\n"
        "stores every run under DIR (runs.csv, sweep.json, one directory per run).\n"
        "Then: specbed report DIR.\n"
        "\n"
        "  --launch CMD          server command; placeholders {port}, {depth}, {drafter},\n"
        "                        {drafter_args}\n"
        "  --launch-off CMD      command for depth 0 (speculation off); default: --launch\n"
        "                        with {depth} = 0 and {drafter} = none (specbed serve takes\n"
        "                        --depth 1..16, so give it --launch-off without a drafter)\n"
        "  --depths LIST         e.g. 0,1,2,4 or 0-7 (0 = speculation off)\n"
        "  --workloads LIST      workload names or files, e.g. code,prose\n"
        "  --concurrency LIST    closed-loop concurrencies, e.g. 1,8\n"
        "  --drafters LIST       values for {drafter}, one sweep each (default: none given)\n"
        "  --drafter-args N=ARGS what {drafter_args} becomes for drafter N (repeatable), e.g.\n"
        "                        \"draft=--draft-model models/tiny-draft\"; empty for others\n"
        "  --repeats R           runs per cell (default 1)\n"
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
        "                        clean; none; or a DIR of clean runs for every threshold\n"
        "  --boot-timeout S      seconds to wait for /health (default 300)\n"
        "  --block-size N        the depth dspark_block_size would impose (default 5)\n"
        "  --drafter-config F    read dspark_block_size / block_size from a checkpoint config\n"
        "  --cost-table F        cost table for the report (specbed profile JSON or\n"
        "                        bench_engine CSV); recorded in sweep.json\n"
        "\n"
        "Load options for every run (--url is set per launch; --workload is --workloads):\n%s",
        LOAD_CLI_HELP);
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
    "p99_e2el_ms", "spec_decode_acceptance_length", "spec_decode_acceptance_rate", "specbed_min_interval_accept_length",
    "specbed_num_intervals", "specbed_metrics_scrapes_failed"};
enum { N_RUN_COLS = sizeof RUN_COLS / sizeof *RUN_COLS, MAX_POS_COLS = 16 };

static void write_run_header(FILE *f) {
    csv_row r = {f, 0};
    for (int i = 0; i < N_RUN_COLS; i++) csv_row_field(&r, RUN_COLS[i]);
    for (int p = 0; p < MAX_POS_COLS; p++) csv_row_fieldf(&r, "pos_%d", p);
    csv_row_end(&r);
}

static void write_run_row(FILE *f, const char *drafter, int depth, const char *wl, int conc, int rep, const char *dir,
                          const cJSON *s) {
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
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(s, "spec_decode_per_position_acceptance_rates");
    for (int p = 0; p < MAX_POS_COLS; p++) {
        const cJSON *v = cJSON_GetArrayItem(pp, p);
        if (cJSON_IsNumber(v)) csv_row_fieldf(&r, "%.6g", v->valuedouble);
        else csv_row_field(&r, "");
    }
    csv_row_end(&r);
    fflush(f);
}

static cJSON *manifest(const sweep_opts *o) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "launch", o->launch);
    if (o->launch_off) cJSON_AddStringToObject(j, "launch_off", o->launch_off);
    cJSON *a = cJSON_AddArrayToObject(j, "depths");
    for (int i = 0; i < o->n_depths; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(o->depths[i]));
    a = cJSON_AddArrayToObject(j, "workloads");
    for (int i = 0; i < o->n_workloads; i++) cJSON_AddItemToArray(a, cJSON_CreateString(o->workloads[i]));
    a = cJSON_AddArrayToObject(j, "concurrency");
    for (int i = 0; i < o->n_conc; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(o->conc[i]));
    a = cJSON_AddArrayToObject(j, "drafters");
    for (int i = 0; i < o->n_drafters; i++) cJSON_AddItemToArray(a, cJSON_CreateString(o->drafters[i]));
    cJSON_AddNumberToObject(j, "repeats", o->repeats);
    cJSON_AddNumberToObject(j, "num_prompts", o->lo.c.num_prompts);
    if (o->lo.c.max_tokens > 0) cJSON_AddNumberToObject(j, "max_tokens", o->lo.c.max_tokens);
    else cJSON_AddStringToObject(j, "max_tokens_source", "workload rows (128 where a row has none)");
    cJSON_AddNumberToObject(j, "temperature", o->lo.c.temperature);
    cJSON_AddNumberToObject(j, "block_size", o->block_size);
    cJSON_AddStringToObject(j, "block_size_source", o->block_src);
    if (o->cost_table) cJSON_AddStringToObject(j, "cost_table", o->cost_table);
    cJSON_AddNumberToObject(j, "canary", o->canary);
    char d[32];
    time_t now = time(NULL);
    strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", localtime(&now));
    cJSON_AddStringToObject(j, "started", d);
    cJSON_AddArrayToObject(j, "launches");
    return j;
}

static int run_sweep(sweep_opts *o) {
    char err[2048], p[4200];
    if (ld_mkdirs(o->out, err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); return 2; }
    /* Every workload must load before any server starts. */
    workload *wls[SW_MAX] = {0};
    for (int i = 0; i < o->n_workloads; i++)
        if (workload_load(&wls[i], o->workloads[i], err, sizeof err)) {
            fprintf(stderr, "sweep: %s\n", err);
            for (int k = 0; k < i; k++) workload_free(wls[k]);
            return 2;
        }
    snprintf(p, sizeof p, "%s/runs.csv", o->out);
    FILE *runs = fopen(p, "w");
    if (!runs) { fprintf(stderr, "sweep: %s: %s\n", p, strerror(errno)); return 2; }
    write_run_header(runs);
    cJSON *man = manifest(o);
    cJSON *launches = cJSON_GetObjectItemCaseSensitive(man, "launches");
    snprintf(p, sizeof p, "%s/sweep.json", o->out);
    ld_write_json(p, man, NULL, 0);
    proc_guard_signals();
    char calib_dir[1700] = "";
    int auto_cal = o->canary_calibrate && !strcmp(o->canary_calibrate, "auto");
    if (o->canary_calibrate && strcmp(o->canary_calibrate, "auto") && strcmp(o->canary_calibrate, "none"))
        snprintf(calib_dir, sizeof calib_dir, "%s", o->canary_calibrate);
    int n_fail_launch = 0, n_canary_fail = 0, n_runs = 0;
    /* Per drafter: the lowest judged-interval accept length of its previous
     * (shallower) launch whose content checks were clean. E(k) does not
     * decrease with k, so that is a clean floor for the next depth. */
    double prev_min[SW_MAX];
    for (int k = 0; k < SW_MAX; k++) prev_min[k] = NAN;
    double t0 = http_now();
    int n_launch = 0;
    for (int di = 0; di < o->n_depths; di++) n_launch += o->depths[di] == 0 ? 1 : o->n_drafters;
    int li = 0;
    for (int di = 0; di < o->n_depths; di++) {
        int depth = o->depths[di];
        for (int dr = 0; dr < (depth == 0 ? 1 : o->n_drafters); dr++) {
            const char *drafter = depth == 0 ? "none" : o->drafters[dr];
            li++;
            char label[256], dir[1500];
            snprintf(label, sizeof label, "%s-d%d", drafter, depth);
            snprintf(dir, sizeof dir, "%s/%s", o->out, label);
            if (ld_mkdirs(dir, err, sizeof err)) { fprintf(stderr, "sweep: %s\n", err); continue; }
            cJSON *L = cJSON_CreateObject();
            cJSON_AddItemToArray(launches, L);
            cJSON_AddStringToObject(L, "drafter", drafter);
            cJSON_AddNumberToObject(L, "depth", depth);
            cJSON_AddStringToObject(L, "dir", label);
            int port;
            char cmd[8192], logp[1600];
            const char *tmpl = depth == 0 && o->launch_off ? o->launch_off : o->launch;
            proc s = {0};
            const char *dargs = "";
            for (int k = 0; k < o->n_dargs; k++) if (!strcmp(o->dargs_name[k], drafter)) dargs = o->dargs_val[k];
            if (proc_free_port(&port, err, sizeof err) ||
                proc_expand(tmpl, port, depth, drafter, dargs, cmd, sizeof cmd)) {
                fprintf(stderr, "sweep: %s: cannot prepare the launch command\n", label);
                cJSON_AddStringToObject(L, "error", "cannot prepare the launch command");
                n_fail_launch++;
                continue;
            }
            cJSON_AddStringToObject(L, "command", cmd);
            snprintf(logp, sizeof logp, "%s/server.log", dir);
            fprintf(stderr, "sweep: [%d/%d] %s: %s\n", li, n_launch, label, cmd);
            double tl = http_now();
            if (proc_start(&s, cmd, port, logp, err, sizeof err) ||
                http_wait_health(s.base, o->boot_timeout, proc_alive, &s, err, sizeof err)) {
                fprintf(stderr, "sweep: %s: %s\nsweep: server log tail (%s):\n%s\n", label, err, logp, proc_log_tail(&s, 1200));
                cJSON_AddStringToObject(L, "error", err);
                proc_stop(&s);
                n_fail_launch++;
                snprintf(p, sizeof p, "%s/sweep.json", o->out);
                ld_write_json(p, man, NULL, 0);
                continue;
            }
            cJSON_AddNumberToObject(L, "boot_s", http_now() - tl);
            int content_clean = !o->canary;   /* without a canary nothing vouches for this launch */
            double run_min = NAN;
            if (o->canary) {
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
                /* The field's 2.0 at depth 5 is "a quarter of the possible gain";
                 * the same share at depth k is 1 + k/4 (capped at 2.0). After a
                 * drafter's first depth, auto mode calibrates from the previous one. */
                double thr = fmin(2.0, 1.0 + 0.25 * depth);
                const char *thr_src = "the field's 2.0 scaled to this depth, min(2, 1 + depth/4)";
                if (auto_cal && !isnan(prev_min[dr]) && prev_min[dr] > 1.05) {
                    thr = 1.0 + (prev_min[dr] - 1.0) / 2.0;
                    thr_src = "halfway from 1 to the lowest judged interval of this drafter's previous depth";
                }
                if (o->canary_threshold >= 0) { thr = o->canary_threshold; thr_src = "--canary-threshold"; }
                cc_thresholds_default(&co.thr, thr);
                char explain[4096] = "";
                if (calib_dir[0]) {
                    cc_observed clean;
                    int nr;
                    if (canary_calibrate_dir(calib_dir, co.min_drafts, &co.thr, &clean, &nr, explain, sizeof explain,
                                             err, sizeof err))
                        fprintf(stderr, "sweep: %s: canary calibration: %s (defaults kept)\n", label, err);
                    if (o->canary_threshold >= 0 || auto_cal || !clean.n_intervals) co.thr.accept_len = thr;
                }
                char cdir[1600];
                snprintf(cdir, sizeof cdir, "%s/canary", dir);
                canary_result cr;
                const cv_verdict *v = &cr.v;
                cJSON *C = cJSON_AddObjectToObject(L, "canary");
                if (canary_live(&co, s.base, cdir, &cr, err, sizeof err)) {
                    fprintf(stderr, "sweep: %s: canary could not run: %s\n", label, err);
                    cJSON_AddStringToObject(C, "verdict", "error");
                    cJSON_AddStringToObject(C, "error", err);
                } else {
                    int baseline = depth == 0 && auto_cal;   /* its scores are the clean level, not a verdict */
                    if (baseline)
                        fprintf(stderr, "sweep: %s: canary baseline for the content checks (against the defaults: %s)\n",
                                label, cr.summary);
                    else
                        fprintf(stderr, "sweep: %s: canary %s\n", label, cr.summary);
                    if (v->failed && !baseline)
                        fprintf(stderr, "sweep: %s: evidence in %s/evidence.txt (a weak drafter can sit at or below the "
                                "accept-length threshold while healthy: see --canary-threshold, --canary-calibrate)\n",
                                label, cdir);
                    cJSON_AddStringToObject(C, "verdict", baseline ? "baseline" : cv_verdict_name(v));
                    if (!isnan(v->first_flag_s)) cJSON_AddNumberToObject(C, "first_flag_s", v->first_flag_s);
                    cJSON_AddNumberToObject(C, "findings", cr.n_findings);
                    cJSON *rs = cJSON_AddArrayToObject(C, "reasons");
                    for (int k = 0; k < v->n_reasons; k++)
                        cJSON_AddItemToArray(rs, cJSON_CreateString(cv_check_name(v->reason[k].check)));
                    if (depth > 0) {   /* no speculation, no interval check */
                        cJSON_AddNumberToObject(C, "threshold", co.thr.accept_len);
                        cJSON_AddStringToObject(C, "threshold_source", thr_src);
                    }
                    content_clean = !v->content_failed;
                    run_min = cr.obs.accept_len_min;
                    cJSON_AddNumberToObject(C, "clean_intervals", v->n_clean);
                    n_canary_fail += v->failed && !baseline;
                    if (depth == 0 && o->canary_calibrate && !strcmp(o->canary_calibrate, "auto"))
                        snprintf(calib_dir, sizeof calib_dir, "%s", cdir);
                }
            }
            for (int wi = 0; wi < o->n_workloads; wi++)
                for (int ci = 0; ci < o->n_conc; ci++)
                    for (int rep = 0; rep < o->repeats; rep++) {
                        ld_config c = o->lo.c;
                        c.url = s.base;
                        c.wl = wls[wi];
                        c.concurrency = o->conc[ci];
                        c.num_prompts = o->lo.set_num_prompts ? o->lo.c.num_prompts : (4 * c.concurrency > 8 ? 4 * c.concurrency : 8);
                        c.seed = o->lo.c.seed + (uint64_t)rep;
                        c.progress = 0;
                        char rdir[1700], rel[600];
                        snprintf(rel, sizeof rel, "%s/%s-c%d-r%d", label, wls[wi]->name, c.concurrency, rep);
                        snprintf(rdir, sizeof rdir, "%s/%s", o->out, rel);
                        ld_result *res;
                        if (ld_run(&c, &res, err, sizeof err)) {
                            fprintf(stderr, "sweep: %s: %s\n", rel, err);
                            continue;
                        }
                        if (ld_write_outputs(rdir, &c, res, &o->lo.pcts, err, sizeof err))
                            fprintf(stderr, "sweep: %s: %s\n", rel, err);
                        if (res->n_scrapes_failed)
                            fprintf(stderr, "sweep: %s: %d of %d /metrics scrape(s) failed (first: %s)\n", rel,
                                    res->n_scrapes_failed, res->n_scrapes, res->scrape_error);
                        if (res->spec_depth_ignored)
                            fprintf(stderr, "sweep: %s: WARNING: %s\n", rel, res->note);
                        for (int k = 0; k < res->n_iv; k++)
                            if (cv_interval_judged(&res->iv[k], o->min_drafts) && !(res->iv[k].accept_len >= run_min))
                                run_min = res->iv[k].accept_len;
                        cJSON *sm = ld_summary_json(&c, res, &o->lo.pcts);
                        write_run_row(runs, drafter, depth, wls[wi]->name, c.concurrency, rep, rel, sm);
                        const cJSON *ot = cJSON_GetObjectItemCaseSensitive(sm, "output_throughput");
                        const cJSON *al = cJSON_GetObjectItemCaseSensitive(sm, "spec_decode_acceptance_length");
                        const cJSON *fl = cJSON_GetObjectItemCaseSensitive(sm, "failed");
                        fprintf(stderr, "sweep: %-40s %8.1f tok/s  accept len %s%.2f  failed %d\n", rel,
                                cJSON_IsNumber(ot) ? ot->valuedouble : NAN, cJSON_IsNumber(al) ? "" : "n/a ",
                                cJSON_IsNumber(al) ? al->valuedouble : 0.0, cJSON_IsNumber(fl) ? (int)fl->valuedouble : -1);
                        cJSON_Delete(sm);
                        ld_result_free(res);
                        n_runs++;
                    }
            proc_stop(&s);
            cJSON_AddNumberToObject(L, "server_exit", s.exit_status);
            if (depth > 0 && content_clean && !isnan(run_min)) prev_min[dr] = run_min;
            snprintf(p, sizeof p, "%s/sweep.json", o->out);
            ld_write_json(p, man, NULL, 0);
        }
    }
    fclose(runs);
    char d[32];
    time_t now = time(NULL);
    strftime(d, sizeof d, "%Y-%m-%d %H:%M:%S", localtime(&now));
    cJSON_AddStringToObject(man, "finished", d);
    cJSON_AddNumberToObject(man, "wall_s", http_now() - t0);
    snprintf(p, sizeof p, "%s/sweep.json", o->out);
    ld_write_json(p, man, NULL, 0);
    cJSON_Delete(man);
    for (int i = 0; i < o->n_workloads; i++) workload_free(wls[i]);
    fprintf(stderr, "sweep: %d run(s) in %.0f s; %d launch(es) failed; %d canary failure(s); results in %s\n", n_runs,
            http_now() - t0, n_fail_launch, n_canary_fail, o->out);
    fprintf(stderr, "sweep: next: specbed report %s\n", o->out);
    return n_runs ? (n_fail_launch ? 1 : 0) : 1;
}

int cmd_sweep(int argc, char **argv) {
    sweep_opts o;
    memset(&o, 0, sizeof o);
    load_cli_defaults(&o.lo);
    o.repeats = 1;
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
        else if (!strcmp(a, "--no-canary")) o.canary = 0;
        else if (!strcmp(a, "--canary-duration")) { VAL(); if (opt_double("sweep", a, v, 1, 86400, &o.canary_duration)) return 2; }
        else if (!strcmp(a, "--canary-threshold")) { VAL(); if (opt_double("sweep", a, v, 0, 1000, &o.canary_threshold)) return 2; }
        else if (!strcmp(a, "--canary-calibrate")) { VAL(); o.canary_calibrate = v; }
        else if (!strcmp(a, "--boot-timeout")) { VAL(); if (opt_double("sweep", a, v, 1, 86400, &o.boot_timeout)) return 2; }
        else if (!strcmp(a, "--block-size")) { VAL(); if (opt_int("sweep", a, v, 1, 64, &o.block_size)) return 2; bs_set = 1; }
        else if (!strcmp(a, "--drafter-config")) { VAL(); dcfg = v; }
        else if (!strcmp(a, "--cost-table")) { VAL(); o.cost_table = v; }
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
    if (!strstr(o.launch, "{port}")) { fprintf(stderr, "sweep: --launch needs a {port} placeholder\n"); return 2; }
    int has_nonzero = 0, has_zero = 0;
    for (int i = 0; i < o.n_depths; i++) { has_nonzero |= o.depths[i] > 0; has_zero |= o.depths[i] == 0; }
    if (has_nonzero && !strstr(o.launch, "{depth}")) {
        fprintf(stderr, "sweep: --launch needs a {depth} placeholder\n");
        return 2;
    }
    if (o.n_drafters && !strstr(o.launch, "{drafter}")) {
        fprintf(stderr, "sweep: --drafters given but --launch has no {drafter} placeholder\n");
        return 2;
    }
    if (!o.n_drafters) { o.drafters[0] = "default"; o.n_drafters = 1; o.dbuf[0] = 0; }
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
