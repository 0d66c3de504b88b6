/* label: server */
/* test_server.c — the OpenAI-compatible server over real HTTP: an
 * in-process server on a free loopback port with the fixture model,
 * speculating with the fixture as its own draft model. Checks the API's
 * shapes (completions, chat, SSE with [DONE] and usage, logprobs, echo),
 * every error status, that a request's greedy (and seeded) output does not
 * depend on what else is in the batch or on the speculative depth, that bad
 * requests among 16 concurrent clients get their 4xx while good ones
 * complete, that a client hanging up frees its KV pages, 429 on a full
 * queue, /metrics and the decode-batch log, and fault injection. */
#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "server.h"
#include "srv_client.h"
#include "test_util.h"

static const char *KEY = "sk-specbed-test";
static char BASE[64];            /* the main server */

static void mkurl(char *out, size_t cap, const char *base, const char *path) {
    snprintf(out, cap, "%s%s", base, path);
}

static sc_resp call(const char *base, const char *method, const char *path, const char *body, const char *key) {
    char u[256];
    mkurl(u, sizeof u, base, path);
    sc_resp r;
    sc_request(method, u, body, body ? strlen(body) : 0, key, &r);
    return r;
}

/* Starts a server on the model in dir (the fixture when NULL). */
static server *start_dir(server_opts *o, const char *dir, char *base, size_t cap) {
    char err[1024];
    server *s;
    o->model_dir = dir ? dir : tu_path("tests/fixtures/qwen3-tied");
    o->port = 0;
    if (server_create(&s, o, err, sizeof err)) {
        fprintf(stderr, "server_create: %s\n", err);
        return NULL;
    }
    snprintf(base, cap, "http://127.0.0.1:%d", server_port(s));
    return s;
}

static server *start(server_opts *o, char *base, size_t cap) { return start_dir(o, NULL, base, cap); }

static double metric(const char *base, const char *series) {
    sc_resp r = call(base, "GET", "/metrics", NULL, KEY);
    double v = r.status == 200 ? sc_metric(r.body, series) : NAN;
    sc_resp_free(&r);
    return v;
}

/* Waits until the server holds no request and no KV page. */
static int idle(const char *base) {
    for (int i = 0; i < 200; i++) {
        sc_resp r = call(base, "GET", "/metrics", NULL, KEY);
        double used = sc_metric(r.body, "specbed:kv_cache_pages_used");
        double run = sc_metric(r.body, "specbed:num_requests_running");
        double wait = sc_metric(r.body, "specbed:num_requests_waiting");
        sc_resp_free(&r);
        if (used == 0 && run == 0 && wait == 0) return 1;
        usleep(50000);
    }
    return 0;
}

/* ---- jobs: one request and its text ---- */

typedef struct {
    int chat, stream, max_tokens, depth, seed, logprobs;   /* depth -1 / logprobs -1: absent */
    double temp;
    const char *prompt, *stop;
} job;

static char *job_body(const job *j) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "model", "qwen3-tied");
    if (j->chat) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddStringToObject(m, "role", "user");
        cJSON_AddStringToObject(m, "content", j->prompt);
        cJSON_AddItemToArray(cJSON_AddArrayToObject(o, "messages"), m);
    } else {
        cJSON_AddStringToObject(o, "prompt", j->prompt);
    }
    cJSON_AddNumberToObject(o, "max_tokens", j->max_tokens);
    cJSON_AddNumberToObject(o, "temperature", j->temp);
    cJSON_AddTrueToObject(o, "ignore_eos");
    if (j->temp > 0) {
        cJSON_AddNumberToObject(o, "seed", j->seed);
        cJSON_AddNumberToObject(o, "top_p", 0.9);
    }
    if (j->depth >= 0) cJSON_AddNumberToObject(o, "spec_depth", j->depth);
    if (j->stop) cJSON_AddStringToObject(o, "stop", j->stop);
    if (j->logprobs >= 0) {
        if (j->chat) {
            cJSON_AddTrueToObject(o, "logprobs");
            cJSON_AddNumberToObject(o, "top_logprobs", j->logprobs);
        } else {
            cJSON_AddNumberToObject(o, "logprobs", j->logprobs);
        }
    }
    if (j->stream) {
        cJSON_AddTrueToObject(o, "stream");
        cJSON_AddTrueToObject(cJSON_AddObjectToObject(o, "stream_options"), "include_usage");
    }
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return s;
}

/* Runs j; returns its text (malloc'd) or NULL, with *finish and *status filled. */
static char *run_job_st(const char *base, const job *j, char *finish, size_t fcap, long *status) {
    char *body = job_body(j);
    sc_resp r = call(base, "POST", j->chat ? "/v1/chat/completions" : "/v1/completions", body, KEY);
    free(body);
    char *text = NULL;
    if (status) *status = r.status;
    if (r.status != 200) {
        if (!status) fprintf(stderr, "run_job: HTTP %ld: %s\n", r.status, r.body);
    } else if (j->stream) {
        sc_sse e;
        sc_parse_sse(r.body, &e);
        CHECKF(e.done && !e.bad_json && !e.errors && e.usage_chunks == 1, "stream events: %s", r.body);
        CHECK(!j->chat || e.role_chunks == 1);
        if (finish) snprintf(finish, fcap, "%s", e.finish);
        text = e.text;
    } else {
        cJSON *o = cJSON_Parse(r.body);
        cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        cJSON *t = j->chat ? cJSON_GetObjectItem(cJSON_GetObjectItem(c, "message"), "content")
                           : cJSON_GetObjectItem(c, "text");
        if (cJSON_IsString(t)) text = strdup(t->valuestring);
        /* logprobs are compared too: exact floats are a sharper check than text */
        cJSON *lp = cJSON_GetObjectItem(c, "logprobs");
        if (text && cJSON_IsObject(lp)) {
            char *l = cJSON_PrintUnformatted(lp);
            char *both = malloc(strlen(text) + strlen(l) + 2);
            sprintf(both, "%s|%s", text, l);
            free(text);
            free(l);
            text = both;
        }
        cJSON *f = cJSON_GetObjectItem(c, "finish_reason");
        if (finish) snprintf(finish, fcap, "%s", cJSON_IsString(f) ? f->valuestring : "");
        cJSON_Delete(o);
    }
    sc_resp_free(&r);
    return text;
}

