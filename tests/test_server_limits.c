/* label: server */
/* test_server_limits.c — the server against slow and hostile clients, on
 * raw sockets (a well-behaved HTTP client cannot send half a request):
 *   - an upload with a Content-Length over the limit gets 413 at once, and
 *     one without the API key gets 401 at once, before any body is sent
 *     (the server buffered whole bodies before either answer);
 *   - connections that stop half-way through their headers are closed after
 *     the inactivity timeout, and while the connection limit is full of them
 *     (stalled for less than the eviction age) /health on a new connection is
 *     answered at once on a reserve slot (test_server_reserve: the reserve
 *     when every slot is being answered);
 *   - two conflicting Content-Length headers get 400, a transfer coding
 *     other than chunked 501 (one was accepted, the other held forever);
 *     so do a method that is not an HTTP token, a path with a NUL or other
 *     control character (%00 used to end the path: /health%00/metrics was
 *     /health) and two Authorization headers (the first one won);
 *   - a chunked body that crosses the size limit gets 413 as it does, not
 *     after its last chunk (which a hostile client never sends);
 *   - a client that sends its whole request and then half-closes
 *     (shutdown SHUT_WR) gets an answer, not a close with 0 bytes: /health
 *     at once; a pending completion is cancelled (as a client that left)
 *     with a 499 that says why;
 *   - after the flood, /health and a real request are served again. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "server.h"
#include "srv_client.h"
#include "test_util.h"

static int PORT;

static int dial(void) { return sc_dial(PORT); }

/* Reads until the peer closes or `ms` pass; returns bytes read (-1 on timeout with nothing). */
static int read_reply(int fd, char *buf, size_t cap, int ms) {
    size_t n = 0;
    double end = sc_now() + ms / 1e3;
    while (n + 1 < cap) {
        int left = (int)((end - sc_now()) * 1e3);
        if (left <= 0) break;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, left) <= 0) break;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
        if (k <= 0) { buf[n] = 0; return (int)n; }   /* closed */
        n += (size_t)k;
        if (strstr(buf, "\r\n\r\n") && n > 12) {     /* headers in; the error body is small */
            buf[n] = 0;
            if (strstr(buf, "}}")) return (int)n;
        }
    }
    buf[n] = 0;
    return n ? (int)n : -1;
}

/* Sends only headers announcing a body, and expects `status` before any body byte. */
static void early(const char *what, const char *headers, int status) {
    int fd = dial();
    CHECK(fd >= 0);
    if (fd < 0) return;
    CHECK(send(fd, headers, strlen(headers), 0) == (ssize_t)strlen(headers));
    char buf[4096];
    double t0 = sc_now();
    int n = read_reply(fd, buf, sizeof buf, 5000);
    char want[32];
    snprintf(want, sizeof want, "HTTP/1.1 %d", status);
    CHECKF(n > 0 && !strncmp(buf, want, strlen(want)), "%s: got '%.60s'", what, n > 0 ? buf : "(nothing)");
    printf("%s: %d after %.0f ms with no body sent\n", what, status, (sc_now() - t0) * 1e3);
    close(fd);
}

