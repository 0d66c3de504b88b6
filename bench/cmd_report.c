/* cmd_report.c — `specbed report DIR`: options, then report_data.c
 * (load + recommend), report_plot.c (gnuplot), report_md.c (text). */
#include "args.h"
#include "commands.h"
#include "load_out.h"
#include "report.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed report DIR [--out REPORT] [--cost-table FILE] [--block-size N]\n"
        "\n"
        "Renders a sweep directory (specbed sweep --out DIR) with gnuplot, PNG and SVG:\n"
        "accept length vs depth per workload, output tokens/s vs depth per workload and\n"
        "concurrency, TTFT/ITL percentiles vs depth, per-position acceptance, measured vs\n"
        "predicted throughput, and interval timelines with the canary threshold; plus\n"
        "report.md (tables and the depth recommendation) and recommendation.json.\n"
        "\n"
        "  --out REPORT       output directory (default DIR/report)\n"
        "  --cost-table FILE  seconds per step vs verify rows: specbed profile JSON or\n"
        "                     bench_engine CSV (default: the sweep's, else measured from the\n"
        "                     sweep itself)\n"
        "  --block-size N     the depth dspark_block_size would impose (default: the sweep's)\n");
}

int cmd_report(int argc, char **argv) {
    const char *dir = NULL, *out = NULL, *cost = NULL;
    int bs = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { help(stdout); return 0; }
        if (!strcmp(a, "--out")) { if (!(v = opt_value("report", argc, argv, &i))) return 2; out = v; }
        else if (!strcmp(a, "--cost-table")) { if (!(v = opt_value("report", argc, argv, &i))) return 2; cost = v; }
        else if (!strcmp(a, "--block-size")) {
            if (!(v = opt_value("report", argc, argv, &i)) || opt_int("report", a, v, 1, 64, &bs)) return 2;
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
    if (rp_recommend(&s, cost, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rp_free(&s); return 2; }
    char dd[1200];
    snprintf(dd, sizeof dd, "%s/data", outdir);
    if (ld_mkdirs(dd, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rp_free(&s); return 2; }
    int rc = 0, figs = 1;
    if (rp_plot(&s, outdir, err, sizeof err)) { fprintf(stderr, "report: %s\n", err); rc = 1; figs = 0; }
    if (rp_write_md(&s, outdir, figs, err, sizeof err) || rp_write_json(&s, outdir, err, sizeof err)) {
        fprintf(stderr, "report: %s\n", err);
        rc = 1;
    }
    printf("recommended depths (measured best / predicted best / block-size %d, lost by inheriting):\n", s.block_size);
    for (int r = 0; r < s.n_recs; r++) {
        const rp_rec *R = &s.recs[r];
        printf("  %-8s %-12s c=%-3d measured %s%d (%.1f tok/s)  predicted %s%d  block-size %d: %s%.1f tok/s, %s%.1f%% lost\n",
               R->drafter, R->workload, R->conc, R->best_meas < 0 ? "n/a " : "", R->best_meas < 0 ? 0 : R->depth[R->best_meas],
               R->best_meas < 0 ? NAN : R->meas_tps[R->best_meas], R->best_pred < 0 ? "n/a " : "",
               R->best_pred < 0 ? 0 : R->depth[R->best_pred], R->block_depth, R->block_swept ? "" : "predicted ",
               R->block_tps, isnan(R->loss_frac) ? "n/a " : "", isnan(R->loss_frac) ? 0.0 : 100 * R->loss_frac);
    }
    printf("report: %s/report.md\n", outdir);
    rp_free(&s);
    return rc;
}
