/* http_guard.c — the connection table's defences that libmicrohttpd does not
 * have (http_guard.h lists them). Why each is here and not an MHD option:
 *
 * - MHD_OPTION_CONNECTION_TIMEOUT (kept: --http-timeout) is an idle timer:
 *   a client that sends one byte per period keeps its connection forever.
 *   The deadlines here are totals, as nginx's client_header_timeout is for
 *   the headers (a timer set once per request, ngx_http_request.c); for the
 *   body a total too (nginx's client_body_timeout is between reads, which a
 *   trickle defeats; Apache's mod_reqtimeout body= is the total form).
 * - MHD_OPTION_CONNECTION_LIMIT and MHD_OPTION_PER_IP_CONNECTION_LIMIT
 *   refuse the NEWCOMER at accept(), before its URL is known. A table (or an
 *   address's share) full of stalled clients then refuses everyone else,
 *   /health probes included; and the per-IP count includes requests being
 *   answered, so a benchmark from one host at a concurrency above it would
 *   be refused. Here a newcomer instead closes the oldest connection that has
 *   been sending its request for STALL_S or more (nginx does this to idle
 *   keep-alive connections when it runs out: ngx_drain_connections in
 *   src/core/ngx_connection.c), the per-address limit counts only requests
 *   still being sent, and when nothing can be evicted a newcomer gets one of
 *   the reserve slots, which answer only /health and /metrics. The MHD
 *   connection limit stays, at ordinary + reserve, as the hard cap on
 *   connection threads. Nothing is refused at accept here: a client from
 *   the probes' own address is indistinguishable from them there, and a
 *   refused client that reconnects at once would win every freed slot.
 *   What this cannot stop is a client holding more sockets than the hard
 *   limit and reconnecting as fast as it is closed: that is a connection
 *   flood for the firewall (e.g. iptables connlimit), as for any server.
 * - libmicrohttpd bounds its own per-connection buffer (32 KiB by default),
 *   not what the application keeps; the body memory budget is here.
 *
 * Closing a connection from outside its thread: shutdown(2) of its socket,
 * under the guard's mutex. libmicrohttpd reports MHD_CONNECTION_NOTIFY_CLOSED
 * (which unlinks the slot under the same mutex) before it closes the
 * descriptor (daemon.c, MHD_cleanup_connections), so a shut-down descriptor
 * is never one reused by a newer connection. The connection's thread then
 * reads end of file and closes it as a client abort; the client sees a
 * close without an answer, as nginx's header timeout gives. */
#include "http_guard.h"
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "errmsg.h"

#define STALL_S 1.0           /* a request still being sent after this long may be evicted */
#define TICK_MS 200           /* how often deadlines are checked */
#define BODY_WAIT_S 1.0       /* how long a body waits for evicted bodies' memory */
#define LOG_EVERY_S 10.0      /* at most one summary line this often */

enum { PH_HEADERS, PH_BODY, PH_ANSWER };
enum { CUT_HEADER, CUT_BODY, CUT_EVICT, CUT_N };

typedef struct gslot {
    struct gslot *prev, *next;
    int fd;
    int family;
    unsigned char addr[16];
    double since;             /* start of the current phase */
    double deadline;          /* HEADERS/BODY: cut after this */
    int phase;
    int cut;                  /* shut down: on its way out, counts for nothing */
    int reserve;              /* admitted on the reserve: /health and /metrics only */
    size_t body;              /* body memory reserved */
} gslot;

struct http_guard {
    http_guard_opts o;
    pthread_mutex_t mu;
    pthread_cond_t tick_cv, body_cv;
    gslot *head;
    size_t body_used;
    long cuts[CUT_N], refused_reserve, refused_body;
    long logged[CUT_N + 2];
    double last_log;
    int stop;
    pthread_t th;
};

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void deadline_ts(struct timespec *ts, double secs) {
    clock_gettime(CLOCK_MONOTONIC, ts);
    long ns = ts->tv_nsec + (long)(secs * 1e9);
    ts->tv_sec += ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
}

static int same_addr(const gslot *a, const gslot *b) {
    return a->family == b->family && !memcmp(a->addr, b->addr, sizeof a->addr);
}

