/* prom.h — Prometheus text exposition format (what /metrics returns on
 * specbed, vLLM, SGLang and llama.cpp servers), parsed into samples.
 * Comment lines (# HELP / # TYPE) are skipped; a sample is
 * `name{label="value",...} value [timestamp]`. Lines that do not parse are
 * counted in n_bad and skipped: a server adding an odd line must not blind
 * the load generator to the counters it needs. */
#ifndef SPECBED_BENCH_PROM_H
#define SPECBED_BENCH_PROM_H
#include <stddef.h>

typedef struct {
    char *name;      /* metric name, e.g. vllm:spec_decode_num_drafts_total */
    char *labels;    /* raw text between the braces, "" when none */
    double value;
} prom_sample;

typedef struct {
    prom_sample *s;
    size_t n;
    size_t n_bad;    /* sample lines that did not parse */
} prom_doc;

/* Parses text into *out (caller frees with prom_free). Fails only on out of memory. */
int  prom_parse(const char *text, prom_doc *out, char *err, size_t errlen);
void prom_free(prom_doc *d);

/* Sum of the samples named exactly `name` (all label sets: several vLLM
 * engines or SGLang ranks add up); with lkey, only samples whose label lkey
 * equals lval. *found (may be NULL) gets the number of samples summed. */
double prom_sum(const prom_doc *d, const char *name, const char *lkey, const char *lval, int *found);

/* Value of label `key` in a raw label string (escapes undone) into out.
 * 0 when present, -1 when absent. */
int prom_label(const char *labels, const char *key, char *out, size_t outlen);

/* The rank a sample belongs to, from its rank labels only (engine,
 * dp_rank, tp_rank, pp_rank, attn_tp_rank, rank — vLLM's data-parallel
 * engines, SGLang's schedulers), in the order they appear, e.g.
 * `dp_rank="1",tp_rank="0"` or `engine="0"`; "" when it has none. Other
 * labels (model_name, engine_type, position) are not part of a rank.
 * Returns how many rank labels were found. */
int prom_rank_key(const char *labels, char *out, size_t outlen);

/* 1 when any sample name starts with prefix (e.g. "vllm:"). */
int prom_has_prefix(const prom_doc *d, const char *prefix);
#endif
