/* args.h — strict option values for every specbed command (the CLI's and
 * bench's alike): a value that is not entirely a number in range is a usage
 * error naming the command and the option, never a silent 0. Each function
 * prints "CMD: OPT expects …, got 'VAL'" on stderr and returns -1 on a bad
 * value, 0 otherwise; CMD is how the user typed the command
 * ("specbed generate"). */
#ifndef SPECBED_ARGS_H
#define SPECBED_ARGS_H
#include <stddef.h>
/* Returns argv[*i + 1] and advances *i, or prints "CMD: OPT needs a value" and returns NULL. */
const char *opt_value(const char *cmd, int argc, char **argv, int *i);
int opt_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out);
int opt_u64(const char *cmd, const char *opt, const char *val, unsigned long long *out);
int opt_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out);
int opt_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out);
/* "0,1,2" or "0-7" or "0..7" into out[0..*n-1]. */
int opt_int_list(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out, int max, int *n);
/* "a,b,c" into out (pointers into buf, which the caller provides). */
int opt_str_list(const char *cmd, const char *opt, const char *val, char *buf, size_t buflen, char **out, int max,
                 int *n);
#endif
