/* label: bench */
/* test_bench_canary_json.c — the canary's evidence and verdict against a
 * tiny hostile HTTP server run in this process (the pattern of
 * test_bench_hostile.c: plain sockets, one thread per connection, loopback):
 *   bad-utf8   streamed text, the model id and an error body carry bytes
 *              that are not UTF-8 → every evidence file (canary.json,
 *              evidence.txt, load/outputs.jsonl, load/summary.json,
 *              reference.jsonl) parses as JSON and is valid UTF-8, the bad
 *              bytes replaced by U+FFFD and flagged (json_utf8.h); the
 *              bad-character check still fails the run on the raw bytes
 *   no-metrics a clean server with no /metrics → no interval can be
 *              judged: "not judged: … gives no accept length", verdict
 *              inconclusive, exit 3 (never a pass); --threshold 0 passes;
 *              --spec-check on cannot show the reference was spec-off (no
 *              draft counters) → the comparison is not claimed, exit 3
 *   engines    vLLM counters of two engines, engine 1 collapsed (1.5)
 *              while the pooled accept length (2.25) passes 2.0 → the run
 *              fails on engine 1, named in the reason and in canary.json's
 *              flagged_intervals with its start, end, accept length and
 *              threshold
 * plus json_utf8's own rules on fixed strings. Bounded: alarm(90). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE   /* strcasestr */
#endif
#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include "canary.h"
#include "httpc.h"
#include "json_utf8.h"
#include "fake_http.h"
#include "test_util.h"

typedef enum { JS_BAD_UTF8, JS_NO_METRICS, JS_ENGINES } js_mode;

typedef struct {
    fake_http http;                  /* the socket side (tests/fake_http.h) */
    js_mode mode;
    atomic_long requests;
} js_server;

static void reply(int fd, int status, const char *type, const char *body) { fh_reply(fd, status, type, body); }

/* Raw bytes that are not UTF-8: a lone continuation byte, 0xFF, a truncated
 * sequence, an encoded surrogate (ED A0 80), an overlong slash (C0 AF). */
#define BAD "ok \x80 \xff \xc3( \xed\xa0\x80 \xc0\xaf end"

static void stream(js_server *s, int fd) {
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n";
    if (fh_send_all(fd, head, sizeof head - 1)) return;
    const char *tok[3] = {"foo", " bar", " baz"};
    char b[512];
    for (int i = 0; i < 3; i++) {
        const char *t = s->mode == JS_BAD_UTF8 && i == 1 ? " " BAD : tok[i];
        snprintf(b, sizeof b, "data: {\"choices\":[{\"index\":0,\"text\":\"%s\",\"finish_reason\":null}]}\n\n", t);
        if (fh_send_all(fd, b, strlen(b))) return;
    }
    static const char tail[] = "data: {\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n"
                               "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":3,\"total_tokens\":8}}\n\n"
                               "data: [DONE]\n\n";
    fh_send_all(fd, tail, sizeof tail - 1);
    atomic_fetch_add(&s->requests, 1);
}

static void metrics(js_server *s, int fd) {
    if (s->mode != JS_ENGINES) { reply(fd, 404, "text/plain", "no metrics\n"); return; }
    long n = atomic_load(&s->requests);
    char body[2048];
    /* per request: engine 0 4 drafts, 8 accepted (3.0); engine 1 4 drafts, 2 accepted (1.5); pooled 2.25 */
    snprintf(body, sizeof body,
             "vllm:spec_decode_num_drafts_total{engine=\"0\",model_name=\"m\"} %ld\n"
             "vllm:spec_decode_num_drafts_total{engine=\"1\",model_name=\"m\"} %ld\n"
             "vllm:spec_decode_num_draft_tokens_total{engine=\"0\",model_name=\"m\"} %ld\n"
             "vllm:spec_decode_num_draft_tokens_total{engine=\"1\",model_name=\"m\"} %ld\n"
             "vllm:spec_decode_num_accepted_tokens_total{engine=\"0\",model_name=\"m\"} %ld\n"
             "vllm:spec_decode_num_accepted_tokens_total{engine=\"1\",model_name=\"m\"} %ld\n"
             "vllm:generation_tokens_total{engine=\"0\",model_name=\"m\"} %ld\n",
             4 * n, 4 * n, 12 * n, 12 * n, 8 * n, 2 * n, 3 * n);
    reply(fd, 200, "text/plain", body);
}

