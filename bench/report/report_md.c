/* report_md.c — the report's text: report.md (the decision and its
 * confidence first, then the evidence) and recommendation.json (the same
 * numbers for scripts). */
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

/* "12.3 [11.0, 13.9]" */
static void ci(FILE *f, const char *fmt, const st_ci *c) {
    num(f, fmt, c->est);
    if (!isnan(c->lo)) {
        fputs(" [", f);
        fprintf(f, fmt, c->lo);
        fputs(", ", f);
        fprintf(f, fmt, c->hi);
        fputs("]", f);
    }
}

static void gain(FILE *f, const rc_gain *g) {
    if (isnan(g->est)) { fputs("–", f); return; }
    fprintf(f, "%.3f×", g->est);
    if (!isnan(g->lo) && g->lo != g->hi) fprintf(f, " [%.3f, %.3f]", g->lo, g->hi);
}

static const char *verdict_word(int v) { return v > 0 ? "**better**" : v < 0 ? "worse" : "within noise"; }

static void figure(FILE *f, const char *out, const char *name, const char *caption) {
    char p[1400];
    snprintf(p, sizeof p, "%s/%s.svg", out, name);
    if (access(p, R_OK)) return;
    fprintf(f, "![%s](%s.svg)\n\n*%s* ([PNG](%s.png))\n\n", caption, name, caption, name);
}

static const rp_cell *off_of(const rp_rec *R) { return R->n && R->depth[0] == 0 ? R->cell[0] : NULL; }

