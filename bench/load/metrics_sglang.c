/* metrics_sglang.c — see metrics_sglang.h. Parses and tails log text only. */
#include "metrics_sglang.h"
#include "errmsg.h"
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* n decimal digits at p → *v; 0 when they are there. */
static int digits(const char *p, int n, int *v) {
    int x = 0;
    for (int i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        x = 10 * x + (p[i] - '0');
    }
    *v = x;
    return 0;
}

/* A timestamp starting at p: "YYYY-MM-DD HH:MM:SS" (SGLang's default
 * datefmt; 'T' also accepted) or "MM-DD HH:MM:SS" (newer SGLang datefmt,
 * vLLM-style "INFO 11-29 18:00:00"), optionally with ",mmm" / ".mmm".
 * A date without a year is read in 2000 (only differences are used). */
static int ts_at(const char *p, double *ts) {
    int Y = 2000, M, D, h, m, s;
    const char *q = p;
    if (!digits(q, 4, &Y) && q[4] == '-') q += 5;
    else Y = 2000;
    if (digits(q, 2, &M) || q[2] != '-' || digits(q + 3, 2, &D) || (q[5] != ' ' && q[5] != 'T')) return -1;
    q += 6;
    if (digits(q, 2, &h) || q[2] != ':' || digits(q + 3, 2, &m) || q[5] != ':' || digits(q + 6, 2, &s)) return -1;
    if (M < 1 || M > 12 || D < 1 || D > 31 || h > 23 || m > 59 || s > 60) return -1;
    q += 8;
    double frac = 0, scale = 0.1;
    if ((*q == '.' || *q == ',') && q[1] >= '0' && q[1] <= '9')
        for (q++; *q >= '0' && *q <= '9'; q++, scale *= 0.1) frac += (*q - '0') * scale;
    struct tm tm = {.tm_year = Y - 1900, .tm_mon = M - 1, .tm_mday = D, .tm_hour = h, .tm_min = m, .tm_sec = s};
    *ts = (double)timegm(&tm) + frac;
    return 0;
}

/* The line's timestamp, wherever the prefix before "Decode batch" puts it:
 *   [2025-02-27 04:37:29 TP0] Decode batch…            SGLang (prefix " TP0", " DP0 TP0 EP0", …)
 *   [11-29 18:00:00 TP0] Decode batch…                  newer SGLang datefmt
 *   [2026-11-29 18:00:00,123] …  /  INFO 11-29 18:00:00 [scheduler.py:1] …   Python logging / vLLM-style configs
 *   (SchedulerActor pid=123) [2026-11-29 18:00:00 TP0] Decode batch…          Ray actor prefix
 * ANSI colour codes are skipped. -1 when the prefix holds no timestamp. */
static int parse_ts(const char *line, const char *end, double *ts) {
    for (const char *p = line; p < end; p++) {
        if (*p < '0' || *p > '9') continue;
        if (p > line && p[-1] >= '0' && p[-1] <= '9') continue;   /* not the start of a number */
        if (!ts_at(p, ts)) return 0;
    }
    return -1;
}

/* "DP1 TP0 EP0" from the prefix [line, end): every DPn / TPn / PPn / EPn
 * word, in order. */
static void parse_rank(const char *line, const char *end, char *out, size_t outlen) {
    size_t o = 0;
    out[0] = 0;
    for (const char *p = line; p + 2 < end; p++) {
        if (p > line && (isalnum((unsigned char)p[-1]) || p[-1] == '_')) continue;
        if (!((p[0] == 'D' || p[0] == 'T' || p[0] == 'P' || p[0] == 'E') && p[1] == 'P' && isdigit((unsigned char)p[2])))
            continue;
        const char *q = p + 2;
        while (q < end && isdigit((unsigned char)*q)) q++;
        if (q < end && (isalnum((unsigned char)*q) || *q == '_')) continue;
        int w = snprintf(out + o, outlen - o, "%s%.*s", o ? " " : "", (int)(q - p), p);
        if (w < 0 || (size_t)w >= outlen - o) break;
        o += (size_t)w;
        p = q - 1;
    }
}

static double num(const char *v) {
    char *e;
    double x = strtod(v, &e);
    return e == v ? NAN : x;
}

int sgl_parse_line(const char *line, sgl_line *o) {
    const char *p = strstr(line, "Decode batch");
    if (!p) return 0;
    memset(o, 0, sizeof *o);
    o->running = o->tokens = o->token_usage = o->accept_len = o->accept_rate = o->gen_tps = o->queue = NAN;
    o->has_ts = parse_ts(line, p, &o->ts) == 0;
    parse_rank(line, p, o->rank, sizeof o->rank);
    p += strlen("Decode batch");
    if (*p == ' ' && p[1] == '[') {            /* SGLANG_LOG_FORWARD_ITERS: "Decode batch [123]," */
        const char *q = strchr(p, ']');
        if (!q) return 0;
        p = q + 1;
    }
    if (*p == '.') o->new_format = 0;
    else if (*p == ',') o->new_format = 1;
    else return 0;
    p++;
    double full_usage = NAN, swa_usage = NAN, full_tok = NAN;
    int fields = 0;
    /* "key: value" pairs separated by ", " */
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p || *p == '\n' || *p == '\r') break;
        const char *k0 = p;
        const char *colon = strstr(p, ": ");
        if (!colon) break;
        size_t kl = (size_t)(colon - k0);
        const char *v = colon + 2;
        const char *ve = strstr(v, ", ");
        if (!ve) ve = v + strcspn(v, "\r\n");
        char key[64];
        if (kl >= sizeof key) kl = sizeof key - 1;
        memcpy(key, k0, kl);
        key[kl] = 0;
        double x = num(v);
        if (!strcmp(key, "#running-req")) o->running = x, fields++;
        else if (!strcmp(key, "#token")) o->tokens = x;
        else if (!strcmp(key, "token usage")) o->token_usage = x;
        else if (!strcmp(key, "#full token")) full_tok = x;
        else if (!strcmp(key, "full token usage")) full_usage = x;
        else if (!strcmp(key, "swa token usage")) swa_usage = x;
        else if (!strcmp(key, "accept len")) o->accept_len = x;
        else if (!strcmp(key, "accept rate")) o->accept_rate = x;
        else if (!strcmp(key, "gen throughput (token/s)")) o->gen_tps = x, fields++;
        else if (!strcmp(key, "#queue-req")) o->queue = x;
        p = ve;
    }
    /* Hybrid models report per-pool usage; SGLang itself takes the max. */
    if (isnan(o->tokens)) o->tokens = full_tok;
    if (isnan(o->token_usage)) o->token_usage = isnan(swa_usage) ? full_usage : fmax(full_usage, swa_usage);
    return fields > 0;
}

