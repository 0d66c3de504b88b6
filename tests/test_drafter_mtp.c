/* label: model */
/* test_drafter_mtp.c — the MTP drafter (spec/drafter_mtp.c) against the
 * PyTorch reference and for losslessness.
 *
 * (1) Goldens (tests/golden/mtp-fixture and, for the two-module fixture
 *     tests/fixtures/qwen3-tied-mtp2, tests/golden/mtp2-fixture, both from
 *     scripts/goldens/make_drafter_fixture.py; tests/golden/mtp from
 *     scripts/goldens/make_drafter_goldens.py when the bundled models/tiny exists):
 *     the C target's final-normed hidden states
 *     (tap FWD_TAP_FINAL_NORM) match the reference's; given the reference's
 *     hidden states, the MTP logits of sampled causal rows (127 and 128
 *     included where the context reaches them) and the chained drafts with
 *     their logits match; feeding the same context incrementally through
 *     accept() in small steps, beside another request, gives bit-identical
 *     logits (the catch-up path is the same arithmetic, batch-invariant).
 *     Tolerance: |Δ| ≤ 1e-3 · max(1, max |golden|) — both sides are f32
 *     arithmetic over the same weights and differ only in summation order
 *     (observed ~1e-5 relative), while a convention error (concatenation
 *     order, position off by one, pre- vs post-norm hidden) moves logits by
 *     O(1). Two modules: the golden follows the step-mod-n rule
 *     (drafter_mtp.h: step k is module k mod n, every module's KV layer
 *     holds every row); it records how far chaining module 0 alone would
 *     be (first_module_only_min_step_diff, ~5), and the test requires that
 *     to exceed 10× the tolerance, so the wrong rule cannot pass.
 * (2) Greedy lossless: spec_run with --drafter mtp equals gen_run token for
 *     token at depths 1..8, batches 1, 3 and 8 of mixed-length prompts, and
 *     every depth drafted and had drafts accepted (a disarmed drafter fails).
 * (3) Sampling: the verify steps' tokens have the target's distribution
 *     (two-sample chi-square against speculation off).
 *     (2) and (3) run in full on the fixture (its MTP was trained on the
 *     fixture target's greedy text, so drafts are accepted), with no
 *     argument. `bundled`: the bundled goldens and depths 1..8 on one batch
 *     of the 8 workload prompts; `full` (label slow): the full sweep and
 *     sampling on the bundled model.
 * (4) A checkpoint whose config promises more modules than it holds is
 *     refused, naming the missing tensor. */
#include "drafter_mtp.h"
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "drafter_test.h"

enum { MAXK = 8 };

static void propose1(int slot, const int *tok, int n, int max_k, spec_proposal *p, float *qbuf,
                     rng_state *rng, const sampler_params *sp) {
    *p = (spec_proposal){.slot = slot, .tokens = tok, .n_tokens = n, .max_k = max_k, .sp = sp, .rng = rng, .q = qbuf};
}

/* Feeds tokens x[0..n) to slot through begin(x[0..m]) and then accept()
 * steps of 1..4 tokens, proposing (and discarding) in between. */
static int feed_incremental(drafter *d, int slot, const int *x, int n, const float *h, int H, int m, float *qbuf) {
    char err[512];
    sampler_params greedy = {0};
    rng_state rng;
    rng_seed(&rng, 1);
    if (d->ops->begin(d, slot, x, m + 1, h, err, sizeof err)) { CHECKF(0, "%s", err); return -1; }
    int cur = m;   /* anchor index: x[0..cur] known */
    for (int step = 0; cur < n - 1; step++) {
        spec_proposal p;
        propose1(slot, x, cur + 1, 2, &p, qbuf, &rng, &greedy);
        if (d->ops->propose(d, &p, 1, err, sizeof err)) { CHECKF(0, "%s", err); return -1; }
        int nc = 1 + step % 4;
        if (cur + nc > n - 1) nc = n - 1 - cur;
        spec_accept a = {.slot = slot, .n_accepted = nc - 1, .committed = x + cur + 1, .n_committed = nc,
                         .tokens = x, .n_tokens = cur + 1 + nc, .hidden = h + (size_t)cur * H};
        d->ops->accept(d, &a, 1);
        cur += nc;
    }
    return 0;
}

