/* report_md.c — the report's text: report.md (tables, figures, the
 * recommendation) and recommendation.json (the same numbers for scripts). */
#include "report.h"
#include "errmsg.h"
#include "load_out.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void num(FILE *f, const char *fmt, double v) {
    if (isnan(v)) fputs("–", f);
    else fprintf(f, fmt, v);
}

static void figure(FILE *f, const char *out, const char *name, const char *caption) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s.svg", out, name);
    if (access(p, R_OK)) return;
    fprintf(f, "![%s](%s.svg)\n\n*%s* ([PNG](%s.png))\n\n", caption, name, caption, name);
}

int rp_write_md(const rp_sweep *s, const char *out, int figs, char *err, size_t errlen) {
    char p[1400];
    snprintf(p, sizeof p, "%s/report.md", out);
    FILE *f = fopen(p, "w");
    if (!f) return errf(err, errlen, "%s: %s", p, strerror(errno));
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    fprintf(f, "# Draft depth sweep report\n\n");
    fprintf(f, "Sweep `%s`, reported %s. Launch template: `%s`.\n\n", s->dir, date, s->launch);
    fprintf(f, "The depth `dspark_block_size` would impose: **%d** (%s).\n\n", s->block_size, s->block_src);

    fprintf(f, "## Recommendation\n\n");
    fprintf(f, "Per drafter × workload × concurrency: the measured best depth (highest output tokens/s), the depth "
               "predicted from per-position acceptance and the cost table, and the depth `dspark_block_size` would "
               "have imposed, with the throughput lost by inheriting it.\n\n");
    fprintf(f, "| drafter | workload | conc | measured best depth (tok/s) | predicted best depth (E(k), ms/step, tok/s) "
               "| block-size depth %d (tok/s) | lost by inheriting |\n|---|---|---|---|---|---|---|\n", s->block_size);
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        fprintf(f, "| %s | %s | %d | ", R->drafter, R->workload, R->conc);
        if (R->best_meas >= 0) fprintf(f, "**%d** (%.1f)", R->depth[R->best_meas], R->meas_tps[R->best_meas]);
        else fputs("–", f);
        fputs(" | ", f);
        if (R->best_pred >= 0)
            fprintf(f, "**%d** (%.2f, %.2f, %.1f)", R->depth[R->best_pred], R->pred_e[R->best_pred],
                    R->pred_step[R->best_pred] * 1e3, R->pred_tps[R->best_pred]);
        else fputs("– (no per-position rates)", f);
        fputs(" | ", f);
        num(f, "%.1f", R->block_tps);
        fputs(R->block_swept ? "" : " (predicted; not swept)", f);
        fputs(" | ", f);
        if (isnan(R->loss_frac)) fputs("–", f);
        else fprintf(f, "%.1f%%", 100 * R->loss_frac);
        fputs(" |\n", f);
    }
    fprintf(f, "\nCost per step:\n");
    for (int d = 0; d < s->n_drafters; d++)
        for (int r = 0; r < s->n_recs; r++)
            if (!strcmp(s->recs[r].drafter, s->drafters[d])) {
                fprintf(f, "- %s: %s\n", s->drafters[d], s->recs[r].cost_source);
                break;
            }
    fputs("\n", f);

    fprintf(f, "## Predicted vs measured, every depth swept\n\n");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        fprintf(f, "**%s, %s, concurrency %d** (per-position rates from depth %d; %.1f output tokens per request, "
                   "%.1f ms per-request overhead from the depth-%d run)\n\n", R->drafter, R->workload, R->conc,
                R->pos_from_depth, R->n_out, R->overhead_s * 1e3, R->n ? R->depth[0] : 0);
        fprintf(f, "| depth | measured accept len | predicted E(k) | predicted ms/step | measured tok/s | predicted tok/s |\n"
                   "|---|---|---|---|---|---|\n");
        for (int j = 0; j < R->n; j++) {
            fprintf(f, "| %d | ", R->depth[j]);
            num(f, "%.3f", R->meas_al[j]); fputs(" | ", f);
            num(f, "%.3f", R->pred_e[j]); fputs(" | ", f);
            num(f, "%.2f", R->pred_step[j] * 1e3); fputs(" | ", f);
            num(f, "%.1f", R->meas_tps[j]); fputs(" | ", f);
            num(f, "%.1f", R->pred_tps[j]); fputs(" |\n", f);
        }
        fputs("\n", f);
    }

    fprintf(f, "## Canary on each cold launch\n\n\"baseline\": the depth-0 launch, whose content scores calibrate the "
               "content checks of the other launches (its findings are counted against the defaults). The threshold is "
               "the accept-length threshold of the interval check (see the sweep's `--canary-threshold`).\n\n"
               "| drafter | depth | verdict | threshold | first flag (s) | findings | note |\n"
               "|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->n_launches; i++) {
        const rp_launch *L = &s->launches[i];
        fprintf(f, "| %s | %d | %s | ", L->drafter, L->depth, L->verdict[0] ? L->verdict : "not run");
        num(f, "%.2f", L->threshold); fputs(" | ", f);
        num(f, "%.1f", L->first_flag_s);
        char note[700];
        if (L->error[0]) snprintf(note, sizeof note, "launch failed: %.600s", L->error);
        else if (L->verdict[0]) snprintf(note, sizeof note, "`%.600s/canary/evidence.txt`", L->dir);
        else note[0] = 0;
        for (char *c = note; *c; c++) if (*c == '|' || *c == '\n') *c = ' ';
        fprintf(f, " | %d | %s |\n", L->findings, note);
    }

    fprintf(f, "\n## Every cell (repeats averaged)\n\n| drafter | depth | workload | conc | reps | accept len | accept rate %% "
               "| tok/s | req/s | TTFT p50 / p99 ms | ITL p50 / p99 ms | TPOT mean ms | min interval accept len | failed |\n"
               "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->n_cells; i++) {
        const rp_cell *c = &s->cells[i];
        fprintf(f, "| %s | %d | %s | %d | %d | ", c->drafter, c->depth, c->workload, c->conc, c->n_rep);
        num(f, "%.3f", c->al); fputs(" | ", f);
        num(f, "%.1f", c->ar); fputs(" | ", f);
        num(f, "%.1f", c->tps); fputs(" | ", f);
        num(f, "%.2f", c->req_tps); fputs(" | ", f);
        num(f, "%.1f", c->ttft_p50); fputs(" / ", f); num(f, "%.1f", c->ttft_p99); fputs(" | ", f);
        num(f, "%.2f", c->itl_p50); fputs(" / ", f); num(f, "%.2f", c->itl_p99); fputs(" | ", f);
        num(f, "%.2f", c->tpot_mean); fputs(" | ", f);
        num(f, "%.2f", c->min_iv_al); fputs(" | ", f);
        num(f, "%.0f", c->failed); fputs(" |\n", f);
    }

    fprintf(f, "\n## Figures\n\n");
    if (!figs) fprintf(f, "(gnuplot was not available: figures not rendered; data and scripts are in `data/`.)\n\n");
    figure(f, out, "accept_length_vs_depth", "Accept length vs depth per workload and concurrency");
    figure(f, out, "throughput_vs_depth", "Output tokens/s vs depth per workload and concurrency");
    figure(f, out, "ttft_vs_depth", "TTFT p50 (solid) and p99 (dashed) vs depth");
    figure(f, out, "itl_vs_depth", "ITL p50 (solid) and p99 (dashed) vs depth");
    figure(f, out, "per_position_acceptance", "Per-position acceptance (unconditional) at the deepest depth swept");
    figure(f, out, "predicted_vs_measured", "Measured (solid) vs predicted (dashed) output tokens/s");
    for (int i = 0; i < s->n_launches; i++) {
        char name[200], cap[300];
        snprintf(name, sizeof name, "timeline_%s_d%d", s->launches[i].drafter, s->launches[i].depth);
        for (char *c = name; *c; c++) if (*c == '/' || *c == ' ') *c = '_';
        snprintf(cap, sizeof cap, "Interval accept length over time, %s depth %d, with the canary threshold",
                 s->launches[i].drafter, s->launches[i].depth);
        figure(f, out, name, cap);
    }

    fprintf(f, "## How the numbers are made\n\n"
               "- Accept length = committed tokens per verify step per sequence, bonus token included (server "
               "counters over the whole run: specbed committed ÷ verify steps; vLLM / llama.cpp 1 + accepted ÷ "
               "drafts; SGLang the mean of its decode-batch intervals).\n"
               "- Per-position rate i = accepted at position i ÷ verify steps: unconditional, so it already equals "
               "Π_{j≤i} α_j, and E(k) = 1 + Σ_{i<k} rate_i (= 1 + Σ_{i≤k} Π_{j≤i} α_j).\n"
               "- Predicted tok/s at depth k and concurrency c = c · N ÷ (T0 + (N − 1) · step ÷ E(k)), with step = "
               "cost(c·(k+1) rows) from the cost table (+ c·k·draft seconds per token when the table has it), N the "
               "output tokens per request and T0 the mean TTFT of the speculation-off run (prefill and queueing).\n"
               "- Percentiles: linear interpolation between closest ranks (numpy's default, as vLLM's benchmark). "
               "TTFT: send → first content chunk; ITL: gaps between content chunks; TPOT: (E2E − TTFT) ÷ (tokens − 1).\n"
               "- Measured best depth: the highest mean output tokens/s over repeats; ties go to the shallower depth.\n");
    fclose(f);
    return 0;
}

