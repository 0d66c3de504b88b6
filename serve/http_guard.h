/* http_guard.h — what libmicrohttpd does not do for the server's connection
 * table: total deadlines for a request's headers and body, a per-address
 * limit on requests still being sent, a reserve of connections for /health
 * and /metrics, eviction of stalled connections when the table is full, and
 * a bound on the memory request bodies hold (http_guard.c says why each is
 * here rather than a libmicrohttpd option).
 *
 * A connection moves through three phases: HEADERS (from accept, or from the
 * previous answer on a kept-alive connection), BODY (headers in, body
 * arriving) and ANSWER (request complete, being answered). Only the first
 * two have a deadline and may be evicted.
 *
 * Thread safety: every call may come from any libmicrohttpd thread. */
#ifndef SPECBED_HTTP_GUARD_H
#define SPECBED_HTTP_GUARD_H
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <microhttpd.h>

typedef struct {
    int max_connections;     /* ordinary connections; a newcomer past this evicts a stalled one */
    int reserve;             /* further connections that may only ask for /health or /metrics */
    int per_ip;              /* requests still being sent (HEADERS/BODY) per client address */
    int header_timeout_s;    /* total time for the request line and headers */
    int body_timeout_s;      /* total time for the body, from the end of the headers */
    size_t body_memory;      /* request body bytes reserved at once, all connections together */
    FILE *log;
} http_guard_opts;

typedef struct http_guard http_guard;

/* Starts the deadline thread. 0 ok, -1 with a message. */
int  http_guard_create(http_guard **out, const http_guard_opts *o, char *err, size_t errlen);
/* Call after MHD_stop_daemon (every connection has been reported closed). */
void http_guard_free(http_guard *g);
/* The hard limit to give MHD_OPTION_CONNECTION_LIMIT: ordinary + reserve. */
unsigned http_guard_mhd_limit(const http_guard *g);

/* MHD_OPTION_NOTIFY_CONNECTION callback; cls is the guard. */
void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code);

/* Headers are in (the access handler's first call). body_bytes is what the
 * body may take: its Content-Length, the body limit for a chunked one, 0 for
 * none. Starts the body deadline and reserves body_bytes of the body memory
 * (waiting up to a second for stalled bodies to be evicted). Returns 0, or
 * 503 with a message in err: the connection came in on the reserve and url
 * is neither /health nor /metrics, or the body memory is taken. */
int  http_guard_headers(http_guard *g, struct MHD_Connection *c, const char *url, size_t body_bytes,
                        char *err, size_t errlen);
/* The whole request is in: no deadline, no eviction, until it is answered. */
void http_guard_answering(http_guard *g, struct MHD_Connection *c);
/* The body was freed (parsed): its reservation goes back. Idempotent. */
void http_guard_body_done(http_guard *g, struct MHD_Connection *c);
/* The request is over (MHD_OPTION_NOTIFY_COMPLETED): the body's reservation
 * goes back, and a kept-alive connection waits for its next request's
 * headers under a new header deadline. */
void http_guard_request_end(http_guard *g, struct MHD_Connection *c);

#endif
