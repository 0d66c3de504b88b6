/* fake_http.h — a scripted HTTP peer on loopback for the bench tests that
 * need a hostile or misbehaving server (endless lines, cut streams, invalid
 * UTF-8, counters that lie). It accepts connections, reads one request per
 * connection (headers and a Content-Length body), and hands it to the
 * test's handler, which writes whatever it likes to the socket; the
 * connection is closed after. One thread per connection, detached. */
#ifndef SPECBED_TEST_FAKE_HTTP_H
#define SPECBED_TEST_FAKE_HTTP_H
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>

typedef void (*fh_handler)(void *ctx, int fd, const char *method, const char *path, const char *body);

typedef struct {
    int fd, port;
    char url[64];            /* http://127.0.0.1:PORT */
    fh_handler handle;
    void *ctx;
    atomic_int stop, active;
    pthread_t th;
} fake_http;

int  fh_start(fake_http *h, fh_handler handle, void *ctx);   /* 0 ok, -1 (message on stderr) */
/* Stops accepting and waits up to 5 s for open connections; returns how
 * many are still open (a test CHECKs 0). */
int  fh_stop(fake_http *h);
int  fh_send_all(int fd, const void *b, size_t n);           /* 0 ok, -1 the peer went away */
void fh_reply(int fd, int status, const char *type, const char *body);   /* a whole response, Connection: close */
#endif
