/* load_shape.c — see load_shape.h. Pure arithmetic and parsing. */
#include "load_shape.h"
#include "errmsg.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ld_profile_parse(const char *s, ld_profile *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    const char *p = s;
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        if (out->n == LD_MAX_PHASES) return errf(err, errlen, "--profile: more than %d phases", LD_MAX_PHASES);
        const char *seg = p;
        char *e;
        double d = strtod(p, &e);
        if (e == p || !(d > 0) || !isfinite(d)) return errf(err, errlen, "--profile: phase '%.20s' must start with a positive duration", seg);
        p = e;
        if (!strncmp(p, "ms", 2)) { d /= 1000; p += 2; }
        else if (*p == 's') p++;
        else if (*p == 'm') { d *= 60; p++; }
        if (*p != '@') return errf(err, errlen, "--profile: phase '%.20s' needs '@N' (concurrency) or '@rX' (rate)", seg);
        p++;
        ld_phase *ph = &out->ph[out->n];
        ph->dur_s = d;
        if (*p == 'r') {
            p++;
            double r = strtod(p, &e);
            if (e == p || !(r > 0) || !isfinite(r)) return errf(err, errlen, "--profile: phase '%.20s' has a bad rate", seg);
            ph->rate = r;
        } else {
            long c = strtol(p, &e, 10);
            if (e == p || c < 1 || c > 100000) return errf(err, errlen, "--profile: phase '%.20s' needs a concurrency in 1..100000", seg);
            ph->concurrency = (int)c;
        }
        p = e;
        if (*p && *p != ',') return errf(err, errlen, "--profile: unexpected '%.10s' after phase '%.20s'", p, seg);
        out->n++;
    }
    if (!out->n) return errf(err, errlen, "--profile: no phases (expected e.g. \"180s@4,60s@r2.5\")");
    return 0;
}

double ld_profile_total(const ld_profile *p) {
    double t = 0;
    for (int i = 0; i < p->n; i++) t += p->ph[i].dur_s;
    return t;
}

int ld_profile_at(const ld_profile *p, double t) {
    double acc = 0;
    for (int i = 0; i < p->n; i++) {
        acc += p->ph[i].dur_s;
        if (t < acc) return i;
    }
    return -1;
}

void ld_profile_format(const ld_profile *p, char *out, size_t outlen) {
    size_t o = 0;
    if (outlen) out[0] = 0;
    for (int i = 0; i < p->n && o < outlen; i++) {
        int w = p->ph[i].rate > 0 ? snprintf(out + o, outlen - o, "%s%gs@r%g", i ? "," : "", p->ph[i].dur_s, p->ph[i].rate)
                                  : snprintf(out + o, outlen - o, "%s%gs@%d", i ? "," : "", p->ph[i].dur_s, p->ph[i].concurrency);
        if (w < 0) break;
        o += (size_t)w;
    }
}

/* splitmix64: small, seedable, good enough for arrival times. */
static uint64_t next(ld_rng *r) {
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void ld_rng_seed(ld_rng *r, uint64_t seed) { r->s = seed * 0x2545F4914F6CDD1Dull + 1; }

double ld_rng_uniform(ld_rng *r) { return ((double)(next(r) >> 11) + 0.5) / 9007199254740992.0; }

static double normal(ld_rng *r) {
    double u = ld_rng_uniform(r), v = ld_rng_uniform(r);
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

/* Marsaglia & Tsang; shape < 1 through the boost x·U^(1/shape). */
double ld_rng_gamma(ld_rng *r, double shape, double scale) {
    if (shape < 1.0) {
        double u = ld_rng_uniform(r);
        return ld_rng_gamma(r, shape + 1.0, scale) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do { x = normal(r); v = 1.0 + c * x; } while (v <= 0);
        v = v * v * v;
        double u = ld_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v * scale;
        if (log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v * scale;
    }
}

double ld_interarrival(ld_rng *r, double rate, double burstiness) {
    if (!isfinite(rate)) return 0;
    return ld_rng_gamma(r, burstiness, 1.0 / (rate * burstiness));
}

void ld_shuffle(ld_rng *r, int *idx, int n) {
    for (int i = n - 1; i > 0; i--) {
        int j = (int)(next(r) % (uint64_t)(i + 1));
        int t = idx[i]; idx[i] = idx[j]; idx[j] = t;
    }
}