static char *run_job(const char *base, const job *j, char *finish, size_t fcap) {
    return run_job_st(base, j, finish, fcap, NULL);
}

static const job MIX[8] = {
    {.prompt = "int main(void) {", .max_tokens = 40, .depth = -1, .logprobs = 1},
    {.prompt = "The quick brown fox", .max_tokens = 24, .stream = 1, .depth = -1, .logprobs = -1},
    {.chat = 1, .prompt = "Write a haiku about the sea.", .max_tokens = 32, .depth = -1, .logprobs = 2},
    {.chat = 1, .prompt = "hello", .max_tokens = 16, .stream = 1, .depth = 2, .logprobs = -1},
    {.prompt = "def parse(", .max_tokens = 48, .temp = 0.8, .seed = 11, .depth = -1, .logprobs = 1},
    {.prompt = "SELECT * FROM", .max_tokens = 20, .depth = 0, .logprobs = 3},
    {.chat = 1, .prompt = "Tell me a story", .max_tokens = 36, .temp = 0.7, .seed = 5, .stream = 1, .depth = 3,
     .logprobs = -1},
    {.prompt = "Once upon a time", .max_tokens = 30, .depth = 7, .logprobs = 2},
};
static char *REF[8];

typedef struct { const char *base; const job *j; char *text; long status; } job_arg;

static void *job_thread(void *p) {
    job_arg *a = p;
    a->text = run_job_st(a->base, a->j, NULL, 0, &a->status);
    return NULL;
}

/* ---- tests ---- */

static void test_routes(void) {
    sc_resp r = call(BASE, "GET", "/health", NULL, NULL);
    CHECK(r.status == 200);
    sc_resp_free(&r);
    r = call(BASE, "GET", "/v1/models", NULL, KEY);
    CHECK(r.status == 200 && strstr(r.body, "\"id\":\"qwen3-tied\""));
    sc_resp_free(&r);
    /* one model, as the openai client's models.retrieve asks for it */
    r = call(BASE, "GET", "/v1/models/qwen3-tied", NULL, KEY);
    CHECKF(r.status == 200 && strstr(r.body, "\"id\":\"qwen3-tied\"") && strstr(r.body, "\"object\":\"model\"") &&
               !strstr(r.body, "\"data\""), "%ld %s", r.status, r.body);
    sc_resp_free(&r);
    r = call(BASE, "GET", "/v1/models/gpt-4", NULL, KEY);
    CHECK(r.status == 404 && strstr(r.body, "model_not_found"));
    sc_resp_free(&r);
    r = call(BASE, "GET", "/v1/models/qwen3-tied", NULL, NULL);
    CHECK(r.status == 401);
    sc_resp_free(&r);
    r = call(BASE, "GET", "/metrics", NULL, KEY);
    CHECK(r.status == 200 && strstr(r.body, "# TYPE specbed:spec_decode_num_drafts_total counter"));
    sc_resp_free(&r);
}

static void test_completion_chat_stream(void) {
    for (int chat = 0; chat < 2; chat++) {
        job j = {.chat = chat, .prompt = chat ? "What is 2+2?" : "hello world", .max_tokens = 20, .depth = -1,
                 .logprobs = -1};
        char fin[16];
        char *plain = run_job(BASE, &j, fin, sizeof fin);
        CHECK(plain && strlen(plain) > 0);
        CHECK(!strcmp(fin, "length"));
        j.stream = 1;
        char *body = job_body(&j);
        sc_resp r = call(BASE, "POST", chat ? "/v1/chat/completions" : "/v1/completions", body, KEY);
        free(body);
        sc_sse e;
        sc_parse_sse(r.body, &e);
        CHECKF(r.status == 200 && e.done && e.usage_completion == 20 && e.errors == 0 && e.bad_json == 0,
               "chat=%d: %s", chat, r.body);
        CHECK(!strcmp(e.finish, "length"));
        CHECKF(plain && !strcmp(e.text, plain), "chat=%d stream '%s' vs '%s'", chat, e.text, plain);
        free(e.text);
        sc_resp_free(&r);
        free(plain);
    }
    /* non-stream shape */
    sc_resp r = call(BASE, "POST", "/v1/chat/completions",
                     "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\",\"content\":"
                     "[{\"type\":\"text\",\"text\":\"hi\"}]}],\"max_tokens\":5,\"temperature\":0}", KEY);
    cJSON *o = cJSON_Parse(r.body);
    CHECKF(r.status == 200 && o, "%s", r.body);
    CHECK(!strcmp(cJSON_GetObjectItem(o, "object")->valuestring, "chat.completion"));
    cJSON *u = cJSON_GetObjectItem(o, "usage");
    CHECK(u && cJSON_GetObjectItem(u, "prompt_tokens")->valueint > 5 &&
          cJSON_GetObjectItem(u, "completion_tokens")->valueint <= 5);
    cJSON_Delete(o);
    sc_resp_free(&r);
}

