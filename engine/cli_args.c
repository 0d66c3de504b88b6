/* cli_args.c — see cli_args.h. */
#include "cli_args.h"
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

int arg_int(const char *opt, const char *val, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "specbed: %s expects an integer in [%ld, %ld], got '%s'\n", opt, lo, hi, val);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int arg_u64(const char *opt, const char *val, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end || val[0] == '-') {
        fprintf(stderr, "specbed: %s expects a non-negative integer, got '%s'\n", opt, val);
        return -1;
    }
    *out = v;
    return 0;
}

int arg_float(const char *opt, const char *val, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, "specbed: %s expects a number in [%g, %g], got '%s'\n", opt, lo, hi, val);
        return -1;
    }
    *out = (float)v;
    return 0;
}

const char *arg_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "specbed: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}
