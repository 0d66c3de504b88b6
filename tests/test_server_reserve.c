/* label: server */
/* test_server_reserve.c — the reserve connection slots when every ordinary
 * slot holds a request being answered (none stalled, so none may be evicted):
 *   - a real request that lands on the reserve waits for an ordinary slot a
 *     bounded time, then gets 503 with the reason (it must neither be served
 *     on the reserve nor hang);
 *   - /health and /metrics are answered at once on the reserve;
 *   - once the long requests' clients leave, a real request is served again.
 * The long requests run on the bundled model (1,000 tokens take ~9 s under
 * ASan on the 2-core machine, ~6x the reserve's wait), one at a time
 * (max_running 1), so every slot is still answering when the extra request
 * is decided. Skips (77) without models/tiny. */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include "server.h"
#include "srv_client.h"
#include "test_util.h"

#define ORDINARY 4

static int PORT;

static int dial(void) { return sc_dial(PORT); }

/* Reads until the peer closes (every request here says Connection: close)
 * or `ms` pass; returns the bytes read, -1 when none came. */
static int read_all(int fd, char *buf, size_t cap, int ms) {
    size_t n = 0;
    double end = sc_now() + ms / 1e3;
    while (n + 1 < cap) {
        int left = (int)((end - sc_now()) * 1e3);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0) break;
        ssize_t k = recv(fd, buf + n, cap - 1 - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
    }
    buf[n] = 0;
    return n ? (int)n : -1;
}

static int send_req(const char *method, const char *path, const char *body) {
    int fd = dial();
    if (fd < 0) return -1;
    char req[1024];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                     method, path, body ? strlen(body) : 0, body ? body : "");
    if (send(fd, req, (size_t)n, 0) != n) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One request on its own connection: the status line's code (0: none) and
 * the seconds it took; the reply in buf. */
static int ask(const char *method, const char *path, const char *body, char *buf, size_t cap, double *took) {
    double t0 = sc_now();
    int fd = send_req(method, path, body);
    int n = fd < 0 ? -1 : read_all(fd, buf, cap, 20000);
    if (fd >= 0) close(fd);
    *took = sc_now() - t0;
    return n > 12 && !strncmp(buf, "HTTP/1.1 ", 9) ? atoi(buf + 9) : 0;
}

int main(void) {
    if (!tu_have("models/tiny/model.safetensors", NULL))
        return tu_skip("test_server_reserve", "models/tiny is not there");
    server_opts o;
    server_opts_default(&o);
    o.model_dir = tu_path("models/tiny");
    o.port = 0;
    o.max_connections = ORDINARY;
    o.max_running = 1;
    o.decode_log_interval = 0;
    o.log = tmpfile();
    char err[1024];
    server *s;
    if (server_create(&s, &o, err, sizeof err)) {
        CHECKF(0, "server_create: %s", err);
        return tu_done("test_server_reserve");
    }
    PORT = server_port(s);

    /* every ordinary slot: a long completion, running or queued behind it */
    const char *longb = "{\"prompt\": \"hi\", \"max_tokens\": 1000, \"ignore_eos\": true}";
    int fds[ORDINARY];
    for (int i = 0; i < ORDINARY; i++) CHECK((fds[i] = send_req("POST", "/v1/completions", longb)) >= 0);
    usleep(300 * 1000);   /* their headers and bodies are in: they are being answered */

    char buf[8192];
    double took;
    int st = ask("POST", "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 1}", buf, sizeof buf, &took);
    CHECKF(st == 503 && strstr(buf, "only /health and /metrics"), "a real request on the reserve: %d after %.1f s: "
           "%.300s", st, took, buf);
    CHECKF(took < 5.0, "the reserve's 503 took %.1f s", took);
    printf("a real request on the reserve: %d after %.2f s\n", st, took);
    const char *paths[2] = {"/health", "/metrics"};
    for (int i = 0; i < 2; i++) {
        st = ask("GET", paths[i], NULL, buf, sizeof buf, &took);
        CHECKF(st == 200 && took < 1.0, "%s on the reserve: %d after %.1f s", paths[i], st, took);
        printf("%s on the reserve: %d after %.2f s\n", paths[i], st, took);
    }
    /* the long requests were still being answered throughout: none has come back */
    for (int i = 0; i < ORDINARY; i++) {
        struct pollfd p = {.fd = fds[i], .events = POLLIN};
        CHECKF(fds[i] < 0 || poll(&p, 1, 0) == 0, "long request %d answered already: the test proved nothing", i);
    }
    /* their clients leave: the requests are cancelled and a real one is served */
    for (int i = 0; i < ORDINARY; i++)
        if (fds[i] >= 0) close(fds[i]);
    double t0 = sc_now();
    st = 0;
    while (st != 200 && sc_now() - t0 < 15) {
        st = ask("POST", "/v1/completions", "{\"prompt\": \"hi\", \"max_tokens\": 4}", buf, sizeof buf, &took);
        if (st != 200) usleep(200 * 1000);
    }
    CHECKF(st == 200, "after the long requests left: %d: %.300s", st, buf);
    printf("a real request after the long ones left: %d after %.2f s\n", st, sc_now() - t0);
    server_free(s);
    fclose(o.log);
    return tu_done("test_server_reserve");
}