static void test_logprobs_echo(void) {
    sc_resp r = call(BASE, "POST", "/v1/completions",
                     "{\"prompt\":\"The quick brown fox\",\"max_tokens\":6,\"temperature\":0,\"logprobs\":3,"
                     "\"ignore_eos\":true}", KEY);
    cJSON *o = cJSON_Parse(r.body);
    cJSON *lp = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "logprobs");
    cJSON *tl = cJSON_GetObjectItem(lp, "token_logprobs"), *tops = cJSON_GetObjectItem(lp, "top_logprobs");
    CHECKF(cJSON_GetArraySize(tl) == 6 && cJSON_GetArraySize(tops) == 6 &&
           cJSON_GetArraySize(cJSON_GetObjectItem(lp, "tokens")) == 6 &&
           cJSON_GetArraySize(cJSON_GetObjectItem(lp, "text_offset")) == 6, "%s", r.body);
    for (int i = 0; i < cJSON_GetArraySize(tl); i++) {
        /* greedy: the chosen token is the most likely one */
        double best = -1e30, chosen = cJSON_GetArrayItem(tl, i)->valuedouble;
        cJSON *x;
        int n = 0;
        cJSON_ArrayForEach(x, cJSON_GetArrayItem(tops, i)) { if (x->valuedouble > best) best = x->valuedouble; n++; }
        CHECK(n >= 1 && n <= 3);
        CHECKF(fabs(best - chosen) < 1e-6 && chosen <= 0, "token %d: %g vs top %g", i, chosen, best);
    }
    cJSON_Delete(o);
    sc_resp_free(&r);

    r = call(BASE, "POST", "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4,\"temperature\":0,"
             "\"logprobs\":true,\"top_logprobs\":2,\"ignore_eos\":true}", KEY);
    o = cJSON_Parse(r.body);
    cJSON *content = cJSON_GetObjectItem(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0), "logprobs"), "content");
    CHECKF(cJSON_GetArraySize(content) == 4, "%s", r.body);
    cJSON *e;
    cJSON_ArrayForEach(e, content) {
        cJSON *t = cJSON_GetObjectItem(e, "top_logprobs");
        CHECK(cJSON_GetArraySize(t) == 2 && cJSON_IsArray(cJSON_GetObjectItem(e, "bytes")));
        CHECK(fabs(cJSON_GetObjectItem(e, "logprob")->valuedouble -
                   cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "logprob")->valuedouble) < 1e-6);
    }
    cJSON_Delete(o);
    sc_resp_free(&r);

    /* streamed logprobs: one entry per generated token */
    job j = {.prompt = "hello world", .max_tokens = 12, .stream = 1, .depth = -1, .logprobs = 2};
    char *body = job_body(&j);
    r = call(BASE, "POST", "/v1/completions", body, KEY);
    free(body);
    sc_sse ev;
    sc_parse_sse(r.body, &ev);
    CHECKF(ev.lp_tokens == 12 && ev.done, "%d logprob entries: %s", ev.lp_tokens, r.body);
    free(ev.text);
    sc_resp_free(&r);

    /* echo: prompt tokens first (the first without a logprob); max_tokens 0 scores the prompt */
    const char *prompt = "Once upon a time there was";
    char b1[256], b2[256];
    snprintf(b1, sizeof b1, "{\"prompt\":\"%s\",\"max_tokens\":0,\"echo\":true,\"logprobs\":1}", prompt);
    snprintf(b2, sizeof b2, "{\"prompt\":\"%s\",\"max_tokens\":3,\"echo\":true,\"logprobs\":1,\"temperature\":0,"
             "\"ignore_eos\":true}", prompt);
    sc_resp r1 = call(BASE, "POST", "/v1/completions", b1, KEY), r2 = call(BASE, "POST", "/v1/completions", b2, KEY);
    cJSON *o1 = cJSON_Parse(r1.body), *o2 = cJSON_Parse(r2.body);
    cJSON *c1 = cJSON_GetArrayItem(cJSON_GetObjectItem(o1, "choices"), 0);
    cJSON *c2 = cJSON_GetArrayItem(cJSON_GetObjectItem(o2, "choices"), 0);
    CHECKF(c1 && c2 && !strcmp(cJSON_GetObjectItem(c1, "text")->valuestring, prompt), "%s", r1.body);
    CHECK(c2 && !strncmp(cJSON_GetObjectItem(c2, "text")->valuestring, prompt, strlen(prompt)));
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(o1, "usage"), "completion_tokens")->valueint == 0);
    cJSON *l1 = cJSON_GetObjectItem(cJSON_GetObjectItem(c1, "logprobs"), "token_logprobs");
    cJSON *l2 = cJSON_GetObjectItem(cJSON_GetObjectItem(c2, "logprobs"), "token_logprobs");
    int np = cJSON_GetObjectItem(cJSON_GetObjectItem(o1, "usage"), "prompt_tokens")->valueint;
    CHECKF(np > 2 && cJSON_GetArraySize(l1) == np && cJSON_GetArraySize(l2) == np + 3, "%d %d %d", np,
           cJSON_GetArraySize(l1), cJSON_GetArraySize(l2));
    CHECK(cJSON_IsNull(cJSON_GetArrayItem(l1, 0)) && cJSON_IsNull(cJSON_GetArrayItem(l2, 0)));
    for (int i = 1; i < np; i++) {
        cJSON *a = cJSON_GetArrayItem(l1, i), *b = cJSON_GetArrayItem(l2, i);
        CHECK(cJSON_IsNumber(a) && cJSON_IsNumber(b) && a->valuedouble == b->valuedouble && a->valuedouble < 0);
    }
    cJSON_Delete(o1);
    cJSON_Delete(o2);
    sc_resp_free(&r1);
    sc_resp_free(&r2);
}

static void test_stop(void) {
    job j = {.chat = 1, .prompt = "hi", .max_tokens = 40, .depth = -1, .logprobs = -1};
    char *full = run_job(BASE, &j, NULL, 0);
    CHECK(full && strlen(full) >= 8);
    if (!full || strlen(full) < 8) { free(full); return; }
    char stop[4];
    size_t L = strlen(full), at = L / 2;
    while (at > 0 && ((unsigned char)full[at] & 0xC0) == 0x80) at--;   /* start on a character */
    memcpy(stop, full + at, 3);
    stop[3] = 0;
    while (strlen(stop) && !strstr(full, stop)) stop[strlen(stop) - 1] = 0;
    size_t want = (size_t)(strstr(full, stop) - full);
    for (int stream = 0; stream < 2; stream++) {
        j.stream = stream;
        j.stop = stop;
        char fin[16];
        char *t = run_job(BASE, &j, fin, sizeof fin);
        CHECKF(t && strlen(t) == want && !strncmp(t, full, want), "stream=%d stop '%s': '%s' vs '%s'", stream, stop,
               t ? t : "(null)", full);
        CHECKF(!strcmp(fin, "stop"), "finish %s", fin);
        free(t);
    }
    free(full);
}

