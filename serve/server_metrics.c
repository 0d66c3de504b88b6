/* server_metrics.c — /metrics in Prometheus text format 0.0.4. Counter
 * names follow vLLM's with the specbed: prefix (so tools written for
 * vLLM's spec-decode metrics read ours by swapping the prefix). Renders
 * from the scheduler's snapshot under the metrics lock; never reads the
 * batch or the drafter, which belong to the scheduler thread. */
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"
#include "strbuf.h"

/* vLLM's bucket bounds, extended downward: a CPU model's steps take ms. */
static const double ttft_le[] = {0.001, 0.0025, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5,
                                 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0};
static const double itl_le[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,
                                0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0};
static const double e2e_le[] = {0.01, 0.025, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0,
                                15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

#define NB(a) ((int)(sizeof a / sizeof *a))

void srv_metrics_init(srv_metrics *m) {
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    m->ttft.le = ttft_le; m->ttft.n = NB(ttft_le);
    m->itl.le = itl_le;   m->itl.n = NB(itl_le);
    m->e2e.le = e2e_le;   m->e2e.n = NB(e2e_le);
}

void srv_metrics_destroy(srv_metrics *m) {
    free(m->tp_pages_used);
    m->tp_pages_used = NULL;
    pthread_mutex_destroy(&m->mu);
}

void srv_hist_observe(srv_hist *h, double v) {
    for (int i = 0; i < h->n; i++)
        if (v <= h->le[i]) h->counts[i]++;     /* stored cumulative, as exposed */
    h->sum += v;
    h->count++;
}

static void head(strbuf *b, const char *name, const char *type, const char *help) {
    strbuf_printf(b, "# HELP specbed:%s %s\n# TYPE specbed:%s %s\n", name, help, name, type);
}

static void counter(strbuf *b, const char *name, const char *help, double v) {
    head(b, name, "counter", help);
    strbuf_printf(b, "specbed:%s %.17g\n", name, v);
}

static void gauge(strbuf *b, const char *name, const char *help, double v) {
    head(b, name, "gauge", help);
    strbuf_printf(b, "specbed:%s %.17g\n", name, v);
}

static void hist(strbuf *b, const char *name, const char *help, const srv_hist *h) {
    head(b, name, "histogram", help);
    for (int i = 0; i < h->n; i++) strbuf_printf(b, "specbed:%s_bucket{le=\"%g\"} %ld\n", name, h->le[i], h->counts[i]);
    strbuf_printf(b, "specbed:%s_bucket{le=\"+Inf\"} %ld\n", name, h->count);
    strbuf_printf(b, "specbed:%s_sum %.17g\n", name, h->sum);
    strbuf_printf(b, "specbed:%s_count %ld\n", name, h->count);
}

char *srv_metrics_render(srv_metrics *m, size_t *len) {
    strbuf b = {0};
    pthread_mutex_lock(&m->mu);
    const spec_counters *c = &m->dc;
    gauge(&b, "num_requests_running", "Number of requests in the running batch (prefilling or decoding).", m->running);
    gauge(&b, "num_requests_waiting", "Number of requests waiting to be admitted.", m->waiting);
    gauge(&b, "kv_cache_usage_perc", "KV-cache usage as a fraction of all pages; 1 means 100 percent.",
          m->pages_total ? (double)m->pages_used / m->pages_total : 0.0);
    gauge(&b, "kv_cache_pages_used", "KV-cache pages held by requests.", m->pages_used);
    gauge(&b, "kv_cache_num_pages", "KV-cache pages in the pool.", m->pages_total);
    if (m->tp > 1 && m->tp_pages_used) {
        head(&b, "kv_cache_pages_used_by_rank", "gauge",
             "KV-cache pages in use on each tensor-parallel rank, as of the last time the batch was empty.");
        for (int r = 0; r < m->tp; r++)
            if (m->tp_pages_used[r] >= 0)
                strbuf_printf(&b, "specbed:kv_cache_pages_used_by_rank{rank=\"%d\"} %d\n", r, m->tp_pages_used[r]);
    }
    gauge(&b, "num_tokens_in_kv", "Tokens held in the KV cache by running requests.", (double)m->tokens_in_kv);
    counter(&b, "prompt_tokens_total", "Prefill tokens processed.", (double)m->prompt_tokens);
    counter(&b, "generation_tokens_total", "Generation tokens produced.", (double)m->generation_tokens);
    head(&b, "request_success_total", "counter", "Finished requests by finish reason.");
    static const char *const why[3] = {"stop", "length", "abort"};
    for (int i = 0; i < 3; i++)
        strbuf_printf(&b, "specbed:request_success_total{finished_reason=\"%s\"} %ld\n", why[i], m->finished[i]);
    counter(&b, "request_failure_total", "Requests that ended with an engine error.", (double)m->failed);
    counter(&b, "nonfinite_logits_requests_total",
            "Requests ended with an error because the model produced NaN/Inf logits for them.",
            (double)m->bs.nonfinite);
    counter(&b, "engine_steps_total", "Batched forward steps run.", (double)m->bs.steps);
    counter(&b, "spec_decode_num_drafts_total", "Number of spec decoding drafts (proposals with at least one token).",
            (double)c->drafts);
    counter(&b, "spec_decode_num_draft_tokens_total", "Number of draft tokens verified.", (double)c->drafted_tokens);
    counter(&b, "spec_decode_num_accepted_tokens_total", "Number of draft tokens accepted.", (double)c->accepted_tokens);
    head(&b, "spec_decode_num_accepted_tokens_per_pos_total", "counter",
         "Accepted draft tokens per draft position (0-based).");
    int k = m->depth;
    for (int i = 0; i < SPEC_MAX_DEPTH; i++)
        if (c->drafted_at[i] && i + 1 > k) k = i + 1;
    for (int i = 0; i < k && i < SPEC_MAX_DEPTH; i++)
        strbuf_printf(&b, "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"%d\"} %ld\n", i, c->accepted_at[i]);
    counter(&b, "spec_decode_num_verify_steps_total",
            "Sequence verify steps of requests that speculate (accept length = committed / steps).", (double)c->steps);
    counter(&b, "spec_decode_num_committed_tokens_total", "Tokens committed by those verify steps, bonus included.",
            (double)c->committed_tokens);
    counter(&b, "spec_decode_num_empty_proposals_total", "Proposals in which the drafter had nothing to offer.",
            (double)c->empty_proposals);
    counter(&b, "spec_decode_num_gated_steps_total",
            "Sequence steps the verify policy kept from drafting because drafting would not pay (adaptive with "
            "the drafter's cost); not counted in spec_decode_num_verify_steps_total.",
            (double)c->gated_steps);
    counter(&b, "spec_decode_num_unverified_draft_tokens_total",
            "Draft tokens the drafter computed that the verify policy then did not verify (drafting paid for nothing).",
            (double)c->unverified_tokens);
    counter(&b, "spec_decode_faults_injected_total", "Faults injected by --inject-fault (canary validation).",
            (double)m->bs.faults_injected);
    hist(&b, "time_to_first_token_seconds", "Histogram of time to first token in seconds.", &m->ttft);
    hist(&b, "inter_token_latency_seconds",
         "Histogram of inter-token latency in seconds (one observation per engine step that gave a request tokens).",
         &m->itl);
    hist(&b, "e2e_request_latency_seconds", "Histogram of end-to-end request latency in seconds.", &m->e2e);
    pthread_mutex_unlock(&m->mu);
    return strbuf_take(&b, len);
}
