/* cost_table.h — seconds per verify step as a function of the rows in the
 * verify batch (DESIGN §6), measured by the engine itself (`specbed
 * profile`, or briefly at startup) and shared by the verification scheduler
 * and the depth recommender. Stored as JSON:
 *   {"model": DIR, "threads": T, "history": H,
 *    "rows": [1, 2, ...], "seconds_per_step": [...],
 *    "draft_seconds_per_token": S}
 * rows ascending; between points the cost is interpolated linearly, past the
 * last point extrapolated from the last two. */
#ifndef SPECBED_COST_TABLE_H
#define SPECBED_COST_TABLE_H
#include <stddef.h>
#include "generate.h"
#include "drafter.h"

#define COST_MAX_POINTS 64

typedef struct {
    int n;
    int rows[COST_MAX_POINTS];
    double seconds[COST_MAX_POINTS];
    double draft_seconds_per_token;   /* 0 if not measured */
    int threads, history;
    char model[512];
} cost_table;

int    cost_table_load(cost_table *t, const char *path, char *err, size_t errlen);
int    cost_table_save(const cost_table *t, const char *path, char *err, size_t errlen);
double cost_seconds(const cost_table *t, int rows);   /* seconds per step for `rows` verify rows */

/* Measures the target (and, with d, the drafter's cost per drafted token):
 * one forward of B rows spread over min(B, max_seqs) sequences that each
 * hold `history` tokens, for B in a geometric-ish ladder up to max_rows.
 * Takes a few seconds on the bundled model. */
int    cost_table_profile(cost_table *t, gen_engine *e, drafter *d, int max_rows, int history, int reps,
                          char *err, size_t errlen);

#endif
