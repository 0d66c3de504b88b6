/* verify_policy.c — verify policies (see verify_policy.h). Owns per-slot acceptance
 * estimates; reads proposals, never draft token identities. */
#include "verify_policy.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"

/* An estimate never drops to 0, so a position that was rejected once can be
 * re-tried when a step has spare capacity (else α = 0 would lock it out). */
#define EST_FLOOR 0.02f
#define EST_PRIOR 0.5f

struct vpolicy {
    vpolicy_opts o;
    float (*est)[SPEC_MAX_DEPTH];   /* [max_slots] conditional acceptance estimates */
    float (*pred)[SPEC_MAX_DEPTH];  /* [max_slots] EMA of predicted conditional rates (calibration) */
    float glob[SPEC_MAX_DEPTH];     /* pooled estimates: the starting point of a new request */
    float (*a)[SPEC_MAX_DEPTH];     /* scratch survival curves [max_slots] */
    int *kmax, *ell;
    struct gate_slot {              /* [max_slots] the adaptive gate's state of each slot */
        int skipped;                /* steps kept from drafting since the last draft */
        int every;                  /* refused steps between probes (PROBE_MIN doubling to PROBE_MAX) */
        int probed;                 /* the last open gate was a probe */
    } *gs;
    float next_thr;                 /* what a further draft had to exceed in the last step (vpolicy_admit) */
    int have_thr;                   /* 0 until the first choose() */
};

int vpolicy_parse(const char *name, vpolicy_kind *out) {
    static const char *names[] = {"fixed", "threshold", "confidence", "adaptive"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(name, names[i])) { *out = (vpolicy_kind)i; return 0; }
    return -1;
}

/* Admitting a draft of survival v to a batch of B rows in n sequences and
 * τ expected tokens, the step's drafting having taken D seconds and the
 * draft still to cost T to draft, pays when
 * (τ + v) / (cost(B + 1) + D + T) > τ / (cost(B) + D), i.e. when
 * v > τ · ((cost(B + 1) + D + T) / (cost(B) + D) − 1). */
static double admit_threshold(const cost_curve *cost, double tau, int n, int B, double D, double T) {
    return tau * ((cost_curve_at_seqs(cost, n, B + 1) + D + T) / (cost_curve_at_seqs(cost, n, B) + D) - 1.0);
}

double vpolicy_admit(const cost_curve *cost, const float (*a)[SPEC_MAX_DEPTH], const int *kmax, int n, int *ell,
                     const vpolicy_draft_cost *dc) {
    /* Start from one row per request (the bonus row), τ = n. Candidates in
     * descending survival; ties by position, then request, so prefixes are
     * admitted in order. The drafts here are made: their drafting is spent
     * time in every Θ alike, so only a further draft pays per_token_s. */
    const double D = dc ? dc->spent_s : 0, T = dc ? dc->per_token_s : 0;
    int B = n;
    double tau = n, theta = tau / (cost_curve_at_seqs(cost, n, B) + D);
    for (int r = 0; r < n; r++) ell[r] = 0;
    for (;;) {
        int best = -1;
        float ba = -1.0f;
        for (int r = 0; r < n; r++) {
            if (ell[r] >= kmax[r]) continue;
            float v = a[r][ell[r]];
            if (v > ba || (v == ba && best >= 0 && ell[r] < ell[best])) { ba = v; best = r; }
        }
        if (best < 0) break;
        double tau2 = tau + ba, theta2 = tau2 / (cost_curve_at_seqs(cost, n, B + 1) + D);
        if (!(theta2 > theta)) break;   /* first non-improvement: stop */
        tau = tau2;
        theta = theta2;
        B++;
        ell[best]++;
    }
    return admit_threshold(cost, tau, n, B, D, T);
}

/* The drafting cost of a step in which the n proposals drafted what they
 * hold (the table's cost for that many drafting sequences; zeros without
 * one). */