static int evictable(const gslot *p, double now) {
    return !p->cut && p->phase != PH_ANSWER && now - p->since >= STALL_S;
}

static void cut(http_guard *g, gslot *p, int why) {   /* caller holds g->mu */
    if (p->fd >= 0) shutdown(p->fd, SHUT_RDWR);
    p->cut = 1;
    g->cuts[why]++;
}

static void release_body(http_guard *g, gslot *p) {   /* caller holds g->mu */
    if (!p->body) return;
    g->body_used -= p->body;
    p->body = 0;
    pthread_cond_broadcast(&g->body_cv);
}

/* The oldest evictable slot (other than skip), optionally of p's address, or NULL. */
static gslot *oldest(http_guard *g, const gslot *addr_of, const gslot *skip, int body_only, double now) {
    gslot *best = NULL;
    for (gslot *p = g->head; p; p = p->next) {
        if (p == skip || !evictable(p, now)) continue;
        if (addr_of && !same_addr(p, addr_of)) continue;
        if (body_only && (p->phase != PH_BODY || !p->body)) continue;
        if (!best || p->since < best->since) best = p;
    }
    return best;
}

/* A new connection s (not yet linked): make room for it. */
static void admit(http_guard *g, gslot *s, double now) {
    int same = 0, ordinary = 0;
    for (gslot *p = g->head; p; p = p->next) {
        if (p->cut) continue;
        ordinary += !p->reserve;
        same += p->phase != PH_ANSWER && same_addr(p, s);
    }
    gslot *v;
    if (same >= g->o.per_ip && (v = oldest(g, s, NULL, 0, now))) {
        ordinary -= !v->reserve;
        cut(g, v, CUT_EVICT);
    }
    if (ordinary >= g->o.max_connections) {
        if ((v = oldest(g, NULL, NULL, 0, now))) cut(g, v, CUT_EVICT);
        else s->reserve = 1;
    }
}

void http_guard_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                       enum MHD_ConnectionNotificationCode code) {
    http_guard *g = cls;
    if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        gslot *s = *socket_context;
        if (!s) return;
        pthread_mutex_lock(&g->mu);
        release_body(g, s);
        if (s->prev) s->prev->next = s->next;
        else g->head = s->next;
        if (s->next) s->next->prev = s->prev;
        pthread_mutex_unlock(&g->mu);
        free(s);
        *socket_context = NULL;
        return;
    }
    gslot *s = calloc(1, sizeof *s);
    *socket_context = s;
    if (!s) return;   /* untracked: only the idle timeout applies to it */
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    s->fd = ci ? ci->connect_fd : -1;
    ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET) {
        s->family = AF_INET;
        memcpy(s->addr, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, 4);
    } else if (sa && sa->sa_family == AF_INET6) {
        s->family = AF_INET6;
        memcpy(s->addr, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, 16);
    }
    double now = now_s();
    s->phase = PH_HEADERS;
    s->since = now;
    s->deadline = now + g->o.header_timeout_s;
    pthread_mutex_lock(&g->mu);
    admit(g, s, now);
    s->next = g->head;
    if (g->head) g->head->prev = s;
    g->head = s;
    pthread_mutex_unlock(&g->mu);
}

static gslot *slot_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

