/* draft_pick.c — one draft from one logits row (see draft_pick.h). */
#include "draft_pick.h"
#include <math.h>

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
