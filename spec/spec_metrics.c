/* spec_metrics.c — see spec_metrics.h. Arithmetic only. */
#include "spec_metrics.h"
#include <string.h>

spec_rates spec_rates_between(const spec_counters *before, const spec_counters *after) {
    static const spec_counters zero;
    const spec_counters *b = before ? before : &zero, *a = after;
    spec_rates r;
    memset(&r, 0, sizeof r);
    r.drafts = a->drafts - b->drafts;
    r.drafted_tokens = a->drafted_tokens - b->drafted_tokens;
    r.accepted_tokens = a->accepted_tokens - b->accepted_tokens;
    r.steps = a->steps - b->steps;
    r.committed_tokens = a->committed_tokens - b->committed_tokens;
    r.empty_proposals = a->empty_proposals - b->empty_proposals;
    r.unverified_tokens = a->unverified_tokens - b->unverified_tokens;
    r.gated_steps = a->gated_steps - b->gated_steps;
    r.draft_s = a->draft_s - b->draft_s;
    r.drafted = r.drafts > 0;
    r.accept_length = r.steps > 0 ? (double)r.committed_tokens / (double)r.steps : 0.0;
    r.mean_acceptance_length = r.drafts > 0 ? 1.0 + (double)r.accepted_tokens / (double)r.drafts : 0.0;
    r.acceptance_rate = r.drafted_tokens > 0 ? (double)r.accepted_tokens / (double)r.drafted_tokens : 0.0;
    for (int i = 0; i < SPEC_MAX_DEPTH; i++) {
        long reached = a->drafted_at[i] - b->drafted_at[i];
        if (reached > 0) r.n_positions = i + 1;
        r.position_rate[i] = r.drafts > 0 ? (double)(a->accepted_at[i] - b->accepted_at[i]) / (double)r.drafts : 0.0;
    }
    return r;
}

void spec_counters_add(spec_counters *acc, const spec_counters *x) {
    acc->drafts += x->drafts;
    acc->drafted_tokens += x->drafted_tokens;
    acc->accepted_tokens += x->accepted_tokens;
    acc->steps += x->steps;
    acc->committed_tokens += x->committed_tokens;
    acc->empty_proposals += x->empty_proposals;
    acc->unverified_tokens += x->unverified_tokens;
    acc->gated_steps += x->gated_steps;
    acc->draft_s += x->draft_s;
    for (int i = 0; i < SPEC_MAX_DEPTH; i++) {
        acc->drafted_at[i] += x->drafted_at[i];
        acc->accepted_at[i] += x->accepted_at[i];
        acc->pred_survival_at[i] += x->pred_survival_at[i];
    }
}