static void check_error(const char *base, const char *method, const char *path, const char *body, size_t len,
                        const char *key, long want, const char *code) {
    char u[256];
    mkurl(u, sizeof u, base, path);
    sc_resp r;
    sc_request(method, u, body, len, key, &r);
    cJSON *o = cJSON_Parse(r.body);
    cJSON *e = cJSON_GetObjectItem(o, "error");
    CHECKF(r.status == want, "%s %s %.80s: got %ld want %ld: %.300s", method, path, body ? body : "", r.status, want,
           r.body);
    CHECKF(cJSON_IsString(cJSON_GetObjectItem(e, "message")) && cJSON_IsString(cJSON_GetObjectItem(e, "type")) &&
           cJSON_IsString(cJSON_GetObjectItem(e, "code")), "error shape: %.300s", r.body);
    if (code && cJSON_IsString(cJSON_GetObjectItem(e, "code")))
        CHECKF(!strcmp(cJSON_GetObjectItem(e, "code")->valuestring, code), "code %s, want %s",
               cJSON_GetObjectItem(e, "code")->valuestring, code);
    cJSON_Delete(o);
    sc_resp_free(&r);
}

typedef struct { const char *method, *path, *body; long status; } bad_req;
static const bad_req BAD[] = {
    {"POST", "/v1/completions", "{\"prompt\": \"x\", ", 400},
    {"POST", "/v1/completions", "[1, 2]", 400},
    {"POST", "/v1/completions", "{\"prompt\": 5}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": \"10\"}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"\"}", 400},
    {"POST", "/v1/completions", "{\"prompt\": []}", 400},
    {"POST", "/v1/completions", "{\"prompt\": [1, -2]}", 400},
    {"POST", "/v1/completions", "{\"prompt\": [\"a\", \"b\"]}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"n\": 2}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"temperature\": 5}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"top_p\": 0}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"spec_depth\": 17}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"spec_depth\": -1}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"spec_depth\": 2.5}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stream\": \"yes\"}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stream_options\": {\"include_usage\": true}}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 2000}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"max_tokens\": 0}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"logprobs\": 21}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"stop\": [\"\"]}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"presence_penalty\": 0.5}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"\xff\xfe\"}", 400},
    {"POST", "/v1/chat/completions", "{\"messages\": []}", 400},
    {"POST", "/v1/chat/completions", "{\"messages\": \"hi\"}", 400},
    {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"wizard\", \"content\": \"x\"}]}", 400},
    {"POST", "/v1/chat/completions", "{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"top_logprobs\": 2}", 400},
    {"POST", "/v1/completions", "{\"prompt\": \"x\", \"model\": \"gpt-4\"}", 404},
    {"GET", "/v1/nope", NULL, 404},
    {"POST", "/v2/completions", "{}", 404},
    {"GET", "/v1/completions", NULL, 405},
    {"POST", "/v1/models", "{}", 405},
};
#define N_BAD ((int)(sizeof BAD / sizeof *BAD))

static void test_errors(void) {
    for (int i = 0; i < N_BAD; i++)
        check_error(BASE, BAD[i].method, BAD[i].path, BAD[i].body, BAD[i].body ? strlen(BAD[i].body) : 0, KEY,
                    BAD[i].status, NULL);
    check_error(BASE, "POST", "/v1/completions", "{\"prompt\": \"x\", \"model\": \"gpt-4\"}", 33, KEY, 404,
                "model_not_found");
    /* JSON read as Python reads it, or refused: NUL in a prompt, chat content
     * or stop string (it once truncated "ab\u0000cd" to "ab"), trailing
     * data, numbers like 01 (each once answered 200) */
    const char *strict[] = {"{\"prompt\": \"ab\\u0000cd\", \"max_tokens\": 2}",
                            "{\"messages\": [{\"role\": \"user\", \"content\": \"a\\u0000\"}], \"max_tokens\": 2}",
                            "{\"prompt\": \"ab\", \"stop\": [\"x\\u0000\"], \"max_tokens\": 2}",
                            "{\"prompt\": \"ab\", \"max_tokens\": 2} trailing",
                            "{\"prompt\": \"ab\", \"max_tokens\": 02}"};
    for (int i = 0; i < 5; i++)
        check_error(BASE, "POST", i == 1 ? "/v1/chat/completions" : "/v1/completions", strict[i], strlen(strict[i]), KEY,
                    400, NULL);
    /* over-long prompts: text and token ids */
    size_t n = 20000;
    char *big = malloc(n + 64);
    int o = snprintf(big, n + 64, "{\"prompt\": \"");
    for (size_t i = 0; i < 3000; i++) o += snprintf(big + o, n + 64 - (size_t)o, "ab ");
    snprintf(big + o, n + 64 - (size_t)o, "\"}");
    check_error(BASE, "POST", "/v1/completions", big, strlen(big), KEY, 400, NULL);
    o = snprintf(big, n + 64, "{\"prompt\": [1");
    for (int i = 0; i < 1100; i++) o += snprintf(big + o, n + 64 - (size_t)o, ",7");
    snprintf(big + o, n + 64 - (size_t)o, "]}");
    check_error(BASE, "POST", "/v1/completions", big, strlen(big), KEY, 400, NULL);
    free(big);
    /* keys */
    check_error(BASE, "POST", "/v1/completions", "{\"prompt\": \"x\"}", 15, "wrong", 401, "invalid_api_key");
    check_error(BASE, "POST", "/v1/completions", "{\"prompt\": \"x\"}", 15, NULL, 401, "invalid_api_key");
    check_error(BASE, "GET", "/metrics", NULL, 0, NULL, 401, NULL);
    check_error(BASE, "GET", "/v1/models", NULL, 0, "sk-specbed-tes", 401, NULL);
    /* a body over the 4 MiB cap */
    size_t huge = (4u << 20) + 16;
    char *h = malloc(huge);
    memset(h, ' ', huge);
    h[0] = '{';
    h[huge - 1] = '}';
    check_error(BASE, "POST", "/v1/completions", h, huge, KEY, 413, "request_too_large");
    free(h);
    CHECK(idle(BASE));
}

/* 8 mixed requests at once give what each gives alone; depth does not
 * change greedy text. */
/* The decision on a UTF-8 byte order mark before the JSON body: one, at
 * the very start, is ignored (RFC 8259 section 8.1 lets a parser ignore it;
 * vLLM's does, Python's json.loads decoding the body as utf-8-sig), and the
 * request is answered as without it; a BOM anywhere else is not JSON: 400. */