int main(void) {
    sc_init();
    server_opts o;
    server_opts_default(&o);
    o.model_dir = tu_path("tests/fixtures/qwen3-tied");
    o.port = 0;
    o.api_key = "k3y";
    o.max_connections = 8;
    o.http_timeout_s = 3;   /* long enough that the flood is still open when the extra connection comes */
    o.decode_log_interval = 0;
    FILE *log = tmpfile();
    o.log = log;
    char err[1024];
    server *s;
    if (server_create(&s, &o, err, sizeof err)) {
        CHECKF(0, "server_create: %s", err);
        return tu_done("test_server_limits");
    }
    PORT = server_port(s);
    early("Content-Length over the limit",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\n"
          "Content-Length: 4194305\r\n\r\n", 413);
    early("no API key, 4 MB announced",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4000000\r\n\r\n",
          401);
    early("wrong API key",
          "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nContent-Length: 100\r\n\r\n", 401);

    /* framing that must not be guessed at */
    early("two Content-Length headers that disagree",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\nContent-Length: 10\r\n"
          "Content-Length: 40\r\n\r\n", 400);
    early("Transfer-Encoding: gzip",
          "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\nTransfer-Encoding: gzip\r\n\r\n",
          501);
    /* request lines and headers no route can mean: refused, not guessed */
    early("a method with a control character", "FROB\x01 /health HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    early("a NUL in the path", "GET /health%00/metrics HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    early("a control character in the path", "GET /health%0a HTTP/1.1\r\nHost: x\r\n\r\n", 400);
    early("two Authorization headers, the right key first",
          "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\nAuthorization: Bearer nope\r\n\r\n", 400);
    early("two Authorization headers, the right key last",
          "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer nope\r\nAuthorization: Bearer k3y\r\n\r\n", 400);
    early("an unknown method that is a token", "FROB /health HTTP/1.1\r\nHost: x\r\n\r\n", 405);

    /* a chunked body that crosses the 4 MiB limit gets 413 as it crosses it,
     * not after a terminating chunk that never comes */
    {
        int fd = dial();
        CHECK(fd >= 0);
        const char *h = "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\n"
                        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
        enum { MB = 1 << 20 };
        char *chunk = malloc(MB + 16);
        int ok = fd >= 0 && chunk && send(fd, h, strlen(h), 0) == (ssize_t)strlen(h);
        if (chunk) {
            int hl = snprintf(chunk, 16, "%x\r\n", MB);
            memset(chunk + hl, 'a', MB);
            memcpy(chunk + hl + MB, "\r\n", 2);
            for (int i = 0; i < 4 && ok; i++)   /* 4 MiB: at the limit, not over it */
                ok = send(fd, chunk, (size_t)hl + MB + 2, 0) == (ssize_t)hl + MB + 2;
            const char *over = "10\r\naaaaaaaaaaaaaaaa\r\n";   /* 16 bytes more; no last chunk follows */
            ok = ok && send(fd, over, strlen(over), 0) == (ssize_t)strlen(over);
        }
        CHECK(ok);
        char buf[4096];
        double t0 = sc_now();
        int n = ok ? read_reply(fd, buf, sizeof buf, 5000) : -1;
        CHECKF(n > 0 && !strncmp(buf, "HTTP/1.1 413", 12) && strstr(buf, "exceeds"), "chunked body over the limit: "
               "got '%.60s' after %.1f s", n > 0 ? buf : "(nothing)", sc_now() - t0);
        printf("chunked body over the limit, never terminated: %.12s after %.0f ms\n", n > 0 ? buf : "nothing",
               (sc_now() - t0) * 1e3);
        free(chunk);
        if (fd >= 0) close(fd);
    }

    /* a complete request, then half-close: an answer, never a silent close. A
     * completion long enough to be pending when the end of the request stream
     * is seen (1,000 tokens: test_server's give-up case) is cancelled with a 499
     * that says why. */
    const char *long_body = "{\"prompt\": \"hi\", \"max_tokens\": 1000, \"ignore_eos\": true}";
    char long_req[512];
    snprintf(long_req, sizeof long_req,
             "POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k3y\r\nContent-Type: application/json\r\n"
             "Content-Length: %zu\r\n\r\n%s", strlen(long_body), long_body);
    const char *halfs[2] = {"GET /health HTTP/1.1\r\nHost: x\r\n\r\n", long_req};
    for (int i = 0; i < 2; i++) {
        int fd = dial();
        CHECK(fd >= 0);
        if (fd < 0) continue;
        CHECK(send(fd, halfs[i], strlen(halfs[i]), 0) == (ssize_t)strlen(halfs[i]));
        CHECK(shutdown(fd, SHUT_WR) == 0);
        char buf[8192];
        int n = read_reply(fd, buf, sizeof buf, 10000);
        const char *want = i ? "HTTP/1.1 499" : "HTTP/1.1 200";
        CHECKF(n > 0 && !strncmp(buf, want, 12), "half-closed %s: got %d bytes '%.60s', want %s",
               i ? "completion" : "/health", n, n > 0 ? buf : "", want);
        CHECKF(i == 0 || (n > 0 && strstr(buf, "shutdown SHUT_WR")), "half-closed completion: no reason in '%.300s'",
               n > 0 ? buf : "");
        printf("half-closed %s: %d bytes back (%.12s)\n", i ? "completion" : "/health", n, n > 0 ? buf : "");
        close(fd);
    }

    /* fill the connection limit with half-sent headers */
    int fds[8], nf = 0;
    for (int i = 0; i < 8; i++) {
        int fd = dial();
        if (fd < 0) break;
        const char *part = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ";
        send(fd, part, strlen(part), 0);
        fds[nf++] = fd;
    }
    CHECK(nf == 8);
    usleep(200 * 1000);
    /* one more: the ordinary slots are full of requests stalled for less than
     * the eviction age, so it lands on a reserve slot, where /health is
     * answered at once (Connection: close, so that the reply's end is the
     * server closing, not the keep-alive idle timeout) */
    int extra = dial();
    char buf[4096];
    double t0 = sc_now();
    CHECK(extra >= 0);
    if (extra >= 0) {
        const char *req = "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
        send(extra, req, strlen(req), 0);
        int n = read_reply(extra, buf, sizeof buf, 1000 * (o.http_timeout_s + 3));
        double waited = sc_now() - t0;
        int served = n > 0 && !strncmp(buf, "HTTP/1.1 200", 12);
        CHECKF(served && waited < 1.0, "a connection past the limit: %s after %.1f s", served ? "served" : "not served",
               waited);
        printf("a connection past the limit: %s after %.1f s\n", served ? "/health served on a reserve slot" :
               "not served", waited);
        close(extra);
    }
    /* the stalled ones are closed by the inactivity timeout */
    int closed = 0;
    for (int i = 0; i < nf; i++) {
        int n = read_reply(fds[i], buf, sizeof buf, 6000);
        closed += n <= 0 || strncmp(buf, "HTTP/1.1 200", 12);
        close(fds[i]);
    }
    CHECKF(closed == nf, "%d of %d stalled connections were closed", closed, nf);
    printf("%d stalled connections closed by the %d s inactivity timeout\n", closed, o.http_timeout_s);
    /* served again */
    char url[128];
    sc_resp r = {0};
    double t1 = sc_now();
    int ok = 0;
    while (sc_now() - t1 < 5 && !ok) {   /* the limit frees as the server reaps the closed sockets */
        snprintf(url, sizeof url, "http://127.0.0.1:%d/health", PORT);
        sc_request("GET", url, NULL, 0, NULL, &r);
        ok = r.status == 200;
        sc_resp_free(&r);
        if (!ok) usleep(100 * 1000);
    }
    CHECK(ok);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1/completions", PORT);
    const char *body = "{\"prompt\": \"hi\", \"max_tokens\": 4, \"temperature\": 0}";
    sc_request("POST", url, body, strlen(body), "k3y", &r);
    CHECKF(r.status == 200, "after the flood: %ld %s", r.status, r.body ? r.body : "");
    sc_resp_free(&r);
    server_free(s);
    fclose(log);
    sc_cleanup();
    return tu_done("test_server_limits");
}