int http_guard_headers(http_guard *g, struct MHD_Connection *c, const char *url, size_t body_bytes,
                       char *err, size_t errlen) {
    gslot *s = slot_of(c);
    if (!s) return 0;
    pthread_mutex_lock(&g->mu);
    double now = now_s();
    s->phase = PH_BODY;
    s->since = now;
    s->deadline = now + g->o.body_timeout_s;
    if (s->reserve && strcmp(url, "/health") && strcmp(url, "/metrics")) {
        /* A real request on the reserve takes an ordinary slot: a free one,
         * or a stalled one's, waiting up to STALL_S + a tick for the fresh
         * connections that filled the table to become evictable. */
        struct timespec ts;
        double until = now + STALL_S + TICK_MS / 1e3;
        while (s->reserve && !s->cut && !g->stop) {
            int ordinary = 0;
            for (gslot *p = g->head; p; p = p->next) ordinary += !p->cut && !p->reserve;
            gslot *v = ordinary < g->o.max_connections ? NULL : oldest(g, NULL, s, 0, now_s());
            if (ordinary < g->o.max_connections || v) {
                if (v) cut(g, v, CUT_EVICT);
                s->reserve = 0;
                break;
            }
            if (now_s() >= until) break;
            deadline_ts(&ts, 0.05);
            pthread_cond_timedwait(&g->body_cv, &g->mu, &ts);
        }
        if (s->reserve) {
            g->refused_reserve++;
            pthread_mutex_unlock(&g->mu);
            errf(err, errlen, "all %d connection slots hold requests being answered; until one frees, only "
                 "/health and /metrics are served; retry later", g->o.max_connections);
            return 503;
        }
        now = now_s();
        s->since = now;
        s->deadline = now + g->o.body_timeout_s;
    }
    if (body_bytes && g->body_used + body_bytes > g->o.body_memory) {
        /* Bodies that stalled give way, oldest first; their memory comes
         * back when their threads close them. */
        size_t need = g->body_used + body_bytes - g->o.body_memory, freeing = 0;
        gslot *v;
        while (freeing < need && (v = oldest(g, NULL, s, 1, now))) {
            freeing += v->body;
            cut(g, v, CUT_EVICT);
        }
        struct timespec ts;
        deadline_ts(&ts, BODY_WAIT_S);
        while (g->body_used + body_bytes > g->o.body_memory && !s->cut && !g->stop)
            if (pthread_cond_timedwait(&g->body_cv, &g->mu, &ts) == ETIMEDOUT) break;
    }
    if (body_bytes && g->body_used + body_bytes > g->o.body_memory) {
        g->refused_body++;
        pthread_mutex_unlock(&g->mu);
        errf(err, errlen, "request bodies being received hold all of the server's %zu MiB for them; retry later",
             g->o.body_memory >> 20);
        return 503;
    }
    g->body_used += body_bytes;
    s->body = body_bytes;
    pthread_mutex_unlock(&g->mu);
    return 0;
}

void http_guard_answering(http_guard *g, struct MHD_Connection *c) {
    gslot *s = slot_of(c);
    if (!s) return;
    pthread_mutex_lock(&g->mu);
    s->phase = PH_ANSWER;
    pthread_mutex_unlock(&g->mu);
}

void http_guard_body_done(http_guard *g, struct MHD_Connection *c) {
    gslot *s = slot_of(c);
    if (!s) return;
    pthread_mutex_lock(&g->mu);
    release_body(g, s);
    pthread_mutex_unlock(&g->mu);
}

void http_guard_request_end(http_guard *g, struct MHD_Connection *c) {
    gslot *s = slot_of(c);
    if (!s) return;
    pthread_mutex_lock(&g->mu);
    release_body(g, s);
    double now = now_s();
    s->phase = PH_HEADERS;
    s->since = now;
    s->deadline = now + g->o.header_timeout_s;
    pthread_mutex_unlock(&g->mu);
}

static int by_addr_age(const void *a, const void *b) {
    const gslot *x = *(gslot *const *)a, *y = *(gslot *const *)b;
    if (x->family != y->family) return x->family < y->family ? -1 : 1;
    int c = memcmp(x->addr, y->addr, sizeof x->addr);
    if (c) return c;
    return x->since < y->since ? -1 : x->since > y->since;
}

/* Deadlines, and each address back within its share (a burst of fresh
 * connections is let in over it until they have had STALL_S to send). */
