/* sim.h — `specbed simulate`: a discrete-event simulation of continuous
 * batching with speculative decoding, for fleets and hardware this machine
 * cannot hold (issue 19). Files only: it reads acceptance rates (a user's
 * JSON or a sweep directory), a cost curve (common/cost_curve.h) and
 * workload files, and writes numbers. bench/SIMULATE.md documents the model
 * and its validation against measured sweeps.
 *
 * The model, one replica (a specbed/vLLM-like server):
 *   - requests wait in FIFO order; between steps the scheduler admits them
 *     up to max_running;
 *   - one step = one ragged batch: every decoding request verifies k + 1
 *     rows (k = min(depth, output left − 1, row_budget ÷ decoders − 1), the
 *     same caps as spec/spec_batch.c), then prompt chunks of prefilling
 *     requests in admission order with the rows left (≤ prefill_chunk each
 *     when that is set);
 *   - step seconds = the cost table at the step's rows and sequences
 *     (SIMULATE.md lists its terms) + the drafter's cost batched over the
 *     drafting sequences + host overheads;
 *   - at the step's end a prompt whose last chunk ran yields its first token
 *     (TTFT), and each decoding request commits a + 1 tokens: a accepted
 *     drafts, sampled position by position with the conditional rates
 *     α_i = p_i ÷ p_{i−1} (p_{−1} = 1), stopping at the first rejection, so
 *     E[a + 1] = E(k) = 1 + Σ_{i<k} p_i (bench/report/recommend.h);
 *   - events (step ends, arrivals, phase changes, batch starts) are ordered
 *     by time across replicas in one heap; at equal times step ends come
 *     first, then phase changes, client returns, arrivals, and batch starts last, so every
 *     request that exists at an instant can join the batch formed then.
 * A fleet is `replicas` such servers behind a load balancer (round-robin, or
 * least-loaded: fewest requests running + waiting, ties rotating).
 *
 * Randomness: two splitmix64 streams per run from the seed: one for traffic
 * (arrival gaps, request lengths), one for acceptance. The traffic stream
 * does not depend on the depth, so the depths of one seed see the same
 * arrivals (common random numbers: their differences are less noisy than
 * their values). The same config and seed give the same numbers. */
#ifndef SPECBED_BENCH_SIM_H
#define SPECBED_BENCH_SIM_H
#include <stddef.h>
#include <stdint.h>
#include "cost_curve.h"
#include "load_shape.h"

#define SIM_MAX_POS 16        /* per-position rates (specbed's SPEC_MAX_DEPTH) */
#define SIM_MAX_DEPTH 16
#define SIM_MAX_REPLICAS 4096

/* The acceptance of one drafter on one workload. */
typedef struct {
    char drafter[64], workload[128];
    int n_pos;                 /* positions known; deeper ones are never accepted */
    double p[SIM_MAX_POS];     /* unconditional rates, non-increasing, in [0, 1] */
    double proposal_rate;      /* P(the drafter proposes anything in a step), (0, 1]; 1 for
                                * model drafters, < 1 for ngram (no match → one row, no drafts).
                                * p are rates per proposal, as specbed's and vLLM's counters are */
    double draft_fill;         /* drafted tokens ÷ k within a proposal, (0, 1]: an ngram match
                                * shorter than k drafts fewer rows (rows and draft cost only) */
    char source[600];          /* where the rates came from */
} sim_accept;

/* Conditional rates from unconditional ones: alpha[i] = p[i] / p[i−1]. */
void sim_alpha_from_rates(const double *p, int n, double *alpha);
/* Accepted drafts of one verify step of k drafts: sequential Bernoulli draws
 * with the conditional rates, stopping at the first rejection. */
int  sim_sample_accept(const double *alpha, int n, int k, ld_rng *r);

typedef enum { SIM_BAL_ROUND_ROBIN = 0, SIM_BAL_LEAST_LOADED = 1 } sim_balance;

/* Request lengths drawn uniformly from a list (a workload's rows). */
typedef struct {
    int n;
    int *prompt, *output;      /* [n] tokens; output 0 = the config's output_len */
} sim_lengths;