static void golden_check(gen_engine *e, const char *gdir, const char *label) {
    char err[1024];
    dt_golden g;
    if (dt_golden_open(&g, gdir)) return;
    const int H = e->m->cfg.hidden_size, V = e->m->cfg.vocab_size;
    int K = dt_json_int(g.doc, "depth");
    CHECK(K >= 1 && K <= MAXK);
    drafter_opts o = {.name = "mtp", .max_seqs = 4};
    drafter *d = NULL;
    if (drafter_create(&d, &o, e, err, sizeof err)) { CHECKF(0, "%s: %s", label, err); dt_golden_close(&g); return; }
    float *tr = malloc(sizeof(float) * MAXK * V), *tr2 = malloc(sizeof(float) * MAXK * V);
    float *qbuf = malloc(sizeof(float) * SPEC_MAX_DEPTH * V);
    sampler_params greedy = {0};
    rng_state rng;
    rng_seed(&rng, 1);
    double worst_h = 0, worst_l = 0, worst_d = 0, tol_max = 0;
    const cJSON *ctxs = cJSON_GetObjectItemCaseSensitive(g.doc, "contexts"), *c;
    cJSON_ArrayForEach(c, ctxs) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        int n1 = dt_json_int(c, "n_tokens");
        long nr;
        const float *ft = dt_get(&g, name, "tokens", n1, NULL), *h = dt_get(&g, name, "h", (long)n1 * H, NULL);
        const float *frows = dt_get(&g, name, "rows", -1, &nr), *rl = dt_get(&g, name, "row_logits", -1, NULL);
        const float *fd = dt_get(&g, name, "draft_tokens", K, NULL), *dl = dt_get(&g, name, "draft_logits", (long)K * V, NULL);
        if (!ft || !h || !frows || !rl || !fd || !dl) continue;
        int *x = malloc(sizeof(int) * (size_t)n1), drafts[MAXK];
        dt_ids(x, ft, n1);
        dt_ids(drafts, fd, K);

        /* the target's own final-normed hidden states */
        float *hc = malloc(sizeof(float) * (size_t)n1 * H);
        int tap = FWD_TAP_FINAL_NORM;
        if (!dt_target_taps(e, x, n1, &tap, 1, hc)) {
            double sc, dh = dt_max_diff(hc, h, (long)n1 * H, &sc);
            if (dh > worst_h) worst_h = dh;
            CHECKF(dh <= 1e-3 * (sc > 1 ? sc : 1), "%s %s: target final hidden differs by %g (scale %g)", label, name, dh, sc);
        }
        free(hc);

        /* chained drafts from the whole context */
        spec_proposal p;
        drafter_mtp_set_trace(d, tr);
        CHECK(!d->ops->begin(d, 0, x, n1, h, err, sizeof err));
        propose1(0, x, n1, K, &p, qbuf, &rng, &greedy);
        CHECK(!d->ops->propose(d, &p, 1, err, sizeof err));
        CHECKF(p.k == K, "%s %s: %d drafts, want %d", label, name, p.k, K);
        for (int k = 0; k < K && k < p.k; k++) {
            CHECKF(p.draft[k] == drafts[k], "%s %s: draft %d is %d, reference %d", label, name, k, p.draft[k], drafts[k]);
            double sc, dd = dt_max_diff(tr + (size_t)k * V, dl + (size_t)k * V, V, &sc);
            double tol = 1e-3 * (sc > 1 ? sc : 1);
            if (dd > worst_d) worst_d = dd;
            if (tol > tol_max) tol_max = tol;
            CHECKF(dd <= tol, "%s %s: draft %d logits differ by %g (scale %g)", label, name, k, dd, sc);
        }
        CHECK(!p.q_valid && !p.has_conf && p.has_top_prob);
        d->ops->release(d, 0);

        /* causal rows i: the first draft after x_0..x_{i+1} */
        for (long j = 0; j < nr; j++) {
            int i = (int)frows[j];
            CHECK(!d->ops->begin(d, 1, x, i + 2, h, err, sizeof err));
            propose1(1, x, i + 2, 1, &p, qbuf, &rng, &greedy);
            CHECK(!d->ops->propose(d, &p, 1, err, sizeof err) && p.k == 1);
            double sc, dd = dt_max_diff(tr, rl + (size_t)j * V, V, &sc);
            if (dd > worst_l) worst_l = dd;
            CHECKF(dd <= 1e-3 * (sc > 1 ? sc : 1), "%s %s: row %d logits differ by %g (scale %g)", label, name, i, dd, sc);
            d->ops->release(d, 1);
        }

        /* incrementally fed, proposed beside another request: bit-identical */
        if (!feed_incremental(d, 2, x, n1, h, H, n1 / 3 > 1 ? n1 / 3 : 1, qbuf) &&
            !d->ops->begin(d, 3, x, n1 / 2 + 1, h, err, sizeof err)) {
            spec_proposal pp[2];
            propose1(2, x, n1, K, &pp[0], qbuf, &rng, &greedy);
            propose1(3, x, n1 / 2 + 1, K, &pp[1], qbuf + (size_t)MAXK * V, &rng, &greedy);
            drafter_mtp_set_trace(d, tr2);
            CHECK(!d->ops->propose(d, pp, 2, err, sizeof err));
            CHECKF(pp[0].k == K && !memcmp(pp[0].draft, drafts, sizeof(int) * (size_t)K),
                   "%s %s: incremental drafts differ", label, name);
            /* recompute the one-shot logits to compare against */
            spec_proposal q1;
            drafter_mtp_set_trace(d, tr);
            CHECK(!d->ops->begin(d, 0, x, n1, h, err, sizeof err));
            propose1(0, x, n1, K, &q1, qbuf, &rng, &greedy);
            CHECK(!d->ops->propose(d, &q1, 1, err, sizeof err));
            CHECKF(!memcmp(tr, tr2, sizeof(float) * (size_t)K * V),
                   "%s %s: logits fed incrementally beside another request are not bit-identical", label, name);
        }
        for (int s = 0; s < 4; s++) d->ops->release(d, s);
        drafter_mtp_set_trace(d, NULL);
        free(x);
    }
    printf("%s: max |Δ| target hidden %.3g, MTP logits of causal rows %.3g, of chained drafts %.3g "
           "(draft tolerance up to %.3g)\n", label, worst_h, worst_l, worst_d, tol_max);
    /* several modules: the golden must tell step-mod-n from module 0 alone */
    const cJSON *apart = cJSON_GetObjectItemCaseSensitive(g.doc, "first_module_only_min_step_diff");
    if (apart) {
        CHECKF(dt_json_int(g.doc, "n_modules") == e->m->cfg.n_mtp_layers, "%s: golden n_modules %d, config %d", label,
               dt_json_int(g.doc, "n_modules"), e->m->cfg.n_mtp_layers);
        CHECKF(cJSON_IsNumber(apart) && apart->valuedouble > 10 * tol_max,
               "%s: module 0 alone is only %g from the step-mod-n golden (tolerance %g): the test cannot tell them apart",
               label, cJSON_IsNumber(apart) ? apart->valuedouble : -1.0, tol_max);
        printf("%s: chaining module 0 alone would move the logits of every chained step by ≥ %.3g\n", label,
               apart->valuedouble);
    }
    free(tr); free(tr2); free(qbuf);
    drafter_free(d);
    dt_golden_close(&g);
}

