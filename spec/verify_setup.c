/* verify_setup.c — vpolicy_setup (see verify_policy.h): the one place that
 * turns a command line's verify-policy options into a policy and its cost
 * curve, for serve, generate and bench_spec alike. */
#include "cost_profile.h"
#include "errmsg.h"
#include "verify_policy.h"

int vpolicy_setup(vpolicy **out, cost_curve *cost, const vpolicy_args *a, gen_engine *e, int max_slots,
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
        } else {
            /* Long enough history that attention is not free; 3 reps take
             * about a second on the bundled model. */
            int rows = max_slots * (max_depth + 1);
            if (log) fprintf(log, "no --cost-table: profiling verify cost at startup (up to %d rows) ...\n", rows);
            if (cost_profile(cost, e, NULL, rows, 128, 3, err, errlen)) return -1;
            if (log)
                fprintf(log, "cost: %g rows %.3f ms ... %g rows %.3f ms per step\n", cost->rows[0],
                        cost->seconds[0] * 1e3, cost->rows[cost->n - 1], cost->seconds[cost->n - 1] * 1e3);
        }
    }
    return vpolicy_create(out, &o, err, errlen);
}
