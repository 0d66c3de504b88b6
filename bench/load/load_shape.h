/* load_shape.h — when the load generator sends requests.
 *
 *   closed loop  --concurrency N: N requests in flight; each completion
 *                starts the next one.
 *   open loop    --rate R [--burstiness B]: arrivals with gamma-distributed
 *                gaps of mean 1/R and shape B (B = 1 is Poisson; B < 1 is
 *                burstier, B > 1 steadier), as vLLM's benchmark does.
 *   profile      --profile "180s@4,180s@20,120s@2,240s@14": phases run back to
 *                back; "@N" is a closed loop of N, "@rX" an open loop at X req/s.
 *                Durations take s (default), m or ms.
 * The RNG is the load generator's own (seeded), so a run's arrival times
 * repeat exactly for the same --seed. */
#ifndef SPECBED_BENCH_LOAD_SHAPE_H
#define SPECBED_BENCH_LOAD_SHAPE_H
#include <stdint.h>
#include <stddef.h>

#define LD_MAX_PHASES 64

typedef struct {
    double dur_s;
    int concurrency;   /* > 0: closed loop of this many */
    double rate;       /* > 0: open loop, requests per second */
} ld_phase;

typedef struct {
    int n;
    ld_phase ph[LD_MAX_PHASES];
} ld_profile;

int    ld_profile_parse(const char *s, ld_profile *out, char *err, size_t errlen);
double ld_profile_total(const ld_profile *p);
/* Phase index at time t (seconds since start), -1 once the profile is over. */
int    ld_profile_at(const ld_profile *p, double t);
/* Writes the profile back as text ("180s@4,60s@r2.5"). */
void   ld_profile_format(const ld_profile *p, char *out, size_t outlen);

typedef struct { uint64_t s; } ld_rng;
void   ld_rng_seed(ld_rng *r, uint64_t seed);
double ld_rng_uniform(ld_rng *r);                        /* (0, 1) */
double ld_rng_gamma(ld_rng *r, double shape, double scale);
/* Gap to the next arrival for rate R and burstiness B; 0 when R is infinite. */
double ld_interarrival(ld_rng *r, double rate, double burstiness);
/* Fisher-Yates shuffle of idx[0..n-1]. */
void   ld_shuffle(ld_rng *r, int *idx, int n);
#endif