/* full: the sweep (depths 1..8 × batches 1, 3, 8, ≥ 2000 tokens
 * compared) and the sampling test; otherwise depths 1..8 on one batch of 8,
 * which keeps the bundled model's share of CI short. */
static void lossless_and_sampling(gen_engine *e, const char *label, int bundled, int full) {
    int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, bundled, pr, lens);
    const int *pp[DT_NP];
    for (int i = 0; i < np; i++) pp[i] = pr[i];
    drafter_opts o = {.name = "mtp", .max_seqs = 8};
    const int all[8] = {1, 2, 3, 4, 5, 6, 7, 8}, batches[3] = {1, 3, 8};
    double t0 = gen_now();
    long total = full ? dt_lossless(e, &o, label, all, 8, batches, 3, pp, lens, np, bundled ? 24 : 32)
                      : dt_lossless(e, &o, label, all, 8, batches + 2, 1, pp, lens, np, 16);
    printf("%s: %ld tokens compared in %.1f s\n", label, total, gen_now() - t0);
    if (full) {
        CHECKF(total >= 2000, "%s: only %ld tokens compared", label, total);
        o.max_seqs = 1;
        t0 = gen_now();
        dt_sampling(e, &o, label, pp[2] + lens[2] - 16, 16, 3, 1500, 1.0f, 6);
        printf("%s: sampling in %.1f s\n", label, gen_now() - t0);
    }
    for (int i = 0; i < np; i++) free(pr[i]);
}

