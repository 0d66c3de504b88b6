/* spec_stats_json.c — spec_stats_add_json (see spec_stats_json.h). */
#include "spec_stats_json.h"

void spec_stats_add_json(cJSON *j, const spec_counters *c, int depth) {
    spec_rates r = spec_rates_between(NULL, c);
    /* vllm/benchmarks/serve.py writes its spec_decode_* block only when
     * draft tokens were counted; so do we */
    if (r.drafted_tokens > 0) {
        cJSON_AddNumberToObject(j, "spec_decode_num_drafts", (double)r.drafts);
        cJSON_AddNumberToObject(j, "spec_decode_draft_tokens", (double)r.drafted_tokens);
        cJSON_AddNumberToObject(j, "spec_decode_accepted_tokens", (double)r.accepted_tokens);
        cJSON_AddNumberToObject(j, "spec_decode_acceptance_rate", 100.0 * r.acceptance_rate);
        cJSON_AddNumberToObject(j, "spec_decode_acceptance_length", r.mean_acceptance_length);
        cJSON *pp = cJSON_AddArrayToObject(j, "spec_decode_per_position_acceptance_rates");
        for (int i = 0; i < depth && i < SPEC_MAX_DEPTH; i++)
            cJSON_AddItemToArray(pp, cJSON_CreateNumber(r.position_rate[i]));
    }
    cJSON_AddNumberToObject(j, "specbed_accept_length", r.accept_length);
    cJSON_AddNumberToObject(j, "specbed_spec_verify_steps", (double)r.steps);
    cJSON_AddNumberToObject(j, "specbed_committed_tokens", (double)r.committed_tokens);
    cJSON_AddNumberToObject(j, "specbed_empty_proposals", (double)r.empty_proposals);
    cJSON_AddNumberToObject(j, "specbed_unverified_draft_tokens", (double)r.unverified_tokens);
    cJSON_AddNumberToObject(j, "specbed_gated_steps", (double)r.gated_steps);
}
