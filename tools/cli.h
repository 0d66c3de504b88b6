/* cli.h — subcommand entry points of the specbed binary. Each takes the
 * arguments after the command name (argv[0] is the command) and returns the
 * process exit status: 0 ok, 1 failed, 2 bad usage. */
#ifndef SPECBED_CLI_H
#define SPECBED_CLI_H
/* The bench subcommands are declared in their folders' headers: bench/load/load_cli.h (load),
 * bench/canary/canary.h, bench/sweep/sweep.h, bench/report/report.h, bench/sim/sim.h (simulate). */
int cli_generate(int argc, char **argv);
int cli_serve(int argc, char **argv);
int cli_profile(int argc, char **argv);
#endif
