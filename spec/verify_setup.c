/* verify_setup.c — vpolicy_setup (see verify_policy.h): the one place that
 * turns a command line's verify-policy options into a policy and its cost
 * curve, for serve, generate and bench_spec alike. */
#include <string.h>
#include "cost_profile.h"
#include "errmsg.h"
#include "verify_policy.h"

/* A table's drafter costs measured for another drafter than d would charge
 * the wrong drafting: dropped. A table that names no drafter (written by
 * hand) is taken at its word. */
static void drop_foreign_draft_cost(cost_curve *c, const drafter *d, const char *path, FILE *log) {
    const char *name = d->ops->name;
    if (!(c->draft_seconds_per_step > 0 || c->draft_seconds_per_token > 0 || c->n_draft_by_seqs > 0)) {
        if (log)
            fprintf(log, "cost table %s has no drafter cost: drafting counts as free (`specbed profile --drafter %s` "
                    "measures it)\n", path, name);
        return;
    }
    if (!c->drafter[0] || !strcmp(c->drafter, name)) return;
    if (log)
        fprintf(log, "cost table %s: its drafter cost is %s's, this run drafts with %s: drafter cost ignored\n", path,
                c->drafter, name);
    c->draft_seconds_per_step = c->draft_seconds_per_token = c->draft_seconds_per_prompt_token = 0;
    c->n_draft_by_seqs = 0;
}

int vpolicy_setup(vpolicy **out, cost_curve *cost, const vpolicy_args *a, gen_engine *e, drafter *d, int max_slots,
                  int max_depth, FILE *log, char *err, size_t errlen) {
    *out = NULL;
    vpolicy_opts o = {.p_min = a->p_min, .alpha = a->alpha, .cost = cost, .max_slots = max_slots};
    const char *name = a->name ? a->name : "fixed";
    if (vpolicy_parse(name, &o.kind))
        return errf(err, errlen, "verify schedule '%s' is not one of %s", name, VPOLICY_NAMES);
    if (o.kind == VPOLICY_FIXED) return 0;
    if ((o.kind == VPOLICY_CONFIDENCE || o.kind == VPOLICY_ADAPTIVE) && cost->n == 0) {
        if (a->cost_path) {
            if (cost_curve_load(cost, a->cost_path, err, errlen)) return -1;
            drop_foreign_draft_cost(cost, d, a->cost_path, log);
        } else {
            /* Long enough history that attention is not free; 3 reps take
             * about a second on the bundled model. */
            int rows = max_slots * (max_depth + 1);
            if (log)
                fprintf(log, "no --cost-table: profiling verify cost (up to %d rows) and drafter %s at startup ...\n",
                        rows, d->ops->name);
            if (cost_profile(cost, e, d, rows, 128, 3, NULL, 0, NULL, err, errlen)) return -1;
            if (log)
                fprintf(log, "cost: %g rows %.3f ms ... %g rows %.3f ms per step\n", cost->rows[0],
                        cost->seconds[0] * 1e3, cost->rows[cost->n - 1], cost->seconds[cost->n - 1] * 1e3);
            if (log) cost_profile_print_draft(log, cost);
        }
    }
    return vpolicy_create(out, &o, err, errlen);
}