static void sweep(http_guard *g, gslot ***arr, size_t *cap) {
    double now = now_s();
    size_t n = 0;
    for (gslot *p = g->head; p; p = p->next) {
        if (p->cut || p->phase == PH_ANSWER) continue;
        if (now >= p->deadline) {
            cut(g, p, p->phase == PH_HEADERS ? CUT_HEADER : CUT_BODY);
            continue;
        }
        if (n == *cap) {
            size_t nc = *cap ? *cap * 2 : 256;
            gslot **a = realloc(*arr, nc * sizeof *a);
            if (!a) return;
            *arr = a;
            *cap = nc;
        }
        (*arr)[n++] = p;
    }
    if (n > 1) qsort(*arr, n, sizeof **arr, by_addr_age);
    for (size_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && same_addr((*arr)[i], (*arr)[j]); j++) {}
        size_t over = j - i > (size_t)g->o.per_ip ? j - i - (size_t)g->o.per_ip : 0;
        for (size_t k = i; k < j && over; k++)
            if (evictable((*arr)[k], now)) { cut(g, (*arr)[k], CUT_EVICT); over--; }
    }
}

/* One line, at most every LOG_EVERY_S, when connections were closed or refused. */
static void maybe_log(http_guard *g) {
    long now_c[CUT_N + 2] = {g->cuts[CUT_HEADER], g->cuts[CUT_BODY], g->cuts[CUT_EVICT], g->refused_reserve,
                             g->refused_body};
    double now = now_s();
    if (!memcmp(now_c, g->logged, sizeof now_c) || now - g->last_log < LOG_EVERY_S || !g->o.log) return;
    fprintf(g->o.log, "specbed serve: http: closed %ld connections past the %d s header deadline, %ld past the %d s "
            "body deadline, %ld stalled ones evicted for newer ones; refused %ld on the reserve, %ld for body "
            "memory (totals since start)\n", now_c[0], g->o.header_timeout_s, now_c[1], g->o.body_timeout_s,
            now_c[2], now_c[3], now_c[4]);
    fflush(g->o.log);
    memcpy(g->logged, now_c, sizeof now_c);
    g->last_log = now;
}

static void *guard_main(void *arg) {
    http_guard *g = arg;
    gslot **arr = NULL;
    size_t cap = 0;
    pthread_mutex_lock(&g->mu);
    while (!g->stop) {
        struct timespec ts;
        deadline_ts(&ts, TICK_MS / 1e3);
        pthread_cond_timedwait(&g->tick_cv, &g->mu, &ts);
        if (g->stop) break;
        sweep(g, &arr, &cap);
        maybe_log(g);
    }
    pthread_mutex_unlock(&g->mu);
    free(arr);
    return NULL;
}

int http_guard_create(http_guard **out, const http_guard_opts *o, char *err, size_t errlen) {
    *out = NULL;
    if (o->max_connections < 1 || o->reserve < 1 || o->per_ip < 1 || o->header_timeout_s < 1 || o->body_timeout_s < 1
        || !o->body_memory)
        return errf(err, errlen, "connection limits, reserve, per-address limit, deadlines and body memory must "
                    "all be positive");
    http_guard *g = calloc(1, sizeof *g);
    if (!g) return errf(err, errlen, "out of memory");
    g->o = *o;
    g->last_log = -LOG_EVERY_S;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&g->mu, NULL);
    pthread_cond_init(&g->tick_cv, &ca);
    pthread_cond_init(&g->body_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&g->th, NULL, guard_main, g)) {
        pthread_cond_destroy(&g->tick_cv);
        pthread_cond_destroy(&g->body_cv);
        pthread_mutex_destroy(&g->mu);
        free(g);
        return errf(err, errlen, "cannot start the connection deadline thread");
    }
    *out = g;
    return 0;
}

unsigned http_guard_mhd_limit(const http_guard *g) {
    return (unsigned)g->o.max_connections + (unsigned)g->o.reserve;
}

void http_guard_free(http_guard *g) {
    if (!g) return;
    pthread_mutex_lock(&g->mu);
    g->stop = 1;
    pthread_cond_broadcast(&g->tick_cv);
    pthread_cond_broadcast(&g->body_cv);
    pthread_mutex_unlock(&g->mu);
    pthread_join(g->th, NULL);
    while (g->head) {   /* none after MHD_stop_daemon; freed in case */
        gslot *p = g->head;
        g->head = p->next;
        free(p);
    }
    pthread_cond_destroy(&g->tick_cv);
    pthread_cond_destroy(&g->body_cv);
    pthread_mutex_destroy(&g->mu);
    free(g);
}
