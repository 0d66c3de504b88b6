/* server.h — the OpenAI-compatible HTTP server (DESIGN §7), as a library so
 * that `specbed serve` and the server tests run the same code.
 *
 * server_create loads the target and drafter, starts ONE scheduler thread
 * that owns the continuous-batching spec_batch, and starts libmicrohttpd
 * (one thread per connection) in front of it. Requests reach the scheduler
 * through a mutex+condvar queue and come back through a per-request output
 * channel. server_shutdown stops accepting, lets running requests finish
 * for up to drain_s seconds, cancels the rest, and joins every thread.
 *
 * Ownership: the server owns the engine, drafter, batch, threads and every
 * request; options strings are borrowed and must outlive the server. */
#ifndef SPECBED_SERVER_H
#define SPECBED_SERVER_H
#include <stddef.h>
#include <stdio.h>
#include "drafters.h"
#include "spec_batch.h"
#include "verify_policy.h"

typedef struct {
    const char *model_dir;
    const char *served_name;     /* /v1/models id; NULL = basename of model_dir */
    drafter_opts dr;             /* name none|ngram|draft|…; max_seqs is set from max_running */
    int depth;                   /* default drafts per step (requests may override with spec_depth) */
    vpolicy_args verify;         /* --verify-schedule, --p-min, --adaptive-alpha, --cost-table */
    const char *host;            /* numeric IPv4/IPv6 address, default 127.0.0.1 */
    int port;                    /* 0 = any free port (see server_port) */
    int max_running;             /* requests in the batch at once (gen_engine max_seqs) */
    int max_queue;               /* waiting requests beyond which new ones get 429 */
    int max_seq_len;             /* context per request; 0 = the engine default */
    int decode_log_interval;     /* decode steps per "Decode batch" log line; 0 = off */
    const char *api_key;         /* NULL = no auth */
    size_t max_body;             /* request bodies larger than this get 413 */
    int max_connections;         /* open connections beyond which new ones are refused */
    int http_timeout_s;          /* a connection idle this long (headers or body) is closed */
    int header_timeout_s;        /* total time for a request's line and headers (serve/http_guard.h) */
    int body_timeout_s;          /* total time for its body, from the end of the headers */
    int max_connections_per_ip;  /* requests still being sent, per client address */
    int reserve_connections;     /* connections past max_connections, for /health and /metrics only */
    size_t body_memory;          /* request body bytes held at once, all connections together */
    int fault_on;                /* fault injection (canary validation) */
    spec_fault fault;
    double drain_s;              /* shutdown: how long running requests may finish */
    FILE *log;                   /* startup and decode-batch lines; NULL = stderr */
    struct kb_comm *comm;        /* tensor parallelism: rank 0's communicator; NULL = one process */
} server_opts;

/* Fills the defaults: host 127.0.0.1, port 8000, depth 4, max_running 16,
 * max_queue 256, decode_log_interval 40, max_body 4 MiB, max_connections 512,
 * http_timeout_s 15, header_timeout_s 10, body_timeout_s 30, max_connections_per_ip 128,
 * reserve_connections 16, body_memory 64 MiB, drain_s 10,
 * verify policy VPOLICY_ARGS_DEFAULT. */
void server_opts_default(server_opts *o);

/* The strings the server puts on the wire, checked before anything loads
 * (server_create checks them too): the API key must be sendable as an
 * Authorization header value (no control character, no leading or trailing
 * blank, which HTTP strips), and the served model name (served_name, or
 * the model directory's name) non-empty, UTF-8, under 256 bytes and free
 * of control characters, since it is an id in every answer. */
int  server_opts_check(const server_opts *o, char *err, size_t errlen);

typedef struct server server;

int  server_create(server **out, const server_opts *o, char *err, size_t errlen);
/* The engine options server_create uses for o: ranks > 0 of a tensor-
 * parallel server create their engine from the same (engine.h
 * gen_engine_serve), so every rank has the same KV pool and batch size. */
gen_engine_opts server_engine_opts(const server_opts *o);
int  server_port(const server *s);            /* the bound port (useful with port 0) */
/* Non-zero once the engine failed (every request then gets 500/503); the
 * CLI exits with status 1 when it sees this. */
int  server_failed(const server *s);
void server_shutdown(server *s);              /* idempotent */
void server_free(server *s);                  /* shuts down first if needed */

#endif