/* The two-module fixture's files under a config that says 3 modules: the
 * drafter is refused and the message names model.layers.4 (module 2). */
static void missing_module_refused(void) {
    char dir[] = "/tmp/specbed_mtp3_XXXXXX", err[1024], p[4200], src[4200];
    if (!mkdtemp(dir)) { CHECKF(0, "mkdtemp failed"); return; }
    const char *files[] = {"model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
                           "model-00003-of-00003.safetensors", "model.safetensors.index.json", "tokenizer.json",
                           "tokenizer_config.json"};
    const int nf = (int)(sizeof files / sizeof files[0]);
    for (int i = 0; i < nf; i++) {
        snprintf(src, sizeof src, "%s/%s", tu_path("tests/fixtures/qwen3-tied-mtp2"), files[i]);
        snprintf(p, sizeof p, "%s/%s", dir, files[i]);
        CHECK(symlink(src, p) == 0);
    }
    char *cfg = tu_read_file(tu_path("tests/fixtures/qwen3-tied-mtp2/config.json"), NULL);
    char *at = cfg ? strstr(cfg, "\"num_nextn_predict_layers\": 2") : NULL;
    CHECKF(at != NULL, "qwen3-tied-mtp2/config.json: no \"num_nextn_predict_layers\": 2");
    if (at) {
        at[strlen("\"num_nextn_predict_layers\": ")] = '3';
        snprintf(p, sizeof p, "%s/config.json", dir);
        FILE *f = fopen(p, "w");
        CHECK(f && fputs(cfg, f) >= 0);
        if (f) fclose(f);
        model *m = NULL;
        drafter *d = NULL;
        mtp_opts mo = {.max_seqs = 1, .quiet = 1};
        if (model_load(&m, dir, err, sizeof err)) {
            CHECKF(0, "%s", err);
        } else {
            int rc = drafter_mtp_create(&d, &mo, m, NULL, err, sizeof err);
            CHECKF(rc != 0 && !d && strstr(err, "model.layers.4."), "3 modules promised, 2 present: rc %d, '%s'", rc,
                   rc ? err : "");
            if (rc) printf("3 modules promised, 2 present: %s\n", err);
            drafter_free(d);
            model_free(m);
        }
    }
    free(cfg);
    for (int i = 0; i <= nf; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, i < nf ? files[i] : "config.json");
        unlink(p);
    }
    rmdir(dir);
}

int main(int argc, char **argv) {
    char err[1024];
    gen_engine *e;
    tu_part part = tu_parse_part(argc, argv);
    if (part == TU_FIXTURES) {
        gen_engine_opts fo = {.model_dir = tu_path("tests/fixtures/qwen3-tied-mtp"), .max_seqs = 8,
                              .max_batch_rows = 96, .max_seq_len = 512};
        if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_mtp"); }
        golden_check(e, "tests/golden/mtp-fixture", "fixture");
        lossless_and_sampling(e, "mtp(fixture)", 0, 1);
        gen_engine_free(e);
        /* two modules: step k uses module k mod 2 */
        fo.model_dir = tu_path("tests/fixtures/qwen3-tied-mtp2");
        if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_mtp"); }
        golden_check(e, "tests/golden/mtp2-fixture", "fixture(2 modules)");
        lossless_and_sampling(e, "mtp(fixture, 2 modules)", 0, 1);
        gen_engine_free(e);
        missing_module_refused();
        return tu_done("test_drafter_mtp");
    }
    if (!tu_have("models/tiny/model.safetensors", "tests/golden/mtp/golden.json", NULL))
        return tu_skip("test_drafter_mtp", "models/tiny or tests/golden/mtp absent");
    gen_engine_opts bo = {.model_dir = tu_path("models/tiny"), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &bo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_mtp"); }
    if (part == TU_BUNDLED) golden_check(e, "tests/golden/mtp", "models/tiny");
    lossless_and_sampling(e, "mtp(models/tiny)", 1, part == TU_FULL);
    gen_engine_free(e);
    return tu_done("test_drafter_mtp");
}
