/* server_http.c — HTTP in front of the scheduler (libmicrohttpd, one thread
 * per connection, so a connection thread may block on its request's output
 * channel). Owns routing, the API key, body size limits, and the two ways a
 * generation is answered: a complete JSON body, or an SSE stream produced
 * by a content-reader callback. A client that disconnects while it waits
 * (seen by peeking at its socket, or by a failed write) has its request
 * cancelled so the scheduler frees its KV pages. Must not touch the batch. */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "http_guard.h"
#include "server_internal.h"

#define WAIT_SLICE_MS 100   /* how often a waiting connection checks its client */

typedef struct {
    char *body;
    size_t n, cap;
    size_t want;          /* Content-Length, when given: the buffer is sized once */
    int counted;          /* a generation response in flight (server.http_active) */
    int answered;         /* refused: the answer is queued or written, what still arrives is dropped */
} conn_state;

/* ---- responses ---- */

/* Takes ownership of body (malloc'd); NULL means out of memory → 500. */
static enum MHD_Result send_body(struct MHD_Connection *c, unsigned status, char *body, const char *ctype) {
    static char oom[] = "{\"error\": {\"message\": \"out of memory\", \"type\": \"server_error\", \"param\": null, "
                        "\"code\": \"internal_error\"}}";
    struct MHD_Response *resp;
    if (body) {
        resp = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    } else {
        status = 500;
        ctype = "application/json";
        resp = MHD_create_response_from_buffer(strlen(oom), oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!resp) { free(body); return MHD_NO; }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 405) MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, POST");
    enum MHD_Result rc = MHD_queue_response(c, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static enum MHD_Result send_error(struct MHD_Connection *c, int status, const char *param, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_body(c, (unsigned)status, srv_error_json(status, msg, param), "application/json");
}

/* The client's side of the connection ended: an error (a reset) or an
 * orderly end of its sending side (recv 0). TCP cannot tell a client that
 * closed entirely (gave up: the common case, and generation should stop) from
 * one that half-closed (shutdown SHUT_WR) and still reads, until we write;
 * like vLLM (uvicorn's http.disconnect), nginx and Go, an end of the request
 * stream while the answer is pending counts as giving up. The plain-answer
 * path then still answers 499 with the reason (a half-closing client reads
 * why; one that left reads nothing), instead of closing with 0 bytes. */
static int client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0) return 1;                        /* orderly end of the client's sending side */
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return 1;
    return 0;
}

static void timed_wait(srv_req *r) {   /* caller holds r->mu */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += WAIT_SLICE_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) { ts.tv_sec++; ts.tv_nsec -= 1000000000L; }
    pthread_cond_timedwait(&r->cv, &r->mu, &ts);
}

/* ---- SSE stream ---- */

enum { PH_HEAD, PH_BODY, PH_USAGE, PH_DONE, PH_END };

typedef struct {
    server *s;
    srv_req *r;
    struct MHD_Connection *c;
    char *pend;
    size_t pend_len, pend_off;
    int phase;
    size_t sent_text;
    int sent_toks;
    srv_cursor cur;
} stream_ctx;

/* Produces the next event into x->pend if one is ready; caller holds r->mu.
 * Returns 1 if it produced or advanced (x->pend may stay NULL when a phase
 * has nothing to say), 0 if the stream must wait, -1 out of memory. */