typedef struct {
    /* one server */
    int max_running;           /* requests batched together */
    int row_budget;            /* rows per step (verify rows + prompt chunks), ≥ max_running */
    int prefill_chunk;         /* most prompt rows of one request per step; 0 = no cap */
    const cost_curve *cost;    /* seconds per step vs rows (borrowed) */
    double draft_s_per_token;  /* seconds per drafted token; < 0: the table's (per drafting batch) */
    double step_overhead_s;    /* fixed host time per step (scheduling, sampling, HTTP) */
    double token_overhead_s;   /* host time per token a step commits (detokenising, stop strings,
                                * the stream's bytes and, on a shared machine, the client's parse of
                                * them); the step's expected tokens: E(k) per decoding request, 1 per
                                * prompt finished */
    double request_overhead_s; /* from a request's arrival to its place in the queue (HTTP,
                                * tokenising): counted in its TTFT and E2E */
    /* speculation */
    int depth;                 /* drafts per verify step; 0 = speculation off (one row, E = 1) */
    const sim_accept *acc;     /* borrowed; unused at depth 0 */
    /* fleet */
    int replicas;
    sim_balance balance;
    /* traffic: phases back to back (closed loop of N, or open loop at R req/s) */
    ld_profile profile;        /* a phase duration may be INFINITY with n_requests > 0 */
    double burstiness;         /* gamma shape of open-loop gaps (1 = Poisson) */
    double think_s;            /* closed loop: a client's pause between a reply and its next request */
    int n_requests;            /* stop arriving after this many; 0 = when the profile ends */
    /* request lengths */
    int prompt_len, output_len;          /* fixed, unless lengths is set */
    const sim_lengths *lengths;          /* borrowed; NULL = fixed */
    /* goodput: a request is good when every SLO given holds (0 = not given) */
    double slo_ttft_s, slo_tpot_s;
    uint64_t seed;
    int keep_records;          /* fill sim_result.rec (tests) */
    long max_arrivals;         /* a guard against a runaway open loop; 0 = 50,000,000 */
} sim_config;

/* The defaults of `specbed serve`: max_running 16, its row budget, no
 * prefill cap, one replica, Poisson, fixed 256/128 tokens. */
void sim_config_defaults(sim_config *c);
/* Checks a config; 0 ok, else a message naming the setting. */
int  sim_config_check(const sim_config *c, char *err, size_t errlen);

/* Metrics of one run, named as vLLM's benchmark names them (units: ms,
 * req/s, tok/s; spec_decode_acceptance_rate in percent), then specbed's own. */
enum {
    SIM_M_COMPLETED, SIM_M_DURATION, SIM_M_TOTAL_INPUT, SIM_M_TOTAL_OUTPUT,
    SIM_M_REQ_TPUT, SIM_M_GOODPUT, SIM_M_OUT_TPUT, SIM_M_TOTAL_TPUT,
    SIM_M_MEAN_TTFT, SIM_M_MEDIAN_TTFT, SIM_M_P99_TTFT,
    SIM_M_MEAN_TPOT, SIM_M_MEDIAN_TPOT, SIM_M_P99_TPOT,
    SIM_M_MEAN_ITL, SIM_M_MEDIAN_ITL, SIM_M_P99_ITL,
    SIM_M_MEAN_E2EL, SIM_M_MEDIAN_E2EL, SIM_M_P99_E2EL,
    SIM_M_ACCEPT_LEN, SIM_M_ACCEPT_RATE,
    SIM_M_STEPS, SIM_M_MEAN_ROWS, SIM_M_MAX_WAITING,
    SIM_N_METRICS
};
extern const char *const SIM_METRIC_NAMES[SIM_N_METRICS];

/* One request, when keep_records is set. */
typedef struct {
    double arrival_s, first_s, finish_s;   /* first token and last token times */
    int prompt, output;                    /* tokens asked for */
    int committed;                         /* output tokens produced */
    int replica, finished;                 /* finished counts how often it finished (1) */
    int steps;                             /* steps that gave it tokens */
} sim_req_rec;

typedef struct {
    double m[SIM_N_METRICS];   /* NaN where undefined (accept length at depth 0, TPOT of 1-token outputs) */
    long arrivals;             /* requests that arrived (= completed: every request finishes) */
    long verify_steps, drafts, drafted_tokens, accepted_tokens, committed_verify;
    long replica_requests[64];  /* requests dispatched to each of the first 64 replicas */
    sim_req_rec *rec;          /* [arrivals] when keep_records; freed by sim_result_free */
    long n_rec;
} sim_result;

