/* label: model */
/* test_fault.c — each --inject-fault kind's trigger (spec/fault.c), on the
 * fixture target drafting for itself (every draft is accepted when
 * nothing is wrong, so any change in the output is the fault's):
 *   - parsing: kinds, keys, the old rows=,p=,seed= form, refusals by name;
 *   - collision: fires only on steps with enough verify rows and, with
 *     depth=D, only on requests verifying exactly D drafts; with p=1 the
 *     greedy output changes; with first=S it stops after S seconds;
 *   - flat: rows below `below` whose token is the trigger get the fixed
 *     distribution (its argmax is what is generated); above it, nothing;
 *   - window: keys more than `below` back hidden change the output, a
 *     window wider than the context does not;
 *   - nondet: the same run twice (two "processes": two armings) gives two
 *     different greedy outputs, where the clean run is reproducible. */
#include <string.h>
#include <unistd.h>
#include "drafters.h"
#include "fault.h"
#include "spec_run.h"
#include "test_util.h"

static void test_parse(void) {
    spec_fault f;
    char err[256];
    CHECK(!fault_parse("collision", &f, err, sizeof err) && f.kind == FAULT_COLLISION && f.min_rows == 4 && f.p == 0.25);
    CHECK(!fault_parse("rows=2,p=1,seed=9", &f, err, sizeof err) && f.kind == FAULT_COLLISION && f.min_rows == 2 &&
          f.p == 1 && f.seed == 9);
    CHECK(!fault_parse("collision,depth=5,first=30", &f, err, sizeof err) && f.depth == 5 && f.first_s == 30);
    CHECK(!fault_parse("flat,below=64,trigger=7", &f, err, sizeof err) && f.kind == FAULT_FLAT && f.below == 64 &&
          f.trigger == 7);
    CHECK(!fault_parse("nondet,p=0.5", &f, err, sizeof err) && f.kind == FAULT_NONDET && f.p == 0.5);
    CHECK(!fault_parse("window", &f, err, sizeof err) && f.kind == FAULT_WINDOW && f.below == 128);
    CHECK(fault_parse("meteor", &f, err, sizeof err) == -1 && strstr(err, "meteor"));
    CHECK(fault_parse("flat,p=2", &f, err, sizeof err) == -1 && strstr(err, "p=2"));
    CHECK(fault_parse("rows=x", &f, err, sizeof err) == -1 && strstr(err, "rows=x"));
    CHECK(fault_parse("p=1,collision", &f, err, sizeof err) == -1);   /* the kind comes first */
}

static void test_collision_rows(void) {
    spec_fault f;
    char err[256];
    fault_parse("collision,rows=6,p=1,depth=3", &f, err, sizeof err);
    fault_state s;
    fault_arm(&s, &f, 0.0);
    unsigned char corrupt[64] = {0};
    int k[3] = {2, 3, 4}, row0[3] = {0, 3, 7};
    CHECK(!fault_pick_row(&s, 0.0, 5, k, row0, 3, corrupt));        /* too few verify rows */
    CHECK(fault_pick_row(&s, 0.0, 12, k, row0, 3, corrupt) == 1);   /* depth 3: only the second request */
    int hit = -1;
    for (int r = 0; r < 64; r++) if (corrupt[r]) hit = r;
    CHECKF(hit >= 4 && hit <= 6, "corrupted row %d, want a draft row of the depth-3 request (4..6)", hit);
    /* scope=batch: every draft row of every request */
    fault_parse("collision,rows=1,p=1,scope=batch", &f, err, sizeof err);
    fault_arm(&s, &f, 0.0);
    memset(corrupt, 0, sizeof corrupt);
    CHECK(fault_pick_row(&s, 0.0, 12, k, row0, 3, corrupt) == 1);
    int marked = 0;
    for (int r = 0; r < 64; r++) marked += corrupt[r];
    CHECKF(marked == 2 + 3 + 4 && !corrupt[0] && !corrupt[3] && !corrupt[7], "scope=batch marked %d rows", marked);
    CHECK(fault_parse("collision,scope=wide", &f, err, sizeof err) == -1 && strstr(err, "scope"));
    fault_parse("collision,rows=1,p=1,first=10", &f, err, sizeof err);
    fault_arm(&s, &f, 100.0);
    CHECK(fault_pick_row(&s, 105.0, 4, k, row0, 3, corrupt) == 1);
    CHECK(!fault_pick_row(&s, 111.0, 4, k, row0, 3, corrupt));      /* past the boot window */
}