static int next_event(stream_ctx *x) {
    srv_req *r = x->r;
    server *s = x->s;
    switch (x->phase) {
    case PH_HEAD:
        /* Chat: the role chunk waits for the prompt's prefill (the first
         * token, or the end), as vLLM's serving_chat.py sends it with the
         * engine's first output: `vllm bench serve` takes TTFT at the first
         * chunk, so one sent at once would report the queue, not prefill.
         * A request that fails first gets only the error event, as there. */
        if (r->kind == SRV_CHAT) {
            if (!r->prompt_done) return 0;
            if (!r->err_status && !(x->pend = srv_render_role_chunk(s, r))) return -1;
        } else if (r->echo) {
            if (!r->prompt_done) return 0;
            if (!r->err_status && !(x->pend = srv_render_echo_chunk(s, r, &x->cur))) return -1;
        }
        x->phase = PH_BODY;
        return 1;
    case PH_BODY: {
        if (r->err_status) {
            x->pend = srv_render_error_event(r->err_status, r->err_msg);
            x->phase = PH_DONE;
            return x->pend ? 1 : -1;
        }
        size_t t_end = r->finished ? r->text_len : r->safe_len;
        int k_end = r->finished ? srv_tokens_in_text(r, r->text_len) : x->sent_toks;
        if (!r->finished)
            while (k_end < r->n_toks && r->toks[k_end].off < t_end) k_end++;
        /* x->cur counts characters from the start of the generated text */
        if (r->finished) {
            x->pend = srv_render_chunk(s, r, x->sent_text, t_end, x->sent_toks, k_end, r->finish_reason, &x->cur);
            x->phase = PH_USAGE;
        } else if (t_end > x->sent_text || (r->logprobs >= 0 && k_end > x->sent_toks)) {
            x->pend = srv_render_chunk(s, r, x->sent_text, t_end, x->sent_toks, k_end, NULL, &x->cur);
        } else {
            return 0;
        }
        x->sent_text = t_end;
        x->sent_toks = k_end;
        return x->pend ? 1 : -1;
    }
    case PH_USAGE:
        if (r->include_usage && !(x->pend = srv_render_usage_chunk(s, r))) return -1;
        x->phase = PH_DONE;
        return 1;
    case PH_DONE:
        x->pend = strdup("data: [DONE]\n\n");
        x->phase = PH_END;
        return x->pend ? 1 : -1;
    default:
        return 0;
    }
}

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max) {
    (void)pos;
    stream_ctx *x = cls;
    for (;;) {
        if (x->pend && x->pend_off < x->pend_len) {
            size_t n = x->pend_len - x->pend_off < max ? x->pend_len - x->pend_off : max;
            memcpy(buf, x->pend + x->pend_off, n);
            x->pend_off += n;
            return (ssize_t)n;
        }
        free(x->pend);
        x->pend = NULL;
        x->pend_len = x->pend_off = 0;
        if (x->phase == PH_END) return MHD_CONTENT_READER_END_OF_STREAM;
        pthread_mutex_lock(&x->r->mu);
        int got = next_event(x);
        if (!got) timed_wait(x->r);
        pthread_mutex_unlock(&x->r->mu);
        if (got < 0) {
            srv_cancel(x->s, x->r);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (got) {
            if (x->pend) x->pend_len = strlen(x->pend);
            continue;
        }
        if (client_gone(x->c)) {
            srv_cancel(x->s, x->r);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
}

static void stream_free(void *cls) {
    stream_ctx *x = cls;
    pthread_mutex_lock(&x->r->mu);
    int fin = x->r->finished;
    pthread_mutex_unlock(&x->r->mu);
    if (!fin) srv_cancel(x->s, x->r);   /* the write failed: the client went away */
    srv_req_unref(x->r);
    free(x->pend);
    free(x);
}

/* ---- generation routes ---- */

static enum MHD_Result generate(server *s, struct MHD_Connection *c, srv_kind kind, conn_state *cs) {
    cs->counted = 1;      /* until `completed` runs: shutdown waits for the last bytes */
    atomic_fetch_add(&s->http_active, 1);
    srv_req *r;
    int status;
    const char *param;
    char err[1024];
    int bad = srv_parse_request(s, kind, cs->body ? cs->body : "", cs->n, &r, &status, &param, err, sizeof err);
    free(cs->body);       /* parsed: its memory and its reservation go back now, not at the answer's end */
    cs->body = NULL;
    cs->n = cs->cap = 0;
    http_guard_body_done(s->guard, c);
    if (bad) return send_error(c, status, param, "%s", err);
    if ((status = srv_enqueue(s, r))) {
        srv_req_unref(r);
        return status == 429 ? send_error(c, 429, NULL, "the server's queue is full (%d waiting); retry later",
                                          s->o.max_queue)
                             : send_error(c, status, NULL, "the server is shutting down or its engine failed");
    }
    if (r->stream) {
        stream_ctx *x = calloc(1, sizeof *x);
        if (!x) { srv_cancel(s, r); srv_req_unref(r); return send_body(c, 500, NULL, NULL); }
        *x = (stream_ctx){.s = s, .r = r, .c = c};
        struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, x,
                                                                      stream_free);
        if (!resp) { stream_free(x); return MHD_NO; }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
        enum MHD_Result rc = MHD_queue_response(c, 200, resp);
        MHD_destroy_response(resp);
        return rc;
    }
    int gone = 0;
    pthread_mutex_lock(&r->mu);
    while (!r->finished) {
        timed_wait(r);
        if (!r->finished && !gone && client_gone(c)) {
            gone = 1;
            pthread_mutex_unlock(&r->mu);
            srv_cancel(s, r);
            pthread_mutex_lock(&r->mu);
        }
    }
    char *body = NULL;
    int st = 200;
    if (r->err_status) {
        st = r->err_status == 499 ? 500 : r->err_status;
        body = srv_error_json(st, r->err_msg, NULL);
    } else {
        body = srv_render_final(s, r);
    }
    pthread_mutex_unlock(&r->mu);
    srv_req_unref(r);
    if (gone) {   /* cancelled; a client that only half-closed still learns why */
        free(body);
        return send_error(c, 499, NULL, "the client closed its side of the connection before the answer "
                          "(a full close or shutdown SHUT_WR), which specbed takes as giving up, as vLLM, nginx and Go "
                          "servers do; the request was cancelled. Keep the connection open until the answer arrives");
    }
    return send_body(c, (unsigned)st, body, "application/json");
}

/* GET /v1/models (the list) or, with id, GET /v1/models/{id} (one model,
 * which the openai client's models.retrieve asks for). */
static enum MHD_Result models(server *s, struct MHD_Connection *c, const char *id) {
    if (id && strcmp(id, s->served_name))
        return send_error(c, 404, "model", "the model '%s' does not exist; this server serves '%s'", id, s->served_name);
    cJSON *j = cJSON_CreateObject(), *m;
    if (id) {
        m = j;
    } else {
        cJSON_AddStringToObject(j, "object", "list");
        m = cJSON_CreateObject();
        cJSON_AddItemToArray(cJSON_AddArrayToObject(j, "data"), m);
    }
    cJSON_AddStringToObject(m, "id", s->served_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "specbed");
    cJSON_AddStringToObject(m, "root", s->o.model_dir);
    cJSON_AddNumberToObject(m, "max_model_len", s->e->opts.max_seq_len);
    char *body = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return send_body(c, 200, body, "application/json");
}

static int authorized(server *s, struct MHD_Connection *c) {
    if (!s->o.api_key) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    const char *k = h + 7, *want = s->o.api_key;
    size_t n = strlen(k), w = strlen(want);
    unsigned diff = n != w;   /* compare every byte: no early exit to time */
    for (size_t i = 0; i < w; i++) diff |= (unsigned)(unsigned char)want[i] ^ (unsigned)(unsigned char)(i < n ? k[i] : 0);
    return diff == 0;
}

static enum MHD_Result route(server *s, struct MHD_Connection *c, const char *url, const char *method,
                             conn_state *cs) {
    http_guard_answering(s->guard, c);   /* the whole request is in: no deadline while it is answered */
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/health")) {
        if (!get) return send_error(c, 405, NULL, "%s %s: use GET", method, url);
        if (atomic_load(&s->failed)) return send_error(c, 503, NULL, "the engine failed; see the server log");
        return send_body(c, 200, strdup("{\"status\": \"ok\"}"), "application/json");
    }
    if (!authorized(s, c))
        return send_error(c, 401, NULL, "missing or incorrect API key (send 'Authorization: Bearer KEY')");
    static const struct { const char *url; int post; } routes[] = {
        {"/v1/completions", 1}, {"/v1/chat/completions", 1}, {"/v1/models", 0}, {"/metrics", 0}};
    if (!strncmp(url, "/v1/models/", 11) && url[11]) {
        if (!get) return send_error(c, 405, NULL, "%s %s: use GET", method, url);
        return models(s, c, url + 11);
    }
    int i = 0, n = (int)(sizeof routes / sizeof *routes);
    while (i < n && strcmp(url, routes[i].url)) i++;
    if (i == n) return send_error(c, 404, NULL, "no route %s %s", method, url);
    if (routes[i].post ? !post : !get)
        return send_error(c, 405, NULL, "%s %s: use %s", method, url, routes[i].post ? "POST" : "GET");
    switch (i) {
    case 0: return generate(s, c, SRV_COMPLETION, cs);
    case 1: return generate(s, c, SRV_CHAT, cs);
    case 2: return models(s, c, NULL);
    default: {
        size_t len;
        char *body = srv_metrics_render(&s->m, &len);
        return send_body(c, 200, body, "text/plain; version=0.0.4; charset=utf-8");
    }
    }
}

/* An answer in the middle of a request body. libmicrohttpd (0.9.x) queues
 * a response only before the body is read or once all of it is, so a body
 * that crosses the size limit part-way (a chunked one may never end) would
 * be read to its end before its 413. This one answer is therefore written
 * here, on the connection's socket, from the connection's own thread (no
 * response is queued, so libmicrohttpd writes nothing there), followed by a
 * lingering close: our side ends, and what the client still sends is read
 * and dropped for up to LINGER_MS, so that closing with unread bytes (a TCP
 * reset) does not destroy the answer before the client has read it.
 * Returning MHD_NO then has libmicrohttpd close the connection. A refusal
 * on the headers of a request whose body is on its way takes this path too:
 * libmicrohttpd's own answer would close without reading that body. */
#define LINGER_MS 2000
/* Set by refuse_lingering for mhd_log, which libmicrohttpd calls from the
 * same connection thread right after the handler returns MHD_NO. */
static _Thread_local char refused_why[160];
static _Thread_local int refused_status;

static enum MHD_Result refuse_lingering(struct MHD_Connection *c, int status, const char *msg) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    char *body = srv_error_json(status, msg, NULL);
    if (!ci || !body) { free(body); return MHD_NO; }
    int fd = ci->connect_fd;
    char head[256];
    int hn = snprintf(head, sizeof head, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                      "Connection: close\r\n\r\n", status, MHD_get_reason_phrase_for((unsigned)status), strlen(body));
    const char *parts[2] = {head, body};
    size_t lens[2] = {(size_t)hn, strlen(body)};
    double end = gen_now() + LINGER_MS / 1e3;
    for (int i = 0; i < 2; i++)
        for (size_t off = 0; off < lens[i] && gen_now() < end;) {
            ssize_t k = send(fd, parts[i] + off, lens[i] - off, MSG_NOSIGNAL);
            if (k > 0) { off += (size_t)k; continue; }
            if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { i = 2; break; }
            struct pollfd p = {.fd = fd, .events = POLLOUT};
            poll(&p, 1, 50);
        }
    free(body);
    shutdown(fd, SHUT_WR);
    snprintf(refused_why, sizeof refused_why, "%s", msg);
    refused_status = status;
    char sink[16384];
    for (double now; (now = gen_now()) < end;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        int left = (int)((end - now) * 1e3);
        if (poll(&p, 1, left > 0 ? left : 1) <= 0) break;
        ssize_t k = recv(fd, sink, sizeof sink, 0);
        if (k == 0 || (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) break;
    }
    return MHD_NO;
}

/* Framing that libmicrohttpd lets through but that must not be guessed at:
 * two Content-Length headers that disagree (request smuggling's classic
 * shape), and a transfer coding other than chunked (RFC 9112 §6.1: 501). */
typedef struct { const char *cl; int cl_conflict; const char *te; int n_auth; } framing;

static enum MHD_Result framing_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH)) {
        if (f->cl && strcmp(f->cl, value)) f->cl_conflict = 1;
        f->cl = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING)) {
        f->te = value;
    } else if (!strcasecmp(key, MHD_HTTP_HEADER_AUTHORIZATION)) {
        f->n_auth++;
    }
    return MHD_YES;
}

