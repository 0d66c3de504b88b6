/* args.c — see args.h. */
#include "args.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *opt_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        fprintf(stderr, "%s: %s needs a value\n", cmd, argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int opt_int(const char *cmd, const char *opt, const char *val, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(val, &end, 10);
    if (errno || end == val || *end || v < lo || v > hi) {
        fprintf(stderr, "%s: %s expects an integer in [%ld, %ld], got '%s'\n", cmd, opt, lo, hi, val);
        return -1;
    }
    *out = (int)v;
    return 0;
}

int opt_u64(const char *cmd, const char *opt, const char *val, unsigned long long *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(val, &end, 10);
    if (errno || end == val || *end || val[0] == '-') {
        fprintf(stderr, "%s: %s expects a non-negative integer, got '%s'\n", cmd, opt, val);
        return -1;
    }
    *out = v;
    return 0;
}

int opt_double(const char *cmd, const char *opt, const char *val, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    double v = strtod(val, &end);
    if (errno || end == val || *end || isnan(v) || !(v >= lo && v <= hi)) {
        fprintf(stderr, "%s: %s expects a number in [%g, %g], got '%s'\n", cmd, opt, lo, hi, val);
        return -1;
    }
    *out = v;
    return 0;
}

int opt_float(const char *cmd, const char *opt, const char *val, double lo, double hi, float *out) {
    double v;
    if (opt_double(cmd, opt, val, lo, hi, &v)) return -1;
    *out = (float)v;
    return 0;
}

int opt_int_list(const char *cmd, const char *opt, const char *val, int lo, int hi, int *out, int max, int *n) {
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
            if (*n == max) {
                fprintf(stderr, "%s: %s has more than %d values\n", cmd, opt, max);
                return -1;
            }
            out[(*n)++] = (int)v;
        }
        if (*e == ',') e++;
        else if (*e) goto bad;
        p = e;
    }
    if (*n) return 0;
bad:
    fprintf(stderr, "%s: %s expects a list like 0,1,2 or 0-7 (values in %d..%d), got '%s'\n", cmd, opt, lo, hi, val);
    return -1;
}

int opt_str_list(const char *cmd, const char *opt, const char *val, char *buf, size_t buflen, char **out, int max,
                 int *n) {
    *n = 0;
    if (strlen(val) + 1 > buflen) {
        fprintf(stderr, "%s: %s is too long\n", cmd, opt);
        return -1;
    }
    strcpy(buf, val);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ') tok++;
        if (!*tok) continue;
        if (*n == max) {
            fprintf(stderr, "%s: %s has more than %d values\n", cmd, opt, max);
            return -1;
        }
        out[(*n)++] = tok;
    }
    if (!*n) {
        fprintf(stderr, "%s: %s is empty\n", cmd, opt);
        return -1;
    }
    return 0;
}
