/* httpc.c — see httpc.h. libcurl easy handles, one call at a time. */
#include "httpc.h"
#include "errmsg.h"
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int http_init(char *err, size_t errlen) {
    if (curl_global_init(CURL_GLOBAL_DEFAULT)) return errf(err, errlen, "libcurl: global init failed");
    return 0;
}

void http_cleanup(void) { curl_global_cleanup(); }

double http_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void http_base(const char *url, char *out, size_t outlen) {
    snprintf(out, outlen, "%s", url);
    size_t n = strlen(out);
    while (n && out[n - 1] == '/') out[--n] = 0;
    if (n >= 3 && !strcmp(out + n - 3, "/v1")) out[n -= 3] = 0;
    while (n && out[n - 1] == '/') out[--n] = 0;
}

typedef struct { char *b; size_t n, cap; int oom, too_big; } buf_t;

static size_t on_body(char *p, size_t sz, size_t nm, void *ud) {
    buf_t *b = ud;
    size_t n = sz * nm;
    if (b->n + n > HTTPC_MAX_BODY) { b->too_big = 1; return 0; }   /* aborts the transfer */
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n + 1) nc *= 2;
        char *nb = realloc(b->b, nc);
        if (!nb) { b->oom = 1; return 0; }
        b->b = nb;
        b->cap = nc;
    }
    memcpy(b->b + b->n, p, n);
    b->n += n;
    b->b[b->n] = 0;
    return n;
}

static int do_req(const char *base, const char *path, const char *api_key, const char *json, long timeout_ms,
                  char **body, long *status, char *err, size_t errlen) {
    *body = NULL;
    *status = 0;
    CURL *h = curl_easy_init();
    if (!h) return errf(err, errlen, "libcurl: cannot create a handle");
    char url[2048];
    snprintf(url, sizeof url, "%s%s", base, path);
    buf_t b = {0};
    struct curl_slist *hdr = NULL;
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 5000 ? timeout_ms : 5000);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    if (json) {
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, json);
    }
    if (api_key) {
        char a[1024];
        snprintf(a, sizeof a, "Authorization: Bearer %s", api_key);
        hdr = curl_slist_append(hdr, a);
    }
    if (hdr) curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    CURLcode rc = curl_easy_perform(h);
    int ret = 0;
    if (b.too_big) ret = errf(err, errlen, "%s: the reply exceeded %u MiB (HTTPC_MAX_BODY); stopped reading it", url,
                              HTTPC_MAX_BODY >> 20);
    else if (rc != CURLE_OK) ret = errf(err, errlen, "%s: %s", url, curl_easy_strerror(rc));
    else if (b.oom) ret = errf(err, errlen, "%s: out of memory reading the reply", url);
    else {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        if (!b.b) { b.b = malloc(1); if (b.b) b.b[0] = 0; }
        *body = b.b;
        b.b = NULL;
    }
    free(b.b);
    curl_slist_free_all(hdr);
    curl_easy_cleanup(h);
    return ret;
}

int http_get(const char *base, const char *path, const char *api_key, long timeout_ms, char **body, long *status,
             char *err, size_t errlen) {
    return do_req(base, path, api_key, NULL, timeout_ms, body, status, err, errlen);
}

int http_post_json(const char *base, const char *path, const char *api_key, const char *json, long timeout_ms,
                   char **body, long *status, char *err, size_t errlen) {
    return do_req(base, path, api_key, json, timeout_ms, body, status, err, errlen);
}

int http_wait_health(const char *base, double timeout_s, int (*alive)(void *), void *ctx, char *err, size_t errlen) {
    double t0 = http_now();
    char last[512] = "no answer yet";
    for (;;) {
        char *body;
        long st;
        if (!http_get(base, "/health", NULL, 2000, &body, &st, last, sizeof last)) {
            free(body);
            if (st == 200) return 0;
            snprintf(last, sizeof last, "GET %s/health answered HTTP %ld", base, st);
        }
        if (alive && !alive(ctx)) return errf(err, errlen, "server exited before %s/health answered (%s)", base, last);
        if (http_now() - t0 > timeout_s)
            return errf(err, errlen, "%s/health not ready after %.0f s (%s)", base, timeout_s, last);
        usleep(200 * 1000);
    }
}

int http_first_model(const char *base, const char *api_key, char *out, size_t outlen) {
    char *body;
    long st;
    char err[256];
    if (do_req(base, "/v1/models", api_key, NULL, 5000, &body, &st, err, sizeof err)) return -1;
    int ret = -1;
    cJSON *j = st == 200 ? cJSON_Parse(body) : NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "data");
    const cJSON *m0 = cJSON_GetArrayItem(d, 0);
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m0, "id");
    if (cJSON_IsString(id)) { snprintf(out, outlen, "%s", id->valuestring); ret = 0; }
    cJSON_Delete(j);
    free(body);
    return ret;
}
