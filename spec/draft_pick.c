/* draft_pick.c — one draft from one logits row (see draft_pick.h). */
#include "draft_pick.h"
#include <math.h>
#include <string.h>

int draft_pick(spec_proposal *p, const float *lg, int V, int pos) {
    p->has_top_prob = 1;
    if (p->sp->temperature <= 0.0f) {
        int t = sample_greedy(lg, V);
        p->top_prob[pos] = expf(logprob_of(lg, V, t));
        return t;
    }
    float *q = p->q + (size_t)pos * V;
    sampler_probs(q, lg, V, p->sp);
    p->q_valid = 1;
    float top = 0.0f;
    for (int v = 0; v < V; v++)
        if (q[v] > top) top = q[v];
    p->top_prob[pos] = top;
    return sample_from_probs(q, V, p->rng);
}

int draft_pick_mapped(spec_proposal *p, const float *lg, int n, const int *d2t, int V, float *probs, int pos) {
    p->has_top_prob = 1;
    if (p->sp->temperature <= 0.0f) {
        /* ties go to the lowest draft id: with d2t ascending (as the
         * trainers write it), to the lowest target id, as sample_greedy */
        int i = sample_greedy(lg, n);
        p->top_prob[pos] = expf(logprob_of(lg, n, i));
        return d2t[i];
    }
    float *q = p->q + (size_t)pos * V;
    sampler_probs(probs, lg, n, p->sp);
    memset(q, 0, sizeof(float) * (size_t)V);
    float top = 0.0f;
    for (int i = 0; i < n; i++) {
        q[d2t[i]] = probs[i];
        if (probs[i] > top) top = probs[i];
    }
    p->q_valid = 1;
    p->top_prob[pos] = top;
    return d2t[sample_from_probs(probs, n, p->rng)];
}
