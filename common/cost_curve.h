/* cost_curve.h — seconds per verify step as a function of the rows in the
 * step (DESIGN §6): the one cost curve. The verify policies (spec/) and the
 * depth recommender (bench/) both read it through cost_curve_at(), so they
 * give the same cost for the same table at every row count.
 *
 * Sources: the JSON that `specbed profile` writes
 *   {"model": DIR, "threads": T, "history": H, "tp": N,
 *    "rows": [1, 2, ...], "seconds_per_step": [...],
 *    "draft_seconds_per_token": S}
 * (any JSON a user writes for other hardware in that shape), bench_engine's
 * CSV (forward_ms rows: batch × rows_per_seq), or points measured by a
 * sweep (cost_curve_from_points).
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

typedef struct {
    int n;
    double rows[COST_MAX_POINTS];      /* ascending, ≥ 1 */
    double seconds[COST_MAX_POINTS];   /* per step, non-decreasing */
    double draft_seconds_per_token;    /* 0 = not measured, or included in seconds */
    int threads, history;              /* how it was measured (0 = unknown) */
    int tp;                            /* tensor-parallel degree it was measured at (0 = unknown) */
    char model[512];
    char source[600];                  /* where it came from, for reports */
} cost_curve;

/* JSON (first non-blank byte '{') or bench_engine CSV. */
int    cost_curve_load(cost_curve *c, const char *path, char *err, size_t errlen);
int    cost_curve_save(const cost_curve *c, const char *path, char *err, size_t errlen);   /* JSON, atomic */
/* From unordered points; non-positive or non-finite ones are skipped. */
void   cost_curve_from_points(cost_curve *c, const double *rows, const double *sec, int n, const char *source);
/* Seconds per step for `rows` rows; NaN for an empty curve. */
double cost_curve_at(const cost_curve *c, double rows);
#endif
