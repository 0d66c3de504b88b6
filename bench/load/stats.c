/* stats.c — see stats.h. Owns nothing but numbers (and the words of a text
 * for its repetition share); no I/O. */
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

/* ---- PRNG, shuffles ---- */

void st_rng_seed(st_rng *r, uint64_t seed) { r->s = seed ^ 0x9E3779B97F4A7C15ull; }

uint64_t st_rng_next(st_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

double st_rng_uniform(st_rng *r) { return (double)(st_rng_next(r) >> 11) * (1.0 / 9007199254740992.0); }

int st_rng_below(st_rng *r, int n) { return n <= 1 ? 0 : (int)(st_rng_uniform(r) * n); }

void st_shuffle_int(st_rng *r, int *v, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = st_rng_below(r, i + 1), t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
}

void st_arm_order(uint64_t seed, int rep, int n, int *order) {
    st_rng r;
    st_rng_seed(&r, seed * 1000003ull + (uint64_t)rep);
    for (int i = 0; i < n; i++) order[i] = i;
    st_shuffle_int(&r, order, n);
}

/* ---- intervals ---- */

double st_t975(int df) {
    static const double t[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                 2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                 2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    if (df < 1) return NAN;
    if (df <= 30) return t[df - 1];
    return 1.96 + 2.4 / df;
}

st_ci st_two_level(st_rep_stat f, void *ctx, const int *n_per_rep, int n_rep, int n_boot, uint64_t seed, int log_scale) {
    st_ci c = {NAN, NAN, NAN, NAN, NAN, NAN, 0, 0};
    int nmax = 1;
    for (int r = 0; r < n_rep; r++) if (n_per_rep[r] > nmax) nmax = n_per_rep[r];
    int *idx = malloc((size_t)nmax * sizeof *idx);
    double *th = malloc((size_t)(n_rep ? n_rep : 1) * sizeof *th), *bs = malloc((size_t)(n_boot > 0 ? n_boot : 1) * sizeof *bs);
    if (!idx || !th || !bs) { free(idx); free(th); free(bs); return c; }
    double wsum = 0;
    long nsum = 0;
    int R = 0;
    for (int r = 0; r < n_rep; r++) {
        int n = n_per_rep[r];
        if (n < 1) continue;
        for (int i = 0; i < n; i++) idx[i] = i;
        double t = f(ctx, r, idx, n);
        if (log_scale) t = t > 0 ? log(t) : NAN;
        if (!isfinite(t)) continue;
        st_rng g;
        st_rng_seed(&g, seed * 7919ull + (uint64_t)r * 104729ull + 1);
        int nb = 0;
        for (int b = 0; b < n_boot; b++) {
            for (int i = 0; i < n; i++) idx[i] = st_rng_below(&g, n);
            double v = f(ctx, r, idx, n);
            if (log_scale) v = v > 0 ? log(v) : NAN;
            if (isfinite(v)) bs[nb++] = v;
        }
        double w = nb > 1 ? st_std(bs, (size_t)nb) : 0;
        wsum += w * w;
        nsum += n;
        th[R++] = t;
    }
    free(idx);
    free(bs);
    if (!R) { free(th); return c; }
    double m = st_mean(th, (size_t)R), W = wsum / R, S2 = 0;
    for (int r = 0; r < R; r++) S2 += (th[r] - m) * (th[r] - m);
    S2 = R > 1 ? S2 / (R - 1) : NAN;
    free(th);
    double nbar = (double)nsum / R;
    int df_within = (int)fmax(1, R * (nbar - 1));
    double V;
    if (R > 1 && S2 >= W) { V = S2 / R; c.df = R - 1; }
    else { V = W / R; c.df = df_within; }
    c.n_rep = R;
    c.se = sqrt(V);
    c.between_sd = R > 1 ? sqrt(S2) : NAN;
    c.within_se = sqrt(W);
    double h = st_t975(c.df) * c.se;
    if (log_scale) { c.est = exp(m); c.lo = exp(m - h); c.hi = exp(m + h); }
    else { c.est = m; c.lo = m - h; c.hi = m + h; }
    return c;
}

int st_isotonic(const double *y, const double *w, int n, double *out) {
    if (n <= 0) return 0;
    double *bv = malloc((size_t)n * sizeof *bv), *bw = malloc((size_t)n * sizeof *bw);
    int *bn = malloc((size_t)n * sizeof *bn);
    if (!bv || !bw || !bn) { free(bv); free(bw); free(bn); return -1; }
    int nb = 0;
    for (int i = 0; i < n; i++) {
        bv[nb] = y[i];
        bw[nb] = w ? w[i] : 1.0;
        bn[nb++] = 1;
        while (nb > 1 && bv[nb - 2] > bv[nb - 1]) {   /* pool the violating pair */
            double ww = bw[nb - 2] + bw[nb - 1];
            bv[nb - 2] = ww > 0 ? (bv[nb - 2] * bw[nb - 2] + bv[nb - 1] * bw[nb - 1]) / ww : 0.5 * (bv[nb - 2] + bv[nb - 1]);
            bw[nb - 2] = ww;
            bn[nb - 2] += bn[nb - 1];
            nb--;
        }
    }
    for (int b = 0, o = 0; b < nb; b++)
        for (int k = 0; k < bn[b]; k++) out[o++] = bv[b];
    free(bv);
    free(bw);
    free(bn);
    return 0;
}

/* FNV-1a over one n-gram of words (each word is [start, end)). */
static uint64_t gram_hash(const char *const *ws, const char *const *we, int n) {
    uint64_t h = 1469598103934665603ull;
    for (int k = 0; k < n; k++) {
        for (const char *p = ws[k]; p < we[k]; p++) { h ^= (unsigned char)*p; h *= 1099511628211ull; }
        h ^= 0x1f; h *= 1099511628211ull;   /* word separator */
    }
    return h;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

double st_repeated_ngram_frac(const char *text, int n) {
    if (!text || n < 1) return NAN;
    size_t cap = 64, nw = 0;
    const char **ws = malloc(cap * sizeof *ws), **we = malloc(cap * sizeof *we);
    if (!ws || !we) { free(ws); free(we); return NAN; }
    for (const char *p = text; *p;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v') p++;
        if (!*p) break;
        const char *s = p;
        while (*p && !(*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == '\f' || *p == '\v')) p++;
        if (nw == cap) {
            cap *= 2;
            const char **a = realloc(ws, cap * sizeof *ws), **b;
            if (!a) { free(ws); free(we); return NAN; }
            ws = a;
            b = realloc(we, cap * sizeof *we);
            if (!b) { free(ws); free(we); return NAN; }
            we = b;
        }
        ws[nw] = s;
        we[nw++] = p;
    }
    double frac = NAN;
    if (nw >= (size_t)n) {
        size_t ng = nw - (size_t)n + 1;
        uint64_t *h = malloc(ng * sizeof *h);
        if (h) {
            for (size_t i = 0; i < ng; i++) h[i] = gram_hash(ws + i, we + i, n);
            qsort(h, ng, sizeof *h, cmp_u64);
            size_t distinct = 1;
            for (size_t i = 1; i < ng; i++) distinct += h[i] != h[i - 1];
            frac = (double)(ng - distinct) / (double)ng;
            free(h);
        }
    }
    free(ws);
    free(we);
    return frac;
}

double st_decode_tps(int c, const double *n_out, const double *ttft, const double *e2el, const int *idx, int n) {
    double tok = 0, sec = 0;
    for (int k = 0; k < n; k++) {
        int i = idx ? idx[k] : k;
        double d = e2el[i] - ttft[i];
        if (!(n_out[i] >= 2) || !(d > 0)) continue;
        tok += n_out[i] - 1;
        sec += d;
    }
    return sec > 0 ? c * tok / sec : NAN;
}

double st_e2e_tps(int c, const double *n_out, const double *e2el, const int *idx, int n) {
    double tok = 0, sec = 0;
    for (int k = 0; k < n; k++) {
        int i = idx ? idx[k] : k;
        if (!(n_out[i] >= 0) || !(e2el[i] > 0)) continue;
        tok += n_out[i];
        sec += e2el[i];
    }
    return sec > 0 ? c * tok / sec : NAN;
}
