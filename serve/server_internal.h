/* server_internal.h — what the serve/ files share: the server context,
 * the request object that travels between an HTTP connection thread and the
 * scheduler thread, metrics and the decode-batch log. Not for use outside
 * serve/.
 *
 * Threads and locks (the whole concurrency story is here):
 * - HTTP connection threads (libmicrohttpd, one per connection) parse a
 *   request, push it on the waiting queue (server.qmu) and then read its
 *   output under srv_req.mu, waiting on srv_req.cv.
 * - ONE scheduler thread owns the spec_batch, the slot→request map and
 *   everything marked "scheduler only"; it writes request output under
 *   srv_req.mu and signals srv_req.cv.
 * - metrics has its own lock; /metrics renders from the scheduler's
 *   snapshot, never from the batch or drafter directly.
 * A request is reference counted: one reference for the connection, one
 * while the scheduler holds it. */
#ifndef SPECBED_SERVER_INTERNAL_H
#define SPECBED_SERVER_INTERNAL_H
#include <pthread.h>
#include <stdatomic.h>
#include "server.h"
#include "stop_match.h"
#include "verify_policy.h"

#define SRV_MAX_STOP STOP_MAX_STRINGS
#define SRV_MAX_TOP 20

typedef enum { SRV_COMPLETION = 0, SRV_CHAT = 1 } srv_kind;

typedef struct {
    int id;
    float lp;            /* logprob of the token under the target (raw logits) */
    size_t off;          /* byte offset in srv_req.text where its text begins */
} srv_tok;

typedef struct srv_req {
    /* ---- set by the HTTP side before queueing, read-only afterwards ---- */
    srv_kind kind;
    char id[48];
    long created;                 /* unix seconds */
    int stream, include_usage, echo;
    int logprobs;                 /* top-k alternatives per token; -1 = no logprobs */
    int max_tokens;               /* as asked (0 only with echo: prompt scoring) */
    spec_req_params p;            /* what the batch gets */
    int *prompt;                  /* [n_prompt] */
    int n_prompt;
    char *prompt_text;            /* echo text */
    size_t prompt_len;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    double t_arrival;             /* gen_now() when parsed */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int refs;                     /* under mu */
    atomic_int cancelled;         /* the client went away */

    /* ---- output: written by the scheduler under mu ---- */
    char *text;                   /* generated text (specials skipped, stop strings cut) */
    size_t text_len, text_cap;
    size_t safe_len;              /* text that can no longer turn into a stop string */
    srv_tok *toks;                /* [n_toks] tokens that produced text or logprobs */
    int n_toks, toks_cap;
    int *top_ids;                 /* [toks_cap, logprobs] */
    float *top_lps;
    float *plp;                   /* echo+logprobs: [n_prompt] logprob of prompt token i (i ≥ 1) */
    int *ptop_ids;                /* [n_prompt, logprobs] alternatives for prompt token i */
    float *ptop_lps;
    int prompt_done;              /* prompt logprobs complete */
    int n_gen;                    /* completion tokens (usage) */
    int finished;                 /* output complete (also on error) */
    const char *finish_reason;    /* "stop" | "length" */
    int err_status;               /* non-zero: finished with an error */
    char err_msg[256];

    /* ---- scheduler only ---- */
    int slot;
    tok_stream ts;
    stop_match stops;             /* the stop strings' matcher, once stop_ready */
    int stop_ready;
    int done;                     /* no more output accepted (stop string hit) */
    int stop_hit;                 /* a stop string cut the text (set under mu): cancel the slot */
    int dirty;                    /* output grew this step: wake the reader after it */
    long last_step;               /* step that last delivered a token (ITL per step) */
    double t_last;
} srv_req;

/* Prometheus histogram with fixed bucket bounds. */
typedef struct {
    const double *le;
    int n;
    long counts[32];
    double sum;
    long count;
} srv_hist;

typedef struct {
    pthread_mutex_t mu;
    /* snapshot refreshed by the scheduler after every step */
    spec_counters dc;
    spec_batch_stats bs;
    int depth;                    /* the server's --depth (0 without a drafter) */
    int running, waiting, pages_used, pages_total;
    long tokens_in_kv;
    int tp;                       /* tensor-parallel ranks (1 = one process) */
    int *tp_pages_used;           /* [tp] each rank's pages in use at the last idle sync (-1 = none yet) */
    /* counters the scheduler adds to */
    long prompt_tokens, generation_tokens;
    long finished[3];             /* stop, length, abort */
    long failed;                  /* requests that ended with an engine error */
    srv_hist ttft, itl, e2e;
} srv_metrics;

typedef struct {
    long steps;                   /* decode steps since the last line */
    double t0;
    spec_counters c0;             /* the batch's spec counters at the interval's start */
    long gen0;
} srv_declog;

struct server {
    server_opts o;
    char served_name[256];
    FILE *log;
    gen_engine *e;
    drafter *d;
    spec_batch *b;
    vpolicy *policy;              /* verify policy, NULL = fixed */
    cost_curve cost;              /* what the policy decides with (confidence/adaptive) */
    int V;
    int im_start, im_end;         /* ChatML tokens, -1 if the tokenizer lacks them */
    int eos[3];                   /* ids that end generation (srv_is_eos) */