int rp_write_json(const rp_sweep *s, const char *out, char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "block_size", s->block_size);
    cJSON_AddStringToObject(j, "block_size_source", s->block_src);
    cJSON *a = cJSON_AddArrayToObject(j, "recommendations");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "drafter", R->drafter);
        cJSON_AddStringToObject(o, "workload", R->workload);
        cJSON_AddNumberToObject(o, "concurrency", R->conc);
        if (R->best_meas >= 0) {
            cJSON_AddNumberToObject(o, "measured_best_depth", R->depth[R->best_meas]);
            cJSON_AddNumberToObject(o, "measured_best_output_throughput", R->meas_tps[R->best_meas]);
        }
        if (R->best_pred >= 0) {
            cJSON_AddNumberToObject(o, "predicted_best_depth", R->depth[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_expected_tokens_per_step", R->pred_e[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_seconds_per_step", R->pred_step[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_output_throughput", R->pred_tps[R->best_pred]);
        }
        cJSON_AddNumberToObject(o, "block_size_depth", R->block_depth);
        if (!isnan(R->block_tps)) cJSON_AddNumberToObject(o, "block_size_output_throughput", R->block_tps);
        cJSON_AddBoolToObject(o, "block_size_depth_swept", R->block_swept);
        if (!isnan(R->loss_frac)) cJSON_AddNumberToObject(o, "throughput_lost_by_inheriting", R->loss_frac);
        cJSON_AddStringToObject(o, "cost_source", R->cost_source);
        cJSON *d = cJSON_AddArrayToObject(o, "depths");
        for (int k = 0; k < R->n; k++) {
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "depth", R->depth[k]);
            if (!isnan(R->meas_tps[k])) cJSON_AddNumberToObject(e, "measured_output_throughput", R->meas_tps[k]);
            if (!isnan(R->meas_al[k])) cJSON_AddNumberToObject(e, "measured_accept_length", R->meas_al[k]);
            if (!isnan(R->pred_e[k])) cJSON_AddNumberToObject(e, "predicted_expected_tokens_per_step", R->pred_e[k]);
            if (!isnan(R->pred_tps[k])) cJSON_AddNumberToObject(e, "predicted_output_throughput", R->pred_tps[k]);
            cJSON_AddItemToArray(d, e);
        }
        cJSON_AddItemToArray(a, o);
    }
    char p[1400];
    snprintf(p, sizeof p, "%s/recommendation.json", out);
    int r = ld_write_json(p, j, err, errlen);
    cJSON_Delete(j);
    return r;
}
