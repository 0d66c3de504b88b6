/* metrics_sglang.h — SGLang's per-interval truth: the scheduler's
 * "Decode batch" log line, printed every --decode-log-interval decode steps.
 * Both generations are understood:
 *   [2025-02-27 04:37:29 TP0] Decode batch. #running-req: 8, #token: 67724, token usage: 0.13,
 *        [accept len: 1.68, ][cuda graph: True, ]gen throughput (token/s): 183.54, #queue-req: 0[, ]
 *   [2026-07-04 05:01:33 TP0] Decode batch[ [1234]], #running-req: 40, #token: N, token usage: U,
 *        accept len: 3.13, accept rate: 0.71, cuda graph: True, gen throughput (token/s): X, #queue-req: Q
 * with hybrid-model token fields in place of #token / token usage
 * (#full token, full token usage, #swa token, swa token usage, mamba num,
 * mamba usage), PD-disaggregation fields, and lines with or without the
 * timestamp prefix, wherever the logging config puts it: "[2025-02-27
 * 04:37:29 TP0]", "[11-29 18:00:00 DP0 TP0]", "[… ,123]", "INFO 11-29
 * 18:00:00 [file.py:1]", behind a Ray "(SchedulerActor pid=123) " prefix or
 * ANSI colours. specbed serve prints the same shape on stderr.
 * Each DP/TP scheduler prints its own lines; the prefix's "DP1 TP0 EP0"
 * names the rank, which the row carries (iv_row.rank[0]) so that a flagged
 * line names its rank.
 * Fields this parser does not know are ignored, so a new field never breaks it. */
#ifndef SPECBED_BENCH_METRICS_SGLANG_H
#define SPECBED_BENCH_METRICS_SGLANG_H
#include <stddef.h>
#include "interval.h"

typedef struct {
    int new_format;          /* "Decode batch," (1) or "Decode batch." (0) */
    int has_ts;              /* a timestamp was found before "Decode batch" */
    double ts;               /* its time, seconds (UTC reading of the printed fields; year 2000 when none is printed) */
    double running, tokens, token_usage, accept_len, accept_rate, gen_tps, queue;   /* NaN when absent */
    char rank[IV_RANK_LABEL];  /* the scheduler that printed it, from the prefix: "DP1 TP0" ("" when none) */
} sgl_line;

/* 1 when line is a Decode batch line (out filled), 0 otherwise. */
int sgl_parse_line(const char *line, sgl_line *out);

/* Reads a log that may still be growing (a file, or "-" for stdin),
 * without blocking: each poll consumes the complete lines written since the
 * last one. */
typedef struct sgl_tail sgl_tail;
/* from_end: skip what the file holds now (live runs); 0 = read from the start. */
int  sgl_tail_open(sgl_tail **out, const char *path, int from_end, char *err, size_t errlen);
/* Calls cb for each Decode batch line read. now = the caller's clock (run
 * seconds), used as the row's end time when live (timestamps have 1 s
 * resolution); offline rows use the line's own timestamp relative to the
 * first one, or the line index when lines have none.
 * Returns the number of rows delivered, -1 on a read error. */
int  sgl_tail_poll(sgl_tail *t, int live, double now, void (*cb)(void *ctx, const iv_row *r), void *ctx);
int  sgl_tail_eof(const sgl_tail *t);   /* the last poll hit end of file (offline scans stop here) */
void sgl_tail_close(sgl_tail *t);
#endif
