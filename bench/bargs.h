/* bargs.h — strict option values for bench's subcommands: a value that is
 * not entirely a number in range is a usage error naming the option. */
#ifndef SPECBED_BENCH_BARGS_H
#define SPECBED_BENCH_BARGS_H
#include <stddef.h>
/* Returns argv[*i + 1] and advances *i, or prints "CMD: OPT needs a value" and returns NULL. */
const char *ba_value(const char *cmd, int argc, char **argv, int *i);
int ba_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out);
int ba_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);
/* "0,1,2" or "0-7" or "0..7" into out[0..*n-1]. */
int ba_int_list(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out, int max, int *n);
/* "a,b,c" into out (pointers into buf, which the caller provides). */
int ba_str_list(const char *cmd, const char *opt, const char *val, char *buf, size_t buflen, char **out, int max, int *n);
#endif
