/* srv_client.h — what the server tests need from an HTTP client: one
 * request → status + body, a stream that hangs up early, SSE parsing, and
 * reading one sample from /metrics. libcurl; call sc_init once, then any
 * thread may make requests. */
#ifndef SPECBED_SRV_CLIENT_H
#define SPECBED_SRV_CLIENT_H
#include <stddef.h>

typedef struct {
    long status;     /* 0: no HTTP answer (transport error) */
    char *body;      /* NUL-terminated, malloc'd */
    size_t len;
} sc_resp;

void sc_init(void);
void sc_cleanup(void);
/* body may be NULL (GET); key NULL = no Authorization header. Returns 0 if an answer came. */
int  sc_request(const char *method, const char *url, const char *body, size_t len, const char *key, sc_resp *out);
/* The same, giving up (closing the connection) after timeout_ms. */
int  sc_request_ms(const char *method, const char *url, const char *body, size_t len, const char *key,
                   long timeout_ms, sc_resp *out);
void sc_resp_free(sc_resp *r);
/* For the tests that must send what a well-behaved client cannot (half a
 * request, a stalled body): a TCP connection to 127.0.0.1:port (-1 on
 * failure), and a monotonic clock in seconds to time the answers. */
int    sc_dial(int port);
double sc_now(void);
/* POSTs a streaming request and closes the connection after n_events SSE
 * events. Returns the events seen. */
int  sc_stream_hangup(const char *url, const char *body, const char *key, int n_events);

typedef struct {
    char *text;             /* completions "text" / chat delta "content", concatenated (malloc'd) */
    int n_events;           /* data: events, [DONE] included */
    int done;               /* saw data: [DONE] as the last event */
    int usage_completion;   /* usage.completion_tokens of the usage chunk, -1 if none */
    int usage_chunks;
    int role_chunks;        /* chat: deltas carrying the role */
    int errors;             /* error events */
    int lp_tokens;          /* logprob entries across chunks */
    char finish[16];        /* finish_reason of the chunk that had one */
    int bad_json;           /* events that were not JSON */
} sc_sse;
int  sc_parse_sse(const char *body, sc_sse *out);   /* 0 ok; free out->text */
/* The value of the sample line starting with `series` (name plus labels,
 * e.g. "specbed:request_success_total{finished_reason=\"abort\"}"); NAN if absent. */
double sc_metric(const char *metrics, const char *series);

#endif
