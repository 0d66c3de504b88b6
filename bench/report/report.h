/* report.h — `specbed report DIR`: reads a sweep (sweep.json, runs.csv, each
 * run's requests.csv and outputs.jsonl, the canaries' canary.json), puts a
 * 95% interval on every throughput and latency figure (stats.h
 * st_two_level: requests bootstrapped within each repeat, repeats combined
 * by a t interval), a paired interval on every depth's gain over
 * speculation off, chooses a depth by the significance rule (recommend.h
 * rc_choose), predicts decode throughput per depth from a stable cost curve
 * and the per-position acceptance, and renders
 *   REPORT/decision_gain_vs_depth, decode_throughput_vs_depth,
 *   e2e_throughput_vs_depth, accept_length_vs_depth, ttft_vs_depth,
 *   itl_vs_depth, per_position_acceptance, predicted_vs_measured,
 *   timeline_<drafter>_d<k>            (.png and .svg, through gnuplot;
 *   one panel per drafter, interval bands)
 *   REPORT/report.md (decision first), REPORT/recommendation.json, and the
 *   data files and gnuplot scripts in REPORT/data
 * REPORT defaults to DIR/report. */
#ifndef SPECBED_BENCH_REPORT_H
#define SPECBED_BENCH_REPORT_H
#include <stddef.h>
#include "recommend.h"
#include "stats.h"

#define RP_MAX_POS 16
#define RP_MAX_DEPTHS 64
#define RP_REPEAT_WARN 0.5   /* repeated word 4-gram share above which a loop explains acceptance */

/* The ok requests of one run (one repeat of a cell), in sending order. */
typedef struct {
    int rep;                       /* the sweep's repeat index */
    int n;
    double *n_out, *ttft, *e2el, *tpot;   /* tokens; seconds; seconds; ms (NaN below 2 tokens) */
    char (*id)[64];                /* workload row ids, for pairing arms within a repeat */
    double itl_p50, itl_p99;       /* the run's, from runs.csv (requests.csv keeps no gaps) */
    double al, pos[RP_MAX_POS];    /* accept length and per-position rates of the run */
    double rep4;                   /* mean repeated word 4-gram share of its outputs */
    int failed, completed;         /* requests, from runs.csv (-1 not recorded) */
} rp_run;

/* One (drafter, depth, workload, concurrency) cell over its repeats. */
typedef struct {
    char drafter[64], workload[128];
    int depth, conc, n_rep;
    char dir[512];                 /* first repeat's run directory, relative to the sweep */
    rp_run *runs;                  /* [n_rep] */
    /* means over repeats (runs.csv) */
    double tps, failed, completed, n_out, al, ar, min_iv_al, rep4;
    int n_pos;
    double pos[RP_MAX_POS];
    /* 95% intervals (st_two_level) */
    st_ci dec, e2e;                /* decode and end-to-end output tokens/s */
    st_ci ttft_mean, ttft_p50, ttft_p99, tpot_mean, tpot_p99, e2el_mean, itl_p50, itl_p99;   /* ms */
    int n_bad;                     /* runs with failed requests or none completed: the cell decides nothing */
    char bad[256];                 /* the first such run, in words */
} rp_cell;

typedef struct {
    char drafter[64];
    int depth, repeat;             /* repeat -1: the canary pass */
    char dir[256];
    char verdict[16];              /* pass / fail / error / baseline / "" (no canary) */
    double first_flag_s, threshold;
    int findings;
    char error[512];
} rp_launch;

