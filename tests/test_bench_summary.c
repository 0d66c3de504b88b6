/* label: bench */
/* test_bench_summary.c — summary.json as `vllm bench serve` writes it: each
 * field under vLLM's name holds vLLM's value by vLLM's formula
 * (vllm/benchmarks/serve.py), with vLLM's type (a float stays "1.0"), and
 * specbed's own definitions under specbed_ names. Fed a hand-built run:
 * three requests (one failed) and a counter set where verify steps
 * outnumber drafts, so the two accept-length definitions differ. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "load.h"
#include "load_out.h"
#include "metrics_src.h"
#include "test_util.h"

#define NEAR(a, b) (fabs((a) - (b)) < 1e-9)

static double num(const cJSON *j, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, k);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

int main(void) {
    workload *wl;
    char err[512];
    CHECKF(!workload_parse(&wl, "w", "{\"prompt\": \"a\"}\n{\"prompt\": \"b\"}\n", err, sizeof err), "%s", err);
    if (!wl) return tu_done("test_bench_summary");
    ld_config c;
    ld_config_defaults(&c);
    c.url = "http://127.0.0.1:1";
    c.wl = wl;
    c.num_prompts = 3;
    c.concurrency = 2;
    ld_result r;
    memset(&r, 0, sizeof r);
    snprintf(r.model, sizeof r.model, "m");
    ld_request q[3];
    memset(q, 0, sizeof q);
    double itl0[2] = {0.01, 0.02}, itl1[1] = {0.03};
    /* closed loop of 2 = vLLM's rate inf, max concurrency 2: every request
     * arrives at 0; the third waits for a slot until 0.4 s */
    q[0] = (ld_request){.idx = 0, .item = 0, .t_send = 0.0, .t_arrival = 0.0, .ttft = 0.1, .e2el = 0.4, .n_out = 3,
                        .n_in = 5, .ok = 1, .itl = itl0, .n_itl = 2, .max_tokens = 8};
    q[1] = (ld_request){.idx = 1, .item = 1, .t_send = 0.0, .t_arrival = 0.0, .ttft = 0.2, .e2el = 0.5, .n_out = 2,
                        .n_in = 5, .ok = 1, .itl = itl1, .n_itl = 1, .max_tokens = 8};
    q[2] = (ld_request){.idx = 2, .item = 0, .t_send = 0.4, .t_arrival = 0.0, .ttft = NAN, .e2el = 0.05, .ok = 0,
                        .error = "HTTP 500", .max_tokens = 8};
    for (int i = 0; i < 3; i++) { q[i].text = ""; q[i].reasoning = ""; }
    r.req = q;
    r.n_req = 3;
    r.duration = 0.5;
    /* drafts 305, steps 447 (the ngram case of issue 37) */
    static const char A[] = "specbed:spec_decode_num_drafts_total 0\nspecbed:spec_decode_num_draft_tokens_total 0\n"
                            "specbed:spec_decode_num_accepted_tokens_total 0\n"
                            "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 0\n"
                            "specbed:spec_decode_num_verify_steps_total 0\nspecbed:spec_decode_num_committed_tokens_total 0\n";
    static const char B[] = "specbed:spec_decode_num_drafts_total 305\nspecbed:spec_decode_num_draft_tokens_total 900\n"
                            "specbed:spec_decode_num_accepted_tokens_total 371\n"
                            "specbed:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 182\n"
                            "specbed:spec_decode_num_verify_steps_total 447\nspecbed:spec_decode_num_committed_tokens_total 818\n";
    msnap a, b;
    CHECK(!msnap_parse(MSRC_SPECBED, A, &a, NULL, 0) && !msnap_parse(MSRC_SPECBED, B, &b, NULL, 0));
    msnap_totals(&a, &b, &r.totals);
    r.has_totals = 1;
    r.msrc = MSRC_SPECBED;
    ld_pcts pc;
    ld_pcts_parse("99", &pc, NULL, 0);

    cJSON *j = ld_summary_json(&c, &r, &pc);
    CHECK(j != NULL);
    /* vLLM's spec-decode figures by vLLM's formulas */
    CHECKF(NEAR(num(j, "spec_decode_acceptance_length"), 1 + 371.0 / 305), "spec_decode_acceptance_length %g",
           num(j, "spec_decode_acceptance_length"));
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(j, "spec_decode_per_position_acceptance_rates");
    CHECK(cJSON_GetArraySize(pp) == 1 && NEAR(cJSON_GetArrayItem(pp, 0)->valuedouble, 182.0 / 305));
    CHECK(NEAR(num(j, "spec_decode_acceptance_rate"), 100.0 * 371 / 900) && num(j, "spec_decode_num_drafts") == 305);
    /* specbed's own, under its own names */
    CHECK(NEAR(num(j, "specbed_acceptance_length"), 818.0 / 447) && num(j, "specbed_num_verify_steps") == 447);
    const cJSON *sp = cJSON_GetObjectItemCaseSensitive(j, "specbed_per_position_acceptance_rates");
    CHECK(cJSON_GetArraySize(sp) == 1 && NEAR(cJSON_GetArrayItem(sp, 0)->valuedouble, 182.0 / 447));
    /* the keys vLLM writes: label and tokenizer_id (None: no --label, no
     * client-side tokenizer), rtfx (no audio: 0), latencies and queue_times
     * for every request sent, failed ones included (latency 0, as vLLM's
     * RequestFuncOutput default) */
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "label")));
    CHECK(cJSON_IsNull(cJSON_GetObjectItemCaseSensitive(j, "tokenizer_id")));
    CHECK(num(j, "rtfx") == 0.0);
    const cJSON *lat = cJSON_GetObjectItemCaseSensitive(j, "latencies"), *qt = cJSON_GetObjectItemCaseSensitive(j, "queue_times");
    CHECK(cJSON_GetArraySize(lat) == 3 && NEAR(cJSON_GetArrayItem(lat, 0)->valuedouble, 0.4) &&
          cJSON_GetArrayItem(lat, 2)->valuedouble == 0.0);
    CHECK(cJSON_GetArraySize(qt) == 3 && cJSON_GetArrayItem(qt, 0)->valuedouble == 0.0 &&
          NEAR(cJSON_GetArrayItem(qt, 2)->valuedouble, 0.4));
    /* peaks: chunks at 0.1, 0.11, 0.13 (q0) and 0.2, 0.23 (q1) all in second 0 */
    CHECK(num(j, "max_output_tokens_per_s") == 5 && num(j, "max_concurrent_requests") == 2);
    cJSON_Delete(j);

    /* written: floats keep a decimal point when whole, counts stay integers */
    char dir[] = "/tmp/specbed_summary_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECKF(!ld_write_outputs(dir, &c, &r, &pc, err, sizeof err), "%s", err);
    char p[600];
    snprintf(p, sizeof p, "%s/summary.json", dir);
    char *t = tu_read_file(p, NULL);
    CHECK(t != NULL);
    if (t) {
        static const char *const WANT[] = {"\"burstiness\":\t1.0", "\"max_output_tokens_per_s\":\t5.0", "\"rtfx\":\t0.0",
                                           "\"max_concurrent_requests\":\t2,", "\"completed\":\t2,", "\"failed\":\t1,",
                                           "\"max_concurrency\":\t2,", "\"label\":\tnull", "\"tokenizer_id\":\tnull",
                                           "\"spec_decode_num_drafts\":\t305,", NULL};
        for (int i = 0; WANT[i]; i++) CHECKF(strstr(t, WANT[i]) != NULL, "summary.json lacks %s", WANT[i]);
        cJSON *back = cJSON_Parse(t);
        CHECKF(back && NEAR(num(back, "burstiness"), 1.0) && NEAR(num(back, "spec_decode_acceptance_length"), 1 + 371.0 / 305),
               "summary.json does not read back");
        const cJSON *l2 = cJSON_GetObjectItemCaseSensitive(back, "latencies");
        CHECK(cJSON_GetArraySize(l2) == 3 && cJSON_IsNumber(cJSON_GetArrayItem(l2, 2)));
        cJSON_Delete(back);
    }
    free(t);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
    workload_free(wl);
    return tu_done("test_bench_summary");
}
