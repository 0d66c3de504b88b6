/* cmd_canary.c — `specbed canary`: options, cold launch, calibration, and
 * the offline scans; the checks are canary.c / canary_probes.c / canary_io.c,
 * the verdict canary_verdict.c. */
#include "args.h"
#include "canary.h"
#include "httpc.h"
#include "proc_launch.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Removes what this run wrote under dir (it created dir), but `keep` (a
 * file name, NULL = none), and dir itself when nothing is kept. Returns 1
 * when `keep` was there and kept. */
static const char *rm_keep;
static int rm_kept;
static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *fw) {
    if (fw->level == 0) return 0;   /* dir itself: below */
    const char *base = p + fw->base;
    if (fw->level == 1 && rm_keep && !strcmp(base, rm_keep) && flag == FTW_F && sb->st_size > 0) { rm_kept = 1; return 0; }
    if (remove(p)) fprintf(stderr, "canary: could not remove %s\n", p);
    return 0;
}

static int rm_outputs(const char *dir, const char *keep) {
    rm_keep = keep;
    rm_kept = 0;
    nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    if (!rm_kept && rmdir(dir)) fprintf(stderr, "canary: could not remove %s\n", dir);
    return rm_kept;
}

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed canary (--url URL | --launch \"CMD {port}\") [options]\n"
        "       specbed canary --sglang-log FILE|- [--threshold T]      (offline scan)\n"
        "       specbed canary --intervals FILE.csv [--threshold T]     (offline scan)\n"
        "       specbed canary --calibrate DIR                          (print thresholds)\n"
        "\n"
        "Runs a short bursty greedy load right after a (cold) server start and fails\n"
        "(exit 1, evidence printed and written to --out) when any judged interval (under\n"
        "load, with an accept length, enough verify steps) has accept length <= the\n"
        "threshold, or when a content check fails: greedy spec-on vs spec-off mismatch\n"
        "(specbed's per-request spec_depth), U+FFFD or control characters, punctuation\n"
        "spray, repeated-trigram loops, different output for identical greedy requests,\n"
        "a flat or context-free next-token distribution in a prefill-only probe (the same\n"
        "top-k logprobs at different contexts), a passphrase that fails to copy across\n"
        "128 tokens. The offline scans apply the same verdict to the\n"
        "intervals alone. Every reason is printed and listed in canary.json.\n"
        "Exit 0 clean, 1 corruption found, 2 could not run, 3 inconclusive (no check\n"
        "failed, but one that was asked for could not be made: --spec-check on against\n"
        "a server whose draft counters move under \"spec_depth\": 0, or an interval\n"
        "check (--threshold > 0) that judged no interval because the source gave no\n"
        "accept length; --threshold 0 turns the interval check off).\n"
        "Per-rank series (SGLang dp_rank/tp_rank, vLLM engine) are judged rank by rank.\n"
        "\n"
        "  --launch CMD          start the server (CMD has a {port} placeholder), wait for\n"
        "                        /health, run, stop it; its log goes to OUT/server.log\n"
        "  --port-base P         with --launch: the first free port from P (P..P+99); default 0,\n"
        "                        any free port the kernel picks\n"
        "  --boot-timeout S      seconds to wait for /health (default 180)\n"
        "  --duration S          length of the bursty load (default 30)\n"
        "  --burst N             concurrency of the bursts (default 8; troughs run 2)\n"
        "  --threshold T         accept length at or below which an interval fails (default 2.0)\n"
        "  --min-drafts N        verify steps an interval needs to be judged (default %d; log\n"
        "                        sources count none, so there only loaded intervals with an\n"
        "                        accept length are judged)\n"
        "  --calibrate DIR       derive every threshold from the clean runs in DIR (a previous\n"
        "                        canary or load --out, or a sweep) and print them\n"
        "  --intervals CSV       offline: scan a saved intervals.csv\n"
        "  --sglang-log FILE     with --url/--launch: live SGLang log as the metric source;\n"
        "                        alone: scan the log offline (- = stdin), one line per flag\n"
        "  --probes N            prompts in the determinism / spec on-off probes (default 8)\n"
        "  --copy-workload W     passphrase prompts (default copy; none = skip)\n"
        "  --spec-check on|off|auto   greedy spec-on vs spec-off (default auto: specbed only);\n"
        "                        the reference pass watches the draft counters and reports\n"
        "                        the check as not made when the server ignored spec_depth 0\n"
        "  --no-content-checks   interval check only\n"
        "  --fail-fast           stop the load at the first flagged interval, or the first\n"
        "                        content failure no later request could undo\n"
        "  --out DIR             evidence directory (default results/canary-DATE); its JSON\n"
        "                        files are valid UTF-8 whatever the server sends (bytes that\n"
        "                        are not UTF-8 become U+FFFD, counted in KEY_invalid_utf8)\n"
        "\n"
        "Load options (the canary sends greedy requests, temperature 0, in prompt-set\n"
        "order, as a bursty profile: 4 s at --burst, 2 s at 2, repeated for --duration,\n"
        "unless --profile or --rate shapes it instead):\n", CV_MIN_DRAFTS_DEFAULT);
    /* the canary's own --duration, --out and --sglang-log are listed above;
     * it fixes temperature, top-p and order, and --concurrency has no effect
     * on its profile (canary.c run_load) */
    static const char *const omit[] = {"--duration", "--out", "--sglang-log", "--temperature", "--top-p",
                                       "--no-shuffle", "--concurrency", NULL};
    static const load_help_spec spec = {
        .omit = omit, .workload = "default code", .interval_s = 2,
        .num_prompts = "unlimited: as many as --duration allows", .max_tokens = "64"};
    load_cli_help(f, &spec);
}

