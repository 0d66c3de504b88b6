/* interval_csv.h — the per-interval CSV (intervals.csv in every load,
 * canary and sweep run directory): written through libcsv's quoting, read
 * back by the canary (offline scans, --calibrate) and the report. Columns:
 * t_start_s,t_end_s,running,waiting,inflight,accept_len,accept_rate,gen_tps,
 * client_tps,drafts,draft_tokens,accepted,line_no,basis,verify_steps[,ranks],pos_0..pos_{K-1}
 * (empty cell = not reported). drafts is the server's drafts counter (vLLM's
 * num_drafts), verify_steps its sequence verify steps (specbed only);
 * accept_len and pos_i are specbed's definitions (metrics_src.h): committed ÷
 * verify steps and accepted at i ÷ verify steps where steps are counted,
 * else 1 + accepted ÷ drafts and accepted at i ÷ drafts. client_tps is
 * output tokens (usage counts) per second, not SSE chunks (interval.h). ranks (only when some row has ranks: SGLang
 * DP/TP, vLLM engines) is LABEL|accept_len|verify_steps|running;… per rank,
 * so that an offline --intervals scan judges rank by rank as the live one. basis says what the server-side numbers of
 * the row describe (iv_basis: step, completion — llama.cpp: requests that
 * finished in the interval —, log, gauge, client). */
#ifndef SPECBED_BENCH_INTERVAL_CSV_H
#define SPECBED_BENCH_INTERVAL_CSV_H
#include <stddef.h>
#include "interval.h"

int iv_csv_write(const char *path, const iv_row *rows, int n, char *err, size_t errlen);
/* *rows is malloc'd (caller frees). */
int iv_csv_read(const char *path, iv_row **rows, int *n, char *err, size_t errlen);
#endif
