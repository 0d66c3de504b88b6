/* spec_cli.h — the one check that a command line's speculation options fit
 * together, shared by generate, serve, profile and bench_spec: an option the
 * chosen drafter or verify schedule would ignore (--depth without a drafter,
 * --p-min without the threshold schedule, --draft-model with ngram) is a
 * usage error before anything loads, never a silent no-op. */
#ifndef SPECBED_SPEC_CLI_H
#define SPECBED_SPEC_CLI_H
#include <stddef.h>

/* What the command line gave; the int fields are 1 when the option was on
 * the command line (its default does not count). */
typedef struct {
    const char *drafters;    /* --drafter NAME, or bench_spec's --drafters list; NULL = none */
    const char *schedules;   /* --verify-schedule NAME, or bench_spec's --schedules list; NULL = fixed */
    const char *depth_opt;   /* the depth option's name when given ("--depth", "--depths"), else NULL */
    int draft_model;         /* --draft-model */
    int dspark_model;        /* -1: the command has no --dspark-model (its --draft-model is also
                                dspark's checkpoint); 0/1: bench_spec's --dspark-model not given/given */
    int ngram;               /* any --ngram-* option */
    int dspark_final_tap;    /* --dspark-final-tap */
    int p_min, alpha, cost_table;   /* --p-min, --adaptive-alpha, --cost-table */
} spec_cli;

/* 0 if the options fit; -1 with a message naming the option and what it
 * needs (callers print it as "CMD: MESSAGE" and exit 2). */
int spec_cli_check(const spec_cli *c, char *err, size_t errlen);

#endif