static void handle(void *ctx, int fd, const char *method, const char *path, const char *body) {
    js_server *srv = ctx;
    if (!strcmp(path, "/health")) reply(fd, 200, "application/json", "{\"status\":\"ok\"}");
    else if (!strcmp(path, "/v1/models"))
        reply(fd, 200, "application/json",
              srv->mode == JS_BAD_UTF8 ? "{\"object\":\"list\",\"data\":[{\"id\":\"model-\xff\xfe\"}]}"
                                       : "{\"object\":\"list\",\"data\":[{\"id\":\"m\"}]}");
    else if (!strcmp(path, "/metrics")) metrics(srv, fd);
    else if (!strcmp(method, "POST") && strstr(path, "completions")) {
        if (strstr(body, "\"stream\":true")) stream(srv, fd);
        else if (srv->mode == JS_BAD_UTF8)   /* the echo probe: an error whose body is not UTF-8 either */
            reply(fd, 400, "application/json", "{\"error\":{\"message\":\"no echo \xff here\"}}");
        else reply(fd, 200, "application/json", "{\"choices\":[{\"index\":0,\"text\":\"foo\",\"finish_reason\":\"length\"}]}");
    } else reply(fd, 404, "application/json", "{\"error\":\"not found\"}");
}

static int js_start(js_server *s, js_mode mode) {
    memset(s, 0, sizeof *s);
    s->mode = mode;
    return fh_start(&s->http, handle, s);
}

static void js_stop(js_server *s) {
    int open_ = fh_stop(&s->http);
    CHECKF(open_ == 0, "test server: %d connection(s) still open", open_);
}

static char *slurp(const char *dir, const char *name) {
    char p[700];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return tu_read_file(p, NULL);
}

/* The file is valid UTF-8 and every line (jsonl) / the whole (json) parses. */
static int check_json_file(const char *dir, const char *name, int lines) {
    char *t = slurp(dir, name);
    CHECKF(t != NULL, "%s/%s missing", dir, name);
    if (!t) return 0;
    size_t bad = utf8_invalid_bytes(t, strlen(t));
    CHECKF(bad == 0, "%s/%s: %zu byte(s) not UTF-8", dir, name, bad);
    int ok = 1;
    if (lines) {
        for (char *l = t, *e; l && *l; l = e ? e + 1 : NULL) {
            e = strchr(l, '\n');
            if (e) *e = 0;
            cJSON *j = cJSON_Parse(l);
            CHECKF(j != NULL, "%s/%s: a line is not JSON: %.80s", dir, name, l);
            ok &= j != NULL;
            cJSON_Delete(j);
        }
    } else {
        cJSON *j = cJSON_Parse(t);
        CHECKF(j != NULL, "%s/%s is not JSON", dir, name);
        ok = j != NULL;
        cJSON_Delete(j);
    }
    free(t);
    return ok && !bad;
}

static cJSON *canary_json(const char *dir) {
    char *t = slurp(dir, "canary.json");
    cJSON *j = t ? cJSON_Parse(t) : NULL;
    free(t);
    CHECKF(j != NULL, "%s/canary.json does not parse", dir);
    return j;
}

static int has_string(const cJSON *arr, const char *s) {
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) if (cJSON_IsString(e) && strstr(e->valuestring, s)) return 1;
    return 0;
}

static int run_canary(const char *url, const char *out, const char *extra) {
    const char *wl = tu_path("tests/fixtures/workloads/mixed.jsonl");
    char *argv[24] = {"canary", "--url", (char *)url, "--workload", (char *)wl, "--spec-check", "off", "--duration", "1.5",
                      "--interval", "0.5", "--probes", "2", "--copy-workload", "none", "--out", (char *)out, "--quiet"};
    int argc = 18;
    if (extra) argv[argc++] = (char *)extra;
    argv[argc] = NULL;
    return cmd_canary(argc, argv);
}