/* The decision for one drafter × workload × concurrency. */
typedef struct {
    char drafter[64], workload[128];
    int conc;
    int n;                         /* depths swept for this series, ascending; index 0 is depth 0 when swept */
    int depth[RP_MAX_DEPTHS];
    const rp_cell *cell[RP_MAX_DEPTHS];
    rc_gain gain[RP_MAX_DEPTHS];       /* decode throughput ÷ speculation off, paired by repeat */
    rc_gain gain_e2e[RP_MAX_DEPTHS];   /* the same for end-to-end throughput */
    int verdict[RP_MAX_DEPTHS];        /* rc_verdict of gain */
    /* The prediction per depth: E(k) from that arm's own counters (deterministic under greedy;
     * pred_e_deep: extrapolated from the deepest arm's per-position rates instead, what an unswept
     * depth gets), verify rows per step (c·(1 + drafted tokens per step), from the arm's accept
     * length and acceptance rate: a short ngram match verifies fewer rows), seconds per step, tok/s. */
    double pred_e[RP_MAX_DEPTHS], pred_e_deep[RP_MAX_DEPTHS], pred_rows[RP_MAX_DEPTHS];
    double pred_step[RP_MAX_DEPTHS], pred_dec[RP_MAX_DEPTHS];
    int pred_inside[RP_MAX_DEPTHS];    /* prediction inside the measured interval: 1, 0, -1 not judged */
    int rec, best;                     /* indices; rec -1 = speculation off (or no decision: undecided) */
    int undecided;                     /* 1: speculation off or every speculative depth is missing or failed */
    char missing[1536];                /* the planned cells left out of this series, each with why; "" none */
    int best_pred;                     /* argmax predicted decode tok/s, -1 none */
    int block_depth, block_idx;        /* block_idx -1 when not swept */
    double block_pred;                 /* predicted decode tok/s at the block depth */
    double lost_block;                 /* 1 − tps(block) ÷ tps(recommended), measured when swept, else predicted */
    int break_even;                    /* content-bound depth (rc_break_even), -1 unknown */
    int pos_from_depth;
    double overhead_s;                 /* per-step overhead anchoring the cost table to depth 0 (table cost only) */
    double max_rep4;                   /* highest repetition share over the series' speculative cells */
    char cost_source[700];
} rp_rec;

typedef struct {
    char dir[1024];
    char launch[4096];
    char launch_off[4096];             /* the depth-0 launch: --launch-off, or the one derived from --launch */
    int launch_off_derived;
    int block_size;
    char block_src[600];
    char cost_table[1024];             /* sweep.json's --cost-table */
    char cost_tables[16][2][600];      /* sweep.json's --profile-cmd results: drafter, path */
    int n_cost_tables;
    char loadavg_start[64], loadavg_end[64], started[32];
    char machine[768];                 /* sweep.json's machine, in words ("" not recorded) */
    int planned_depths[RP_MAX_DEPTHS], n_planned;   /* sweep.json's depths */
    int has_dspark;                    /* a drafter named dspark was swept: the block-size comparison applies */
    double temperature, top_p, wall_s;
    long long order_seed, seed;
    int repeats_planned, repeats_done, n_boot;
    char gave_up[2048];                /* what --budget gave up, "" none */
    rp_cell *cells;
    int n_cells;
    rp_launch *launches;
    int n_launches;
    rp_rec *recs;
    int n_recs;
    char drafters[16][64];
    int n_drafters;
    int n_pred, n_pred_inside;         /* predictions judged against the measured interval */
} rp_sweep;

int  rp_load(rp_sweep *s, const char *dir, char *err, size_t errlen);
/* cost_table: a file overriding the sweep's (NULL = sweep.json's profiles or
 * table, else a monotone fit to the sweep's own step times). n_boot:
 * bootstrap resamples per repeat (default 1000); seed: their seed. */
int  rp_recommend(rp_sweep *s, const char *cost_table, int n_boot, unsigned long long seed, char *err, size_t errlen);
void rp_free(rp_sweep *s);

/* gnuplot figures into outdir; 0 ok. */
int  rp_plot(const rp_sweep *s, const char *outdir, char *err, size_t errlen);
int  rp_write_md(const rp_sweep *s, const char *outdir, int have_figures, char *err, size_t errlen);
int  rp_write_json(const rp_sweep *s, const char *outdir, char *err, size_t errlen);
/* "speculation off", "depth K" or "no decision" (static buffer per call slot). */
const char *rp_decision_word(const rp_rec *R);

/* `specbed report DIR` (tools/main.c dispatches to it; argv[0] is
 * "report"): 0 ok, 1 failed, 2 bad usage / could not run. */
int cmd_report(int argc, char **argv);
#endif