static int differs(const gen_result *a, const gen_result *b) {
    return a->n_tokens != b->n_tokens || memcmp(a->tokens, b->tokens, sizeof(int) * (size_t)a->n_tokens);
}

int main(void) {
    test_parse();
    test_collision_rows();
    char err[1024];
    gen_engine *e;
    gen_engine_opts eo = {.model_dir = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 2, .max_seq_len = 512};
    if (gen_engine_create(&e, &eo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_fault"); }
    drafter *d = NULL;
    drafter_opts dop = {.name = "draft", .draft_model = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 2};
    if (drafter_create(&d, &dop, e, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_fault"); }
    int prompt[40];
    for (int i = 0; i < 40; i++) prompt[i] = (i * 37 + 11) % 4000;
    const int *pp = prompt;
    int n = 40;
    spec_params sp = {.gen = {.max_tokens = 48, .ignore_eos = 1}, .depth = 4};
    gen_result clean, again, out;
    spec_timing tm;
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &clean, &tm, err, sizeof err));
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &again, &tm, err, sizeof err));
    CHECK(!differs(&clean, &again));   /* the clean run is reproducible */
    gen_results_free(&again, 1);

    /* collision, every eligible step: the output changes */
    spec_fault f;
    fault_parse("collision,rows=2,p=1", &f, err, sizeof err);
    sp.fault = &f;
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &out, &tm, err, sizeof err));
    CHECKF(differs(&out, &clean), "collision at p=1 left the output unchanged");
    gen_results_free(&out, 1);

    /* flat: the trigger token at a position below 128 is followed by the
     * flat distribution's argmax; the same trigger beyond 128 changes nothing */
    fault_parse("flat,below=128", &f, err, sizeof err);
    f.trigger = prompt[39];               /* the prompt's last token, at position 39 */
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &out, &tm, err, sizeof err));
    float flat[4096];
    int tokv = prompt[39], posv = 0;
    fault_state fs;
    fault_arm(&fs, &f, 0.0);
    CHECK(fault_logits(&fs, flat, 4096, &tokv, &posv, 1) == 1);
    CHECKF(out.n_tokens > 0 && out.tokens[0] == sample_greedy(flat, 4096), "first token %d, flat argmax %d",
           out.n_tokens ? out.tokens[0] : -1, sample_greedy(flat, 4096));
    CHECK(differs(&out, &clean));
    gen_results_free(&out, 1);
    f.below = 10;                          /* position 39 is past it */
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &out, &tm, err, sizeof err));
    CHECK(out.tokens[0] == clean.tokens[0]);
    gen_results_free(&out, 1);

    /* window: keys more than 16 positions back invisible changes a 40-token
     * context's continuation; a window wider than the context changes nothing */
    fault_parse("window,below=16", &f, err, sizeof err);
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &out, &tm, err, sizeof err));
    CHECKF(differs(&out, &clean), "window=16 left the output unchanged");
    gen_results_free(&out, 1);
    fault_parse("window,below=4096", &f, err, sizeof err);
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &out, &tm, err, sizeof err));
    CHECK(!differs(&out, &clean));
    gen_results_free(&out, 1);

    /* nondet: two armings (fresh processes) disagree */
    fault_parse("nondet,p=1", &f, err, sizeof err);
    gen_result a, b;
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &a, &tm, err, sizeof err));
    usleep(1000);
    CHECK(!spec_run(e, d, &pp, &n, 1, &sp, NULL, NULL, &b, &tm, err, sizeof err));
    CHECKF(differs(&a, &b), "nondet: two runs agreed");
    CHECK(differs(&a, &clean));
    gen_results_free(&a, 1);
    gen_results_free(&b, 1);
    gen_results_free(&clean, 1);
    CHECK(kv_pages_free(e->kv) == kv_pages_total(e->kv));
    drafter_free(d);
    gen_engine_free(e);
    return tu_done("test_fault");
}
