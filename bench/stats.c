/* stats.c — see stats.h. Owns nothing but numbers; no I/O. */
#include "stats.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void st_sort(double *v, size_t n) { if (n > 1) qsort(v, n, sizeof *v, cmp_double); }

double st_percentile_sorted(const double *v, size_t n, double p) {
    if (!n) return NAN;
    if (p <= 0) return v[0];
    if (p >= 100) return v[n - 1];
    double r = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(r);
    if (lo + 1 >= n) return v[n - 1];
    double f = r - (double)lo;
    return v[lo] + f * (v[lo + 1] - v[lo]);
}

double st_percentile(const double *v, size_t n, double p) {
    if (!n) return NAN;
    double *c = malloc(n * sizeof *c);
    if (!c) return NAN;
    memcpy(c, v, n * sizeof *c);
    st_sort(c, n);
    double r = st_percentile_sorted(c, n, p);
    free(c);
    return r;
}

double st_mean(const double *v, size_t n) {
    if (!n) return NAN;
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return s / (double)n;
}

double st_std(const double *v, size_t n) {
    if (!n) return NAN;
    double m = st_mean(v, n), s = 0;
    for (size_t i = 0; i < n; i++) s += (v[i] - m) * (v[i] - m);
    return sqrt(s / (double)n);
}

int dvec_push(dvec *d, double x) {
    if (d->n == d->cap) {
        size_t nc = d->cap ? d->cap * 2 : 64;
        double *nv = realloc(d->v, nc * sizeof *nv);
        if (!nv) return -1;
        d->v = nv;
        d->cap = nc;
    }
    d->v[d->n++] = x;
    return 0;
}

void dvec_free(dvec *d) { free(d->v); d->v = NULL; d->n = d->cap = 0; }