int rp_write_md(const rp_sweep *s, const char *out, int figs, char *err, size_t errlen) {
    char p[1400];
    snprintf(p, sizeof p, "%s/report.md", out);
    FILE *f = fopen(p, "w");
    if (!f) return errf(err, errlen, "%s: %s", p, strerror(errno));
    char date[64];
    time_t now = time(NULL);
    strftime(date, sizeof date, "%Y-%m-%d %H:%M", localtime(&now));
    fprintf(f, "# Draft depth sweep report\n\n");
    fprintf(f, "Sweep `%s` (started %s, %.0f s), reported %s. Launch template: `%s`.\n\n", s->dir,
            s->started[0] ? s->started : "?", s->wall_s, date, s->launch);
    fprintf(f, "Repeats: %d of %d planned, each visiting every (drafter, depth) arm in an order shuffled from "
               "order seed %lld (sweep.json `orders`). Decoding: %s (request seed %lld). Load average (1, 5, 15 min) "
               "at the start: %s; at the end: %s.%s%s\n\n",
            s->repeats_done >= 0 ? s->repeats_done : s->repeats_planned, s->repeats_planned, s->order_seed,
            s->temperature > 0 ? "sampled" : "greedy", s->seed, s->loadavg_start[0] ? s->loadavg_start : "not recorded",
            s->loadavg_end[0] ? s->loadavg_end : "not recorded", s->gave_up[0] ? " **Budget:** " : "", s->gave_up);
    if (s->launch_off[0])
        fprintf(f, "Speculation off (depth 0) launched as `%s`%s.\n\n", s->launch_off,
                s->launch_off_derived ? " (derived from the launch template: its speculation flags removed)" : "");
    fprintf(f, "Machine: %s.\n\n", s->machine[0] ? s->machine : "not recorded (sweeps before issue 37 did not record it)");
    if (s->temperature > 0) {
        fprintf(f, "Temperature %.2f", s->temperature);
        if (s->top_p < 1) fprintf(f, ", top-p %.2f", s->top_p);
        fprintf(f, ".\n\n");
    }

    /* ---- the decision ---- */
    fprintf(f, "## Recommendation\n\n");
    int n_depth = 0, n_off = 0, n_none = 0;
    for (int r = 0; r < s->n_recs; r++) {
        if (s->recs[r].undecided) n_none++;
        else if (s->recs[r].rec >= 0) n_depth++;
        else n_off++;
    }
    fprintf(f, "**%d of %d cells recommend a draft depth; %d say speculation off** (no depth's decode throughput is "
               "significantly above speculation off's)", n_depth, s->n_recs, n_off);
    if (n_none)
        fprintf(f, "; **%d have no decision**: their baseline (speculation off) or every speculative depth is missing "
                   "or failed (\"Missing or failed cells\" below)", n_none);
    fprintf(f, ". A decision uses only cells whose every run completed all its requests. A depth is better only when the "
               "95%% interval of its gain excludes 1; the recommendation is the shallowest such depth whose gain lies "
               "within the best depth's interval.\n\n");
    int blk = s->has_dspark;   /* the block-size comparison is DSpark's question only */
    fprintf(f, "| drafter | workload | conc | decision | its gain (decode tok/s ÷ off) [95%% CI] | best depth by estimate "
               "| end-to-end gain of the decision | speculation-off decode tok/s [95%% CI] |");
    if (blk) fprintf(f, " block-size depth %d |", s->block_size);
    fprintf(f, " loops (max rep. 4-gram share) |\n|---|---|---|---|---|---|---|---|%s---|\n", blk ? "---|" : "");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        const rp_cell *off = off_of(R);
        fprintf(f, "| %s | %s | %d | **%s** | ", R->drafter, R->workload, R->conc, rp_decision_word(R));
        if (R->undecided) {
            fprintf(f, "– (missing or failed: %s) | – | – | ", R->missing);
            if (off) ci(f, "%.1f", &off->dec);
            else fputs("–", f);
            fputs(blk ? " | – | – |\n" : " | – |\n", f);
            continue;
        }
        if (R->rec >= 0) gain(f, &R->gain[R->rec]);
        else fputs("1 (off)", f);
        fputs(" | ", f);
        if (R->best >= 0) { fprintf(f, "%d: ", R->depth[R->best]); gain(f, &R->gain[R->best]); }
        else fputs("–", f);
        fputs(" | ", f);
        if (R->rec >= 0) gain(f, &R->gain_e2e[R->rec]);
        else fputs("1 (off)", f);
        fputs(" | ", f);
        if (off) ci(f, "%.1f", &off->dec);
        else fputs("– (depth 0 not swept)", f);
        fputs(" | ", f);
        if (blk) {
            if (R->block_idx >= 0) { gain(f, &R->gain[R->block_idx]); fprintf(f, ", %s", verdict_word(R->verdict[R->block_idx])); }
            else { num(f, "%.1f tok/s", R->block_pred); fputs(" (predicted; not swept)", f); }
            if (!isnan(R->lost_block)) fprintf(f, "; %.1f%% below the decision", 100 * R->lost_block);
            fputs(" | ", f);
        }
        num(f, "%.2f", R->max_rep4);
        if (R->max_rep4 > RP_REPEAT_WARN) fputs(" ⚠ loop-driven", f);
        fputs(" |\n", f);
    }

    /* ---- what was left out, and why ---- */
    int any_missing = 0;
    for (int r = 0; r < s->n_recs; r++) any_missing |= s->recs[r].missing[0] != 0;
    if (any_missing) {
        fprintf(f, "\n## Missing or failed cells\n\nLeft out of every decision and interval below (a failed run's "
                   "throughput measures the failure, not the server):\n\n");
        for (int r = 0; r < s->n_recs; r++) {
            const rp_rec *R = &s->recs[r];
            if (R->missing[0])
                fprintf(f, "- %s, %s, concurrency %d%s: %s\n", R->drafter, R->workload, R->conc,
                        R->undecided ? " (no decision)" : "", R->missing);
        }
    }

    /* ---- noise ---- */
    fprintf(f, "\n## Measured noise (speculation off, between repeats)\n\n"
               "The between-repeat s.d. of log decode tok/s is the run-to-run variation (≈ its coefficient of "
               "variation); the request-noise s.e. is what one repeat's own requests explain. When the first exceeds "
               "the second, drift or machine load moved whole runs, and the intervals widen to match.\n\n"
               "| workload | conc | repeats | decode tok/s [95%% CI] | between-repeat s.d. | request-noise s.e. per repeat |\n"
               "|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->n_cells; i++) {
        const rp_cell *c = &s->cells[i];
        if (c->depth != 0) continue;
        fprintf(f, "| %s | %d | %d | ", c->workload, c->conc, c->dec.n_rep);
        ci(f, "%.1f", &c->dec);
        fputs(" | ", f);
        num(f, "%.1f%%", 100 * c->dec.between_sd);
        fputs(" | ", f);
        num(f, "%.1f%%", 100 * c->dec.within_se);
        fputs(" |\n", f);
    }

    /* ---- every depth ---- */
    fprintf(f, "\n## Gain over speculation off, every depth swept\n\n");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        fprintf(f, "**%s, %s, concurrency %d** — %s\n\n", R->drafter, R->workload, R->conc, rp_decision_word(R));
        fprintf(f, "| depth | decode tok/s [95%% CI] | gain [95%% CI] | verdict | end-to-end tok/s [95%% CI] | end-to-end gain "
                   "| accept len | E(k) from the deepest arm | verify rows per step | predicted decode tok/s | inside the interval "
                   "| rep. 4-gram share |\n"
                   "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (int j = 0; j < R->n; j++) {
            const rp_cell *c = R->cell[j];
            fprintf(f, "| %d | ", R->depth[j]);
            ci(f, "%.1f", &c->dec); fputs(" | ", f);
            gain(f, &R->gain[j]); fputs(" | ", f);
            fputs(R->depth[j] ? verdict_word(R->verdict[j]) : "baseline", f); fputs(" | ", f);
            ci(f, "%.1f", &c->e2e); fputs(" | ", f);
            gain(f, &R->gain_e2e[j]); fputs(" | ", f);
            num(f, "%.3f", R->depth[j] == 0 ? 1.0 : c->al); fputs(" | ", f);
            num(f, "%.3f", R->depth[j] == 0 ? 1.0 : R->pred_e_deep[j]); fputs(" | ", f);
            num(f, "%.2f", R->pred_rows[j]); fputs(" | ", f);
            num(f, "%.1f", R->pred_dec[j]); fputs(" | ", f);
            fputs(R->pred_inside[j] < 0 ? (R->depth[j] ? "–" : "anchor") : R->pred_inside[j] ? "yes" : "no", f); fputs(" | ", f);
            num(f, "%.2f", c->rep4);
            if (c->rep4 > RP_REPEAT_WARN && R->depth[j] > 0) fputs(" ⚠", f);
            fputs(" |\n", f);
        }
        fputs("\n", f);
    }

    /* ---- predictions ---- */
    fprintf(f, "## Predicted vs measured\n\n");
    if (s->n_pred)
        fprintf(f, "Predicted decode tok/s fell inside the measured 95%% interval in **%d of %d** speculative cells "
                   "(%.0f%%).\n\n", s->n_pred_inside, s->n_pred, 100.0 * s->n_pred_inside / s->n_pred);
    else fprintf(f, "No prediction could be judged (no per-position rates or no intervals).\n\n");
    fprintf(f, "Predicted decode tok/s at depth k, concurrency c = c · E(k) ÷ step(k). E(k) is the arm's own accept "
               "length from the server's counters (deterministic under greedy, so not a noisy input); what is predicted "
               "is the step time: step(k) = cost(c sequences, c·(1 + d) rows) + c·(F + d·T) + overhead, with d the "
               "drafted tokens per step (accept length − 1 over the acceptance rate: a short ngram match verifies fewer "
               "rows), F and T the draft cost per drafting step and per drafted token. \"E(k) from the deepest arm\" "
               "(1 + Σ_{i<k} rate_i from the deepest depth's per-position counters) is what an unswept depth is "
               "predicted from; it reads low where a loop drives acceptance (a deep arm crosses a loop in few steps, so "
               "its steps sample the hard stretches more often). Cost per step:\n\n");
    for (int d = 0; d < s->n_drafters; d++)
        for (int r = 0; r < s->n_recs; r++)
            if (!strcmp(s->recs[r].drafter, s->drafters[d])) {
                fprintf(f, "- %s: %s\n", s->drafters[d], s->recs[r].cost_source);
                break;
            }
    fputs("\n", f);

    /* ---- content bound ---- */
    fprintf(f, "## What the content allows (per-position acceptance, break-even depth)\n\n"
               "Per-position acceptance (unconditional: P(draft i accepted)) at the deepest depth, and the depth past "
               "which one more draft row costs more than it returns (predicted decode tok/s stops rising)");
    if (blk)
        fprintf(f, ", next to what `dspark_block_size` would impose (**%d**, %s).\n\n"
                   "| drafter | workload | conc | rate at position 1..8 | break-even depth | decision | block-size depth |\n"
                   "|---|---|---|---|---|---|---|\n", s->block_size, s->block_src);
    else
        fprintf(f, ".\n\n| drafter | workload | conc | rate at position 1..8 | break-even depth | decision |\n"
                   "|---|---|---|---|---|---|\n");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        const rp_cell *deep = NULL;
        for (int j = 0; j < R->n; j++) if (R->depth[j] == R->pos_from_depth) deep = R->cell[j];
        fprintf(f, "| %s | %s | %d | ", R->drafter, R->workload, R->conc);
        if (deep)
            for (int k = 0; k < deep->n_pos && k < 8; k++) { if (k) fputs(" ", f); num(f, "%.2f", deep->pos[k]); }
        else fputs("–", f);
        fputs(" | ", f);
        if (R->break_even >= 0) fprintf(f, "%d", R->break_even);
        else fputs("–", f);
        fprintf(f, " | %s |", rp_decision_word(R));
        if (blk) fprintf(f, " %d |", R->block_depth);
        fputs("\n", f);
    }

    /* ---- canary ---- */
    fprintf(f, "\n## Canary on each cold launch (canary pass)\n\n\"baseline\": the depth-0 launch, whose content scores "
               "calibrate the content checks of the other launches (its findings are counted against the defaults). "
               "The threshold is the accept-length threshold of the interval check.\n\n"
               "| drafter | depth | verdict | threshold | first flag (s) | findings | note |\n|---|---|---|---|---|---|---|\n");
    int n_launch_fail = 0;
    for (int i = 0; i < s->n_launches; i++) {
        const rp_launch *L = &s->launches[i];
        if (L->repeat >= 0) { n_launch_fail += L->error[0] != 0; continue; }
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
    if (n_launch_fail) fprintf(f, "\n%d launch(es) of the repeat passes failed (sweep.json).\n", n_launch_fail);

    /* ---- every cell ---- */
    fprintf(f, "\n## Every cell: latency, 95%% intervals\n\n| drafter | depth | workload | conc | repeats | accept len | "
               "accept rate %% | TTFT mean ms | TTFT p99 ms | TPOT mean ms | TPOT p99 ms | ITL p50 ms | ITL p99 ms | "
               "E2E mean ms | requests failed |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < s->n_cells; i++) {
        const rp_cell *c = &s->cells[i];
        fprintf(f, "| %s | %d | %s | %d | %d | ", c->drafter, c->depth, c->workload, c->conc, c->n_rep);
        num(f, "%.3f", c->al); fputs(" | ", f);
        num(f, "%.1f", c->ar); fputs(" | ", f);
        ci(f, "%.1f", &c->ttft_mean); fputs(" | ", f);
        ci(f, "%.1f", &c->ttft_p99); fputs(" | ", f);
        ci(f, "%.3f", &c->tpot_mean); fputs(" | ", f);
        ci(f, "%.3f", &c->tpot_p99); fputs(" | ", f);
        ci(f, "%.3f", &c->itl_p50); fputs(" | ", f);
        ci(f, "%.3f", &c->itl_p99); fputs(" | ", f);
        ci(f, "%.1f", &c->e2el_mean); fputs(" | ", f);
        int nf = 0, ns = 0;   /* requests, summed over the repeats: counts are whole numbers */
        for (int k = 0; k < c->n_rep; k++) {
            nf += c->runs[k].failed > 0 ? c->runs[k].failed : 0;
            ns += (c->runs[k].failed > 0 ? c->runs[k].failed : 0) + (c->runs[k].completed > 0 ? c->runs[k].completed : 0);
        }
        fprintf(f, "%d of %d |\n", nf, ns);
    }

    fprintf(f, "\n## Figures\n\n");
    if (!figs) fprintf(f, "(gnuplot was not available: figures not rendered; data and scripts are in `data/`.)\n\n");
    figure(f, out, "decision_gain_vs_depth", "Decision: decode gain over speculation off vs depth, 95% intervals, the 1.0 line");
    figure(f, out, "decode_throughput_vs_depth", "Decode tokens/s vs depth, one panel per drafter, 95% bands");
    figure(f, out, "e2e_throughput_vs_depth", "End-to-end tokens/s vs depth, 95% bands");
    figure(f, out, "accept_length_vs_depth", "Accept length vs depth");
    figure(f, out, "ttft_vs_depth", "TTFT mean vs depth, 95% bands");
    figure(f, out, "itl_vs_depth", "ITL p50 vs depth, 95% bands (between repeats)");
    figure(f, out, "per_position_acceptance", "Per-position acceptance (unconditional) at the deepest depth, code vs prose");
    figure(f, out, "predicted_vs_measured", "Measured decode tokens/s (95% bars) vs predicted (dashed)");
    for (int i = 0; i < s->n_launches; i++) {
        if (s->launches[i].repeat >= 0 || s->launches[i].depth == 0) continue;
        char name[200], cap[300];
        snprintf(name, sizeof name, "timeline_%s_d%d", s->launches[i].drafter, s->launches[i].depth);
        for (char *c = name; *c; c++) if (*c == '/' || *c == ' ') *c = '_';
        snprintf(cap, sizeof cap, "Interval accept length over time, %s depth %d, with the canary threshold",
                 s->launches[i].drafter, s->launches[i].depth);
        figure(f, out, name, cap);
    }

    fprintf(f, "## How the numbers are made\n\n"
               "- Decode tok/s of a run = concurrency · Σ(output tokens − 1) ÷ Σ(E2E − TTFT) over its requests "
               "(= 1000 ÷ token-weighted mean TPOT ms × concurrency): prefill and queueing, which TTFT holds, are left "
               "out. End-to-end tok/s = concurrency · Σ output tokens ÷ Σ E2E (closed loop). Warm-up requests of each "
               "visit are not recorded.\n"
               "- Intervals (bench/load/stats.h `st_two_level`): in each repeat the requests are bootstrapped (%d "
               "resamples, seeded) for the s.e. of that repeat's figure; the repeats' figures are averaged (log scale "
               "for throughputs and gains) and the interval is ± t·√(max(S², W)/R), S² the between-repeat variance, W "
               "the mean request-noise variance, df R − 1 when S² ≥ W. tests/test_bench_stats.c measures its coverage "
               "(0.93–0.98 on synthetic repeats, 3 to 10 repeats). ITL percentiles have between-repeat intervals "
               "only (requests.csv keeps no gaps).\n"
               "- Gain of depth k = its decode tok/s ÷ speculation off's, per repeat (the same prompts in the same "
               "repeat, resampled together), then combined as above. A depth is *better* only when the interval "
               "excludes 1 (*worse* when it lies below).\n"
               "- Accept length = committed tokens per verify step per sequence, bonus token included. Per-position "
               "rate i = accepted at position i ÷ verify steps (unconditional), E(k) = 1 + Σ_{i<k} rate_i.\n"
               "- Repetition: the share of repeated word 4-grams in each output (outputs.jsonl), averaged; above %.1f "
               "a loop, not the drafter, explains much of the acceptance.\n"
               "- Percentiles: linear interpolation between closest ranks (numpy's default). TTFT: send → first "
               "content chunk; TPOT: (E2E − TTFT) ÷ (tokens − 1).\n", s->n_boot, RP_REPEAT_WARN);
    fclose(f);
    return 0;
}