int cmd_canary(int argc, char **argv) {
    canary_opts o;
    canary_opts_default(&o);
    const char *launch = NULL, *calib = NULL, *csv = NULL;
    double boot_timeout = 180, threshold = 2.0;
    int threshold_set = 0, port_base = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(stdout); return 0; }
#define VAL() do { if (!(v = opt_value("canary", argc, argv, &i))) return 2; } while (0)
        if (!strcmp(a, "--launch")) { VAL(); launch = v; }
        else if (!strcmp(a, "--port-base")) { VAL(); if (opt_int("canary", a, v, 1, 65435, &port_base)) return 2; }
        else if (!strcmp(a, "--boot-timeout")) { VAL(); if (opt_double("canary", a, v, 1, 86400, &boot_timeout)) return 2; }
        else if (!strcmp(a, "--duration")) { VAL(); if (opt_double("canary", a, v, 1, 86400, &o.duration_s)) return 2; }
        else if (!strcmp(a, "--burst")) { VAL(); if (opt_int("canary", a, v, 1, 4096, &o.burst)) return 2; }
        else if (!strcmp(a, "--threshold")) { VAL(); if (opt_double("canary", a, v, 0, 1000, &threshold)) return 2; threshold_set = 1; }
        else if (!strcmp(a, "--min-drafts")) { VAL(); if (opt_double("canary", a, v, 0, 1e9, &o.min_drafts)) return 2; }
        else if (!strcmp(a, "--calibrate")) { VAL(); calib = v; }
        else if (!strcmp(a, "--intervals")) { VAL(); csv = v; }
        else if (!strcmp(a, "--probes")) { VAL(); if (opt_int("canary", a, v, 1, 64, &o.n_probe)) return 2; }
        else if (!strcmp(a, "--copy-workload")) { VAL(); o.copy_workload = strcmp(v, "none") ? v : ""; }
        else if (!strcmp(a, "--spec-check")) {
            VAL();
            if (!strcmp(v, "on")) o.spec_check = 1;
            else if (!strcmp(v, "off")) o.spec_check = 0;
            else if (!strcmp(v, "auto")) o.spec_check = -1;
            else { fprintf(stderr, "canary: --spec-check '%s' must be on, off or auto\n", v); return 2; }
        }
        else if (!strcmp(a, "--no-content-checks")) o.content_checks = 0;
        else if (!strcmp(a, "--fail-fast")) o.fail_fast = 1;
        else {
            int r = load_cli_opt("canary", argc, argv, &i, &o.lo);
            if (r < 0) return 2;
            if (r == 0) { fprintf(stderr, "canary: unknown option '%s' (see specbed canary --help)\n", a); return 2; }
        }
