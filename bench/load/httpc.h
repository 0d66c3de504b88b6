/* httpc.h — the few blocking HTTP calls bench/ makes outside the load
 * loop (health checks, /metrics snapshots, /v1/models, canary probes),
 * through libcurl. Streaming requests under load are load.c's (curl multi).
 * A URL given by the user is a server base ("http://host:port", an
 * optional trailing "/v1" or "/" is dropped); paths are appended to it.
 * Every reply body is bounded by HTTPC_MAX_BODY: a server that never ends
 * one (an endless /metrics) fails the call with a message, it does not
 * grow the client. */
#ifndef SPECBED_BENCH_HTTPC_H
#define SPECBED_BENCH_HTTPC_H
#include <stddef.h>

#define HTTPC_MAX_BODY (64u << 20)   /* 64 MiB: a /metrics body or probe reply (real ones are < 1 MiB) */

/* curl_global_init / cleanup, once per command. */
int  http_init(char *err, size_t errlen);
void http_cleanup(void);

/* Normalises a base URL into out ("http://h:p" without trailing / or /v1). */
void http_base(const char *url, char *out, size_t outlen);

/* GET base+path (Authorization: Bearer api_key when api_key is non-NULL:
 * specbed serve --api-key guards /metrics too). *body (malloc'd,
 * NUL-terminated, caller frees) and *status are set when the server
 * answered; -1 on a transport failure or a body over HTTPC_MAX_BODY
 * (message in err). */
int http_get(const char *base, const char *path, const char *api_key, long timeout_ms, char **body, long *status,
             char *err, size_t errlen);
/* POST a JSON body (Authorization: Bearer api_key when api_key is non-NULL). */
int http_post_json(const char *base, const char *path, const char *api_key, const char *json,
                   long timeout_ms, char **body, long *status, char *err, size_t errlen);

/* Polls GET /health until it answers 200 or timeout_s passes; alive() (may
 * be NULL) is asked between polls whether to keep waiting (a launched
 * server that died). 0 when healthy. */
int http_wait_health(const char *base, double timeout_s, int (*alive)(void *ctx), void *ctx,
                     char *err, size_t errlen);

/* The first model id from GET /v1/models into out; -1 when none. */
int http_first_model(const char *base, const char *api_key, char *out, size_t outlen);

double http_now(void);   /* monotonic seconds */
#endif