static vpolicy_draft_cost drafting_cost(const cost_curve *cost, const spec_proposal *props, int n) {
    int seqs = 0, drafted = 0;
    for (int r = 0; r < n; r++) {
        seqs += props[r].k > 0;
        drafted += props[r].k;
    }
    double F = 0, T = 0;
    cost_curve_draft_at(cost, seqs > 0 ? seqs : 1, &F, &T);
    return (vpolicy_draft_cost){seqs * F + drafted * T, T};
}

/* Conditional survival signal of draft i: confidence head, else the
 * distribution's top probability, else -1 (none). */
static float signal(const spec_proposal *p, int i) {
    if (p->has_conf) return p->conf[i];
    if (p->has_top_prob) return p->top_prob[i];
    return -1.0f;
}

/* The conditional survival the policy uses for draft i of p, in [0, 1]:
 * the confidence head (or top probability); without one, the per-slot
 * estimate; adaptive rescales a head by how well its past predictions
 * matched reality. */
static float survival_step(const vpolicy *s, const spec_proposal *p, int i) {
    const float *est = s->est[p->slot], *pred = s->pred[p->slot];
    float c = signal(p, i);
    if (s->o.kind == VPOLICY_ADAPTIVE) {
        if (c < 0) c = est[i];
        else if (pred[i] > 0) c = c * est[i] / pred[i];
    } else if (c < 0) {
        c = est[i];
    }
    return c > 1.0f ? 1.0f : c < 0.0f ? 0.0f : c;
}

static void choose(void *ctx, spec_proposal *props, int n) {
    vpolicy *s = ctx;
    if (s->o.kind == VPOLICY_THRESHOLD) {
        for (int r = 0; r < n; r++) {
            int k = 0;
            while (k < props[r].k) {
                float c = signal(&props[r], k);
                if (c >= 0 && c < s->o.p_min) break;
                k++;
            }
            props[r].k = k;
        }
        return;
    }
    for (int r = 0; r < n; r++) {
        const spec_proposal *p = &props[r];
        float surv = 1.0f;
        for (int i = 0; i < p->k; i++) s->a[r][i] = surv *= survival_step(s, p, i);
        s->kmax[r] = p->k;
    }
    /* The drafting this step already did is part of its time: leaving it
     * out made a dear drafting pass look free and cut DSpark (1.3 ms per
     * pass against 0.3-0.9 ms for 1-6 verify rows on this CPU) to one
     * verified draft a step, below what fixed verification gained with the
     * same drafts (bench/RECORD.md). */
    vpolicy_draft_cost dc = drafting_cost(s->o.cost, props, n);
    s->next_thr = (float)vpolicy_admit(s->o.cost, (const float (*)[SPEC_MAX_DEPTH])s->a, s->kmax, n, s->ell, &dc);
    /* Only a batch's threshold says something about the next batch: a
     * single stream's own is recomputed exactly in keep(), and the last
     * step's (taken after admitting several drafts, at a larger τ and B)
     * was often lower, letting drafts through that choose() then cut:
     * MTP at depth 8, 8 prompts × 160 tokens, single stream: 598 → 210
     * unverified drafts under confidence, 489 → 128 under adaptive, the
     * same drafts verified and accepted (bench/RECORD.md). */
    s->have_thr = n > 1;
    for (int r = 0; r < n; r++) props[r].k = s->ell[r];
}

/* Drafting that stops early (spec_proposal.keep): threshold stops exactly
 * where choose() would cut. Confidence/adaptive: the survival of drafts
 * 0..k-1 bounds draft k's from above, so draft k is not drafted when that
 * bound does not beat the admission threshold: as this request alone sets
 * it (B = k + 1 rows, τ = 1 + the survivals so far: exact for a single
 * stream), or, when the last step verified a batch of several requests, as
 * that batch ended (what its next draft had to exceed: the best estimate of
 * this batch's, which admission over n sequences raises with τ). Taking
 * the lower of the two instead kept drafting nearly everything a CPU batch
 * then cut (bench_spec --batch 4, depth 4, code: unverified drafts per step
 * MTP 2.87 → 1.00, DSpark 2.15 → 0.02 under confidence; accept length
 * within 0.06; bench/RECORD.md). When the drafter gives draft k's own
 * signal ahead (conf_ahead), the bound is draft k's survival itself, and
 * for a single stream keep() then answers exactly what choose() will: no
 * draft is computed that is not verified. Only signals fixed before each
 * draft was drawn are read. */
