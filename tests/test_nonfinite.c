/* label: server */
/* test_nonfinite.c — a checkpoint whose logits are NaN (issue: top-k
 * sampling read out of bounds on them; `generate` died with SIGSEGV and one
 * request with top_k killed `serve`). The fixture target with one NaN in
 * model.norm.weight makes every logit NaN. Held here, under ASan:
 *   - the sampler's top-k / top-p on NaN logits stays in bounds;
 *   - sampler_first_nonfinite finds NaN, +Inf and -Inf, and passes finite rows;
 *   - gen_run and spec_run (plain and speculative) fail with a message that
 *     says so, and free every KV page;
 *   - serve answers such a request 500 with that message, counts it in
 *     /metrics, and keeps serving: /health, and a request to a healthy
 *     server alongside is unaffected. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cjson/cJSON.h>
#include "drafters.h"
#include "server.h"
#include "spec_run.h"
#include "srv_client.h"
#include "test_util.h"

/* dir/ = the fixture with model.norm.weight[0] = NaN (config and tokenizer linked). */
static int make_nan_model(const char *dir) {
    size_t len;
    char *b = tu_read_file(tu_path("tests/fixtures/qwen3-tied/model.safetensors"), &len);
    if (!b || len < 8) return -1;
    unsigned long long hl = 0;
    memcpy(&hl, b, 8);
    char *hdr = strndup(b + 8, (size_t)hl);
    cJSON *h = cJSON_Parse(hdr);
    const cJSON *t = h ? cJSON_GetObjectItemCaseSensitive(h, "model.norm.weight") : NULL;
    const cJSON *off = t ? cJSON_GetObjectItemCaseSensitive(t, "data_offsets") : NULL;
    const cJSON *dt = t ? cJSON_GetObjectItemCaseSensitive(t, "dtype") : NULL;
    int rc = -1;
    if (cJSON_IsArray(off) && cJSON_IsString(dt) && !strcmp(dt->valuestring, "F32")) {
        size_t at = 8 + (size_t)hl + (size_t)cJSON_GetArrayItem(off, 0)->valuedouble;
        float nan = NAN;
        memcpy(b + at, &nan, 4);
        mkdir(dir, 0755);
        char p[1024];
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        FILE *f = fopen(p, "wb");
        if (f && fwrite(b, 1, len, f) == len) rc = 0;
        if (f) fclose(f);
        const char *links[2] = {"config.json", "tokenizer.json"};
        for (int i = 0; i < 2; i++) {
            char src[128];
            snprintf(src, sizeof src, "tests/fixtures/qwen3-tied/%s", links[i]);
            snprintf(p, sizeof p, "%s/%s", dir, links[i]);
            unlink(p);
            if (symlink(tu_path(src), p)) rc = -1;
        }
    }
    cJSON_Delete(h);
    free(hdr);
    free(b);
    return rc;
}

static void test_sampler(void) {
    enum { V = 64 };
    float lg[V], probs[V];
    for (int i = 0; i < V; i++) lg[i] = NAN;
    rng_state r;
    rng_seed(&r, 1);
    sampler_params sp = {.temperature = 1.0f, .top_k = 5, .top_p = 0.9f};
    sampler_probs(probs, lg, V, &sp);                 /* must stay in bounds (ASan) */
    int t = sampler_sample(lg, V, &sp, &r, probs);
    CHECK(t >= 0 && t < V);
    CHECK(sampler_first_nonfinite(lg, V) == 0);
    for (int i = 0; i < V; i++) lg[i] = (float)i * 0.1f;
    CHECK(sampler_first_nonfinite(lg, V) == -1);
    lg[17] = INFINITY;
    CHECK(sampler_first_nonfinite(lg, V) == 17);
    lg[17] = 0;
    lg[63] = -INFINITY;
    CHECK(sampler_first_nonfinite(lg, V) == 63);
    lg[63] = 0;
    lg[40] = NAN;
    lg[41] = NAN;
    sampler_probs(probs, lg, V, &sp);                 /* mixed NaN and finite */
    t = sampler_sample(lg, V, &sp, &r, probs);
    CHECK(t >= 0 && t < V);
}

