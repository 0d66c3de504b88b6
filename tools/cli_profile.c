/* cli_profile.c — `specbed profile`: measures the verify cost curve
 * (seconds per step vs rows in the verify batch, plus the drafter's cost per
 * drafted token) and writes it as a cost table JSON (common/cost_curve.h) for
 * --cost-table, the confidence/adaptive verify policies and the depth recommender. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "args.h"

#define CMD "specbed profile"
#include "cost_profile.h"
#include "drafters.h"
#include "outfile.h"
#include "spec_cli.h"
#include "cli_tp.h"
#include "cli_device.h"
#include "workload_tokens.h"

static void help(FILE *f) {
    fprintf(f,
        "usage: specbed profile --model DIR --out cost.json [options]\n"
        "\n"
        "Measures one forward of B verify rows (B = 1..8, then ×1.5 up to --max-rows),\n"
        "spread over up to 8 sequences holding --history tokens each, and in exactly\n"
        "1, 2, 4 and 8 sequences (by_sequences), and the drafter's seconds per drafting\n"
        "step and per drafted token at batch 1; writes the cost table as JSON.\n"
        "\n"
        "  --model DIR         target model (required)\n"
        "  --out FILE          where to write the cost table (required; written atomically)\n"
        "  --drafter NAME      also time this drafter: " DRAFTER_NAMES " (default none)\n"
        "  --draft-model DIR   draft checkpoint for --drafter draft|dspark\n"
        "  --dspark-final-tap S raw|normed: which target state a DSpark checkpoint's tap of the\n"
        "                      final layer was trained on (refused without it)\n"
        "  --max-rows N        largest verify batch measured (default 128)\n"
        "  --history N         tokens already in each sequence's KV cache (default 256)\n"
        "  --reps N            repetitions per point; the median is kept (default 5)\n"
        "  --text WORKLOAD     histories and verify rows from this workload's prompts (a name\n"
        "                      under workloads/ or a .jsonl path), each sequence its own stretch;\n"
        "                      required for a mixture-of-experts model, whose steps read the\n"
        "                      experts their rows route to (default: hashed token ids)\n"
        "  --tp N              tensor parallelism over N processes (under `mpirun -np N`);\n"
        "                      the table records the degree (default 1)\n"
        CLI_DEVICE_HELP
        CLI_EXPERTS_HELP);
}

int cli_profile(int argc, char **argv) {
    const char *model_dir = NULL, *out = NULL, *device = "cpu", *text = NULL;
    drafter_opts dop = {.name = "none", .max_seqs = 8};
    int max_rows = 128, history = 256, reps = 5, tp = 1, experts_on_host = 0;
    spec_cli given = {.dspark_model = -1};   /* speculation options given (spec_cli_check) */
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { help(stdout); return 0; }
        else if (!strcmp(a, "--model")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; model_dir = v; }
        else if (!strcmp(a, "--out")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; out = v; }
        else if (!strcmp(a, "--drafter")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; dop.name = v; }
        else if (!strcmp(a, "--draft-model")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; dop.draft_model = v; given.draft_model = 1; }
        else if (!strcmp(a, "--dspark-final-tap")) { if (!(v = opt_value(CMD, argc, argv, &i)) || drafter_opt_dspark_final_tap(CMD, a, v, &dop)) return 2; given.dspark_final_tap = 1; }
        else if (!strcmp(a, "--max-rows")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 4096, &max_rows)) return 2; }
        else if (!strcmp(a, "--history")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 1 << 20, &history)) return 2; }
        else if (!strcmp(a, "--tp")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 64, &tp)) return 2; }
        else if (!strcmp(a, "--device")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; device = v; if (cli_device_check(CMD, v)) return 2; }
        else if (!strcmp(a, "--experts-on-host")) experts_on_host = 1;
        else if (!strcmp(a, "--text")) { if (!(v = opt_value(CMD, argc, argv, &i))) return 2; text = v; }
        else if (!strcmp(a, "--reps")) { if (!(v = opt_value(CMD, argc, argv, &i)) || opt_int(CMD, a, v, 1, 1000, &reps)) return 2; }
        else { fprintf(stderr, "specbed profile: unknown option '%s' (see --help)\n", a); return 2; }
    }
    if (!model_dir || !out) { fprintf(stderr, "specbed profile: --model DIR and --out FILE are required\n"); return 2; }
    char err[1024];
    given.drafters = dop.name;
    if (spec_cli_check(&given, err, sizeof err)) { fprintf(stderr, CMD ": %s\n", err); return 2; }
    /* the table is written after minutes of measuring: a destination that cannot take it fails now */
    if (outfile_check(out, err, sizeof err)) { fprintf(stderr, CMD ": --out %s\n", err); return 1; }
    if (cli_device_select_experts(CMD, device, tp, experts_on_host)) return 1;
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = model_dir, .max_seqs = 8, .max_batch_rows = max_rows > 64 ? max_rows : 64,
                          .max_seq_len = history + max_rows + 64};
    tp_job job;
    if (tp_job_open(&job, CMD, tp)) return 1;
    if (job.rank > 0) return tp_job_worker(&job, CMD, eo);
    eo.comm = job.comm;
    if (gen_engine_create(&e, &eo, err, sizeof err)) {
        fprintf(stderr, "specbed profile: %s\n", err);
        if (job.comm) kb_comm_abort(job.comm, 1, NULL);
        return 1;
    }
    drafter *d = NULL;
    cost_curve t;
    int rc = 1, *ids = NULL;
    long n_ids = 0;
    if (text) {
        wl_tokens wt;
        if (wl_tokens_load(&wt, text, e->tok, 0, err, sizeof err)) { fprintf(stderr, CMD ": --text %s\n", err); goto out; }
        n_ids = wt.total;
        if (!(ids = malloc(sizeof(int) * (size_t)n_ids)) || wl_tokens_stream(&wt, (int)n_ids, ids, err, sizeof err)) {
            wl_tokens_free(&wt);
            fprintf(stderr, CMD ": --text %s: out of memory\n", text);
            goto out;
        }
        wl_tokens_free(&wt);
    }
    if (drafter_create(&d, &dop, e, err, sizeof err)) { fprintf(stderr, "specbed profile: %s\n", err); goto out; }
    if (cost_profile(&t, e, d, max_rows, history, reps, ids, n_ids, text, err, sizeof err) ||
        cost_curve_save(&t, out, err, sizeof err)) {
        fprintf(stderr, "specbed profile: %s\n", err);
        goto out;
    }
    printf("%8s %12s %14s%s\n", "rows", "ms/step", "ms/row", t.n_moe ? "  experts/layer (MoE routing)" : "");
    for (int i = 0; i < t.n; i++) {
        printf("%8g %12.3f %14.4f", t.rows[i], t.seconds[i] * 1e3, t.seconds[i] * 1e3 / t.rows[i]);
        if (t.n_moe) printf("  %12.2f", cost_curve_experts_at(&t, t.rows[i]));
        printf("\n");
    }
    cost_profile_print_draft(stdout, &t);
    printf("cost table written to %s\n", out);
    rc = 0;
out:
    free(ids);
    drafter_free(d);
    gen_engine_free(e);
    tp_job_close(&job);
    return rc;
}