static void test_bom(void) {
    const char *plain = "{\"prompt\": \"hello\", \"max_tokens\": 6, \"temperature\": 0}";
    char body[256];
    sc_resp a = call(BASE, "POST", "/v1/completions", plain, KEY);
    snprintf(body, sizeof body, "\xEF\xBB\xBF%s", plain);
    sc_resp b = call(BASE, "POST", "/v1/completions", body, KEY);
    cJSON *ja = cJSON_Parse(a.body), *jb = cJSON_Parse(b.body);
    cJSON *ta = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(ja, "choices"), 0), "text");
    cJSON *tb = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(jb, "choices"), 0), "text");
    CHECKF(a.status == 200 && b.status == 200 && cJSON_IsString(ta) && cJSON_IsString(tb) &&
           !strcmp(ta->valuestring, tb->valuestring), "a leading BOM: %ld %.200s vs %ld %.200s", b.status, b.body,
           a.status, a.body);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    sc_resp_free(&a);
    sc_resp_free(&b);
    const char *fmt[] = {"\xEF\xBB\xBF\xEF\xBB\xBF%s", " \xEF\xBB\xBF%s", "%s\xEF\xBB\xBF"};
    for (int i = 0; i < 3; i++) {
        snprintf(body, sizeof body, fmt[i], plain);
        check_error(BASE, "POST", "/v1/completions", body, strlen(body), KEY, 400, "invalid_request");
    }
}

/* Text keeps every byte its tokens decode to, a NUL included (JSON carries
 * it as \u0000; cJSON's strings would end there). Token 188 of the fixture's
 * byte-level vocabulary is the byte 0x00, 64 is "a". */
static void test_nul_text(void) {
    const char *body = "{\"prompt\": [64, 188, 64], \"max_tokens\": 0, \"echo\": true, \"logprobs\": 0}";
    sc_resp r = call(BASE, "POST", "/v1/completions", body, KEY);
    CHECKF(r.status == 200 && strstr(r.body, "\"text\":\"a\\u0000a\""), "echo of a NUL: %ld %.300s", r.status, r.body);
    sc_resp_free(&r);
    const char *sbody = "{\"prompt\": [64, 188, 64], \"max_tokens\": 0, \"echo\": true, \"stream\": true}";
    r = call(BASE, "POST", "/v1/completions", sbody, KEY);
    CHECKF(r.status == 200 && strstr(r.body, "\"text\":\"a\\u0000a\""), "streamed echo of a NUL: %ld %.300s", r.status,
           r.body);
    sc_resp_free(&r);
    /* the escapes cJSON makes stay as they were */
    const char *q = "{\"prompt\": \"say \\\"hi\\\"\\n\\t\\\\ \\u0001\", \"max_tokens\": 0, \"echo\": true}";
    r = call(BASE, "POST", "/v1/completions", q, KEY);
    CHECKF(r.status == 200 && strstr(r.body, "\"text\":\"say \\\"hi\\\"\\n\\t\\\\ \\u0001\""), "escapes: %ld %.300s",
           r.status, r.body);
    sc_resp_free(&r);
}

/* The "content" strings of a chat response or SSE stream, concatenated as
 * they stand in the JSON (escapes kept: cJSON would end a string at \u0000). */
static void raw_contents(const char *body, char *out, size_t cap) {
    size_t o = 0;
    out[0] = 0;
    for (const char *p = body; (p = strstr(p, "\"content\":\"")) != NULL;) {
        p += strlen("\"content\":\"");
        for (; *p && *p != '"'; p++) {
            if (*p == '\\' && p[1]) {   /* an escape: both characters */
                if (o + 1 < cap) out[o++] = *p;
                p++;
            }
            if (o + 1 < cap) out[o++] = *p;
        }
        out[o] = 0;
    }
}

/* The chat route keeps a generated NUL too. A request cannot carry one
 * (refused) and the fixture does not generate token 188, so this serves the
 * fixture's weights with a tokenizer whose vocabulary swaps two entries:
 * "nchannels", which the fixture generates greedily after "hi", and "Ā",
 * the byte-level form of the byte 0x00. The model then generates the same
 * ids, which decode to NUL bytes. */
static void test_nul_chat(void) {
    job j = {.chat = 1, .prompt = "hi", .max_tokens = 3, .depth = -1, .logprobs = -1};
    char *plain = run_job(BASE, &j, NULL, 0);
    CHECKF(plain && !strcmp(plain, "\nnchannelsnchannels"),
           "the fixture's greedy reply to 'hi' is no longer \"\\nnchannelsnchannels\" (got '%s'): pick the swapped "
           "entry anew", plain ? plain : "(null)");
    free(plain);
    char dir[] = "/tmp/test_server_nul_XXXXXX", path[512];
    CHECK(mkdtemp(dir) != NULL);
    static const char *const links[] = {"config.json", "generation_config.json", "model.safetensors",
                                        "tokenizer_config.json"};
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        char src[512];
        snprintf(src, sizeof src, "%s/%s", tu_path("tests/fixtures/qwen3-tied"), links[i]);
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        CHECKF(symlink(src, path) == 0, "symlink %s", path);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", tu_path("tests/fixtures/qwen3-tied"));
    char *txt = tu_read_file(path, NULL);
    cJSON *tj = txt ? cJSON_Parse(txt) : NULL;
    free(txt);
    cJSON *vocab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(tj, "model"), "vocab");
    cJSON *a = cJSON_GetObjectItemCaseSensitive(vocab, "nchannels"), *b = cJSON_GetObjectItemCaseSensitive(vocab, "\xC4\x80");
    CHECKF(cJSON_IsNumber(a) && cJSON_IsNumber(b), "the fixture's vocabulary lacks 'nchannels' or the NUL byte");
    if (!cJSON_IsNumber(a) || !cJSON_IsNumber(b)) { cJSON_Delete(tj); return; }
    double ida = a->valuedouble;
    cJSON_SetNumberValue(a, b->valuedouble);
    cJSON_SetNumberValue(b, ida);
    char *out = cJSON_PrintUnformatted(tj);
    cJSON_Delete(tj);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f && out && fputs(out, f) >= 0);
    if (f) fclose(f);
    free(out);

    server_opts o;
    server_opts_default(&o);
    o.api_key = KEY;
    o.served_name = "qwen3-tied";
    o.log = tmpfile();
    char base[64], got[256];
    server *s = start_dir(&o, dir, base, sizeof base);
    CHECK(s != NULL);
    for (int stream = 0; s && stream < 2; stream++) {
        j.stream = stream;
        char *body = job_body(&j);
        sc_resp r = call(base, "POST", "/v1/chat/completions", body, KEY);
        free(body);
        raw_contents(r.body ? r.body : "", got, sizeof got);
        CHECKF(r.status == 200 && !strcmp(got, "\\n\\u0000\\u0000"), "chat%s reply with NULs: %ld content '%s' in %.400s",
               stream ? " stream" : "", r.status, got, r.body);
        sc_resp_free(&r);
    }
    if (s) server_free(s);
    if (o.log) fclose(o.log);
    for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, links[i]);
        remove(path);
    }
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    remove(path);
    rmdir(dir);
}

