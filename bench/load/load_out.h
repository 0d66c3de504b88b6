/* load_out.h — what a load run leaves in its --out directory:
 *   requests.csv    one row per request (timings in ms, tokens, status, error)
 *   intervals.csv   one row per metrics interval (interval_csv.h)
 *   summary.json    run summary with `vllm bench serve`'s field names AND
 *                   units where one exists (completed, failed,
 *                   request_throughput, output_throughput, mean/median/std
 *                   and p{str(p)} _ttft_ms, _tpot_ms, _itl_ms, _e2el_ms, e.g.
 *                   p99.9_itl_ms, max_output_tokens_per_s (1-second buckets),
 *                   spec_decode_acceptance_rate in PERCENT,
 *                   spec_decode_acceptance_length = 1 + accepted ÷ drafts,
 *                   …_num_drafts, …_draft_tokens, …_accepted_tokens,
 *                   …_per_position_acceptance_rates = accepted at i ÷ drafts,
 *                   label, tokenizer_id (null: no client tokenizer), rtfx,
 *                   latencies, queue_times), by vLLM's formulas
 *                   (vllm/benchmarks/serve.py); every other field is
 *                   specbed's own and starts with "specbed_", e.g.
 *                   specbed_acceptance_length = committed ÷ verify steps
 *   outputs.jsonl   the text of every request ("reasoning" too when the
 *                   server streamed any; "error" for failed ones): evidence
 *                   for the canary and its --calibrate
 *
 * Goodput (vLLM's --goodput): a request is good when every given SLO holds
 * (ttft ≤ X ms, tpot ≤ Y ms, e2el ≤ Z ms); request_goodput = good ÷ duration. */
#ifndef SPECBED_BENCH_LOAD_OUT_H
#define SPECBED_BENCH_LOAD_OUT_H
#include <cjson/cJSON.h>
#include <stddef.h>
#include "load.h"

#define LD_MAX_PCT 8

typedef struct {
    int n;
    double p[LD_MAX_PCT];       /* percentiles to report, e.g. 50, 90, 99 */
} ld_pcts;

int  ld_pcts_parse(const char *s, ld_pcts *out, char *err, size_t errlen);
/* The key word vLLM gives percentile p (str(int(p)) or str(p)): "99", "99.9". */
void ld_pct_word(double p, char *out, size_t outlen);

/* The summary as JSON (caller frees with cJSON_Delete); numbers are cJSON
 * numbers, for callers that read it back. */
cJSON *ld_summary_json(const ld_config *c, const ld_result *r, const ld_pcts *pcts);
/* For writing: the fields vLLM holds as floats (durations, throughputs,
 * _ms statistics, burstiness, max_output_tokens_per_s, rtfx, the
 * acceptance rate and length, latencies, queue_times …) printed with a
 * decimal point when whole ("1.0", as Python's json writes a float), so a
 * typed reader sees vLLM's types; counts stay integers. After this the
 * affected items are raw JSON text, not cJSON numbers. */
void ld_summary_float_form(cJSON *j);

/* Writes the four files into dir (created if missing). */
int ld_write_outputs(const char *dir, const ld_config *c, const ld_result *r, const ld_pcts *pcts,
                     char *err, size_t errlen);

/* mkdir -p */
int ld_mkdirs(const char *dir, char *err, size_t errlen);
/* Writes a cJSON document to path (pretty-printed). */
int ld_write_json(const char *path, const cJSON *j, char *err, size_t errlen);
#endif