#define SGL_MAX_LINE (1u << 20)   /* 1 MiB: a log line longer than this is dropped */

struct sgl_tail {
    int fd, own, eof;
    char *buf;
    size_t len, cap;
    long line_no, rows;
    int have_first;
    double first_ts, last_end;
};

int sgl_tail_open(sgl_tail **out, const char *path, int from_end, char *err, size_t errlen) {
    *out = NULL;
    sgl_tail *t = calloc(1, sizeof *t);
    if (!t) return errf(err, errlen, "out of memory");
    if (!strcmp(path, "-")) {
        t->fd = 0;
        int fl = fcntl(0, F_GETFL);
        if (fl >= 0) fcntl(0, F_SETFL, fl | O_NONBLOCK);
    } else {
        t->fd = open(path, O_RDONLY);
        if (t->fd < 0) { free(t); return errf(err, errlen, "%s: cannot open SGLang log: %s", path, strerror(errno)); }
        t->own = 1;
        if (from_end) {
            /* Skip what is there, counting its lines so that live rows still
             * carry the file's own line numbers (the evidence names them). */
            char b[65536];
            ssize_t n;
            while ((n = read(t->fd, b, sizeof b)) > 0)
                for (ssize_t i = 0; i < n; i++) t->line_no += b[i] == '\n';
        }
    }
    t->last_end = NAN;
    *out = t;
    return 0;
}

static void handle_line(sgl_tail *t, char *line, int live, double now, void (*cb)(void *, const iv_row *), void *ctx) {
    t->line_no++;
    sgl_line L;
    if (!sgl_parse_line(line, &L)) return;
    iv_row r;
    iv_row_clear(&r);
    double end;
    if (live) end = now;
    else if (L.has_ts) {
        if (!t->have_first) { t->first_ts = L.ts; t->have_first = 1; }
        end = L.ts - t->first_ts;
    } else end = (double)t->rows;
    r.t_start = isnan(t->last_end) ? end : t->last_end;
    r.t_end = end;
    t->last_end = end;
    r.running = L.running;
    r.waiting = L.queue;
    r.accept_len = L.accept_len;
    r.accept_rate = L.accept_rate;
    r.gen_tps = L.gen_tps;
    r.line_no = t->line_no;
    r.basis = IV_BASIS_LOG;
    if (L.rank[0]) {   /* one scheduler's line: the row is that rank's */
        r.n_ranks = 1;
        snprintf(r.rank[0].label, sizeof r.rank[0].label, "%s", L.rank);
        r.rank[0].accept_len = L.accept_len;
        r.rank[0].drafts = NAN;
        r.rank[0].running = L.running;
    }
    t->rows++;
    cb(ctx, &r);
}

int sgl_tail_poll(sgl_tail *t, int live, double now, void (*cb)(void *, const iv_row *), void *ctx) {
    long before = t->rows;
    t->eof = 0;
    for (;;) {
        if (t->cap - t->len < 4096) {
            size_t nc = t->cap ? t->cap * 2 : 65536;
            char *nb = realloc(t->buf, nc);
            if (!nb) return -1;
            t->buf = nb;
            t->cap = nc;
        }
        ssize_t n = read(t->fd, t->buf + t->len, t->cap - t->len - 1);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) { t->eof = 1; break; }
        t->len += (size_t)n;
        t->buf[t->len] = 0;
        char *s = t->buf, *nl;
        while ((nl = memchr(s, '\n', t->len - (size_t)(s - t->buf)))) {
            *nl = 0;
            handle_line(t, s, live, now, cb, ctx);
            s = nl + 1;
        }
        size_t rest = t->len - (size_t)(s - t->buf);
        memmove(t->buf, s, rest);
        t->len = rest;
        /* A line that never ends is not a Decode batch line: keep its
         * start's line count right and drop it rather than grow. */
        if (t->len > SGL_MAX_LINE) t->len = 0;
    }
    /* An offline scan's last line may lack its newline. */
    if (t->eof && !live && t->len) {
        t->buf[t->len] = 0;
        handle_line(t, t->buf, live, now, cb, ctx);
        t->len = 0;
    }
    return (int)(t->rows - before);
}

int sgl_tail_eof(const sgl_tail *t) { return t->eof; }

void sgl_tail_close(sgl_tail *t) {
    if (!t) return;
    if (t->own) close(t->fd);
    free(t->buf);
    free(t);
}