#undef VAL
    }
    char err[2048];
    cc_thresholds_default(&o.thr, threshold);
    if (calib) {
        char explain[4096];
        cc_observed clean;
        int n_runs;
        if (canary_calibrate_dir(calib, o.min_drafts, &o.thr, &clean, &n_runs, explain, sizeof explain, err, sizeof err)) {
            fprintf(stderr, "canary: --calibrate: %s\n", err);
            return 2;
        }
        if (threshold_set) o.thr.accept_len = threshold;   /* an explicit --threshold wins */
        printf("calibrated from %d clean run(s) in %s:\n%s", n_runs, calib, explain);
        fflush(stdout);
    }
    int live = o.lo.c.url || launch;
    /* Offline scans: the same verdict over the intervals alone. */
    if (!live && (csv || o.lo.c.sglang_log)) {
        int n_rows = 0;
        cv_verdict v;
        int r = csv ? canary_scan_csv(csv, &o.thr, o.min_drafts, stdout, &n_rows, &v, err, sizeof err)
                    : canary_scan_sglang(o.lo.c.sglang_log, &o.thr, o.min_drafts, stdout, &n_rows, &v, err, sizeof err);
        if (r) { fprintf(stderr, "canary: %s\n", err); return 2; }
        int flagged = v.interval_failed ? v.reason[0].count : 0;
        printf("canary: %d of %d interval(s) at or below accept length %.3f; %d judged (loaded, with an accept length%s)%s\n",
               flagged, n_rows, o.thr.accept_len, v.n_judged, csv ? ", enough verify steps" : "",
               n_rows ? "" : " (no Decode batch lines / rows found)");
        if (v.interval_failed) {
            char line[512];
            cv_reason_format(&v.reason[0], line, sizeof line);
            printf("canary: FAIL because %s\n", line);
        }
        if (n_rows && !v.failed && v.inconclusive) {
            char line[512];
            cv_not_judged_format(&v, csv ? "the interval CSV" : "the SGLang log", o.min_drafts, line, sizeof line);
            printf("canary: INCONCLUSIVE: %s\n", line);
        }
        return v.failed ? 1 : !n_rows ? 2 : v.inconclusive ? 3 : 0;
    }
    if (!live) {
        if (calib) return 0;
        fprintf(stderr, "canary: give --url, --launch, --sglang-log or --intervals (see --help)\n");
        return 2;
    }
    if (o.lo.c.url && launch) { fprintf(stderr, "canary: --url and --launch exclude each other\n"); return 2; }
    if (port_base && !launch) { fprintf(stderr, "canary: --port-base needs --launch\n"); return 2; }
    /* before anything is created: a template without {port} would start a
     * server specbed cannot find, and wait the whole boot timeout for it */
    if (launch && proc_template_check(launch, "--launch", err, sizeof err)) { fprintf(stderr, "canary: %s\n", err); return 2; }
    if (!o.lo.workload) o.lo.workload = "code";
    o.lo.c.url = o.lo.c.url ? o.lo.c.url : "http://127.0.0.1:0";   /* replaced after launch */
    if (load_cli_check("canary", &o.lo)) return 2;
    char outdir[1024];
    if (o.lo.out) snprintf(outdir, sizeof outdir, "%s", o.lo.out);
    else {
        char d[32];
        time_t now = time(NULL);
        strftime(d, sizeof d, "%Y%m%d-%H%M%S", localtime(&now));
        snprintf(outdir, sizeof outdir, "results/canary-%s", d);
    }
    /* Created here, so that a canary that cannot run (no server, a launch
     * that never became healthy) takes it away again (out:). */
    struct stat st_out;
    int created = stat(outdir, &st_out) != 0;
    if (ld_mkdirs(outdir, err, sizeof err)) { fprintf(stderr, "canary: %s\n", err); return 2; }
    int launch_failed = 0;
    if (http_init(err, sizeof err)) { fprintf(stderr, "canary: %s\n", err); return 2; }
    proc s = {0};
    char base[256];
    int rc = 2;
    double t_launch = http_now(), boot_s = NAN;
    if (launch) {
        proc_guard_signals();
        int port;
        char cmd[8192], logp[1100];
        if (proc_pick_port(port_base, &port, err, sizeof err)) { fprintf(stderr, "canary: %s\n", err); goto out; }
        if (proc_expand(launch, port, -1, NULL, NULL, cmd, sizeof cmd)) { fprintf(stderr, "canary: --launch command too long\n"); goto out; }
        snprintf(logp, sizeof logp, "%s/server.log", outdir);
        if (proc_start(&s, cmd, port, logp, err, sizeof err)) { fprintf(stderr, "canary: %s\n", err); goto out; }
        if (http_wait_health(s.base, boot_timeout, proc_alive, &s, err, sizeof err)) {
            fprintf(stderr, "canary: %s\ncanary: server log tail (%s):\n%s\n", err, logp, proc_log_tail(&s, 1500));
            launch_failed = 1;
            goto out;
        }
        o.t_health = http_now();
        o.t_launch = t_launch;
        boot_s = o.t_health - t_launch;
        snprintf(base, sizeof base, "%s", s.base);
    } else
        http_base(o.lo.c.url, base, sizeof base);
    canary_result res;
    if (canary_live(&o, base, outdir, &res, err, sizeof err)) {
        fprintf(stderr, "canary: could not run: %s\n", err);
        if (launch) fprintf(stderr, "canary: server log tail:\n%s\n", proc_log_tail(&s, 1500));
        goto out;
    }
    printf("canary %s\n", res.summary);
    if (!isnan(res.v.first_flag_s))
        printf("canary: first flag %.1f s into the load\n", res.v.first_flag_s);
    if (!isnan(res.v.first_flag_s) && o.t_health > 0)
        printf("canary: first flag %.2f s after the first /health 200\n", res.v.first_flag_s + res.t_load_origin - o.t_health);
    if (!isnan(boot_s)) printf("canary: server became healthy %.1f s after launch\n", boot_s);
    printf("canary: evidence in %s\n", outdir);
    rc = res.v.failed ? 1 : res.v.inconclusive ? 3 : 0;
out:
    if (launch) proc_stop(&s);
    http_cleanup();
    if (rc == 2 && created) {
        /* nothing was judged: no results folder is left behind, except the
         * log of a server that failed to start (evidence of why) */
        int kept = rm_outputs(outdir, launch_failed ? "server.log" : NULL);
        if (kept) fprintf(stderr, "canary: could not run; %s/server.log kept (the failed launch's log), nothing else written\n", outdir);
        else fprintf(stderr, "canary: could not run; removed %s (created by this run, nothing in it to keep)\n", outdir);
    }
    return rc;
}
