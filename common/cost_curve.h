/* cost_curve.h — seconds per verify step as a function of the rows in the
 * step (DESIGN §6): the one cost curve. The verify policies (spec/) and the
 * depth recommender (bench/) both read it through cost_curve_at(), so they
 * give the same cost for the same table at every row count.
 *
 * Sources: the JSON that `specbed profile` writes
 *   {"model": DIR, "threads": T, "history": H, "tp": N,
 *    "rows": [1, 2, ...], "seconds_per_step": [...],
 *    "drafter": NAME (optional: whose draft_* costs these are),
 *    "draft_seconds_per_token": S, "draft_seconds_per_step": F (optional),
 *    "logits_seconds_per_row": L (optional),
 *    "context_seconds_per_row_token": A (optional),
 *    "draft_seconds_per_prompt_token": B (optional),
 *    "draft_by_sequences": [{"sequences": n, "seconds_per_step": F_n,
 *                            "seconds_per_token": T_n}, ...] (optional),
 *    "moe": {"experts": E, "top_k": k, "sparse_layers": L, "expert_bytes": X,
 *            "text": WORKLOAD, "rows": [...], "distinct_experts_per_layer": [...]}
 *            (optional: a mixture-of-experts target)}
 * (any JSON a user writes for other hardware in that shape), bench_engine's
 * CSV (forward_ms rows: batch × rows_per_seq), or points measured by a
 * sweep (cost_curve_from_points).
 *
 * The same rows cost less in fewer sequences (a span of verify rows reads
 * its sequence's K/V once; on this CPU 8 rows of one sequence cost 0.56 ms,
 * 4 × 2 rows 0.63 ms, 8 × 1 row 0.86 ms), so a table may also hold one curve
 * per sequence count,
 *   "by_sequences": [{"sequences": 1, "rows": [...], "seconds_per_step": [...]}, ...]
 * (profile measures 1, 2, 4, 8; bench_engine's CSV gives its batches), read
 * by cost_curve_at_seqs. "rows"/"seconds_per_step" stay the curve for
 * readers that know only the row count.
 *
 * The curve: points with equal rows are averaged, sorted by rows, and made
 * non-decreasing (a bigger step never costs less: timer noise otherwise
 * makes a policy chase phantom savings). Between points it is linear; past
 * either end it extends the nearest segment, never below a quarter of the
 * cheapest point; one point is flat. */
#ifndef SPECBED_COST_CURVE_H
#define SPECBED_COST_CURVE_H
#include <stddef.h>

#define COST_MAX_POINTS 256
#define COST_MAX_SEQ_CURVES 8
#define COST_SEQ_POINTS 32

typedef struct {
    int seqs, n;                       /* the step's sequences; points */
    double rows[COST_SEQ_POINTS], seconds[COST_SEQ_POINTS];   /* as the main curve: ascending, non-decreasing */
} cost_seq_curve;

/* The drafter's cost when n sequences draft in one step (a drafter batches
 * them: one MTP or DSpark pass, one draft-model forward for all). */
typedef struct {
    int seqs;
    double per_step, per_token;        /* seconds per drafting sequence; per drafted token */
} cost_draft_point;

