/* load_cli.h — the load options shared by `specbed load`, `canary` and
 * `sweep` (one parser, one help text, so the three never drift apart). */
#ifndef SPECBED_BENCH_LOAD_CLI_H
#define SPECBED_BENCH_LOAD_CLI_H
#include <stdio.h>
#include "load.h"
#include "load_out.h"

typedef struct {
    ld_config c;
    const char *workload;        /* FILE or NAME */
    const char *out;             /* --out DIR */
    ld_pcts pcts;
    int quiet;
    int set_num_prompts, set_interval, set_max_tokens;   /* given on the command line */
} load_cli;

void load_cli_defaults(load_cli *o);
/* Consumes argv[*i] (and its value) when it is a load option: 1 consumed,
 * 0 not a load option, -1 bad value (message printed). */
int  load_cli_opt(const char *cmd, int argc, char **argv, int *i, load_cli *o);
/* Checks the combination; 0 ok, -1 (message printed). */
int  load_cli_check(const char *cmd, load_cli *o);
/* load's own option help (its defaults), for a command that prints every
 * load option unchanged; load_cli_help() prints them with the command's own
 * defaults and without the ones it documents itself or fixes. */
extern const char LOAD_CLI_HELP[];
typedef struct {
    const char *const *omit;     /* NULL-terminated options not to list (the command's own, or fixed) */
    const char *workload;        /* the --workload default in words; NULL = required */
    const char *num_prompts;     /* the --num-prompts default, in words */
    const char *max_tokens;      /* the --max-tokens default, in words */
    double interval_s;           /* the --interval default */
} load_help_spec;
/* Each load option once, with the defaults in s. */
void load_cli_help(FILE *f, const load_help_spec *s);
/* Prints the vLLM-style result table. */
void load_print_summary(FILE *f, const load_cli *o, const ld_result *r);

/* `specbed load` (tools/main.c dispatches to it; argv[0] is "load"): 0 ok,
 * 1 no request succeeded or a /metrics scrape failed, 2 bad usage / could
 * not run. */
int cmd_load(int argc, char **argv);
#endif