static void add_gain(cJSON *o, const char *k, const rc_gain *g) {
    if (isnan(g->est)) return;
    cJSON *a = cJSON_AddArrayToObject(o, k);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(g->est));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(isnan(g->lo) ? g->est : g->lo));
    cJSON_AddItemToArray(a, cJSON_CreateNumber(isnan(g->hi) ? g->est : g->hi));
}

static void add_ci(cJSON *o, const char *k, const st_ci *c) {
    if (isnan(c->est)) return;
    cJSON *a = cJSON_AddArrayToObject(o, k);
    cJSON_AddItemToArray(a, cJSON_CreateNumber(c->est));
    if (!isnan(c->lo)) {
        cJSON_AddItemToArray(a, cJSON_CreateNumber(c->lo));
        cJSON_AddItemToArray(a, cJSON_CreateNumber(c->hi));
    }
}

int rp_write_json(const rp_sweep *s, const char *out, char *err, size_t errlen) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "block_size", s->block_size);
    cJSON_AddStringToObject(j, "block_size_source", s->block_src);
    cJSON_AddStringToObject(j, "interval", "95% two-level: requests bootstrapped within repeats, repeats by t");
    cJSON_AddNumberToObject(j, "bootstrap_resamples", s->n_boot);
    cJSON_AddNumberToObject(j, "predictions_judged", s->n_pred);
    cJSON_AddNumberToObject(j, "predictions_inside_interval", s->n_pred_inside);
    if (s->loadavg_start[0]) cJSON_AddStringToObject(j, "loadavg_start", s->loadavg_start);
    if (s->loadavg_end[0]) cJSON_AddStringToObject(j, "loadavg_end", s->loadavg_end);
    if (s->machine[0]) cJSON_AddStringToObject(j, "machine", s->machine);
    cJSON *a = cJSON_AddArrayToObject(j, "recommendations");
    for (int r = 0; r < s->n_recs; r++) {
        const rp_rec *R = &s->recs[r];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "drafter", R->drafter);
        cJSON_AddStringToObject(o, "workload", R->workload);
        cJSON_AddNumberToObject(o, "concurrency", R->conc);
        cJSON_AddStringToObject(o, "decision", rp_decision_word(R));
        if (R->missing[0]) cJSON_AddStringToObject(o, "missing_or_failed", R->missing);
        if (R->undecided) cJSON_AddNullToObject(o, "recommended_depth");
        else cJSON_AddNumberToObject(o, "recommended_depth", R->rec >= 0 ? R->depth[R->rec] : 0);
        if (R->rec >= 0) add_gain(o, "recommended_gain_ci95", &R->gain[R->rec]);
        if (R->best >= 0) {
            cJSON_AddNumberToObject(o, "measured_best_depth", R->depth[R->best]);
            add_gain(o, "measured_best_gain_ci95", &R->gain[R->best]);
            cJSON_AddNumberToObject(o, "measured_best_decode_throughput", R->cell[R->best]->dec.est);
        }
        if (R->best_pred >= 0) {
            cJSON_AddNumberToObject(o, "predicted_best_depth", R->depth[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_expected_tokens_per_step", R->pred_e[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_seconds_per_step", R->pred_step[R->best_pred]);
            cJSON_AddNumberToObject(o, "predicted_decode_throughput", R->pred_dec[R->best_pred]);
        }
        if (R->break_even >= 0) cJSON_AddNumberToObject(o, "break_even_depth", R->break_even);
        cJSON_AddNumberToObject(o, "block_size_depth", R->block_depth);
        cJSON_AddBoolToObject(o, "block_size_depth_swept", R->block_idx >= 0);
        if (!isnan(R->lost_block)) cJSON_AddNumberToObject(o, "throughput_lost_by_inheriting", R->lost_block);
        if (!isnan(R->max_rep4)) cJSON_AddNumberToObject(o, "max_repeated_4gram_frac", R->max_rep4);
        cJSON_AddStringToObject(o, "cost_source", R->cost_source);
        cJSON *d = cJSON_AddArrayToObject(o, "depths");
        for (int k = 0; k < R->n; k++) {
            const rp_cell *c = R->cell[k];
            cJSON *e = cJSON_CreateObject();
            cJSON_AddNumberToObject(e, "depth", R->depth[k]);
            cJSON_AddNumberToObject(e, "repeats", c->n_rep);
            add_ci(e, "decode_throughput_ci95", &c->dec);
            add_ci(e, "e2e_throughput_ci95", &c->e2e);
            add_gain(e, "gain_ci95", &R->gain[k]);
            add_gain(e, "e2e_gain_ci95", &R->gain_e2e[k]);
            if (R->depth[k]) cJSON_AddStringToObject(e, "verdict", R->verdict[k] > 0 ? "better" : R->verdict[k] < 0 ? "worse" : "within noise");
            if (!isnan(c->tps)) cJSON_AddNumberToObject(e, "measured_output_throughput", c->tps);
            if (!isnan(c->al)) cJSON_AddNumberToObject(e, "measured_accept_length", c->al);
            if (!isnan(c->rep4)) cJSON_AddNumberToObject(e, "repeated_4gram_frac", c->rep4);
            if (!isnan(R->pred_e[k])) cJSON_AddNumberToObject(e, "predicted_expected_tokens_per_step", R->pred_e[k]);
            if (!isnan(R->pred_e_deep[k]))
                cJSON_AddNumberToObject(e, "expected_tokens_per_step_from_deepest_arm", R->pred_e_deep[k]);
            if (!isnan(R->pred_rows[k])) cJSON_AddNumberToObject(e, "predicted_verify_rows_per_step", R->pred_rows[k]);
            if (!isnan(R->pred_step[k])) cJSON_AddNumberToObject(e, "predicted_seconds_per_step", R->pred_step[k]);
            if (!isnan(R->pred_dec[k])) cJSON_AddNumberToObject(e, "predicted_decode_throughput", R->pred_dec[k]);
            if (R->pred_inside[k] >= 0) cJSON_AddBoolToObject(e, "prediction_inside_interval", R->pred_inside[k]);
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
