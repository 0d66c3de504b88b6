/* commands.h — the bench subcommands of the specbed binary (tools/main.c
 * dispatches to them). Each takes the arguments after the command name
 * (argv[0] is the command) and returns the exit status: 0 ok, 1 failed
 * (the canary: corruption found; load: no request succeeded or a /metrics
 * scrape failed), 2 bad usage / could not run, 3 (the canary only)
 * inconclusive: a check it was asked to make could not be made. */
#ifndef SPECBED_BENCH_COMMANDS_H
#define SPECBED_BENCH_COMMANDS_H
int cmd_load(int argc, char **argv);
int cmd_canary(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_simulate(int argc, char **argv);
#endif
