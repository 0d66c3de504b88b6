/* sampler.c — reproducible sampling (see sampler.h).
 * Owns no state: the RNG lives in the caller's rng_state, one per request,
 * so a request's draws never depend on what else is running. */
#include "sampler.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void rng_seed(rng_state *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(rng_state *r) {   /* xoshiro256** */
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

double rng_uniform(rng_state *r) { return (double)(rng_next(r) >> 11) * 0x1.0p-53; }

int sample_greedy(const float *logits, int n) {
    int best = 0;
    for (int i = 1; i < n; i++)
        if (logits[i] > logits[best]) best = i;
    return best;
}

/* Sort helper for top-k / top-p: descending probability, ties by ascending id
 * so the kept set is a deterministic function of the logits. A total order
 * even for NaN (ranked below everything): quickselect's scans stop only at
 * elements that compare equal to the pivot, so a comparator that is not an
 * order walks off the array. Callers reject non-finite logits first
 * (sampler_first_nonfinite); this keeps a bad row from becoming a crash. */
typedef struct { float p; int id; } pid;
static int pid_cmp(const void *a, const void *b) {
    const pid *x = a, *y = b;
    int xn = isnan(x->p), yn = isnan(y->p);
    if (xn != yn) return xn ? 1 : -1;
    if (!xn && x->p != y->p) return x->p > y->p ? -1 : 1;
    return x->id - y->id;
}

int sampler_first_nonfinite(const float *logits, int n) {
    /* x - x is 0 for finite x and NaN for ±Inf and NaN: one pass the
     * compiler vectorises, then the exact index only on failure */
    float acc = 0.0f;
    for (int i = 0; i < n; i++) acc += logits[i] - logits[i];
    if (acc == 0.0f) return -1;
    for (int i = 0; i < n; i++)
        if (!isfinite(logits[i])) return i;
    return -1;
}

/* Quickselect: afterwards a[0..k) hold the k first elements under pid_cmp. */
static void select_first(pid *a, int n, int k) {
    int lo = 0, hi = n - 1;
    while (lo < hi) {
        pid pivot = a[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (pid_cmp(&a[i], &pivot) < 0) i++;
            while (pid_cmp(&a[j], &pivot) > 0) j--;
            if (i <= j) { pid t = a[i]; a[i] = a[j]; a[j] = t; i++; j--; }
        }
        if (k - 1 <= j) hi = j;
        else if (k - 1 >= i) lo = i;
        else break;
    }
}

void sampler_probs(float *probs, const float *logits, int n, const sampler_params *sp) {
    if (sp->temperature <= 0.0f) {
        memset(probs, 0, sizeof(float) * (size_t)n);
        probs[sample_greedy(logits, n)] = 1.0f;
        return;
    }
    /* softmax(logits / T) in double for the normaliser */
    float mx = logits[0];
    for (int i = 1; i < n; i++) if (logits[i] > mx) mx = logits[i];
    double sum = 0.0;
    for (int i = 0; i < n; i++) {
        double e = exp(((double)logits[i] - mx) / sp->temperature);
        probs[i] = (float)e;
        sum += e;
    }
    for (int i = 0; i < n; i++) probs[i] = (float)(probs[i] / sum);

    int use_k = sp->top_k > 0 && sp->top_k < n;
    int use_p = sp->top_p > 0.0f && sp->top_p < 1.0f;
    if (!use_k && !use_p) return;

    pid *order = malloc(sizeof(pid) * (size_t)n);
    if (!order) return;   /* out of memory: fall back to the untruncated distribution */
    for (int i = 0; i < n; i++) { order[i].p = probs[i]; order[i].id = i; }
    int keep = use_k ? sp->top_k : n;
    /* top-k: select the k first in pid_cmp's total order in O(n), then sort
     * only those; the kept set is the same as a full sort's. */
    if (use_k) select_first(order, n, keep);
    qsort(order, (size_t)keep, sizeof(pid), pid_cmp);
    if (use_p) {
        /* smallest prefix whose mass reaches top_p (HF/vLLM keep the token
         * that crosses the threshold) */
        double cum = 0.0;
        int kp = 0;
        while (kp < keep) { cum += order[kp].p; kp++; if (cum >= sp->top_p) break; }
        keep = kp;
    }
    double kept = 0.0;
    for (int i = 0; i < keep; i++) kept += order[i].p;
    for (int i = keep; i < n; i++) probs[order[i].id] = 0.0f;
    for (int i = 0; i < keep; i++) probs[order[i].id] = (float)(order[i].p / kept);
    free(order);
}

int sample_from_probs(const float *probs, int n, rng_state *r) {
    double u = rng_uniform(r), cum = 0.0;
    int last = -1;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0.0f) continue;
        cum += probs[i];
        last = i;
        if (u < cum) return i;
    }
    return last >= 0 ? last : 0;   /* rounding left u above the total mass */
}

int sampler_sample(const float *logits, int n, const sampler_params *sp, rng_state *r,
                   float *scratch) {
    if (sp->temperature <= 0.0f) return sample_greedy(logits, n);
    sampler_probs(scratch, logits, n, sp);
    return sample_from_probs(scratch, n, r);
}

static double log_sum_exp(const float *logits, int n) {
    float mx = logits[0];
    for (int i = 1; i < n; i++) if (logits[i] > mx) mx = logits[i];
    double s = 0.0;
    for (int i = 0; i < n; i++) s += exp((double)logits[i] - mx);
    return mx + log(s);
}

float logprob_of(const float *logits, int n, int id) {
    return (float)((double)logits[id] - log_sum_exp(logits, n));
}

void logprobs_top(const float *logits, int n, int k, int *ids, float *lps) {
    if (k > n) k = n;
    double lse = log_sum_exp(logits, n);
    /* k is small (≤ 20): insertion into a sorted list of k */
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (m == k && logits[i] <= logits[ids[m - 1]]) continue;
        int j = m < k ? m++ : k - 1;
        while (j > 0 && logits[ids[j - 1]] < logits[i]) { ids[j] = ids[j - 1]; j--; }
        ids[j] = i;
    }
    for (int i = 0; i < m; i++) lps[i] = (float)((double)logits[ids[i]] - lse);
}