static int keep(void *ctx, const spec_proposal *p) {
    const vpolicy *s = ctx;
    int known = p->k + (p->conf_ahead ? 1 : 0);   /* drafts whose signal is known */
    if (known <= 0) return 1;
    if (s->o.kind == VPOLICY_THRESHOLD) {
        float c = signal(p, known - 1);
        return !(c >= 0 && c < s->o.p_min);
    }
    if (p->slot < 0 || p->slot >= s->o.max_slots) return 1;
    double tau = 1.0, bound = 1.0;
    for (int i = 0; i < p->k; i++) tau += bound *= survival_step(s, p, i);
    if (p->conf_ahead) bound *= survival_step(s, p, p->k);
    if (s->have_thr) return bound > s->next_thr;
    /* this request alone: its drafting so far (the pass that gave a signal
     * has run) is spent; draft k would add its own per-token cost */
    double F, T;
    cost_curve_draft_at(s->o.cost, 1, &F, &T);
    return bound > admit_threshold(s->o.cost, tau, 1, p->k + 1, F + p->k * T, T);
}

/* Adaptive only: whether drafting pays at all this step. The drafter's own
 * cost (the table's draft_seconds_per_step and _per_token for n_seqs
 * drafting together, from `specbed profile --drafter`) is what the
 * admission rule leaves out; here it is charged against the tokens the
 * slot's acceptance estimates promise: drafting pays if some ℓ ≤ max_k has
 * (n + g_ℓ) / (cost(n, n + ℓ) + F + ℓ·T) > n / cost(n, n), g_ℓ = Σ_{j<ℓ}
 * Π_{i≤j} est_i (the others' drafts taken as they were). A slot kept from
 * drafting learns nothing, so after `every` refused steps it drafts
 * once anyway to refresh its estimates; a probe after which the gate is
 * still closed doubles the interval (PROBE_MIN to PROBE_MAX: a drafter that
 * does not pay costs 1/PROBE_MAX of its drafting, not 1/PROBE_MIN), an open
 * gate brings it back to PROBE_MIN. Resetting it after any accepted probe
 * instead kept DSpark, whose first drafts are often accepted but whose
 * drafting does not pay on this CPU, probing every 16 steps: 0.74x of
 * speculation off against ≈ 1.0x (bench/RECORD.md). The price: a drafter
 * that does pay but starts from the pessimistic prior (0.5) opens late.
 * Without drafter costs in the table the gate stays open. */
#define PROBE_MIN 16
#define PROBE_MAX 256
static int gate(void *ctx, int slot, int max_k, int n_seqs) {
    vpolicy *s = ctx;
    if (slot < 0 || slot >= s->o.max_slots || n_seqs < 1) return 1;   /* installed for adaptive only */
    double F = 0, T = 0;
    cost_curve_draft_at(s->o.cost, n_seqs, &F, &T);
    if (F <= 0 && T <= 0) return 1;
    const double n = n_seqs, base = n / cost_curve_at_seqs(s->o.cost, n, n);
    double g = 0, surv = 1;
    for (int l = 1; l <= max_k && l <= SPEC_MAX_DEPTH; l++) {
        g += surv *= s->est[slot][l - 1];
        if ((n + g) / (cost_curve_at_seqs(s->o.cost, n, n + l) + F + l * T) > base) {
            s->gs[slot] = (struct gate_slot){.every = PROBE_MIN};
            return 1;
        }
    }
    struct gate_slot *g1 = &s->gs[slot];
    if (g1->probed && g1->every < PROBE_MAX) g1->every *= 2;
    g1->probed = ++g1->skipped >= g1->every;   /* a probe: draft once anyway */
    if (g1->probed) g1->skipped = 0;
    return g1->probed;
}