    pthread_t loop_thread;
    int loop_started;
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    srv_req **waiting;            /* FIFO [n_wait], capacity max_queue */
    int n_wait;
    srv_req **running;            /* by batch slot [max_running]; scheduler only */
    atomic_int n_running;         /* requests in the batch (read by the queue for 429) */
    int stopping;                 /* no new requests; drain */
    int stop_now;                 /* cancel everything and exit the scheduler */
    atomic_int any_cancel;        /* a running request was cancelled by its client */
    atomic_int failed;
    atomic_long req_counter;
    long step_no;                 /* scheduler only */
    int tp_synced;                /* scheduler only: the other ranks' KV matches since the last step */
    long gen_total;               /* scheduler only: tokens generated */
    srv_declog dl;                /* scheduler only */

    struct MHD_Daemon *mhd;
    struct http_guard *guard;     /* deadlines, eviction, reserve, body memory (http_guard.h) */
    int port;
    int listen_fd;                /* after quiesce: ours to close, -1 otherwise */
    atomic_int http_active;       /* generation responses not yet completely sent */
    int shut;
    srv_metrics m;
};

/* server_req.c: request objects and the output channel */
srv_req *srv_req_new(void);                       /* refs = 1 */
void srv_req_ref(srv_req *r);
void srv_req_unref(srv_req *r);                   /* frees at 0 */
void srv_req_on_token(server *s, srv_req *r, int token, const float *logits);
void srv_req_on_prompt_logits(server *s, srv_req *r, int i, const float *logits);
void srv_req_notify(srv_req *r);                  /* wakes the reader if the step gave r output */
void srv_req_finish(server *s, srv_req *r, const char *reason);   /* reason NULL = keep the stop/ length found */
void srv_req_fail(srv_req *r, int status, const char *msg);
int  srv_is_eos(const server *s, int id);

/* server_openai.c: request JSON → srv_req. On failure *status is the HTTP
 * status (400/404) and err the message, *param the offending field or NULL. */
int  srv_parse_request(server *s, srv_kind kind, const char *body, size_t len, srv_req **out,
                       int *status, const char **param, char *err, size_t errlen);

/* server_chat.c: ChatML rendering of an OpenAI messages array (malloc'd text). */
int  srv_render_chatml(const void *messages_json, char **out, size_t *len, const char **param,
                       char *err, size_t errlen);

/* server_render.c: response bodies (malloc'd NUL-terminated strings; NULL
 * when out of memory). The caller holds r->mu. */
typedef struct { size_t byte, chars; } srv_cursor;   /* text_offset bookkeeping: r->text[0..byte) is chars
                                                        characters after the echoed prompt's */
char *srv_error_json(int status, const char *msg, const char *param);
char *srv_render_final(server *s, srv_req *r);        /* r finished without error */
/* One SSE event "data: {...}\n\n" carrying r->text[t0..t1) and tokens [k0, k1). */
char *srv_render_chunk(server *s, srv_req *r, size_t t0, size_t t1, int k0, int k1, const char *finish,
                       srv_cursor *cur);
char *srv_render_echo_chunk(server *s, srv_req *r, srv_cursor *cur);   /* completions echo: the prompt */
char *srv_render_role_chunk(server *s, srv_req *r);                    /* chat: {"role": "assistant"} */
char *srv_render_usage_chunk(server *s, srv_req *r);
char *srv_render_error_event(int status, const char *msg);
/* Tokens to report when the text ends at text_end (drops those a stop string cut). */
int   srv_tokens_in_text(const srv_req *r, size_t text_end);

/* server_text.c: UTF-8 and stop-string helpers. */
int    srv_utf8_valid(const char *s, size_t n);
size_t srv_utf8_chars(const char *s, size_t n);
/* Token text for logprobs: valid UTF-8 as is, else "bytes:\xNN…" (OpenAI). */
void   srv_token_str(const tokenizer *t, int id, char *buf, size_t cap);
/* A JSON string item holding the n bytes at s, a NUL included (as \u0000):
 * cJSON's strings end at the first NUL, and generated or echoed text may
 * hold one (a token that decodes to 0x00). NULL when out of memory. */
struct cJSON *srv_json_text(const char *s, size_t n);

/* server_metrics.c */
void srv_metrics_init(srv_metrics *m);
void srv_metrics_destroy(srv_metrics *m);
void srv_hist_observe(srv_hist *h, double v);       /* caller holds m->mu */
char *srv_metrics_render(srv_metrics *m, size_t *len);   /* malloc'd Prometheus text */

/* decode_log.c: one SGLang-shaped line per interval of decode steps. */
void srv_declog_reset(srv_declog *l, const server *s);
typedef struct {
    int running;          /* requests in the step */
    long kv_tokens;       /* their KV tokens before the step */
    double usage;         /* KV pages in use / total, before the step */
    int waiting;          /* queue after the step */
} srv_declog_batch;
void srv_declog_step(srv_declog *l, server *s, const srv_declog_batch *bt);

/* sched_loop.c */
void srv_loop_callbacks(server *s, spec_callbacks *cb);   /* the batch's callbacks into the scheduler */
int  srv_loop_start(server *s, char *err, size_t errlen);
/* Queues r (takes a reference). Returns 0, or the HTTP status to answer
 * (429 queue full, 503 shutting down / failed). */
int  srv_enqueue(server *s, srv_req *r);
void srv_cancel(server *s, srv_req *r);            /* the client went away */
void srv_loop_stop(server *s);                     /* drain, cancel, join */

/* server_http.c */
int  srv_http_start(server *s, char *err, size_t errlen);
void srv_http_quiesce(server *s);
void srv_http_stop(server *s);

#endif
