/* fake_http.c — see fake_http.h. */
#include "fake_http.h"
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

typedef struct { fake_http *h; int fd; } conn;

int fh_send_all(int fd, const void *buf, size_t n) {
    const char *b = buf;
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

void fh_reply(int fd, int status, const char *type, const char *body) {
    char h[256];
    snprintf(h, sizeof h, "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", status,
             status == 200 ? "OK" : status == 404 ? "Not Found" : "Error", type, strlen(body));
    if (!fh_send_all(fd, h, strlen(h))) fh_send_all(fd, body, strlen(body));
}

static void *conn_main(void *arg) {
    conn c = *(conn *)arg;
    free(arg);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(c.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    setsockopt(c.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char req[65536];
    size_t n = 0;
    char *hend = NULL;
    req[0] = 0;
    while (n < sizeof req - 1 && !(hend = strstr(req, "\r\n\r\n"))) {
        ssize_t k = recv(c.fd, req + n, sizeof req - 1 - n, 0);
        if (k <= 0) break;
        n += (size_t)k;
        req[n] = 0;
    }
    if (hend) {
        size_t clen = 0;
        const char *cl = strcasestr(req, "Content-Length:");
        if (cl) clen = strtoul(cl + 15, NULL, 10);
        size_t have = n - (size_t)(hend + 4 - req);
        while (have < clen && n < sizeof req - 1) {
            ssize_t k = recv(c.fd, req + n, sizeof req - 1 - n, 0);
            if (k <= 0) break;
            n += (size_t)k;
            have += (size_t)k;
            req[n] = 0;
        }
        char method[8] = "", path[256] = "";
        sscanf(req, "%7s %255s", method, path);
        c.h->handle(c.h->ctx, c.fd, method, path, hend + 4);
    }
    shutdown(c.fd, SHUT_RDWR);
    close(c.fd);
    atomic_fetch_sub(&c.h->active, 1);
    return NULL;
}

static void *accept_main(void *arg) {
    fake_http *h = arg;
    while (!atomic_load(&h->stop)) {
        struct pollfd p = {.fd = h->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int cfd = accept(h->fd, NULL, NULL);
        if (cfd < 0) continue;
        conn *c = malloc(sizeof *c);
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        atomic_fetch_add(&h->active, 1);
        if (!c || (c->h = h, c->fd = cfd, pthread_create(&t, &at, conn_main, c))) {
            free(c);
            close(cfd);
            atomic_fetch_sub(&h->active, 1);
        }
        pthread_attr_destroy(&at);
    }
    return NULL;
}

int fh_start(fake_http *h, fh_handler handle, void *ctx) {
    memset(h, 0, sizeof *h);
    h->handle = handle;
    h->ctx = ctx;
    h->fd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (h->fd < 0 || bind(h->fd, (struct sockaddr *)&a, sizeof a) || listen(h->fd, 64) ||
        getsockname(h->fd, (struct sockaddr *)&a, &al)) {
        fprintf(stderr, "fake_http: cannot listen: %s\n", strerror(errno));
        return -1;
    }
    h->port = ntohs(a.sin_port);
    snprintf(h->url, sizeof h->url, "http://127.0.0.1:%d", h->port);
    return pthread_create(&h->th, NULL, accept_main, h) ? -1 : 0;
}

int fh_stop(fake_http *h) {
    atomic_store(&h->stop, 1);
    pthread_join(h->th, NULL);
    close(h->fd);
    for (int i = 0; i < 500 && atomic_load(&h->active) > 0; i++) usleep(10 * 1000);   /* ≤ 5 s */
    return atomic_load(&h->active);
}