static void test_batch_invariance(void) {
    for (int i = 0; i < 8; i++) {
        REF[i] = run_job(BASE, &MIX[i], NULL, 0);
        CHECKF(REF[i] && strlen(REF[i]) > 0, "job %d alone", i);
    }
    pthread_t th[8];
    job_arg a[8];
    for (int i = 0; i < 8; i++) {
        a[i] = (job_arg){.base = BASE, .j = &MIX[i]};
        pthread_create(&th[i], NULL, job_thread, &a[i]);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        CHECKF(a[i].text && REF[i] && !strcmp(a[i].text, REF[i]), "job %d: batched '%s' vs alone '%s'", i,
               a[i].text ? a[i].text : "(null)", REF[i] ? REF[i] : "(null)");
        free(a[i].text);
    }
    /* speculation on (several depths) vs off through the API */
    for (int i = 0; i < 8; i++) {
        if (MIX[i].temp > 0) continue;   /* sampled: same distribution, not the same draws */
        static const int depths[] = {0, 1, 4, 9};
        for (int d = 0; d < 4; d++) {
            job j = MIX[i];
            j.depth = depths[d];
            char *t = run_job(BASE, &j, NULL, 0);
            CHECKF(t && REF[i] && !strcmp(t, REF[i]), "job %d at spec_depth %d: '%s' vs '%s'", i, depths[d],
                   t ? t : "(null)", REF[i] ? REF[i] : "(null)");
            free(t);
        }
    }
}

typedef struct { int id, fails; } client_arg;

static void *client(void *p) {
    client_arg *a = p;
    for (int it = 0; it < 3; it++) {
        int g = (a->id + it) % 8;
        char *t = run_job(BASE, &MIX[g], NULL, 0);
        if (!t || !REF[g] || strcmp(t, REF[g])) a->fails++;
        free(t);
        const bad_req *b = &BAD[(a->id * 3 + it) % N_BAD];
        sc_resp r = call(BASE, b->method, b->path, b->body, b->body ? KEY : KEY);
        if (r.status != b->status) {
            fprintf(stderr, "client %d: %s %s got %ld want %ld\n", a->id, b->method, b->path, r.status, b->status);
            a->fails++;
        }
        sc_resp_free(&r);
    }
    return NULL;
}

static void test_16_clients(void) {
    pthread_t th[16];
    client_arg a[16];
    for (int i = 0; i < 16; i++) {
        a[i] = (client_arg){.id = i};
        pthread_create(&th[i], NULL, client, &a[i]);
    }
    int fails = 0;
    for (int i = 0; i < 16; i++) {
        pthread_join(th[i], NULL);
        fails += a[i].fails;
    }
    CHECKF(fails == 0, "%d wrong answers among 16 concurrent clients", fails);
    CHECK(idle(BASE));
    char *t = run_job(BASE, &MIX[0], NULL, 0);   /* still serving */
    CHECK(t && REF[0] && !strcmp(t, REF[0]));
    free(t);
}

static void test_disconnect(void) {
    const char *series = "specbed:request_success_total{finished_reason=\"abort\"}";
    double before = metric(BASE, series);
    char u[256];
    mkurl(u, sizeof u, BASE, "/v1/completions");
    const char *body = "{\"prompt\":\"hello\",\"max_tokens\":1000,\"temperature\":0,\"ignore_eos\":true,"
                       "\"spec_depth\":0,\"stream\":true}";
    int ev = sc_stream_hangup(u, body, KEY, 3);
    CHECK(ev >= 3);
    CHECK(idle(BASE));
    CHECKF(metric(BASE, series) == before + 1, "abort count %g, before %g", metric(BASE, series), before);
    /* a non-streaming request whose client gives up */
    const char *b2 = "{\"prompt\":\"hello\",\"max_tokens\":1000,\"temperature\":0,\"ignore_eos\":true,"
                     "\"spec_depth\":0}";
    sc_resp r;
    sc_request_ms("POST", u, b2, strlen(b2), KEY, 40, &r);   /* well inside 1000 tokens even in Release */
    CHECK(r.status == 0);
    sc_resp_free(&r);
    CHECK(idle(BASE));
    CHECKF(metric(BASE, series) == before + 2, "abort count %g, before %g", metric(BASE, series), before);
}