/* Runs one simulation. 0 ok; -1 with a message (bad config, out of memory,
 * more arrivals than max_arrivals). */
int  sim_run(const sim_config *c, sim_result *out, char *err, size_t errlen);
void sim_result_free(sim_result *r);

/* ---- inputs (sim_input.c) ---- */

#define SIM_CELL_REPEATS 32
/* One drafter × depth × workload × concurrency cell of a sweep's runs.csv,
 * repeats averaged (NaN values skipped). Drafter "none" is depth 0. A run
 * with failed requests or none completed measured the failure, not the
 * server: it is left out of the averages and counted in n_bad (a cell
 * whose every run failed has n_rep 0). sim_sweep_cells returns the cells
 * sorted: speculation off first, then drafter, workload, concurrency, depth
 * (runs.csv is in the sweep's shuffled visit order). */
typedef struct {
    char drafter[64], workload[128];
    int depth, conc, n_rep;
    double tps, req_tps, completed, n_out;          /* output tok/s, req/s, requests, output tokens per request */
    double ttft_mean, tpot_mean, e2el_mean;         /* ms */
    double al, ar;                                  /* accept length; acceptance rate in percent */
    int n_pos;
    double pos[SIM_MAX_POS];                        /* per-position rates (pos_i columns) */
    int n_dir;
    char dir[8][256];                               /* the repeats' run directories, relative to the sweep */
    int n_vals;                                     /* repeats kept below (the first SIM_CELL_REPEATS) */
    double rep_tps[SIM_CELL_REPEATS], rep_tpot[SIM_CELL_REPEATS];   /* each repeat's output tok/s, mean TPOT ms */
    int n_bad;                                      /* runs left out: failed requests, or none completed */
    char bad[160];                                  /* the first of them, in words */
} sim_sweep_cell;
/* Reads DIR/runs.csv (written by `specbed sweep`); *out is malloc'd. */
int sim_sweep_cells(const char *dir, sim_sweep_cell **out, int *n, char *err, size_t errlen);

/* A JSON file {"WORKLOAD": [p_0, p_1, ...], ...} or, per workload,
 * {"rates": [...], "proposal_rate": Q, "draft_fill": F}. Rates are
 * vLLM's unconditional per-position acceptance (accepted_at[i] ÷ drafts),
 * so they must not increase. *out is malloc'd (the caller frees). */
int sim_accept_load_json(const char *path, const char *drafter, sim_accept **out, int *n, char *err,
                         size_t errlen);
/* From a sweep directory (sweep --out DIR): per drafter × workload, the
 * rates measured at the deepest depth swept (averaged over concurrencies
 * and repeats), with proposal_rate and draft_fill from the same runs'
 * accept length and acceptance rate. drafter NULL = every drafter. */
int sim_accept_load_sweep(const char *dir, const char *drafter, sim_accept **out, int *n, char *err,
                          size_t errlen);
/* Fills proposal_rate and draft_fill of a from a measured accept length
 * (committed ÷ steps) and acceptance rate (percent) at depth k. */
void sim_accept_fit_fill(sim_accept *a, int k, double accept_length, double acceptance_rate_pct);
/* Lengths from a workload (workload.h): prompt tokens ≈ characters ÷
 * chars_per_token (at least 1), output = the row's max_tokens or 0. */
int sim_lengths_from_workload(const char *name_or_path, double chars_per_token, sim_lengths *out, char *err,
                              size_t errlen);
void sim_lengths_free(sim_lengths *l);
/* Phases: load_shape.h's "60s@r2,60s@8" or the form "60:rate=2,60:concurrency=8". */
int sim_phases_parse(const char *s, ld_profile *out, char *err, size_t errlen);

/* ---- aggregation over seeded repeats (sim_out.c) ---- */

/* 95% interval of the mean of n values (Student t, n − 1 degrees of
 * freedom); lo = hi = the value for n = 1; NaN values are skipped. */
void sim_interval95(const double *v, int n, double *mean, double *lo, double *hi);

/* ---- a grid of runs: acceptance set × replicas × load × depth (sim_out.c) ---- */

typedef enum { SIM_LOAD_CONCURRENCY = 0, SIM_LOAD_RATE = 1, SIM_LOAD_PROFILE = 2 } sim_load_kind;
typedef struct {
    sim_load_kind kind;
    double value;              /* concurrency or req/s (fleet-wide, or per replica with per_replica);
                                * profiles: their order in the command line */
    ld_profile profile;        /* SIM_LOAD_PROFILE */
    char label[160];           /* "c=8", "r=2.5", "60s@r2,60s@r10" */
} sim_load;