static void test_utf8_rules(void) {
    size_t b;
    char *f = utf8_fix("a\xff" "b\xc3\xa9" "c\xe2\x82" "d", &b);   /* é kept, FF and a truncated € replaced */
    CHECKF(f && b == 3 && !strcmp(f, "a\xEF\xBF\xBD" "b\xc3\xa9" "c\xEF\xBF\xBD\xEF\xBF\xBD" "d"), "fix: %s (%zu)", f ? f : "", b);
    free(f);
    CHECK(utf8_invalid_bytes("\xed\xa0\x80", 3) == 3 && utf8_invalid_bytes("\xc0\xaf", 2) == 2);
    CHECK(utf8_invalid_bytes("\xf4\x90\x80\x80", 4) == 4 && utf8_invalid_bytes("\xf0\x9f\x98\x80 \xef\xbf\xbd", 8) == 0);
    /* U+FFFD the server itself sent is text, not a flag */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "ok", "fine \xef\xbf\xbd");
    char *s = json_print_utf8(j, 0);
    CHECK(s && !strstr(s, "invalid_utf8"));
    free(s);
    cJSON_AddStringToObject(j, "text", "x\xff");
    cJSON *arr = cJSON_AddArrayToObject(j, "findings");
    cJSON_AddItemToArray(arr, cJSON_CreateString("y\xfe\xfe"));
    s = json_print_utf8(j, 1);
    cJSON *back = s ? cJSON_Parse(s) : NULL;
    CHECK(s && utf8_invalid_bytes(s, strlen(s)) == 0 && back);
    const cJSON *n1 = cJSON_GetObjectItemCaseSensitive(back, "text_invalid_utf8");
    const cJSON *n2 = cJSON_GetObjectItemCaseSensitive(back, "invalid_utf8_replaced");
    CHECK(cJSON_IsNumber(n1) && n1->valuedouble == 1 && cJSON_IsNumber(n2) && n2->valuedouble == 3);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(back, "text")), "x\xEF\xBF\xBD"));
    /* the original is untouched */
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "text")), "x\xff"));
    cJSON_Delete(back);
    free(s);
    cJSON_Delete(j);
}

static void test_bad_utf8(const char *tmp) {
    js_server s;
    if (js_start(&s, JS_BAD_UTF8)) { CHECK(0); return; }
    char out[512];
    snprintf(out, sizeof out, "%s/bad_utf8", tmp);
    int rc = run_canary(s.http.url, out, NULL);
    js_stop(&s);
    CHECKF(rc == 1, "canary against invalid UTF-8 exited %d, want 1 (bad characters)", rc);
    check_json_file(out, "canary.json", 0);
    check_json_file(out, "reference.jsonl", 1);
    char load[600];
    snprintf(load, sizeof load, "%s/load", out);
    check_json_file(load, "outputs.jsonl", 1);
    check_json_file(load, "summary.json", 0);
    char *ev = slurp(out, "evidence.txt");
    CHECK(ev && utf8_invalid_bytes(ev, strlen(ev)) == 0 && strstr(ev, "bad_chars"));
    free(ev);
    /* the bad bytes are replaced and flagged, not dropped */
    char *o = slurp(load, "outputs.jsonl");
    char *nl = o ? strchr(o, '\n') : NULL;
    if (nl) *nl = 0;
    cJSON *j = o ? cJSON_Parse(o) : NULL;
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(j, "text_invalid_utf8");
    const char *txt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "text"));
    CHECKF(cJSON_IsNumber(fl) && fl->valuedouble == 8, "text_invalid_utf8: %g", cJSON_IsNumber(fl) ? fl->valuedouble : -1);
    CHECK(txt && strstr(txt, "ok \xEF\xBF\xBD \xEF\xBF\xBD") && strstr(txt, " end"));
    CHECK(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(j, "invalid_utf8_replaced")));
    cJSON_Delete(j);
    free(o);
    cJSON *c = canary_json(out);
    const cJSON *reasons = cJSON_GetObjectItemCaseSensitive(c, "reasons");
    CHECK(cJSON_GetArraySize(reasons) >= 1 &&
          !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(reasons, 0), "check")), "bad_chars"));
    cJSON_Delete(c);
}

