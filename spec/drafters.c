/* drafters.c — drafter construction by name and the one statistics printer
 * (see drafters.h). */
#include "drafters.h"
#include "draft_stack.h"
#include <stdio.h>
#include <string.h>
#include "drafter_dspark.h"
#include "drafter_model.h"
#include "drafter_mtp.h"
#include "drafter_ngram.h"
#include "args.h"
#include "errmsg.h"
#include "spec_run.h"

/* What rank 0 tells the other ranks about an MTP or DSpark drafter it made
 * under tensor parallelism (engine/draft_stack.h): the options that make
 * the same drafter from the same checkpoint. */
typedef struct {
    char name[16];
    char draft_model[4096];
    int max_seqs, max_seq_len, depth, dspark_final_tap;
} tp_desc;

static int create(drafter **out, const drafter_opts *o, gen_engine *t, int max_seq_len, char *err, size_t errlen) {
    *out = NULL;
    const char *n = o->name ? o->name : "none";
    int V = t->m->cfg.vocab_size;
    if (!strcmp(n, "none")) return 0;
    if (!strcmp(n, "ngram")) {
        ngram_opts no = {.n_max = o->ngram_n_max, .n_min = o->ngram_n_min, .lookahead = o->ngram_lookahead,
                         .spec_factor = o->ngram_spec_factor, .quiet = o->quiet};
        return drafter_ngram_create(out, &no, V, err, errlen);
    }
    if (!strcmp(n, "draft")) {
        draft_model_opts mo = {.model_dir = o->draft_model, .max_seqs = o->max_seqs, .max_seq_len = max_seq_len};
        return drafter_model_create(out, &mo, t->tok, V, err, errlen);
    }
    if (!strcmp(n, "mtp")) {
        mtp_opts mo = {.max_seqs = o->max_seqs, .max_seq_len = max_seq_len, .quiet = o->quiet};
        return drafter_mtp_create(out, &mo, t->m, t->fwd, err, errlen);
    }
    if (!strcmp(n, "dspark")) {
        dspark_opts so = {.model_dir = o->draft_model, .max_seqs = o->max_seqs, .max_seq_len = max_seq_len,
                          .depth = o->depth, .quiet = o->quiet, .final_tap = (dspark_final_tap)o->dspark_final_tap};
        return drafter_dspark_create(out, &so, t->m, t->tok, t->fwd, err, errlen);
    }
    return errf(err, errlen, "unknown drafter '%s' (expected %s)", n, DRAFTER_NAMES);
}

int drafter_create(drafter **out, const drafter_opts *o, gen_engine *t, char *err, size_t errlen) {
    if (create(out, o, t, t->opts.max_seq_len, err, errlen)) return -1;
    drafter *d = *out;
    if (!d || !d->stack || fwd_tp_size(t->fwd) == 1) return 0;
    /* the other ranks make theirs now (drafter_tp_host) */
    tp_desc desc = {.max_seqs = o->max_seqs, .max_seq_len = t->opts.max_seq_len, .depth = o->depth,
                    .dspark_final_tap = o->dspark_final_tap};
    snprintf(desc.name, sizeof desc.name, "%s", o->name);
    if (o->draft_model && strlen(o->draft_model) >= sizeof desc.draft_model) {
        drafter_free(d);
        *out = NULL;
        return errf(err, errlen, "--draft-model: path longer than %zu bytes", sizeof desc.draft_model - 1);
    }
    snprintf(desc.draft_model, sizeof desc.draft_model, "%s", o->draft_model ? o->draft_model : "");
    if (draft_stack_open(d->stack, &desc, sizeof desc, err, errlen)) {
        drafter_free(d);
        *out = NULL;
        return -1;
    }
    return 0;
}

static int host_open(void *ctx, const void *bytes, size_t n, draft_stack **stack, void **owner, char *err,
                     size_t errlen) {
    tp_desc desc;
    if (n != sizeof desc) return errf(err, errlen, "drafter description of %zu bytes, expected %zu", n, sizeof desc);
    memcpy(&desc, bytes, n);
    desc.name[sizeof desc.name - 1] = desc.draft_model[sizeof desc.draft_model - 1] = 0;
    drafter_opts o = {.name = desc.name, .draft_model = desc.draft_model[0] ? desc.draft_model : NULL,
                      .max_seqs = desc.max_seqs, .depth = desc.depth, .quiet = 1,
                      .dspark_final_tap = desc.dspark_final_tap};
    drafter *d;
    if (create(&d, &o, ctx, desc.max_seq_len, err, errlen)) return -1;
    if (!d || !d->stack) {
        drafter_free(d);
        return errf(err, errlen, "drafter %s has no layers to shard", desc.name);
    }
    *stack = d->stack;
    *owner = d;
    return 0;
}

static void host_close(void *ctx, void *owner) {
    (void)ctx;
    drafter_free(owner);
}

void drafter_tp_host(gen_engine *e) {
    draft_host h = {.open = host_open, .close = host_close, .ctx = e};
    draft_stack_set_host(e->fwd, &h);
}

void drafter_free(drafter *d) {
    if (d) d->ops->free(d);
}

int drafter_opt_ngram_factor(const char *cmd, const char *opt, const char *val, drafter_opts *o) {
    double f;
    if (opt_double(cmd, opt, val, 0, 1e6, &f)) return -1;
    o->ngram_spec_factor = f > 0 ? f : -1;   /* the option's 0 is no cap; the field's is the default */
    return 0;
}

int drafter_opt_dspark_final_tap(const char *cmd, const char *opt, const char *val, drafter_opts *o) {
    dspark_final_tap ft;
    if (dspark_final_tap_parse(val, &ft)) {
        fprintf(stderr, "%s: %s must be %s (which state the checkpoint's final-layer tap was trained on), not '%s'\n",
                cmd, opt, DSPARK_FINAL_TAP_NAMES, val ? val : "");
        return -1;
    }
    o->dspark_final_tap = (int)ft;
    return 0;
}

void drafter_print_stats(FILE *f, const drafter *d, const spec_counters *counters, int depth) {
    spec_rates c = spec_rates_between(NULL, counters);
    fprintf(f, "drafter %s, depth %d: %ld drafts, %ld drafted, %ld accepted, %ld empty proposals, "
            "%ld drafted but not verified (verify policy), %ld steps not drafted (the policy's gate)\n",
            d->ops->name, depth, c.drafts, c.drafted_tokens, c.accepted_tokens, c.empty_proposals,
            c.unverified_tokens, c.gated_steps);
    fprintf(f, "accept length %.3f (committed per verify step, bonus included; vLLM's mean acceptance length, "
            "1 + accepted per draft: %.3f), acceptance rate %.3f\n", c.accept_length, c.mean_acceptance_length,
            c.acceptance_rate);
    fprintf(f, "per-position acceptance:");
    for (int i = 0; i < depth && i < SPEC_MAX_DEPTH; i++) fprintf(f, " %.3f", c.position_rate[i]);
    fprintf(f, "\n");
}
