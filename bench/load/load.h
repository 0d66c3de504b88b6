/* load.h — the load generator: drives an OpenAI-compatible server
 * (specbed, vLLM, SGLang, llama.cpp) with streaming requests over libcurl
 * multi, measures TTFT / ITL / TPOT / E2E per request, and samples the
 * server's speculative-decoding metrics once per interval.
 *
 * Timing definitions (vLLM bench serve's):
 *   TTFT  send → first SSE event with a non-empty "choices" array, even when
 *         its text is empty (a chat role chunk counts, as in vLLM); text is
 *         collected from text (completions), delta.content and
 *         delta.reasoning_content / delta.reasoning (reasoning models)
 *   ITL   gaps between successive such events (one sample per gap; a chunk
 *         carrying several tokens is one gap). Not comparable across
 *         servers: specbed and vLLM send a speculative step's tokens as one
 *         chunk, llama-server one SSE event per token inside the step
 *   TPOT  (E2E − TTFT) ÷ (output tokens − 1), requests with ≥ 2 tokens:
 *         comparable across servers
 *   E2E   send → the last such event (vLLM's "latency")
 * These are vLLM's definitions (vllm/benchmarks/lib/endpoint_request_func.py):
 * a "chunk" is an event with a non-empty "choices" array, whether or not its
 * text is empty, and E2E ends at the last such chunk.
 * Output tokens: usage.completion_tokens when the server sends usage
 * (stream_options.include_usage is requested), else the tokens counted in
 * logprobs, else one per chunk with text. An interval's client_tps spreads
 * each request's output tokens over the intervals its chunks arrived in
 * (interval.h).
 * --api-key must be printable ASCII without CR/LF (ld_run refuses it
 * otherwise: it is sent as a header). --spec-depth K > 0 against a server
 * whose draft counters did not move is reported (spec_depth_unused).
 *
 * A request succeeds only when its stream ENDS: HTTP 200, no error event,
 * and a finish_reason, a usage chunk or "data: [DONE]" before the server
 * closed it (a stream cut after some tokens is a failed request, "truncated
 * stream"). SSE lines and events are bounded (sse.h: 1 MiB each) and
 * /metrics bodies too (httpc.h: 64 MiB); a scrape that fails is counted
 * (n_scrapes_failed) and `specbed load` exits 1 on any. */
#ifndef SPECBED_BENCH_LOAD_H
#define SPECBED_BENCH_LOAD_H
#include <stdint.h>
#include "interval.h"
#include "load_shape.h"
#include "metrics_src.h"
#include "workload.h"

typedef enum { EP_COMPLETIONS, EP_CHAT } ld_endpoint;

#define LD_DEFAULT_MAX_TOKENS 128   /* a row without max_tokens, when --max-tokens is not given */
/* What one response may send, relative to what it asked for: at most
 * max_tokens + LD_EXTRA_EVENTS SSE events (a token per event at worst, plus a
 * role chunk, a finish chunk, usage, [DONE]) and (max_tokens + LD_EXTRA_EVENTS)
 * × LD_BYTES_PER_TOKEN bytes (20 top logprobs per token fit in a few KiB).
 * A stream past either is abandoned and the request fails, saying which:
 * an endless well-formed stream cannot grow the client. */
#define LD_EXTRA_EVENTS 64
#define LD_BYTES_PER_TOKEN (64u << 10)

struct ld_request;

typedef struct {
    double ttft_ms, tpot_ms, e2el_ms;   /* 0 = no objective on that metric */
} ld_slo;

