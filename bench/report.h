/* report.h — `specbed report DIR`: reads a sweep (sweep.json, runs.csv, the
 * runs' intervals.csv, the canaries' canary.json), aggregates repeats,
 * computes the depth recommendation (recommend.h), and renders
 *   REPORT/accept_length_vs_depth, throughput_vs_depth, ttft_vs_depth,
 *   itl_vs_depth, per_position_acceptance, predicted_vs_measured,
 *   timeline_<drafter>_d<k>            (.png and .svg, through gnuplot)
 *   REPORT/report.md, REPORT/recommendation.json, and the data files and
 *   gnuplot scripts in REPORT/data
 * REPORT defaults to DIR/report. */
#ifndef SPECBED_BENCH_REPORT_H
#define SPECBED_BENCH_REPORT_H
#include <stddef.h>
#include "recommend.h"

#define RP_MAX_POS 16

/* One (drafter, depth, workload, concurrency) cell, repeats averaged. */
typedef struct {
    char drafter[64], workload[128];
    int depth, conc, n_rep;
    char dir[512];                 /* first repeat's run directory, relative to the sweep */
    double tps, req_tps, failed, completed;
    double ttft_mean, n_out, ttft_p50, ttft_p99, itl_p50, itl_p99, tpot_mean, tpot_p50, tpot_p99, e2el_mean;
    double al, ar, min_iv_al;   /* accept length; acceptance rate in percent (vLLM's unit); lowest interval accept length */
    int n_pos;
    double pos[RP_MAX_POS];
} rp_cell;

typedef struct {
    char drafter[64];
    int depth;
    char dir[256];
    char verdict[16];              /* pass / fail / error / "" (no canary) */
    double first_flag_s, threshold;
    int findings;
    char error[512];
} rp_launch;

/* The recommendation for one drafter × workload × concurrency. */
typedef struct {
    char drafter[64], workload[128];
    int conc;
    int n;                         /* depths swept for this series */
    int depth[64];
    double meas_tps[64], meas_al[64], pred_e[64], pred_step[64], pred_tps[64];
    int best_meas, best_pred;      /* indices, -1 when none */
    int block_depth;
    double block_tps;              /* measured when swept, else predicted */
    int block_swept;
    double loss_frac;              /* (best − block) ÷ best: measured when the block depth was swept,
                                    * else predicted against the predicted best (block depth included) */
    int pos_from_depth;            /* the run the per-position rates came from */
    double n_out, overhead_s;      /* output tokens per request and per-request overhead (mean TTFT)
                                    * of the speculation-off run, for the end-to-end prediction */
    char cost_source[600];
} rp_rec;

typedef struct {
    char dir[1024];
    char launch[4096];
    int block_size;
    char block_src[600];
    char cost_table[1024];
    rp_cell *cells;
    int n_cells;
    rp_launch *launches;
    int n_launches;
    rp_rec *recs;
    int n_recs;
    char drafters[16][64];
    int n_drafters;
} rp_sweep;

int  rp_load(rp_sweep *s, const char *dir, char *err, size_t errlen);
/* cost_table: a file overriding sweep.json's (NULL = sweep.json's, else measured). */
int  rp_recommend(rp_sweep *s, const char *cost_table, char *err, size_t errlen);
void rp_free(rp_sweep *s);

/* gnuplot figures into outdir; 0 ok. */
int  rp_plot(const rp_sweep *s, const char *outdir, char *err, size_t errlen);
int  rp_write_md(const rp_sweep *s, const char *outdir, int have_figures, char *err, size_t errlen);
int  rp_write_json(const rp_sweep *s, const char *outdir, char *err, size_t errlen);
#endif