/* The objective when --objective is not given, and why (into why): goodput
 * when an SLO is given (stated in why); else, when any load is open loop (a
 * rate, or a profile with a rate phase), mean TPOT minimised — an open-loop
 * server that keeps up serves exactly the offered load at every depth, so
 * output throughput ties and would leave depth 0 "within the best" at every
 * load; else (closed loop) output throughput. */
int sim_default_objective(const sim_load *loads, int n_loads, int any_slo, double slo_ttft_ms, double slo_tpot_ms,
                          char *why, size_t whylen);

typedef struct {
    double mean[SIM_N_METRICS], lo[SIM_N_METRICS], hi[SIM_N_METRICS];   /* over the repeats */
    int n_rep;
} sim_cell;

/* The decision for one acceptance set × replicas × load. */
typedef struct {
    int best;                  /* depth index maximising the objective's mean (ties: shallower); -1 none */
    int recommended;           /* the shallowest depth whose mean is within the best's 95% interval */
    int off_within;            /* depth 0 was simulated and is the best or within its interval */
    double gain;               /* best ÷ depth 0 (latencies: depth 0 ÷ best), NaN without depth 0 */
} sim_decision;

typedef struct {
    const sim_accept *sets; int n_sets;
    const int *depths; int n_depths;
    const int *replicas; int n_replicas;
    const sim_load *loads; int n_loads;
    int per_replica;           /* loads scale with the replica count */
    int objective;             /* the metric maximised (throughputs, goodput) or minimised (latencies) */
    const char *objective_why; /* why that one (the default's reason, or "--objective"); printed with the decisions */
    const sim_config *base;    /* the settings every run shares */
    const sim_lengths *set_lengths; /* [n_sets] lengths per acceptance set (its workload's), or NULL: base's */
    const char *lengths_source;/* NULL = fixed lengths */
    int repeats;
    sim_cell *cells;           /* [n_sets][n_replicas][n_loads][n_depths], filled by sim_grid_run */
    sim_decision *dec;         /* [n_sets][n_replicas][n_loads] */
    double wall_s;             /* seconds the simulations took */
    long sim_requests;         /* requests simulated in all */
} sim_grid;

static inline int sim_grid_at(const sim_grid *g, int s, int r, int l, int d) {
    return ((s * g->n_replicas + r) * g->n_loads + l) * g->n_depths + d;
}
/* Runs every cell `repeats` times (seeds base->seed + 0..repeats−1) and
 * decides per load. progress: print one line per cell on stderr. */
int  sim_grid_run(sim_grid *g, int progress, char *err, size_t errlen);
void sim_grid_free(sim_grid *g);
/* The markdown tables (every cell, then the decisions) as one string (caller frees). */
char *sim_grid_markdown(const sim_grid *g);
/* simulate.csv and simulate.json into dir (written atomically). */
int  sim_grid_write(const sim_grid *g, const char *dir, char *err, size_t errlen);

/* ---- the command (cmd_simulate.c) and its validation mode (sim_compare.c) ---- */
typedef struct {
    const char *sweep_dir, *drafter, *out_dir;
    const cost_curve *cost;
    double draft_s_per_token, chars_per_token;
    double step_overhead_s;    /* < 0: fitted per workload, with a per-token part, to the sweep's depth-0 cells */
    double token_overhead_s;   /* used when step_overhead_s is given (≥ 0) */
    double request_overhead_s; /* < 0: per workload from its lowest-concurrency depth-0 cell */
    double think_s;            /* < 0: per concurrency from the sweep's depth-0 cells (see sim_compare.c) */
    int repeats, max_running, row_budget;
    uint64_t seed;
} sim_compare_opts;
/* `specbed simulate` (tools/main.c dispatches to it): argv[0] is "simulate"; returns 0 ok, 1 outputs not written, 2 bad usage. */
int cmd_simulate(int argc, char **argv);
/* Simulates every measured cell of a sweep with its own settings and
 * acceptance and prints measured vs simulated per cell; writes compare.csv
 * and compare.md into out_dir. 0 ok. */
int sim_compare_sweep(const sim_compare_opts *o, char *err, size_t errlen);
#endif