/* RFC 9110 §9.1: a method is a token (RFC 9110 §5.6.2's tchar). */
static int is_token(const char *m) {
    if (!*m) return 0;
    for (; *m; m++)
        if (!((*m >= 'a' && *m <= 'z') || (*m >= 'A' && *m <= 'Z') || (*m >= '0' && *m <= '9') ||
              strchr("!#$%&'*+-.^_`|~", *m)))
            return 0;
    return 1;
}

/* The first control character (C0 or DEL) in s, or -1. */
static int first_ctl(const char *s) {
    for (int i = 0; s[i]; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return i;
    return -1;
}

/* What the headers alone already refuse, so that an unauthenticated or
 * oversized upload costs the server nothing: the status (0: none) and why. */
static int early_refusal(server *s, struct MHD_Connection *c, const char *method, const char *url, const framing *fr,
                         const char *cl, char *why, size_t n) {
    if (!is_token(method)) {   /* a request line libmicrohttpd let through but no route can mean */
        snprintf(why, n, "malformed request line: the method is not an HTTP token (RFC 9110 section 9.1)");
        return 400;
    }
    int ctl = first_ctl(url);
    if (ctl >= 0) {
        snprintf(why, n, "malformed request target: the path holds a control character or NUL (%%-encoded or not) "
                 "at decoded offset %d", ctl);
        return 400;
    }
    if (fr->n_auth > 1) {   /* which one is meant is a guess, as with two Content-Lengths */
        snprintf(why, n, "%d Authorization headers: send one", fr->n_auth);
        return 400;
    }
    if (fr->cl_conflict) {
        snprintf(why, n, "conflicting Content-Length headers");
        return 400;
    }
    if (fr->te && strcasecmp(fr->te, "chunked") && strcasecmp(fr->te, "identity")) {
        snprintf(why, n, "Transfer-Encoding '%s' is not supported (use chunked or none)", fr->te);
        return 501;
    }
    if (strcmp(url, "/health") && !authorized(s, c)) {
        snprintf(why, n, "missing or incorrect API key (send 'Authorization: Bearer KEY')");
        return 401;
    }
    if (cl && strtoull(cl, NULL, 10) > s->o.max_body) {
        snprintf(why, n, "the request body exceeds %zu bytes", s->o.max_body);
        return 413;
    }
    return 0;
}

/* libmicrohttpd's own %HH decoding, except that a %00 becomes DEL instead
 * of ending the path there: otherwise "/health%00/metrics" would be routed
 * as "/health". The handler refuses any control character in the path. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *uri) {
    (void)cls; (void)c;
    size_t n = MHD_http_unescape(uri);
    for (size_t i = 0; i < n; i++)
        if (!uri[i]) uri[i] = 0x7f;
    return n;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                               const char *version, const char *upload_data, size_t *upload_data_size,
                               void **con_cls) {
    (void)version;
    server *s = cls;
    conn_state *cs = *con_cls;
    if (!cs) {
        if (!(cs = calloc(1, sizeof *cs))) return MHD_NO;
        *con_cls = cs;
        /* Headers are in, the body is not: refuse what would be refused
         * anyway before buffering a byte of it, so an unauthenticated or
         * oversized upload costs the server nothing. (Answering now makes
         * libmicrohttpd close the connection instead of reading the body.) */
        framing fr = {0};
        MHD_get_connection_values(c, MHD_HEADER_KIND, framing_header, &fr);
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        int chunked = fr.te && !strcasecmp(fr.te, "chunked");
        char why[1024];
        int st = early_refusal(s, c, method, url, &fr, cl, why, sizeof why);
        if (!st) {
            /* The body deadline starts, and the body's memory is reserved before
             * a byte of it is kept: its Content-Length, or the limit when chunked. */
            cs->want = cl ? (size_t)strtoull(cl, NULL, 10) : 0;
            st = http_guard_headers(s->guard, c, url, cl ? cs->want : chunked ? s->o.max_body : 0, why, sizeof why);
        }
        if (st) {
            cs->answered = 1;
            /* A body on its way (announced, or chunked) would still be arriving
             * when libmicrohttpd closes after its answer, and closing with
             * unread bytes resets the connection, which can destroy the answer
             * before the client reads it: answer with a lingering close. */
            if ((cl && strtoull(cl, NULL, 10) > 0) || chunked)
                return refuse_lingering(c, st, why);
            return send_error(c, st, NULL, "%s", why);
        }
        return MHD_YES;
    }
    if (cs->answered) {            /* an early answer is queued: drop whatever still arrives */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (cs->n + n > s->o.max_body) {   /* 413 now, not after a body that may never end */
            free(cs->body);
            cs->body = NULL;
            cs->n = cs->cap = 0;
            cs->answered = 1;
            char msg[128];
            snprintf(msg, sizeof msg, "the request body exceeds %zu bytes", s->o.max_body);
            return refuse_lingering(c, 413, msg);
        }
        if (cs->n + n + 1 > cs->cap) {
            size_t cap = cs->cap ? cs->cap : cs->want ? cs->want + 1 : 4096;
            while (cap < cs->n + n + 1) cap *= 2;
            if (cap > s->o.max_body + 1) cap = s->o.max_body + 1;   /* never past what was reserved */
            char *b = realloc(cs->body, cap);
            if (!b) return MHD_NO;
            cs->body = b;
            cs->cap = cap;
        }
        memcpy(cs->body + cs->n, upload_data, n);
        cs->n += n;
        cs->body[cs->n] = 0;
        return MHD_YES;
    }
    return route(s, c, url, method, cs);
}