typedef struct {
    const char *url;             /* server base */
    const char *api_key;         /* NULL = none */
    const char *model;           /* NULL = first id of /v1/models, else "default" */
    ld_endpoint endpoint;
    const workload *wl;          /* borrowed */
    int num_prompts;             /* requests to send; 0 = until the profile / duration ends */
    int max_tokens;              /* 0 = the row's max_tokens, else LD_DEFAULT_MAX_TOKENS */
    double temperature;
    double top_p;                /* nucleus mass sent as "top_p" when < 1 (1 = off, not sent) */
    uint64_t seed;
    int concurrency;             /* closed loop (used when rate == 0 and no profile) */
    double rate, burstiness;     /* open loop when rate > 0 (INFINITY = all at once) */
    int max_concurrency;         /* open-loop cap; 0 = none */
    int use_profile;
    ld_profile profile;
    double duration_s;           /* stop sending after this; 0 = no limit */
    double interval_s;           /* metrics sampling period */
    msrc_kind msrc;              /* MSRC_AUTO detects from /metrics */
    const char *sglang_log;      /* SGLang log file being written, "-" = stdin; NULL = none */
    int spec_depth;              /* -1 = leave the server's default; else sent as "spec_depth" */
    int ignore_eos;
    int logprobs;                /* top logprobs per token to ask for; 0 = none */
    int shuffle;                 /* shuffle the prompt order with seed (default on) */
    int first_item;              /* start the cycle at this item (canary probes) */
    double request_timeout_s;
    int progress;                /* progress line on stderr */
    ld_slo slo;
    double t_origin;             /* http_now() that t = 0 refers to; 0 = the run's own start */
    /* Called as each request completes (not for cancelled ones), t in run
     * seconds; a non-zero return stops the load (the canary's live checks). */
    int (*on_done)(void *ctx, const struct ld_request *q, double t);
    void *on_done_ctx;
    /* Called for each interval row as it is recorded (its client-side
     * fields filled in); a non-zero return stops the load (the canary's
     * --fail-fast). The load generator itself judges nothing. */
    int (*on_interval)(void *ctx, const iv_row *row);
    void *on_interval_ctx;
} ld_config;

void ld_config_defaults(ld_config *c);

typedef struct ld_request {
    int idx;                     /* order of sending */
    int item;                    /* workload row */
    int phase;                   /* profile phase, 0 otherwise */
    double t_send;               /* seconds since t = 0 */
    double t_arrival;            /* when the shape made it due (open loop: its arrival; closed loop: its
                                    phase's start, vLLM's rate-inf arrival); t_send − t_arrival is the
                                    client-side queue time (vLLM's client_queue_time) */
    double ttft, e2el;           /* seconds; NaN when not reached */
    int n_out, n_in;             /* tokens (n_in 0 when the server sent no usage) */
    int ok;
    long http_status;
    char *error;                 /* failed requests: why */
    char *text;                  /* streamed output (text / delta.content) */
    char *reasoning;             /* streamed delta.reasoning_content / delta.reasoning; "" when none */
    char *finish_reason;
    int max_tokens;              /* what the request asked for */
    double *itl;                 /* seconds, [n_itl] */
    int n_itl;
    int inflight_at_send;
} ld_request;

typedef struct {
    ld_request *req;
    int n_req;
    iv_row *iv;
    int n_iv;
    double duration;             /* first send → last completion, seconds */
    double t_first_send;         /* seconds since t = 0 */
    msrc_kind msrc;              /* the source actually used */
    int has_totals;              /* counters from the first and last snapshot */
    mtotals totals;
    char model[256];
    int stopped_early;           /* on_done or on_interval asked to stop */
    int n_scrapes, n_scrapes_failed;   /* /metrics reads attempted for the counter source, and failed */
    char scrape_error[512];      /* the first failure */
    /* --spec-depth 0 sent, yet the server drafted during the run (its draft
     * counters moved, or its decode log printed accept lengths): the server
     * ignores the per-request override, or another client drafted meanwhile. */
    int spec_depth_ignored;
    double ignored_drafts, ignored_draft_tokens;   /* the counter movement (NaN for log sources) */
    /* --spec-depth K > 0 sent, yet nothing drafted: the server's draft
     * counters did not move (1), or nothing can tell (2: no draft counters,
     * no accept lengths) — it may not speculate at all. */
    int spec_depth_unused;
    char note[1600];             /* e.g. why metrics were unavailable */
} ld_result;

/* Runs the load. 0 = it ran (requests may still have failed; see ok);
 * -1 = it could not run (no server, bad config), message in err. */
int  ld_run(const ld_config *c, ld_result **out, char *err, size_t errlen);
void ld_result_free(ld_result *r);
/* 0 when key (NULL = none) can go into an Authorization header: printable
 * ASCII, no CR/LF or other control characters; -1 with a message. */
int  ld_api_key_check(const char *key, char *err, size_t errlen);
#endif
