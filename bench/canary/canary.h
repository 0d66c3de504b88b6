/* canary.h — `specbed canary`: run a short bursty greedy load right after a
 * (cold) server start and fail when any judged interval's accept length is
 * at or below the threshold (canary_verdict.h says which intervals are
 * judged), or when the content checks fail
 * (canary_checks.h): greedy spec-on vs spec-off mismatch (servers that take
 * a per-request "spec_depth"), bad characters, punctuation spray, trigram
 * loops, different output for identical greedy requests, a flat or a
 * context-free next-token distribution in a prefill-only probe (echo +
 * logprobs), a passphrase that
 * fails to copy across the 128-token boundary (workloads/copy.jsonl).
 *
 * Evidence goes to --out: canary.json (verdict, reasons, not_made with
 * why, thresholds, observed scores, flagged_intervals — each with its start
 * and end in seconds since the load began and since the server's launch,
 * its accept length, rank and the threshold —, findings, tolerated findings), evidence.txt (what a human reads), load/ (the load's
 * requests.csv, intervals.csv, summary.json, outputs.jsonl), reference.jsonl
 * (the reference outputs), copy.jsonl (the passphrase probes).
 *
 * Pass or fail is cv_judge()'s (canary_verdict.h), for the live run and the
 * offline scans alike; this module gathers what it judges and writes the
 * evidence. */
#ifndef SPECBED_BENCH_CANARY_H
#define SPECBED_BENCH_CANARY_H
#include <stddef.h>
#include <stdio.h>
#include "canary_checks.h"
#include "canary_verdict.h"
#include "load_cli.h"

typedef struct {
    load_cli lo;                 /* load options (url, workload, …); the canary forces temperature 0 */
    double duration_s;           /* bursty load length (default 30) */
    int burst;                   /* concurrency of the bursts (default 8) */
    double min_drafts;           /* verify steps an interval needs to be judged (CV_MIN_DRAFTS_DEFAULT) */
    cc_thresholds thr;
    int n_probe;                 /* prompts in the determinism / spec-on-off probes (default 8) */
    const char *copy_workload;   /* default "copy"; "" = skip */
    int spec_check;              /* -1 auto (server is specbed), 0 off, 1 on */
    int content_checks;          /* 0 = interval check only */
    int fail_fast;               /* stop the load at the first flagged interval or settled content failure */
    int quiet;                   /* findings to the evidence files only, not stderr (sweeps) */
    /* The server's boot, when the caller launched it (http_now() clock;
     * 0 = unknown, e.g. --url): canary.json then gives every flagged
     * interval in seconds since the launch too, and the first flag in
     * seconds since the first /health 200. */
    double t_launch;             /* the server process was started */
    double t_health;             /* its /health first answered 200 */
} canary_opts;

void canary_opts_default(canary_opts *o);

/* What a live canary run produced. */
typedef struct {
    cv_verdict v;                /* pass / fail and why (times in seconds since the load began) */
    cc_observed obs;             /* the run's scores (calibration reads them back from canary.json) */
    int n_findings;              /* evidence lines, notes excluded */
    char summary[512];           /* one line */
    double t_load_origin;        /* http_now() of the load's t = 0 (times in v are relative to it) */
} canary_result;

/* Runs the canary against a server at base_url; writes evidence under
 * outdir. 0 = it ran (see res->v.failed), -1 = could not run (err). */
int canary_live(const canary_opts *o, const char *base_url, const char *outdir, canary_result *res,
                char *err, size_t errlen);

/* Derives thresholds from the clean runs under dir (canary.json files, or
 * load outputs: intervals.csv + outputs.jsonl), into t; prints nothing.
 * explain gets the derivation. -1 when dir holds no usable run. */
int canary_calibrate_dir(const char *dir, double min_drafts, cc_thresholds *t, cc_observed *clean, int *n_runs,
                         char *explain, size_t explen, char *err, size_t errlen);

/* Observations of a load output directory (intervals.csv, outputs.jsonl):
 * judged intervals (cv_interval_judged) and the text scores. */
int canary_observe_load_dir(const char *dir, double min_drafts, cc_observed *o, char *err, size_t errlen);

/* Offline scans of an SGLang log (path "-" = stdin) or an interval CSV:
 * every flagged interval is printed to out with its line number / row, and
 * v gets cv_judge()'s verdict over the intervals (content checks: none).
 * *n_rows = intervals read. 0 ok, -1 on error. */
int canary_scan_sglang(const char *path, const cc_thresholds *t, double min_drafts, FILE *out, int *n_rows,
                       cv_verdict *v, char *err, size_t errlen);
int canary_scan_csv(const char *path, const cc_thresholds *t, double min_drafts, FILE *out, int *n_rows,
                    cv_verdict *v, char *err, size_t errlen);

/* `specbed canary` (tools/main.c dispatches to it; argv[0] is "canary"):
 * 0 pass, 1 corruption found, 2 bad usage / could not run, 3 inconclusive
 * (a check it was asked to make could not be made). */
int cmd_canary(int argc, char **argv);
#endif
