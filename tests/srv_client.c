/* srv_client.c — see srv_client.h. */
#include "srv_client.h"
#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void sc_init(void) { curl_global_init(CURL_GLOBAL_ALL); }
void sc_cleanup(void) { curl_global_cleanup(); }

typedef struct { char *p; size_t n, cap; } buf;

static size_t on_data(char *d, size_t sz, size_t nm, void *u) {
    buf *b = u;
    size_t n = sz * nm;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 4096;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) return 0;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
    b->p[b->n] = 0;
    return n;
}

static struct curl_slist *headers(const char *key) {
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    if (key) {
        char a[512];
        snprintf(a, sizeof a, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, a);
    }
    return curl_slist_append(h, "Expect:");
}

int sc_request(const char *method, const char *url, const char *body, size_t len, const char *key, sc_resp *out) {
    return sc_request_ms(method, url, body, len, key, 120000, out);
}

int sc_request_ms(const char *method, const char *url, const char *body, size_t len, const char *key,
                  long timeout_ms, sc_resp *out) {
    memset(out, 0, sizeof *out);
    CURL *c = curl_easy_init();
    if (!c) return -1;
    buf b = {0};
    struct curl_slist *h = headers(key);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    }
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    out->body = b.p ? b.p : calloc(1, 1);
    out->len = b.n;
    return rc == CURLE_OK ? 0 : -1;
}

void sc_resp_free(sc_resp *r) {
    free(r->body);
    r->body = NULL;
}

typedef struct { buf b; int events, stop_after; } hang;

static size_t on_stream(char *d, size_t sz, size_t nm, void *u) {
    hang *h = u;
    size_t n = sz * nm;
    if (on_data(d, sz, nm, &h->b) != n) return 0;
    h->events = 0;
    for (const char *p = h->b.p; (p = strstr(p, "\n\n")); p += 2) h->events++;
    return h->events >= h->stop_after ? 0 : n;    /* 0 makes curl drop the connection */
}

int sc_stream_hangup(const char *url, const char *body, const char *key, int n_events) {
    CURL *c = curl_easy_init();
    if (!c) return 0;
    hang h = {.stop_after = n_events};
    struct curl_slist *hd = headers(key);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_stream);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &h);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
    curl_easy_perform(c);
    curl_slist_free_all(hd);
    curl_easy_cleanup(c);
    free(h.b.p);
    return h.events;
}

static void add_text(sc_sse *o, const char *t) {
    size_t a = o->text ? strlen(o->text) : 0, n = strlen(t);
    char *p = realloc(o->text, a + n + 1);
    if (!p) return;
    memcpy(p + a, t, n + 1);
    o->text = p;
}

int sc_parse_sse(const char *body, sc_sse *o) {
    memset(o, 0, sizeof *o);
    o->usage_completion = -1;
    o->text = calloc(1, 1);
    const char *p = body;
    while (*p) {
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        if (strncmp(p, "data: ", 6)) { o->bad_json++; p = end + 2; continue; }
        o->n_events++;
        size_t n = (size_t)(end - p - 6);
        o->done = n == 6 && !strncmp(p + 6, "[DONE]", 6);
        if (o->done) { p = end + 2; continue; }
        cJSON *j = cJSON_ParseWithLength(p + 6, n);
        p = end + 2;
        if (!j) { o->bad_json++; continue; }
        if (cJSON_GetObjectItem(j, "error")) o->errors++;
        cJSON *u = cJSON_GetObjectItem(j, "usage");
        if (cJSON_IsObject(u)) {
            o->usage_chunks++;
            o->usage_completion = cJSON_GetObjectItem(u, "completion_tokens")->valueint;
        }
        cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "choices"), 0);
        if (ch) {
            cJSON *t = cJSON_GetObjectItem(ch, "text"), *d = cJSON_GetObjectItem(ch, "delta");
            if (cJSON_IsString(t)) add_text(o, t->valuestring);
            if (d) {
                cJSON *c = cJSON_GetObjectItem(d, "content");
                if (cJSON_IsString(c)) add_text(o, c->valuestring);
                if (cJSON_GetObjectItem(d, "role")) o->role_chunks++;
            }
            cJSON *f = cJSON_GetObjectItem(ch, "finish_reason");
            if (cJSON_IsString(f)) snprintf(o->finish, sizeof o->finish, "%s", f->valuestring);
            cJSON *lp = cJSON_GetObjectItem(ch, "logprobs");
            if (cJSON_IsObject(lp)) {
                cJSON *arr = cJSON_GetObjectItem(lp, "content");
                if (!arr) arr = cJSON_GetObjectItem(lp, "tokens");
                o->lp_tokens += cJSON_GetArraySize(arr);
            }
        }
        cJSON_Delete(j);
    }
    return 0;
}

double sc_metric(const char *m, const char *series) {
    size_t n = strlen(series);
    for (const char *p = m; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, series, n) && p[n] == ' ') return strtod(p + n + 1, NULL);
    }
    return NAN;
}

int sc_dial(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a)) {
        if (fd >= 0) close(fd);
        return -1;
    }
    return fd;
}

double sc_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}