static void observe(void *ctx, const spec_proposal *p, int n_acc) {
    vpolicy *s = ctx;
    if (p->slot < 0 || p->slot >= s->o.max_slots) return;
    float al = (float)s->o.alpha;
    float *est = s->est[p->slot], *pred = s->pred[p->slot];
    /* positions 0..n_acc were reached; 0..n_acc-1 accepted, n_acc rejected */
    for (int i = 0; i < p->k && i <= n_acc; i++) {
        float obs = i < n_acc ? 1.0f : 0.0f;
        est[i] = al * est[i] + (1 - al) * obs;
        if (est[i] < EST_FLOOR) est[i] = EST_FLOOR;
        s->glob[i] = 0.98f * s->glob[i] + 0.02f * obs;
        float c = signal(p, i);
        if (c >= 0) pred[i] = al * pred[i] + (1 - al) * c;
    }
}

static void reset(void *ctx, int slot) {
    vpolicy *s = ctx;
    if (slot < 0 || slot >= s->o.max_slots) return;
    for (int i = 0; i < SPEC_MAX_DEPTH; i++) {
        s->est[slot][i] = s->glob[i] > EST_FLOOR ? s->glob[i] : EST_FLOOR;
        s->pred[slot][i] = 0.0f;
    }
    s->gs[slot] = (struct gate_slot){.every = PROBE_MIN};
}

int vpolicy_create(vpolicy **out, const vpolicy_opts *o, char *err, size_t errlen) {
    *out = NULL;
    if (o->max_slots < 1) return errf(err, errlen, "verify policy: max_slots must be ≥ 1");
    if ((o->kind == VPOLICY_CONFIDENCE || o->kind == VPOLICY_ADAPTIVE) && (!o->cost || o->cost->n < 1))
        return errf(err, errlen, "verify policy: confidence/adaptive need a cost curve");
    if (o->kind == VPOLICY_THRESHOLD && !(o->p_min >= 0 && o->p_min <= 1))
        return errf(err, errlen, "verify policy: --p-min %g outside [0, 1]", o->p_min);
    if (o->kind == VPOLICY_ADAPTIVE && !(o->alpha >= 0 && o->alpha < 1))
        return errf(err, errlen, "verify policy: --adaptive-alpha %g outside [0, 1)", o->alpha);
    vpolicy *s = calloc(1, sizeof *s);
    if (!s) return errf(err, errlen, "out of memory");
    s->o = *o;
    size_t n = (size_t)o->max_slots;
    s->est = calloc(n, sizeof *s->est);
    s->pred = calloc(n, sizeof *s->pred);
    s->a = calloc(n, sizeof *s->a);
    s->kmax = calloc(n, sizeof(int));
    s->ell = calloc(n, sizeof(int));
    s->gs = calloc(n, sizeof *s->gs);
    if (!s->est || !s->pred || !s->a || !s->kmax || !s->ell || !s->gs) {
        vpolicy_free(s);
        return errf(err, errlen, "out of memory");
    }
    for (int i = 0; i < SPEC_MAX_DEPTH; i++) s->glob[i] = EST_PRIOR;
    for (int r = 0; r < o->max_slots; r++) reset(s, r);
    *out = s;
    return 0;
}

void vpolicy_free(vpolicy *s) {
    if (!s) return;
    free(s->est); free(s->pred); free(s->a); free(s->kmax); free(s->ell); free(s->gs);
    free(s);
}

spec_verify_hook vpolicy_hook(vpolicy *s) {
    spec_verify_hook h = {0};
    if (!s || s->o.kind == VPOLICY_FIXED) return h;
    h.ctx = s;
    h.choose = choose;
    h.observe = observe;
    h.reset = reset;
    h.keep = keep;
    if (s->o.kind == VPOLICY_ADAPTIVE) h.gate = gate;
    return h;
}