static void test_metrics_and_log(FILE *log) {
    sc_resp r = call(BASE, "GET", "/metrics", NULL, KEY);
    const char *m = r.body;
    double drafts = sc_metric(m, "specbed:spec_decode_num_drafts_total");
    double dt = sc_metric(m, "specbed:spec_decode_num_draft_tokens_total");
    double acc = sc_metric(m, "specbed:spec_decode_num_accepted_tokens_total");
    double p0 = sc_metric(m, "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"}");
    double p3 = sc_metric(m, "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"3\"}");
    CHECKF(drafts > 0 && dt >= drafts && acc > 0, "drafts %g tokens %g accepted %g", drafts, dt, acc);
    /* the draft model is the target itself: every draft survives */
    CHECKF(acc == dt, "accepted %g of %g drafted", acc, dt);
    CHECK(p0 == drafts && p3 > 0 && p3 <= p0);
    CHECK(sc_metric(m, "specbed:time_to_first_token_seconds_count") > 0);
    CHECK(sc_metric(m, "specbed:inter_token_latency_seconds_count") > 0);
    CHECK(sc_metric(m, "specbed:e2e_request_latency_seconds_count") > 0);
    CHECK(sc_metric(m, "specbed:generation_tokens_total") > 0 && sc_metric(m, "specbed:prompt_tokens_total") > 0);
    CHECK(sc_metric(m, "specbed:kv_cache_usage_perc") == 0);
    CHECK(sc_metric(m, "specbed:request_success_total{finished_reason=\"length\"}") > 0);
    sc_resp_free(&r);

    fflush(log);
    rewind(log);
    char line[512];
    int n = 0, spec = 0, plain = 0;
    while (fgets(line, sizeof line, log)) {
        const char *p = strstr(line, "Decode batch, ");
        if (!p) continue;
        int run, q, used = 0, head = 0, mid = 0;
        long tok;
        double usage, len = 0, rate = 0, thr;
        int got = sscanf(p, "Decode batch, #running-req: %d, #token: %ld, token usage: %lf, %n", &run, &tok, &usage,
                         &head);
        CHECKF(got == 3 && head > 0 && line[0] == '[', "log line: %s", line);
        if (head <= 0) continue;
        const char *t = p + head;
        /* accept len / rate appear only for intervals in which a request drafted (SGLang's shape) */
        int drafted = !strncmp(t, "accept len: ", 12);
        if (drafted) {
            CHECKF(sscanf(t, "accept len: %lf, accept rate: %lf, %n", &len, &rate, &mid) == 2 && mid > 0, "%s", line);
            t += mid;
        }
        got = sscanf(t, "gen throughput (token/s): %lf, #queue-req: %d%n", &thr, &q, &used);
        CHECKF(got == 2 && t[used] == '\n', "log line: %s", line);
        CHECKF(run >= 1 && tok > 0 && thr > 0 && q >= 0, "%s", line);
        if (drafted) CHECKF(len >= 1.0 && rate >= 0 && rate <= 1, "%s", line);
        n++;
        spec += drafted && len > 2.0 && rate == 1.0;
        plain += !drafted;
    }
    CHECKF(n >= 5 && spec >= 1, "%d decode-batch lines, %d speculative", n, spec);
}

/* max-running 1, max-queue 1: a burst beyond that gets 429, the rest completes. */
static void test_queue_full(void) {
    server_opts o;
    server_opts_default(&o);
    o.max_running = 1;
    o.max_queue = 1;
    o.decode_log_interval = 0;
    char base[64];
    server *s = start(&o, base, sizeof base);
    CHECK(s != NULL);
    if (!s) return;
    enum { N = 6 };
    pthread_t th[N];
    job_arg a[N];
    job j = {.prompt = "hello", .max_tokens = 300, .depth = -1, .logprobs = -1};
    for (int i = 0; i < N; i++) {
        a[i] = (job_arg){.base = base, .j = &j};
        pthread_create(&th[i], NULL, job_thread, &a[i]);
    }
    int ok = 0, full = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += a[i].status == 200 && a[i].text && strlen(a[i].text) > 0;
        full += a[i].status == 429;
        free(a[i].text);
    }
    CHECKF(ok >= 2 && full >= 1 && ok + full == N, "%d completed, %d got 429, of %d (room for 2)", ok, full, N);
    sc_resp r = call(base, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":300,\"ignore_eos\":true}", NULL);
    sc_resp r2 = call(base, "GET", "/metrics", NULL, NULL);
    CHECK(r.status == 200 && r2.status == 200);
    sc_resp_free(&r);
    sc_resp_free(&r2);
    /* This server has no drafter: a request asking for speculation is
     * refused (a figure "at depth 4" from a server that drafted nothing is
     * no figure); depth 0 is what it does anyway. */
    const char *deep = "{\"prompt\":\"x\",\"max_tokens\":2,\"spec_depth\":4}";
    check_error(base, "POST", "/v1/completions", deep, strlen(deep), NULL, 400, "invalid_request");
    r = call(base, "POST", "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2,\"spec_depth\":1}", NULL);
    CHECKF(r.status == 400 && strstr(r.body, "\"param\":\"spec_depth\"") && strstr(r.body, "no drafter"), "%ld %s",
           r.status, r.body);
    sc_resp_free(&r);
    r = call(base, "POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":2,\"spec_depth\":0}", NULL);
    CHECKF(r.status == 200, "spec_depth 0 without a drafter: %ld %s", r.status, r.body);
    sc_resp_free(&r);
    server_free(s);
}

/* A streamed chat completion's role chunk comes after the prompt is
 * prefilled, with the first token, as vLLM sends it (serving_chat.py sends
 * the role delta on the engine's first output), so a client that takes TTFT
 * at the first chunk (vllm bench serve) measures prefill. One running slot,
 * held by a long request: a chat stream queued behind it cannot be
 * prefilled before the long request finishes, so when its first chunk
 * arrives the long request must have been counted finished. A role chunk
 * sent at once arrives while the stream still waits in the queue. */
static void test_role_after_prefill(void) {
    server_opts o;
    server_opts_default(&o);
    o.max_running = 1;
    o.decode_log_interval = 0;
    char base[64];
    server *s = start(&o, base, sizeof base);
    CHECK(s != NULL);
    if (!s) return;
    job a = {.prompt = "hello", .max_tokens = 900, .depth = -1, .logprobs = -1};
    job_arg aa = {.base = base, .j = &a};
    pthread_t th;
    pthread_create(&th, NULL, job_thread, &aa);
    int running = 0;
    for (int i = 0; i < 2000 && !running; i++) running = metric(base, "specbed:num_requests_running") == 1;
    CHECKF(running, "the long request never showed as running");
    double fin0 = metric(base, "specbed:request_success_total{finished_reason=\"length\"}");
    job b = {.chat = 1, .stream = 1, .prompt = "hi", .max_tokens = 8, .depth = -1, .logprobs = -1};
    char *body = job_body(&b), u[256];
    mkurl(u, sizeof u, base, "/v1/chat/completions");
    int ev = sc_stream_hangup(u, body, NULL, 1);
    double fin1 = metric(base, "specbed:request_success_total{finished_reason=\"length\"}");
    free(body);
    pthread_join(th, NULL);
    CHECKF(aa.status == 200, "long request: HTTP %ld", aa.status);
    free(aa.text);
    CHECK(idle(base));
    CHECKF(ev == 1 && fin0 == 0 && fin1 >= 1,
           "%d event(s), finished %g then %g: the long request %s when the stream's first chunk came (that chunk "
           "must wait for the stream's prefill, which waits for the long request)", ev, fin0, fin1,
           fin1 >= 1 ? "had finished" : "was still running");
    server_free(s);
}

