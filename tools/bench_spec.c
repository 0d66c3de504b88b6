/* bench_spec.c — what each drafter buys at each depth, on real prompts.
 *
 * For each drafter × depth 1..8 × workload, runs the workload's first
 * --num-prompts prompts one at a time (single stream, greedy; --batch B:
 * B at a time, one continuous batch) and reports
 * accept length (bonus included), per-position acceptance, and decode
 * tokens/s as a ratio to speculation off measured in the same run, on the
 * same prompts, each speculative run paired with a speculation-off run of
 * the same prompts just before it (the row prints both: speedup = tokens/s
 * over off tok/s). Per-position acceptance is vLLM's (accepted at i over
 * drafts); a position no draft reached prints '-' (an ngram drafter's cap
 * can keep it below the depth). Drafts computed and then not verified
 * (a verify policy cut them) are counted per verify step. Prints a table;
 * writes CSV with --out. Greedy output is
 * also compared with speculation off, and any mismatch is reported (it
 * would be a bug: speculation is lossless).
 *
 * Like bench_engine, this measures the engine below HTTP, so it links it.
 *
 * With --schedules, each drafter × depth also runs under each verification
 * policy (spec/verify_policy.h); for drafters with a confidence head the mean
 * predicted survival per position is printed beside the observed one (the
 * head's calibration).
 *
 * usage: bench_spec --model DIR [--draft-model DIR] [--dspark-model DIR]
 *                   [--drafters ngram,draft,mtp,dspark] [--schedules fixed,...]
 *                   [--cost-table FILE] [--workloads code,prose] [--num-prompts N]
 *                   [--max-tokens N] [--depths 1-8] [--batch B] [--out FILE.csv] [--device cpu|cuda]
 *                   [--ngram-max N] [--ngram-min N] [--ngram-spec-factor F]
 *                   [--dspark-final-tap raw|normed] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "args.h"
#include "csv_row.h"
#include "outfile.h"
#include "drafters.h"
#include "verify_policy.h"
#include "spec_run.h"
#include "spec_cli.h"
#include "cli_tp.h"
#include "cli_device.h"
#include "workload_tokens.h"

int main(int argc, char **argv) {
    const char *model_dir = NULL, *draft_dir = NULL, *dspark_dir = NULL, *out = NULL, *cost_path = NULL;
    const char *device = "cpu";
    char drafters_s[256] = "ngram,draft", workloads_s[256] = "code,prose", schedules_s[256] = "fixed";
    int num_prompts = 8, max_tokens = 96, dmin = 1, dmax = 8, tp = 1, batch = 1;
    drafter_opts ngram = {0};   /* --ngram-* (the drafter's defaults unless given) and --dspark-final-tap */
    spec_cli given = {0};       /* speculation options given (spec_cli_check); --dspark-model is dspark's */
    static const char usage[] =
        "usage: bench_spec --model DIR [--draft-model DIR] [--dspark-model DIR]\n"
        "                  [--drafters ngram,draft,mtp,dspark] [--schedules fixed,threshold,confidence,adaptive]\n"
        "                  [--cost-table F] [--workloads code,prose] [--num-prompts N] [--max-tokens N]\n"
        "                  [--depths A-B] [--batch B (prompts per continuous batch, default 1)] [--out F.csv]\n"
        "                  [--tp N (under mpirun -np N)] [--device cpu|cuda]\n"
        "                  [--ngram-max N] [--ngram-min N] (ngram suffix lengths, default 3, 1)\n"
        "                  [--ngram-spec-factor F] (ngram drafts <= ceil(F x match length), default 1, 0 = no cap)\n"
        "                  [--dspark-final-tap raw|normed] (the state a DSpark checkpoint's final-layer tap was\n"
        "                  trained on; refused without it, as DeepSpec's evaluator refuses it)\n";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { fputs(usage, stdout); return 0; }
        if (!(v = opt_value("bench_spec", argc, argv, &i))) return 2;
        if (!strcmp(a, "--model")) model_dir = v;
        else if (!strcmp(a, "--draft-model")) { draft_dir = v; given.draft_model = 1; }
        else if (!strcmp(a, "--dspark-model")) { dspark_dir = v; given.dspark_model = 1; }
        else if (!strcmp(a, "--dspark-final-tap")) { if (drafter_opt_dspark_final_tap("bench_spec", a, v, &ngram)) return 2; given.dspark_final_tap = 1; }
        else if (!strcmp(a, "--cost-table")) { cost_path = v; given.cost_table = 1; }
        else if (!strcmp(a, "--schedules")) snprintf(schedules_s, sizeof schedules_s, "%s", v);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--drafters")) snprintf(drafters_s, sizeof drafters_s, "%s", v);
        else if (!strcmp(a, "--workloads")) snprintf(workloads_s, sizeof workloads_s, "%s", v);
        else if (!strcmp(a, "--tp")) { if (opt_int("bench_spec", a, v, 1, 64, &tp)) return 2; }
        else if (!strcmp(a, "--device")) { device = v; if (cli_device_check("bench_spec", v)) return 2; }
        else if (!strcmp(a, "--num-prompts")) { if (opt_int("bench_spec", a, v, 1, 100000, &num_prompts)) return 2; }
        else if (!strcmp(a, "--ngram-max")) { if (opt_int("bench_spec", a, v, 1, 64, &ngram.ngram_n_max)) return 2; given.ngram = 1; }
        else if (!strcmp(a, "--ngram-min")) { if (opt_int("bench_spec", a, v, 1, 64, &ngram.ngram_n_min)) return 2; given.ngram = 1; }
        else if (!strcmp(a, "--ngram-spec-factor")) { if (drafter_opt_ngram_factor("bench_spec", a, v, &ngram)) return 2; given.ngram = 1; }
        else if (!strcmp(a, "--batch")) { if (opt_int("bench_spec", a, v, 1, 64, &batch)) return 2; }
        else if (!strcmp(a, "--max-tokens")) { if (opt_int("bench_spec", a, v, 2, 1 << 20, &max_tokens)) return 2; }
        else if (!strcmp(a, "--depths")) {
            int d[SPEC_MAX_DEPTH], nd;
            if (opt_int_list("bench_spec", a, v, 1, SPEC_MAX_DEPTH, d, SPEC_MAX_DEPTH, &nd)) return 2;
            given.depth_opt = "--depths";
            dmin = dmax = d[0];
            for (int k = 1; k < nd; k++) { if (d[k] < dmin) dmin = d[k]; if (d[k] > dmax) dmax = d[k]; }
        }
        else { fprintf(stderr, "bench_spec: unknown option %s\n%s", a, usage); return 2; }
    }
    if (!model_dir) {
        fprintf(stderr, "bench_spec: --model DIR is required\n%s", usage);
        return 2;
    }
    char err[1024];
    given.drafters = drafters_s;
    given.schedules = schedules_s;
    if (spec_cli_check(&given, err, sizeof err)) { fprintf(stderr, "bench_spec: %s\n", err); return 2; }
    if (out && outfile_check(out, err, sizeof err)) { fprintf(stderr, "bench_spec: --out %s\n", err); return 1; }
    if (cli_device_select("bench_spec", device, tp)) return 1;
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = model_dir, .max_seqs = batch};
    tp_job job;
    if (tp_job_open(&job, "bench_spec", tp)) return 1;
    if (job.rank > 0) return tp_job_worker(&job, "bench_spec", eo);
    eo.comm = job.comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) { fprintf(stderr, "bench_spec: %s\n", err); return 1; }
    /* one cost table per drafter (its drafting cost is part of it), loaded
     * or profiled once, by the drafter's first policy that needs it */
    enum { MAX_DRAFTERS = 8 };
    static cost_curve costs[MAX_DRAFTERS];
    char cost_names[MAX_DRAFTERS][32] = {{0}};
    FILE *csv = NULL;
    char tmp_out[4200];
    if (out) {
        snprintf(tmp_out, sizeof tmp_out, "%s.tmp", out);
        csv = fopen(tmp_out, "w");
        if (!csv) { fprintf(stderr, "bench_spec: cannot write %s\n", out); return 1; }
        csv_row h = {csv, 0};
        const char *cols[] = {"workload", "drafter", "schedule", "depth", "batch", "accept_length", "acceptance_rate",
                              "tokens_per_s", "off_tokens_per_s", "speedup", "mismatches", "unverified_per_step"};
        for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) csv_row_field(&h, cols[i]);
        for (int i = 0; i < dmax; i++) csv_row_fieldf(&h, "pos%d", i + 1);
        for (int i = 0; i < dmax; i++) csv_row_fieldf(&h, "pred_survival%d", i + 1);
        csv_row_end(&h);
    }
    int rc = 0;
    gen_params gp = {.max_tokens = max_tokens, .ignore_eos = 1};
    char *wsave = NULL;
    for (char *w = strtok_r(workloads_s, ",", &wsave); w; w = strtok_r(NULL, ",", &wsave)) {
        wl_tokens ps;
        if (wl_tokens_load(&ps, w, e->tok, num_prompts, err, sizeof err)) {
            fprintf(stderr, "bench_spec: %s\n", err);
            rc = 1;
            continue;
        }
        /* speculation off: reference tokens and baseline speed */
        gen_result *ref = calloc((size_t)ps.count, sizeof *ref);
        double base_s = 0;
        long base_tok = 0;
        for (int p = 0; p < ps.count; p += batch) {
            spec_timing t;
            spec_params sp = {.gen = gp};
            int nb = ps.count - p < batch ? ps.count - p : batch;
            if (spec_run(e, NULL, (const int *const *)ps.ids + p, ps.n + p, nb, &sp, NULL, NULL, &ref[p], &t, err,
                         sizeof err)) {
                fprintf(stderr, "bench_spec: %s\n", err); return 1;
            }
            base_s += t.total_s - t.prefill_s;
            for (int i = 0; i < nb; i++) base_tok += ref[p + i].n_tokens - 1;
        }
        double base_tps = base_tok / base_s;
        printf("\nworkload %s: %d prompts, %d tokens each, %d at a time; speculation off %.1f tokens/s (the reference "
               "run)\n", w, ps.count, max_tokens, batch, base_tps);
        printf("each row: speedup = tokens/s / off tok/s, its own speculation-off run on the same prompts just before "
               "it;\nacc.len = committed tokens per verify step (bonus included); per-position acceptance = accepted "
               "at i / drafts\n(vLLM's), '-' where no draft reached position i\n");
        printf("%-8s %-10s %5s %8s %8s %9s %9s %7s %6s  per-position acceptance\n", "drafter", "schedule", "depth",
               "acc.len", "acc.rate", "tokens/s", "off tok/s", "speedup", "unver.");
        char dcopy[256], *dsave = NULL;
        snprintf(dcopy, sizeof dcopy, "%s", drafters_s);
        for (char *dn = strtok_r(dcopy, ",", &dsave); dn; dn = strtok_r(NULL, ",", &dsave)) {
            drafter_opts dop = {.name = dn, .draft_model = !strcmp(dn, "dspark") ? dspark_dir : draft_dir,
                                .max_seqs = batch, .ngram_n_max = ngram.ngram_n_max,
                                .ngram_n_min = ngram.ngram_n_min, .ngram_spec_factor = ngram.ngram_spec_factor,
                                .dspark_final_tap = !strcmp(dn, "dspark") ? ngram.dspark_final_tap : 0};
            drafter *d;
            if (drafter_create(&d, &dop, e, err, sizeof err)) {
                fprintf(stderr, "bench_spec: %s: %s\n", dn, err);
                rc = 1;
                continue;
            }
            if (!d) continue;   /* "none" is the baseline above */
            int ci = 0;
            while (ci < MAX_DRAFTERS - 1 && cost_names[ci][0] && strcmp(cost_names[ci], dn)) ci++;
            if (strcmp(cost_names[ci], dn)) {   /* a new drafter (past MAX_DRAFTERS: the last slot, re-measured) */
                memset(&costs[ci], 0, sizeof costs[ci]);
                snprintf(cost_names[ci], sizeof cost_names[ci], "%s", dn);
            }
            cost_curve *cost = &costs[ci];
            char scopy[256], *ssave = NULL;
            snprintf(scopy, sizeof scopy, "%s", schedules_s);
            for (char *sn = strtok_r(scopy, ",", &ssave); sn; sn = strtok_r(NULL, ",", &ssave)) {
            vpolicy_args va = VPOLICY_ARGS_DEFAULT;
            va.name = sn;
            va.cost_path = cost_path;
            vpolicy_kind kind;
            if (vpolicy_parse(sn, &kind)) { fprintf(stderr, "bench_spec: unknown schedule %s\n", sn); return 2; }
            for (int depth = dmin; depth <= dmax; depth++) {
                spec_counters cnt = {0};
                vpolicy *sc = NULL;
                if (vpolicy_setup(&sc, cost, &va, e, d, batch, dmax, stderr, err, sizeof err)) {
                    fprintf(stderr, "bench_spec: %s\n", err);
                    return 1;
                }
                double s = 0, s_off = 0;
                long tok = 0, tok_off = 0;
                int mism = 0;
                gen_result *r = calloc((size_t)batch, sizeof *r);
                if (!r) { fprintf(stderr, "bench_spec: out of memory\n"); return 1; }
                for (int p = 0; p < ps.count; p += batch) {
                    spec_timing t;
                    int nb = ps.count - p < batch ? ps.count - p : batch;
                    const int *const *pp = (const int *const *)ps.ids + p;
                    /* paired: speculation off on the same prompts right before, so
                     * background load drifts hit both sides alike */
                    {
                        spec_params so_ = {.gen = gp};
                        if (spec_run(e, NULL, pp, ps.n + p, nb, &so_, NULL, NULL, r, &t, err, sizeof err)) {
                            fprintf(stderr, "bench_spec: %s\n", err); return 1;
                        }
                        s_off += t.total_s - t.prefill_s;
                        for (int i = 0; i < nb; i++) tok_off += r[i].n_tokens - 1;
                        gen_results_free(r, nb);
                    }
                    spec_params sp = {.gen = gp, .depth = depth, .verify = vpolicy_hook(sc)};
                    if (spec_run(e, d, pp, ps.n + p, nb, &sp, NULL, NULL, r, &t, err, sizeof err)) {
                        fprintf(stderr, "bench_spec: %s\n", err); return 1;
                    }
                    s += t.total_s - t.prefill_s;
                    spec_counters_add(&cnt, &t.counters);
                    for (int i = 0; i < nb; i++) {
                        tok += r[i].n_tokens - 1;
                        mism += r[i].n_tokens != ref[p + i].n_tokens ||
                                memcmp(r[i].tokens, ref[p + i].tokens, sizeof(int) * (size_t)r[i].n_tokens);
                    }
                    gen_results_free(r, nb);
                }
                free(r);
                const spec_counters *c = &cnt;
                spec_rates rt = spec_rates_between(NULL, c);
                double tps = tok / s;
                double off_tps = tok_off / s_off;   /* this row's paired speculation-off run */
                vpolicy_free(sc);
                double unv = c->steps ? (double)c->unverified_tokens / c->steps : 0;
                printf("%-8s %-10s %5d %8.3f %8.3f %9.1f %9.1f %6.2fx %6.2f ", dn, sn, depth, rt.accept_length,
                       rt.acceptance_rate, tps, off_tps, tps / off_tps, unv);
                for (int i = 0; i < depth; i++)
                    if (c->drafted_at[i]) printf(" %.2f", rt.position_rate[i]);
                    else printf("    -");
                if (c->pred_survival_at[0] > 0) {   /* a confidence head: its calibration */
                    printf("  [");
                    for (int i = 0; i < depth; i++)
                        if (c->drafted_at[i])
                            printf(" %.2f/%.2f", c->pred_survival_at[i] / c->drafted_at[i],
                                   (double)c->accepted_at[i] / c->drafted_at[i]);
                        else printf(" -");
                    printf(" ] predicted/observed survival");
                }
                printf("%s\n", mism ? "  MISMATCH vs speculation off" : "");
                if (mism) rc = 1;
                if (csv) {
                    csv_row row = {csv, 0};
                    csv_row_field(&row, w);
                    csv_row_field(&row, dn);
                    csv_row_field(&row, sn);
                    csv_row_fieldf(&row, "%d", depth);
                    csv_row_fieldf(&row, "%d", batch);
                    csv_row_fieldf(&row, "%.4f", rt.accept_length);
                    csv_row_fieldf(&row, "%.4f", rt.acceptance_rate);
                    csv_row_fieldf(&row, "%.2f", tps);
                    csv_row_fieldf(&row, "%.2f", off_tps);
                    csv_row_fieldf(&row, "%.4f", tps / off_tps);
                    csv_row_fieldf(&row, "%d", mism);
                    csv_row_fieldf(&row, "%.4f", unv);
                    for (int i = 0; i < dmax; i++)   /* empty: beyond the depth, or no draft reached it */
                        if (i < depth && c->drafted_at[i]) csv_row_fieldf(&row, "%.4f", rt.position_rate[i]);
                        else csv_row_field(&row, "");
                    for (int i = 0; i < dmax; i++)   /* only a confidence head predicts survival */
                        if (i < depth && c->drafted_at[i] && c->pred_survival_at[0] > 0)
                            csv_row_fieldf(&row, "%.4f", c->pred_survival_at[i] / c->drafted_at[i]);
                        else csv_row_field(&row, "");
                    csv_row_end(&row);
                }
            }
            }
            drafter_free(d);
        }
        gen_results_free(ref, ps.count);
        free(ref);
        wl_tokens_free(&ps);
    }
    if (csv) {
        fclose(csv);
        if (rename(tmp_out, out)) { fprintf(stderr, "bench_spec: cannot write %s\n", out); rc = 1; }
    }
    gen_engine_free(e);
    tp_job_close(&job);
    return rc;
}
