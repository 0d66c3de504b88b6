/* bargs.c — see bargs.h. */
#include "bargs.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *ba_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) { fprintf(stderr, "%s: %s needs a value\n", cmd, argv[*i]); return NULL; }
    return argv[++*i];
}

int ba_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out) {
    char *e;
    errno = 0;
    long v = strtol(val, &e, 10);
    if (errno || e == val || *e || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s' must be an integer in %ld..%ld\n", cmd, opt, val, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int ba_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
    char *e;
    double v = strtod(val, &e);
    if (e == val || *e || isnan(v) || v < lo || v > hi) {
        fprintf(stderr, "%s: %s '%s' must be a number in %g..%g\n", cmd, opt, val, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int ba_int_list(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out, int max, int *n) {
    *n = 0;
    const char *p = val;
    while (*p) {
        char *e;
        long a = strtol(p, &e, 10);
        if (e == p) goto bad;
        long b = a;
        if (*e == '-' || (*e == '.' && e[1] == '.')) {
            const char *q = *e == '-' ? e + 1 : e + 2;
            b = strtol(q, &e, 10);
            if (e == q) goto bad;
        }
        if (a < lo || b > hi || b < a) goto bad;
        for (long v = a; v <= b; v++) {
            if (*n == max) { fprintf(stderr, "%s: %s has more than %d values\n", cmd, opt, max); return -1; }
            out[(*n)++] = (int)v;
        }
        if (*e == ',') e++;
        else if (*e) goto bad;
        p = e;
    }
    if (*n) return 0;
bad:
    fprintf(stderr, "%s: %s '%s' must be a list like 0,1,2 or 0-7 (values in %d..%d)\n", cmd, opt, val, lo, hi);
    return -1;
}

int ba_str_list(const char *cmd, const char *opt, const char *val, char *buf, size_t buflen, char **out, int max, int *n) {
    *n = 0;
    if (strlen(val) + 1 > buflen) { fprintf(stderr, "%s: %s is too long\n", cmd, opt); return -1; }
    strcpy(buf, val);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (*n == max) { fprintf(stderr, "%s: %s has more than %d values\n", cmd, opt, max); return -1; }
        out[(*n)++] = tok;
    }
    if (!*n) { fprintf(stderr, "%s: %s is empty\n", cmd, opt); return -1; }
    return 0;
}
