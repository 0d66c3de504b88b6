/* cmd_report.c — `specbed report DIR`: options, then report_data.c
 * (load, intervals, decision, predictions), report_plot.c (gnuplot),
 * report_md.c (text). */
#include "args.h"
#include "load_out.h"
#include "report.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed report DIR [--out REPORT] [--cost-table FILE] [--block-size N]\n"
        "                          [--bootstrap N] [--seed S]\n"
        "\n"
        "Renders a sweep directory (specbed sweep --out DIR) with gnuplot, PNG and SVG,\n"
        "one panel per drafter with 95%% interval bands: the decision figure (gain over\n"
        "speculation off vs depth, with the 1.0 line), decode and end-to-end tokens/s,\n"
        "accept length, TTFT/ITL, per-position acceptance (code vs prose), predicted vs\n"
        "measured, and interval timelines with the canary threshold; plus report.md\n"
        "(the decision and its confidence first) and recommendation.json.\n"
        "\n"
        "Intervals: per repeat, the requests are bootstrapped (N resamples, seeded);\n"
        "the repeats are combined by a t interval on max(between-repeat, request-noise)\n"
        "variance (bench/load/stats.h st_two_level). A depth's gain is its decode tokens/s\n"
        "over speculation off's, paired by repeat (same prompts); a depth is better only\n"
        "when the gain's interval excludes 1; the recommendation is the shallowest such\n"
        "depth whose gain lies within the best depth's interval, else speculation off.\n"
        "\n"
        "  --out REPORT       output directory (default DIR/report)\n"
        "  --cost-table FILE  seconds per step vs verify rows: specbed profile JSON or\n"
        "                     bench_engine CSV (default: the sweep's --profile-cmd tables or\n"
        "                     --cost-table, else a monotone fit to the sweep's own step times)\n"
        "  --block-size N     the depth dspark_block_size would impose (default: the sweep's)\n"
        "  --bootstrap N      resamples per repeat (default 1000)\n"
        "  --seed S           bootstrap seed (default 1)\n");
}

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *cost = NULL;
    int bs = 0, nboot = 1000;
    double seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(stdout); return 0; }
        if (!strcmp(a, "--out")) { if (!(v = opt_value("report", argc, argv, &i))) return 2; out = v; }
        else if (!strcmp(a, "--cost-table")) { if (!(v = opt_value("report", argc, argv, &i))) return 2; cost = v; }
        else if (!strcmp(a, "--block-size")) {
            if (!(v = opt_value("report", argc, argv, &i)) || opt_int("report", a, v, 1, 64, &bs)) return 2;
        } else if (!strcmp(a, "--bootstrap")) {
            if (!(v = opt_value("report", argc, argv, &i)) || opt_int("report", a, v, 10, 1000000, &nboot)) return 2;
        } else if (!strcmp(a, "--seed")) {
            if (!(v = opt_value("report", argc, argv, &i)) || opt_double("report", a, v, 0, 9007199254740992.0, &seed)) return 2;
        } else if (a[0] == '-') { fprintf(stderr, "report: unknown option '%s' (see specbed report --help)\n", a); return 2; }
        else if (!dir) dir = a;
        else { fprintf(stderr, "report: one sweep directory only ('%s')\n", a); return 2; }
    }
    if (!dir) { fprintf(stderr, "report: give the sweep directory (see --help)\n"); return 2; }
    char err[2048], outdir[1100];
    snprintf(outdir, sizeof outdir, "%s", out ? out : "");
    if (!out) snprintf(outdir, sizeof outdir, "%s/report", dir);
    rp_sweep s;
    if (rp_load(&s, dir, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rp_free(&s); return 2; }
    if (bs) { s.block_size = bs; snprintf(s.block_src, sizeof s.block_src, "--block-size"); }
    if (rp_recommend(&s, cost, nboot, (unsigned long long)seed, err, sizeof err)) {
        fprintf(stderr, "report: %s\n", err);
        rp_free(&s);
        return 2;
    }
    char dd[1200];
    snprintf(dd, sizeof dd, "%s/data", outdir);
    if (ld_mkdirs(dd, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rp_free(&s); return 2; }
    int rc = 0, figs = 1;
    if (rp_plot(&s, outdir, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rc = 1; figs = 0; }
    if (rp_write_md(&s, outdir, figs, err, sizeof err) || rp_write_json(&s, outdir, err, sizeof err)) {
        fprintf(stderr, "report: %s\n", err);
        rc = 1;
    }
    printf("recommended depths (decode tokens/s; gain over speculation off with its 95%% interval; better only when "
           "the interval excludes 1):\n");
    for (int r = 0; r < s.n_recs; r++) {
        const rp_rec *R = &s.recs[r];
        printf("  %-8s %-10s c=%-3d %-16s", R->drafter, R->workload, R->conc, rp_decision_word(R));
        int j = R->rec >= 0 ? R->rec : R->best;
        if (j >= 0 && !R->undecided)
            printf(" %s depth %d: %.3fx [%.3f, %.3f]", R->rec >= 0 ? "gain" : "best point", R->depth[j], R->gain[j].est,
                   R->gain[j].lo, R->gain[j].hi);
        printf("  predicted best %s%d", R->best_pred < 0 ? "n/a " : "", R->best_pred < 0 ? 0 : R->depth[R->best_pred]);
        if (R->undecided) printf("  (%s)", R->missing);
        if (!isnan(R->lost_block) && s.has_dspark && !R->undecided)
            printf("  block-size depth %d: %.1f%% %s the decision%s", R->block_depth, 100 * fabs(R->lost_block),
                   R->lost_block >= 0 ? "below" : "above (point estimate)", R->block_idx >= 0 ? "" : " (predicted)");
        printf("\n");
    }
    if (s.n_pred)
        printf("predicted decode tok/s inside the measured 95%% interval: %d of %d cells (%.0f%%)\n", s.n_pred_inside,
               s.n_pred, 100.0 * s.n_pred_inside / s.n_pred);
    printf("report: %s/report.md\n", outdir);
    rp_free(&s);
    return rc;
}
