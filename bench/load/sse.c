/* sse.c — see sse.h. Framing only; what an event means is load.c's. */
#include "sse.h"
#include <stdlib.h>
#include <string.h>

void sse_init(sse_parser *p, sse_event_cb cb, void *ctx) {
    memset(p, 0, sizeof *p);
    p->cb = cb;
    p->ctx = ctx;
}

const char *sse_error(const sse_parser *p) {
    switch (p->err) {
    case SSE_OOM: return "out of memory reading the SSE stream";
    case SSE_LINE_TOO_LONG: return "an SSE line exceeded 1 MiB (SSE_MAX_LINE) without a line end";
    case SSE_EVENT_TOO_BIG: return "an SSE event exceeded 1 MiB of data (SSE_MAX_EVENT) without a blank line";
    default: return "";
    }
}

static int grow(char **b, size_t *cap, size_t need) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 256;
    while (nc < need) nc *= 2;
    char *nb = realloc(*b, nc);
    if (!nb) return -1;
    *b = nb;
    *cap = nc;
    return 0;
}

static void dispatch(sse_parser *p) {
    if (p->has_data && !p->err) {
        if (grow(&p->data, &p->data_cap, p->data_len + 1)) { p->err = SSE_OOM; return; }
        p->data[p->data_len] = 0;
        p->cb(p->ctx, p->data, p->data_len);
    }
    p->data_len = 0;
    p->has_data = 0;
}

static void end_line(sse_parser *p) {
    char *l = p->line;
    size_t n = p->line_len;
    if (n && l[n - 1] == '\r') n--;
    p->line_len = 0;
    if (n == 0) { dispatch(p); return; }
    if (l[0] == ':') return;
    if (n >= 5 && !memcmp(l, "data:", 5)) {
        size_t off = 5;
        if (off < n && l[off] == ' ') off++;
        size_t add = n - off + (p->has_data ? 1 : 0);
        if (p->data_len + add > SSE_MAX_EVENT) { p->err = SSE_EVENT_TOO_BIG; return; }
        if (grow(&p->data, &p->data_cap, p->data_len + add + 1)) { p->err = SSE_OOM; return; }
        if (p->has_data) p->data[p->data_len++] = '\n';
        memcpy(p->data + p->data_len, l + off, n - off);
        p->data_len += n - off;
        p->has_data = 1;
    }
}

void sse_feed(sse_parser *p, const char *buf, size_t n) {
    for (size_t i = 0; i < n && !p->err; ) {
        const char *nl = memchr(buf + i, '\n', n - i);
        size_t take = nl ? (size_t)(nl - (buf + i)) : n - i;
        /* +1: a CRLF line may carry its '\r' up to the cap */
        if (p->line_len + take > SSE_MAX_LINE + 1) { p->err = SSE_LINE_TOO_LONG; return; }
        if (grow(&p->line, &p->line_cap, p->line_len + take + 1)) { p->err = SSE_OOM; return; }
        memcpy(p->line + p->line_len, buf + i, take);
        p->line_len += take;
        i += take;
        if (nl) { end_line(p); i++; }
    }
}

void sse_finish(sse_parser *p) {
    if (p->err) return;
    if (p->line_len) end_line(p);
    dispatch(p);
}

void sse_free(sse_parser *p) {
    free(p->line);
    free(p->data);
    memset(p, 0, sizeof *p);
}
