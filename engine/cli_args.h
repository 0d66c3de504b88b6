/* cli_args.h — strict option-value parsing shared by the subcommands: a
 * value that is not entirely a number in range is a usage error naming the
 * option, never a silent 0. */
#ifndef SPECBED_CLI_ARGS_H
#define SPECBED_CLI_ARGS_H
int arg_int(const char *opt, const char *val, long lo, long hi, int *out);
int arg_u64(const char *opt, const char *val, unsigned long long *out);
int arg_float(const char *opt, const char *val, double lo, double hi, float *out);
/* Returns argv[*i + 1] and advances *i, or prints "OPT needs a value" and returns NULL. */
const char *arg_value(int argc, char **argv, int *i);
#endif