static void completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    (void)toe;   /* a stream's cancellation is stream_free's */
    server *s = cls;
    conn_state *cs = *con_cls;
    http_guard_request_end(s->guard, c);
    if (cs) {
        if (cs->counted) atomic_fetch_sub(&s->http_active, 1);
        free(cs->body);
        free(cs);
        *con_cls = NULL;
    }
}

/* One fprintf per line: stdio locks the stream per call, so a line written
 * in one call never interleaves with the scheduler's log lines. */
static void mhd_log(void *cls, const char *fmt, va_list ap) {
    server *s = cls;
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    if (refused_why[0] && !strncmp(msg, "Application reported internal error", 35)) {
        /* not an error of ours: the connection refuse_lingering answered is being closed */
        fprintf(s->log, "specbed serve: http: %s: %d sent before the body's end, connection closed\n", refused_why,
                refused_status);
        refused_why[0] = 0;
        fflush(s->log);
        return;
    }
    fprintf(s->log, "specbed serve: http: %s%s", msg, n && msg[n - 1] == '\n' ? "" : "\n");
    fflush(s->log);
}

int srv_http_start(server *s, char *err, size_t errlen) {
    struct sockaddr_in v4 = {0};
    struct sockaddr_in6 v6 = {0};
    const struct sockaddr *sa;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL |
                     MHD_USE_ITC | MHD_USE_ERROR_LOG;
    if (inet_pton(AF_INET, s->o.host, &v4.sin_addr) == 1) {
        v4.sin_family = AF_INET;
        v4.sin_port = htons((uint16_t)s->o.port);
        sa = (const struct sockaddr *)&v4;
    } else if (inet_pton(AF_INET6, s->o.host, &v6.sin6_addr) == 1) {
        v6.sin6_family = AF_INET6;
        v6.sin6_port = htons((uint16_t)s->o.port);
        sa = (const struct sockaddr *)&v6;
        flags |= MHD_USE_IPv6;
    } else {
        snprintf(err, errlen, "--host '%s' is not a numeric IPv4 or IPv6 address", s->o.host);
        return -1;
    }
    /* One thread per connection: the connection limit (ordinary + reserve)
     * bounds the threads, the inactivity timeout frees idle connections, and
     * the guard (http_guard.c) adds total deadlines, eviction of stalled
     * connections, the per-address limit, the /health reserve and the body
     * memory bound, so /health stays reachable under a slow-client flood. */
    http_guard_opts go = {
        .max_connections = s->o.max_connections > 0 ? s->o.max_connections : 512,
        .reserve = s->o.reserve_connections > 0 ? s->o.reserve_connections : 16,
        .per_ip = s->o.max_connections_per_ip > 0 ? s->o.max_connections_per_ip : 128,
        .header_timeout_s = s->o.header_timeout_s > 0 ? s->o.header_timeout_s : 10,
        .body_timeout_s = s->o.body_timeout_s > 0 ? s->o.body_timeout_s : 30,
        .body_memory = s->o.body_memory >= s->o.max_body ? s->o.body_memory : s->o.max_body,
        .log = s->log};
    if (http_guard_create(&s->guard, &go, err, errlen)) return -1;
    s->mhd = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, handler, s, MHD_OPTION_EXTERNAL_LOGGER,
                              mhd_log, s, MHD_OPTION_SOCK_ADDR, sa, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, http_guard_notify, s->guard,
                              MHD_OPTION_CONNECTION_LIMIT, http_guard_mhd_limit(s->guard),
                              MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)(s->o.http_timeout_s > 0 ? s->o.http_timeout_s : 15),
                              MHD_OPTION_UNESCAPE_CALLBACK, unescape, NULL, MHD_OPTION_END);
    if (!s->mhd) {
        snprintf(err, errlen, "cannot listen on %s port %d (in use, or not an address of this machine?)",
                 s->o.host, s->o.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : s->o.port;
    return 0;
}

/* Stops accepting connections; the listening socket is ours to close, but
 * only after MHD_stop_daemon (its threads may still look at it). */
void srv_http_quiesce(server *s) {
    if (s->mhd && s->listen_fd < 0) s->listen_fd = MHD_quiesce_daemon(s->mhd);
}

void srv_http_stop(server *s) {
    /* Every request is finished now, but its last bytes (a stream's usage
     * chunk and [DONE]) may still be on their way: MHD_stop_daemon would
     * cut them off. Give them a few seconds. */
    for (int i = 0; i < 500 && atomic_load(&s->http_active) > 0; i++) usleep(10000);
    if (s->mhd) MHD_stop_daemon(s->mhd);
    s->mhd = NULL;
    http_guard_free(s->guard);   /* after the daemon: every connection has been reported closed */
    s->guard = NULL;
    if (s->listen_fd >= 0) close(s->listen_fd);
    s->listen_fd = -1;
}