typedef struct {
    int n;
    double rows[COST_MAX_POINTS];      /* ascending, ≥ 1 */
    double seconds[COST_MAX_POINTS];   /* per step, non-decreasing */
    double draft_seconds_per_token;    /* 0 = not measured, or included in seconds */
    double logits_seconds_per_row;     /* what one row's lm_head costs: every verify row the curves
                                          count needs its logits, a prompt chunk only its last row's
                                          (so a chunk costs the curve less this per other row); 0 = none */
    double context_seconds_per_row_token; /* attention: what one row pays per token of context it
                                          attends to. The curves were measured with `history` tokens in
                                          every sequence, so a step whose spans start at other lengths
                                          (a fresh prompt: 0) costs this × Σ rows × (start − history)
                                          more; 0 = none */
    double draft_seconds_per_step;     /* a drafting step's fixed cost per sequence (the drafter's
                                          catch-up over the tokens just committed, a block drafter's
                                          one pass), beside the per-token one; 0 = none */
    double draft_seconds_per_prompt_token; /* a request's first proposal: the drafter's pass over
                                          its prompt (an MTP head or draft model filling its own
                                          cache), per prompt token; 0 = none */
    int n_draft_by_seqs;               /* draft cost per drafting batch, ascending seqs; 0 = only
                                          the batch-1 figures above */
    cost_draft_point draft_by_seqs[COST_MAX_SEQ_CURVES];
    int threads, history;              /* how it was measured (0 = unknown) */
    int tp;                            /* tensor-parallel degree it was measured at (0 = unknown) */
    char model[512];
    char drafter[32];                  /* the drafter whose draft_* costs these are ("" = unknown) */
    char source[600];                  /* where it came from, for reports */
    int n_by_seqs;                     /* curves per sequence count, ascending seqs; 0 none */
    cost_seq_curve by_seqs[COST_MAX_SEQ_CURVES];
    /* A mixture-of-experts target: a verify step reads the weights of the
     * union of the experts its rows route to, so its cost grows with the rows
     * even at batch 1 by how far their routing overlaps. The seconds above
     * were measured on `moe_text` (real text: hashed ids route as no text
     * does) and already hold that; this curve says why, and lets a reader
     * price the experts on another memory (experts in host memory, read
     * across the bus each step). n_moe 0 = a dense target or not measured. */
    int moe_experts, moe_top_k, moe_sparse_layers, n_moe;
    double moe_expert_bytes;           /* one expert's gate + up + down */
    double moe_rows[COST_SEQ_POINTS];  /* ascending: consecutive rows of one sequence (a verify step at batch 1) */
    double moe_distinct[COST_SEQ_POINTS]; /* distinct experts read per sparse layer per step */
    char moe_text[64];                 /* the workload the rows were */
} cost_curve;

/* JSON (first non-blank byte '{') or bench_engine CSV. */
int    cost_curve_load(cost_curve *c, const char *path, char *err, size_t errlen);
int    cost_curve_save(const cost_curve *c, const char *path, char *err, size_t errlen);   /* JSON, atomic */
/* From unordered points; non-positive or non-finite ones are skipped. */
void   cost_curve_from_points(cost_curve *c, const double *rows, const double *sec, int n, const char *source);
/* Distinct experts a step of `rows` rows reads per sparse layer: linear
 * between the measured points, held at the nearest end outside them; NaN
 * when the table has no MoE curve. */
double cost_curve_experts_at(const cost_curve *c, double rows);
/* The experts moved to a slower memory (`--experts-on-host`: expert weights
 * in host memory, read across a bus of bus_bytes_per_s each step, the rest
 * where it was measured): every point of every curve gets the bus time of
 * the experts its step reads, sparse layers × distinct experts × expert
 * bytes ÷ bandwidth. A step of r rows in each of n sequences reads, per
 * layer, one sequence's measured distinct experts D(r) (the routing curve)
 * or, across sequences, E·(1 − (1 − D(r)/E)^n): the sequences' routing
 * taken as independent of each other. The main curve's B rows sit in
 * min(B, 8) sequences, as profile measures it. -1 when the table has no
 * routing curve (a dense target, or not measured on text). Nothing else in
 * the table changes: the draft costs and the seconds already measured stay. */
int    cost_curve_offload_experts(cost_curve *c, double bus_bytes_per_s, char *err, size_t errlen);
/* Seconds per step for `rows` rows; NaN for an empty curve. */
double cost_curve_at(const cost_curve *c, double rows);
/* Adds (or replaces) the curve for `seqs` sequences from unordered points (as
 * cost_curve_from_points; at most COST_SEQ_POINTS kept). 0 ok, -1 full. */
int    cost_curve_add_seqs(cost_curve *c, int seqs, const double *rows, const double *sec, int n);
/* Seconds per step for `rows` rows spread over `seqs` sequences: the
 * per-sequence-count curves, linear in the sequence count between the two
 * measured around it (the nearest one past either end); cost_curve_at when
 * the table has none. */
double cost_curve_at_seqs(const cost_curve *c, double seqs, double rows);
/* The draft cost when `seqs` sequences draft together: per drafting
 * sequence and per drafted token, linear in seqs between the two batches
 * measured around it (the nearest past either end); the batch-1 figures
 * (draft_seconds_per_step, draft_seconds_per_token) when the table has no
 * per-batch ones. */
void   cost_curve_draft_at(const cost_curve *c, double seqs, double *per_step, double *per_token);
#endif