static void test_engine(const char *dir) {
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = dir, .max_seqs = 2};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    int prompt[6] = {5, 9, 11, 5, 9, 11}, n = 6;
    const int *pp = prompt;
    gen_result res;
    gen_params gp = {.max_tokens = 8, .sp = {.temperature = 0.8f, .top_k = 5}};
    CHECK(gen_run(e, &pp, &n, 1, &gp, NULL, NULL, &res, NULL, err, sizeof err) == -1 && strstr(err, "non-finite"));
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    spec_params sp = {.gen = gp, .depth = 3};
    CHECK(spec_run(e, NULL, &pp, &n, 1, &sp, NULL, NULL, &res, NULL, err, sizeof err) == -1 &&
          strstr(err, "non-finite"));
    drafter *d = NULL;
    drafter_opts dop = {.name = "ngram", .max_seqs = 2};
    CHECK(!drafter_create(&d, &dop, e, err, sizeof err) && d);
    if (d) {
        CHECKF(spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &res, NULL, err, sizeof err) == -1 &&
                   strstr(err, "non-finite"), "%s", err);
        drafter_free(d);
    }
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    gen_engine_free(e);
}

static server *start(const char *model, char *base, size_t cap, FILE *log) {
    server_opts o;
    server_opts_default(&o);
    o.model_dir = model;
    o.port = 0;
    o.decode_log_interval = 0;
    o.log = log;
    char err[1024];
    server *s;
    if (server_create(&s, &o, err, sizeof err)) { fprintf(stderr, "server_create: %s\n", err); return NULL; }
    snprintf(base, cap, "http://127.0.0.1:%d", server_port(s));
    return s;
}

static void test_serve(const char *dir) {
    FILE *log = tmpfile();
    char base[64], good[64], u[128];
    server *s = start(dir, base, sizeof base, log), *g = start(tu_path("tests/fixtures/qwen3-tied"), good, sizeof good, log);
    CHECK(s && g);
    if (s && g) {
        const char *body = "{\"prompt\": \"hello\", \"max_tokens\": 8, \"temperature\": 0.7, \"top_k\": 5}";
        snprintf(u, sizeof u, "%s/v1/completions", base);
        for (int i = 0; i < 3; i++) {   /* again and again: the server survives each */
            sc_resp r;
            sc_request("POST", u, body, strlen(body), NULL, &r);
            CHECKF(r.status == 500 && r.body && strstr(r.body, "non-finite"), "status %ld: %s", r.status,
                   r.body ? r.body : "");
            sc_resp_free(&r);
        }
        const char *sbody = "{\"prompt\": \"hello\", \"max_tokens\": 8, \"top_k\": 5, \"stream\": true}";
        sc_resp r;
        sc_request("POST", u, sbody, strlen(sbody), NULL, &r);
        sc_sse ev;
        CHECKF(r.status == 200 && !sc_parse_sse(r.body, &ev) && ev.errors == 1, "stream: %ld %s", r.status, r.body);
        free(ev.text);
        sc_resp_free(&r);
        snprintf(u, sizeof u, "%s/health", base);
        sc_request("GET", u, NULL, 0, NULL, &r);
        CHECK(r.status == 200);
        sc_resp_free(&r);
        snprintf(u, sizeof u, "%s/metrics", base);
        /* /metrics is a snapshot the scheduler refreshes after each step: wait for it */
        for (int i = 0; i < 100; i++) {
            sc_request("GET", u, NULL, 0, NULL, &r);
            if (sc_metric(r.body, "specbed:nonfinite_logits_requests_total") == 4) break;
            sc_resp_free(&r);
            usleep(20 * 1000);
        }
        CHECKF(sc_metric(r.body, "specbed:nonfinite_logits_requests_total") == 4 &&
                   sc_metric(r.body, "specbed:request_failure_total") == 4 &&
                   sc_metric(r.body, "specbed:kv_cache_pages_used") == 0,
               "%s", r.body);
        sc_resp_free(&r);
        snprintf(u, sizeof u, "%s/v1/completions", good);
        sc_request("POST", u, body, strlen(body), NULL, &r);
        CHECK(r.status == 200);
        sc_resp_free(&r);
    }
    server_free(s);
    server_free(g);
    fclose(log);
}

int main(void) {
    sc_init();
    char dir[] = "/tmp/specbed_nan_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char model[600];
    snprintf(model, sizeof model, "%s/m", dir);
    test_sampler();
    if (make_nan_model(model)) {
        CHECKF(0, "could not build the NaN checkpoint under %s", model);
    } else {
        test_engine(model);
        test_serve(model);
    }
    const char *files[3] = {"model.safetensors", "config.json", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        char p[700];
        snprintf(p, sizeof p, "%s/%s", model, files[i]);
        unlink(p);
    }
    rmdir(model);
    rmdir(dir);
    sc_cleanup();
    return tu_done("test_nonfinite");
}