static void test_no_metrics(const char *tmp) {
    js_server s;
    if (js_start(&s, JS_NO_METRICS)) { CHECK(0); return; }
    char out[512];
    snprintf(out, sizeof out, "%s/no_metrics", tmp);
    int rc = run_canary(s.http.url, out, NULL);
    js_stop(&s);
    CHECKF(rc == 3, "canary against a server with no accept length exited %d, want 3 (inconclusive)", rc);
    cJSON *c = canary_json(out);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "verdict")), "inconclusive"));
    CHECK(has_string(cJSON_GetObjectItemCaseSensitive(c, "not_made"), "accept_len"));
    const char *nj = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "not_judged"));
    CHECKF(nj && strstr(nj, "not judged: ") && strstr(nj, "gives no accept length"), "not_judged: %s", nj ? nj : "(none)");
    cJSON_Delete(c);
    char *ev = slurp(out, "evidence.txt");
    CHECK(ev && strstr(ev, "INCONCLUSIVE") && strstr(ev, "not judged"));
    free(ev);
    /* with the interval check off there is nothing left unmade: pass */
    if (js_start(&s, JS_NO_METRICS)) { CHECK(0); return; }
    snprintf(out, sizeof out, "%s/no_metrics_off", tmp);
    const char *wl = tu_path("tests/fixtures/workloads/mixed.jsonl");
    char *argv[] = {"canary", "--url", s.http.url, "--workload", (char *)wl, "--spec-check", "off", "--duration", "1", "--probes", "2",
                    "--copy-workload", "none", "--threshold", "0", "--out", out, "--quiet", NULL};
    rc = cmd_canary(18, argv);
    js_stop(&s);
    CHECKF(rc == 0, "canary with --threshold 0 exited %d, want 0", rc);
    /* --spec-check on where nothing shows the reference was speculation-off
     * (no draft counters): the comparison is not claimed */
    if (js_start(&s, JS_NO_METRICS)) { CHECK(0); return; }
    snprintf(out, sizeof out, "%s/no_metrics_spec", tmp);
    char *argv2[] = {"canary", "--url", s.http.url, "--workload", (char *)wl, "--spec-check", "on", "--duration", "1", "--probes", "2",
                     "--copy-workload", "none", "--threshold", "0", "--out", out, "--quiet", NULL};
    rc = cmd_canary(18, argv2);
    js_stop(&s);
    CHECKF(rc == 3, "--spec-check on without draft counters exited %d, want 3", rc);
    c = canary_json(out);
    CHECK(has_string(cJSON_GetObjectItemCaseSensitive(c, "not_made"), "spec_mismatch"));
    const char *ref = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "reference"));
    CHECK(ref && strstr(ref, "unverified"));
    CHECK(has_string(cJSON_GetObjectItemCaseSensitive(c, "findings"), "NOT MADE"));
    cJSON_Delete(c);
}

static void test_engines(const char *tmp) {
    js_server s;
    if (js_start(&s, JS_ENGINES)) { CHECK(0); return; }
    char out[512];
    snprintf(out, sizeof out, "%s/engines", tmp);
    int rc = run_canary(s.http.url, out, NULL);
    js_stop(&s);
    CHECKF(rc == 1, "canary against a collapsed engine exited %d, want 1", rc);
    cJSON *c = canary_json(out);
    const cJSON *r0 = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(c, "reasons"), 0);
    const char *txt = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r0, "text"));
    CHECKF(txt && strstr(txt, "accept length") && strstr(txt, "engine=\"1\""), "reason: %s", txt ? txt : "(none)");
    const cJSON *fl = cJSON_GetObjectItemCaseSensitive(c, "flagged_intervals");
    CHECK(cJSON_GetArraySize(fl) >= 1);
    const cJSON *f0 = cJSON_GetArrayItem(fl, 0);
    const cJSON *al = cJSON_GetObjectItemCaseSensitive(f0, "accept_len"), *th = cJSON_GetObjectItemCaseSensitive(f0, "threshold");
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(f0, "start_s"), *en = cJSON_GetObjectItemCaseSensitive(f0, "end_s");
    CHECK(cJSON_IsNumber(al) && fabs(al->valuedouble - 1.5) < 1e-9 && cJSON_IsNumber(th) && th->valuedouble == 2.0);
    CHECK(cJSON_IsNumber(st) && cJSON_IsNumber(en) && en->valuedouble > st->valuedouble);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(f0, "rank")), "engine=\"1\""));
    /* not launched here: no boot clock, said as null rather than guessed */
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(f0, "start_since_launch_s")));
    cJSON_Delete(c);
    /* the saved intervals keep the ranks: the offline scan flags engine 1 too */
    char csv[700];
    snprintf(csv, sizeof csv, "%s/load/intervals.csv", out);
    char *argv[] = {"canary", "--intervals", csv, NULL};
    rc = cmd_canary(3, argv);
    CHECKF(rc == 1, "offline scan of the engines' intervals exited %d, want 1", rc);
}

int main(void) {
    alarm(90);
    char err[512];
    char tmp[] = "/tmp/specbed_canary_json_XXXXXX";
    if (!mkdtemp(tmp) || http_init(err, sizeof err)) return 1;
    test_utf8_rules();
    test_bad_utf8(tmp);
    test_no_metrics(tmp);
    test_engines(tmp);
    http_cleanup();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", tmp);
    return tu_done("test_bench_canary_json");
}
