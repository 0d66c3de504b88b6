/* drafters.c — drafter construction by name and the one statistics printer
 * (see drafters.h). */
#include "drafters.h"
#include <stdio.h>
#include <string.h>
#include "drafter_dspark.h"
#include "drafter_model.h"
#include "drafter_mtp.h"
#include "drafter_ngram.h"
#include "errmsg.h"
#include "spec_run.h"

int drafter_create(drafter **out, const drafter_opts *o, gen_engine *t, char *err, size_t errlen) {
    *out = NULL;
    const char *n = o->name ? o->name : "none";
    int V = t->m->cfg.vocab_size;
    if (!strcmp(n, "none")) return 0;
    if (!strcmp(n, "ngram")) {
        ngram_opts no = {.n_max = o->ngram_n_max, .n_min = o->ngram_n_min, .lookahead = o->ngram_lookahead};
        return drafter_ngram_create(out, &no, V, err, errlen);
    }
    if (!strcmp(n, "draft")) {
        draft_model_opts mo = {.model_dir = o->draft_model, .max_seqs = o->max_seqs,
                               .max_seq_len = t->opts.max_seq_len};
        return drafter_model_create(out, &mo, t->tok, V, err, errlen);
    }
    if (!strcmp(n, "mtp")) {
        mtp_opts mo = {.max_seqs = o->max_seqs, .max_seq_len = t->opts.max_seq_len, .quiet = o->quiet};
        return drafter_mtp_create(out, &mo, t->m, err, errlen);
    }
    if (!strcmp(n, "dspark")) {
        dspark_opts so = {.model_dir = o->draft_model, .max_seqs = o->max_seqs, .max_seq_len = t->opts.max_seq_len,
                          .depth = o->depth, .quiet = o->quiet};
        return drafter_dspark_create(out, &so, t->m, t->tok, err, errlen);
    }
    return errf(err, errlen, "unknown drafter '%s' (expected %s)", n, DRAFTER_NAMES);
}

void drafter_free(drafter *d) {
    if (d) d->ops->free(d);
}

void drafter_print_stats(FILE *f, const drafter *d, const spec_counters *counters, int depth) {
    spec_rates c = spec_rates_between(NULL, counters);
    fprintf(f, "drafter %s, depth %d: %ld drafts, %ld drafted, %ld accepted, %ld empty proposals, "
            "%ld drafted but not verified (verify policy)\n", d->ops->name, depth, c.drafts, c.drafted_tokens,
            c.accepted_tokens, c.empty_proposals, c.unverified_tokens);
    fprintf(f, "accept length %.3f (committed per verify step, bonus included), acceptance rate %.3f\n",
            c.accept_length, c.acceptance_rate);
    fprintf(f, "per-position acceptance:");
    for (int i = 0; i < depth && i < SPEC_MAX_DEPTH; i++) fprintf(f, " %.3f", c.position_rate[i]);
    fprintf(f, "\n");
}
