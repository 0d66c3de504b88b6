/* stats.h — the summary statistics every bench output uses.
 *
 * Percentile definition (stated once, used everywhere): linear interpolation
 * between closest ranks, i.e. numpy's default ("linear") method, which is
 * what vLLM's benchmark_serving uses: for n sorted values x[0..n-1] and
 * p in [0,100], rank r = p/100 · (n−1), result = x[⌊r⌋] + (r−⌊r⌋)·(x[⌊r⌋+1] − x[⌊r⌋]).
 * The median is the 50th percentile. Empty input gives NaN.
 * Standard deviation is the population one (numpy's np.std default). */
#ifndef SPECBED_BENCH_STATS_H
#define SPECBED_BENCH_STATS_H
#include <stddef.h>

/* v need not be sorted; it is left untouched (a sorted copy is made). */
double st_percentile(const double *v, size_t n, double p);
/* v must already be sorted ascending. */
double st_percentile_sorted(const double *v, size_t n, double p);
double st_mean(const double *v, size_t n);
double st_std(const double *v, size_t n);
void   st_sort(double *v, size_t n);

/* A growable array of doubles (ITL samples and the like). */
typedef struct { double *v; size_t n, cap; } dvec;
int  dvec_push(dvec *d, double x);   /* 0 ok, -1 out of memory */
void dvec_free(dvec *d);
#endif
