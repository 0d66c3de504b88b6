/* spec_stats_json.h — a run's speculative statistics as `--stats-json`
 * writes them. A field named like `vllm bench serve`'s holds vLLM's value by
 * vLLM's formula (vllm/benchmarks/serve.py, from the counters of
 * vllm/v1/spec_decode/metrics.py): spec_decode_num_drafts, _draft_tokens,
 * _accepted_tokens, _acceptance_rate (accepted ÷ drafted, in percent),
 * _acceptance_length (1 + accepted ÷ drafts) and
 * _per_position_acceptance_rates (accepted at position i ÷ drafts, one per
 * position up to the depth); like vLLM's, they are left out when nothing
 * was drafted. specbed's own figures carry specbed_ names:
 * specbed_accept_length (committed ÷ specbed_spec_verify_steps, bonus
 * included: SGLang's accept len, and /metrics' and the decode-batch
 * line's), the steps, committed tokens, empty proposals, unverified drafts
 * and gated steps. */
#ifndef SPECBED_SPEC_STATS_JSON_H
#define SPECBED_SPEC_STATS_JSON_H
#include <cjson/cJSON.h>
#include "spec_metrics.h"

/* Adds the fields above to j for counters c of a run at depth K. */
void spec_stats_add_json(cJSON *j, const spec_counters *c, int depth);

#endif
