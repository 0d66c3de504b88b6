/* canary.h — `specbed canary`: run a short bursty greedy load right after a
 * (cold) server start and fail when any loaded interval's accept length is
 * at or below the threshold, or when the content checks fail
 * (canary_checks.h): greedy spec-on vs spec-off mismatch (servers that take
 * a per-request "spec_depth"), bad characters, punctuation spray, trigram
 * loops, different output for identical greedy requests, a flat next-token
 * distribution in a prefill-only probe (echo + logprobs), a passphrase that
 * fails to copy across the 128-token boundary (workloads/copy.jsonl).
 *
 * Evidence goes to --out: canary.json (verdict, thresholds, observed
 * scores, findings), evidence.txt (what a human reads), load/ (the load's
 * requests.csv, intervals.csv, summary.json, outputs.jsonl), reference.jsonl
 * (the reference outputs), copy.jsonl (the passphrase probes). */
#ifndef SPECBED_BENCH_CANARY_H
#define SPECBED_BENCH_CANARY_H
#include <stddef.h>
#include "canary_checks.h"
#include "load_cli.h"

typedef struct {
    load_cli lo;                 /* load options (url, workload, …); the canary forces temperature 0 */
    double duration_s;           /* bursty load length (default 30) */
    int burst;                   /* concurrency of the bursts (default 8) */
    double min_drafts;           /* interval needs this many verify steps to be judged (default 4) */
    cc_thresholds thr;
    int n_probe;                 /* prompts in the determinism / spec-on-off probes (default 8) */
    const char *copy_workload;   /* default "copy"; "" = skip */
    int spec_check;              /* -1 auto (server is specbed), 0 off, 1 on */
    int content_checks;          /* 0 = interval check only */
    int fail_fast;               /* stop the load at the first flagged interval */
    int quiet;                   /* findings to the evidence files only, not stderr (sweeps) */
} canary_opts;

void canary_opts_default(canary_opts *o);

typedef struct {
    int ran;                     /* 0 = could not run */
    int failed;                  /* corruption signature found */
    int content_failed;          /* … by a content check */
    int interval_failed;         /* … by the accept-length interval check */
    int n_findings;
    double first_flag_s;         /* end of the first flagged interval, seconds after the load began; NaN */
    int clean_intervals;         /* loaded intervals judged and not flagged */
    int judged_intervals;
    cc_observed obs;
    char summary[512];           /* one line */
} canary_verdict;

/* Runs the canary against a server at base_url; writes evidence under
 * outdir. 0 = it ran (see v->failed), -1 = could not run (err). */
int canary_live(const canary_opts *o, const char *base_url, const char *outdir, canary_verdict *v,
                char *err, size_t errlen);

/* Derives thresholds from the clean runs under dir (canary.json files, or
 * load outputs: intervals.csv + outputs.jsonl), into t; prints nothing.
 * explain gets the derivation. -1 when dir holds no usable run. */
int canary_calibrate_dir(const char *dir, double min_drafts, cc_thresholds *t, cc_observed *clean, int *n_runs,
                         char *explain, size_t explen, char *err, size_t errlen);

/* Observations of a load output directory (intervals.csv, outputs.jsonl):
 * loaded intervals with ≥ min_drafts verify steps, and the text scores. */
int canary_observe_load_dir(const char *dir, double min_drafts, cc_observed *o, char *err, size_t errlen);

/* Offline scans: every loaded interval at or below threshold, printed with
 * its line number (SGLang log; path "-" = stdin) or row (interval CSV).
 * Returns the number flagged, -1 on error. */
int canary_scan_sglang(const char *path, double threshold, FILE *out, int *n_rows, char *err, size_t errlen);
int canary_scan_csv(const char *path, double threshold, double min_drafts, FILE *out, int *n_rows,
                    char *err, size_t errlen);
#endif