/* A verify schedule (fewer drafts verified when they tend to fail) is
 * still lossless: greedy text equals the fixed-schedule server's, under a
 * batch of concurrent requests; /metrics counts the drafts computed and
 * then not verified. With DSpark, whose confidence comes before each
 * draft, drafting stops early there too. cost_table NULL: the server
 * profiles verify and drafter costs at startup (adaptive's probes draft
 * whatever that measures); a table makes the decisions independent of the
 * machine: profiled under ASan on a CI machine, DSpark's drafting looked
 * so dear that confidence admitted no draft at all (0 drafts verified). */
static void test_verify_schedule(const char *drafter, const char *dir, const char *policy, const char *cost_table) {
    server_opts o;
    server_opts_default(&o);
    o.dr.name = drafter;
    o.dr.draft_model = tu_path(dir);
    o.verify.name = policy;
    o.verify.cost_path = cost_table;
    o.api_key = KEY;
    o.decode_log_interval = 0;
    FILE *log = tmpfile();
    o.log = log;
    char base[64];
    server *s = start(&o, base, sizeof base);
    CHECK(s != NULL);
    if (s) {
        pthread_t th[8];
        job_arg a[8];
        for (int i = 0; i < 8; i++) {
            a[i] = (job_arg){.base = base, .j = &MIX[i]};
            pthread_create(&th[i], NULL, job_thread, &a[i]);
        }
        for (int i = 0; i < 8; i++) {
            pthread_join(th[i], NULL);
            if (MIX[i].temp == 0)
                CHECKF(a[i].text && REF[i] && !strcmp(a[i].text, REF[i]), "%s with %s, job %d differs", drafter, policy,
                       i);
            free(a[i].text);
        }
        sc_resp r = call(base, "GET", "/metrics", NULL, KEY);
        double dt = sc_metric(r.body, "specbed:spec_decode_num_draft_tokens_total");
        double unv = sc_metric(r.body, "specbed:spec_decode_num_unverified_draft_tokens_total");
        printf("%s with %s, 8 concurrent jobs: %g drafts verified, %g computed and not verified\n", drafter, policy, dt,
               unv);
        CHECKF(dt > 0 && unv >= 0, "%s with %s: draft tokens %g, unverified %g", drafter, policy, dt, unv);
        sc_resp_free(&r);
        server_free(s);
    }
    fclose(log);
}

static void test_fault_injection(void) {
    server_opts o;
    server_opts_default(&o);
    o.dr.name = "draft";
    o.dr.draft_model = tu_path("tests/fixtures/qwen3-tied");
    o.fault_on = 1;
    o.fault = (spec_fault){.kind = FAULT_COLLISION, .min_rows = 2, .p = 1.0, .seed = 1};
    o.decode_log_interval = 0;
    FILE *log = tmpfile();
    o.log = log;
    char base[64];
    server *s = start(&o, base, sizeof base);
    CHECK(s != NULL);
    if (!s) { fclose(log); return; }
    job j = {.prompt = "int main(void) {", .max_tokens = 24, .depth = -1, .logprobs = -1};
    char *t = run_job(base, &j, NULL, 0);
    CHECK(t != NULL);
    free(t);
    sc_resp r = call(base, "GET", "/metrics", NULL, NULL);
    CHECKF(sc_metric(r.body, "specbed:spec_decode_faults_injected_total") > 0, "no fault injected");
    sc_resp_free(&r);
    server_free(s);
    rewind(log);
    char line[512];
    int on = 0;
    while (fgets(line, sizeof line, log)) on += strstr(line, "FAULT INJECTION IS ON") != NULL;
    CHECK(on == 1);
    fclose(log);
}

int main(void) {
    sc_init();
    server_opts o;
    server_opts_default(&o);
    o.dr.name = "draft";
    o.dr.draft_model = tu_path("tests/fixtures/qwen3-tied");
    o.api_key = KEY;
    o.decode_log_interval = 5;
    FILE *log = tmpfile();
    o.log = log;
    server *s = start(&o, BASE, sizeof BASE);
    CHECK(s != NULL);
    if (s) {
        test_routes();
        test_completion_chat_stream();
        test_logprobs_echo();
        test_stop();
        test_errors();
        test_bom();
        test_nul_text();
        test_nul_chat();
        test_batch_invariance();
        test_16_clients();
        test_disconnect();
        test_metrics_and_log(log);
        CHECK(idle(BASE));
        server_free(s);
        test_verify_schedule("draft", "tests/fixtures/qwen3-tied", "adaptive", NULL);
        /* a verify row adds 1.4 us to a 1 ms step and a draft costs 10 us
         * more: a draft pays once its survival beats roughly (1.4 + 10) us
         * / 1 ms, about 0.01, so what is admitted is the confidence
         * head's doing, not the machine's timing */
        char cost[] = "/tmp/test_server_cost_XXXXXX";
        int fd = mkstemp(cost);
        FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
        CHECK(f != NULL);
        if (f) {
            fputs("{\"drafter\": \"dspark\", \"rows\": [1, 8, 64], \"seconds_per_step\": [0.001, 0.00101, 0.0011], "
                  "\"draft_seconds_per_step\": 0.00002, \"draft_seconds_per_token\": 0.00001}\n", f);
            fclose(f);
            test_verify_schedule("dspark", "tests/fixtures/dspark-tiny", "confidence", cost);
            remove(cost);
        }
    }
    fclose(log);
    for (int i = 0; i < 8; i++) free(REF[i]);
    test_queue_full();
    test_role_after_prefill();
    test_fault_injection();
    sc_cleanup();
    return tu_done("test_server");
}
