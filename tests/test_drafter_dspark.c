/* label: model */
/* test_drafter_dspark.c — the DSpark drafter (spec/drafter_dspark.c)
 * against the PyTorch reference and for losslessness.
 *
 * (1) Goldens (tests/golden/dspark-fixture from scripts/goldens/make_drafter_fixture.py,
 *     whose checkpoint omits embed_tokens/lm_head so the target's are used;
 *     and tests/golden/dspark from scripts/goldens/make_drafter_goldens.py when the
 *     bundled models/tiny-dspark exists): the C target's taps of
 *     target_layer_ids match the reference's; given the reference's taps,
 *     one block's drafts, base logits U_k, Markov-corrected logits and
 *     confidences match, at anchors past position 128 too; a depth below γ
 *     gives the same first drafts with bit-identical logits (a trimmed
 *     block is a full block, read partly); depth 2γ matches the reference of
 *     the chaining rule (make_drafter_fixture.py dspark_chain) where the
 *     golden has it; feeding the context incrementally through accept(),
 *     beside another request, is bit-identical; so is drafting one slot at a
 *     time under a keep hook (each slot's head its own pass). Tolerance as in
 *     test_drafter_mtp.c: |Δ| ≤ 1e-3 · max(1, max |golden|) for logits,
 *     1e-4 for confidences (a sigmoid, |Δc| ≤ |Δz|/4) — f32 on both sides,
 *     summation order only.
 * (2) Greedy lossless at depths 1..2γ (trimmed, exact and chained blocks),
 *     batches 1, 3, 8 of mixed lengths, with drafts accepted at every depth.
 * (3) Sampling: verify-step tokens keep the target's distribution (depth
 *     γ+1, so a chained block is drawn from too).
 *     (2) and (3) run in full on the fixture (no argument). `bundled`: the
 *     bundled goldens and depths 1..2γ on one batch of the 8 workload
 *     prompts; `full` (label slow): the full sweep and sampling there.
 * (4) Bad checkpoints are refused with a message naming the problem; a
 *     tap of the target's final layer is refused, naming DeepSpec's reason,
 *     unless --dspark-final-tap says raw or normed, and then that state is
 *     fed (final_tap: the fixture's raw and normed goldens). */
#include <stdio.h>
#include <sys/stat.h>
#include "drafter_dspark.h"
#include "dspark_ckpt.h"
#include "engine.h"
#include "drafter_test.h"

enum { MAXK = 16 };

/* models/tiny-dspark taps layers 0 1 2 of the 4-layer target, no final
 * layer (issue 39: DeepSpec's evaluator loads it unpatched), so it loads
 * without --dspark-final-tap. */
#define BUNDLED_FINAL_TAP 0   /* taps 0 1 2 of 4: no final-layer tap */

static void prop(spec_proposal *p, int slot, const int *tok, int n, int max_k, float *q, rng_state *rng,
                 const sampler_params *sp) {
    *p = (spec_proposal){.slot = slot, .tokens = tok, .n_tokens = n, .max_k = max_k, .sp = sp, .rng = rng, .q = q};
}

static int keep_all(void *ctx, const spec_proposal *p) { (void)ctx; (void)p; return 1; }

static int run1(drafter *d, spec_proposal *p) {
    char err[512];
    int rc = d->ops->propose(d, p, 1, err, sizeof err);
    CHECKF(!rc, "%s", err);
    return rc;
}

static void cmp(const char *what, const char *label, const char *name, int k, const float *a, const float *b, long n,
                double rel, double *worst) {
    double sc, dd = dt_max_diff(a, b, n, &sc);
    if (dd > *worst) *worst = dd;
    CHECKF(dd <= rel * (sc > 1 ? sc : 1), "%s %s: %s %d differs by %g (scale %g)", label, name, what, k, dd, sc);
}

static void golden_check(gen_engine *e, const char *ddir, const char *gdir, const char *label, int final_tap) {
    char err[1024];
    dt_golden g;
    if (dt_golden_open(&g, gdir)) return;
    const int H = e->m->cfg.hidden_size, V = e->m->cfg.vocab_size;
    drafter_opts o = {.name = "dspark", .draft_model = tu_path(ddir), .max_seqs = 4, .depth = 8,
                      .dspark_final_tap = final_tap};
    drafter *d = NULL;
    if (drafter_create(&d, &o, e, err, sizeof err)) { CHECKF(0, "%s: %s", label, err); dt_golden_close(&g); return; }
    const int G = drafter_dspark_block_size(d), T = d->n_taps;
    CHECKF(G == dt_json_int(g.doc, "block_size"), "%s: block size %d, golden says %d", label, G,
           dt_json_int(g.doc, "block_size"));
    float *cor = malloc(sizeof(float) * MAXK * V), *base = malloc(sizeof(float) * MAXK * V);
    float *cor2 = malloc(sizeof(float) * MAXK * V), *q = malloc(sizeof(float) * 2 * MAXK * V);
    sampler_params greedy = {0};
    rng_state rng;
    rng_seed(&rng, 1);
    double wt = 0, wl = 0, wc = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(g.doc, "contexts")) {
        const char *name = cJSON_GetObjectItemCaseSensitive(c, "name")->valuestring;
        int n1 = dt_json_int(c, "n_tokens"), a = n1 - 1;
        const float *ft = dt_get(&g, name, "tokens", n1, NULL), *taps = dt_get(&g, name, "taps", (long)a * T * H, NULL);
        const float *fd = dt_get(&g, name, "draft_tokens", G, NULL);
        const float *gl = dt_get(&g, name, "corrected_logits", (long)G * V, NULL);
        const float *gc = dt_get(&g, name, "confidence", G, NULL);
        if (!ft || !taps || !fd || !gl || !gc) continue;
        int *x = malloc(sizeof(int) * (size_t)n1), dr[MAXK];
        dt_ids(x, ft, n1);
        dt_ids(dr, fd, G);

        /* the C target's taps */
        float *tc = malloc(sizeof(float) * (size_t)n1 * T * H);
        if (!dt_target_taps(e, x, a, d->tap_layers, T, tc)) {
            double sc, dt = dt_max_diff(tc, taps, (long)a * T * H, &sc);
            if (dt > wt) wt = dt;
            CHECKF(dt <= 1e-3 * (sc > 1 ? sc : 1), "%s %s: target taps differ by %g (scale %g)", label, name, dt, sc);
        }
        free(tc);

        /* one block */
        spec_proposal p;
        drafter_dspark_set_trace(d, cor, base);
        CHECK(!d->ops->begin(d, 0, x, n1, taps, err, sizeof err));
        prop(&p, 0, x, n1, G, q, &rng, &greedy);
        if (!run1(d, &p)) {
            CHECKF(p.k == G && p.has_conf && !p.q_valid, "%s %s: k %d has_conf %d", label, name, p.k, p.has_conf);
            for (int k = 0; k < G && k < p.k; k++) {
                CHECKF(p.draft[k] == dr[k], "%s %s: draft %d is %d, reference %d", label, name, k, p.draft[k], dr[k]);
                cmp("corrected logits", label, name, k, cor + (size_t)k * V, gl + (size_t)k * V, V, 1e-3, &wl);
                cmp("confidence", label, name, k, &p.conf[k], &gc[k], 1, 1e-4, &wc);
            }
            const cJSON *hb = cJSON_GetObjectItemCaseSensitive(c, "has_base_logits");
            if (cJSON_IsTrue(hb)) {
                const float *gb = dt_get(&g, name, "base_logits", (long)G * V, NULL);
                for (int k = 0; gb && k < G; k++)
                    cmp("base logits", label, name, k, base + (size_t)k * V, gb + (size_t)k * V, V, 1e-3, &wl);
            }
        }
        /* trimmed: depth 2 < γ reads the same full block */
        spec_proposal pt;
        drafter_dspark_set_trace(d, cor2, NULL);
        CHECK(!d->ops->begin(d, 1, x, n1, taps, err, sizeof err));
        prop(&pt, 1, x, n1, 2, q, &rng, &greedy);
        if (!run1(d, &pt))
            CHECKF(pt.k == 2 && !memcmp(pt.draft, dr, 2 * sizeof(int)) && !memcmp(cor, cor2, sizeof(float) * 2 * V) &&
                       !memcmp(pt.conf, p.conf, 2 * sizeof(float)),
                   "%s %s: a trimmed block differs from the full block", label, name);

        /* one slot at a time, as under a verify policy (a keep hook, here one
         * that wants every draft): each slot's head is a head-only pass of
         * its row, asked for after its confidence; the block's bits */
        spec_proposal pl;
        drafter_dspark_set_trace(d, cor2, NULL);
        CHECK(!d->ops->begin(d, 3, x, n1, taps, err, sizeof err));
        prop(&pl, 3, x, n1, G, q, &rng, &greedy);
        pl.keep = keep_all;
        if (!run1(d, &pl))
            CHECKF(pl.k == G && !memcmp(pl.draft, p.draft, sizeof(int) * (size_t)G) &&
                       !memcmp(cor, cor2, sizeof(float) * (size_t)G * V) &&
                       !memcmp(pl.conf, p.conf, sizeof(float) * (size_t)G),
                   "%s %s: the slots' heads one at a time differ from the block's", label, name);

        /* chained: depth 2γ (and 2γ+1 is not more than 16 for γ ≤ 5) */
        long nct;
        if (st_find(g.st, "c0.chain_tokens") && 2 * G <= MAXK) {
            const float *ct = dt_get(&g, name, "chain_tokens", 2 * G, &nct);
            const float *cc = dt_get(&g, name, "chain_confidence", 2 * G, NULL);
            char cl[64];
            snprintf(cl, sizeof cl, "%s.chain_logits", name);
            const float *clg = st_find(g.st, cl) ? dt_get(&g, name, "chain_logits", (long)2 * G * V, NULL) : NULL;
            int cd[MAXK];
            spec_proposal pc;
            drafter_dspark_set_trace(d, cor2, NULL);
            CHECK(!d->ops->begin(d, 2, x, n1, taps, err, sizeof err));
            prop(&pc, 2, x, n1, 2 * G, q, &rng, &greedy);
            if (ct && cc && !run1(d, &pc)) {
                dt_ids(cd, ct, 2 * G);
                CHECKF(pc.k == 2 * G && !memcmp(pc.draft, cd, sizeof(int) * 2 * G),
                       "%s %s: chained drafts differ from the reference of the chaining rule", label, name);
                for (int k = 0; k < 2 * G; k++) cmp("chained confidence", label, name, k, &pc.conf[k], &cc[k], 1, 1e-4, &wc);
                for (int k = 0; clg && k < 2 * G; k++)
                    cmp("chained logits", label, name, k, cor2 + (size_t)k * V, clg + (size_t)k * V, V, 1e-3, &wl);
            }
        }
        for (int s = 0; s < 4; s++) d->ops->release(d, s);

        /* incremental feeding through accept(), proposed beside another request */
        int m = a / 3 > 1 ? a / 3 : 1, cur = m;
        CHECK(!d->ops->begin(d, 2, x, m + 1, taps, err, sizeof err));
        for (int step = 0; cur < a; step++) {
            spec_proposal pi;
            prop(&pi, 2, x, cur + 1, 3, q, &rng, &greedy);
            if (run1(d, &pi)) break;
            int nc = 1 + step % 5;
            if (cur + nc > a) nc = a - cur;
            spec_accept ac = {.slot = 2, .n_accepted = nc - 1, .committed = x + cur + 1, .n_committed = nc, .tokens = x,
                              .n_tokens = cur + 1 + nc, .hidden = taps + (size_t)cur * T * H};
            d->ops->accept(d, &ac, 1);
            cur += nc;
        }
        CHECK(!d->ops->begin(d, 3, x, a / 2 + 1, taps, err, sizeof err));
        spec_proposal pb[2];
        prop(&pb[0], 2, x, n1, G, q, &rng, &greedy);
        prop(&pb[1], 3, x, a / 2 + 1, G + 1, q + (size_t)MAXK * V, &rng, &greedy);
        drafter_dspark_set_trace(d, cor2, NULL);
        if (!d->ops->propose(d, pb, 2, err, sizeof err))
            CHECKF(pb[0].k == G && !memcmp(pb[0].draft, dr, sizeof(int) * (size_t)G) &&
                       !memcmp(cor, cor2, sizeof(float) * (size_t)G * V) && !memcmp(pb[0].conf, p.conf, sizeof(float) * G),
                   "%s %s: fed incrementally beside another request, the block is not bit-identical", label, name);
        else
            CHECKF(0, "%s", err);
        for (int s = 0; s < 4; s++) d->ops->release(d, s);
        drafter_dspark_set_trace(d, NULL, NULL);
        free(x);
    }
    printf("%s: max |Δ| target taps %.3g, logits %.3g, confidence %.3g\n", label, wt, wl, wc);
    free(cor); free(base); free(cor2); free(q);
    drafter_free(d);
    dt_golden_close(&g);
}

/* full: the sweep (depths 1..2γ — trimmed, one and chained
 * blocks — × batches 1, 3, 8, ≥ 2000 tokens compared) and the sampling
 * test at depth γ+1 (a chained draw); otherwise depths 1..2γ on one batch
 * of 8, which keeps the bundled model's share of CI short. */
static void lossless_and_sampling(gen_engine *e, const char *ddir, int bundled, int full) {
    char err[512] = "";
    const char *label = bundled ? "dspark(models/tiny-dspark)" : "dspark(fixture)";
    int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, bundled, pr, lens);
    const int *pp[DT_NP];
    for (int i = 0; i < np; i++) pp[i] = pr[i];
    drafter_opts o = {.name = "dspark", .draft_model = tu_path(ddir), .max_seqs = 8, .quiet = 1,
                      .dspark_final_tap = bundled ? BUNDLED_FINAL_TAP : 0};
    drafter *d = NULL;
    int G = 0;
    if (!drafter_create(&d, &o, e, err, sizeof err)) G = drafter_dspark_block_size(d);
    drafter_free(d);
    CHECKF(G > 0, "%s", err);
    int maxd = 2 * G <= SPEC_MAX_DEPTH ? 2 * G : SPEC_MAX_DEPTH, all[SPEC_MAX_DEPTH];
    for (int i = 0; i < maxd; i++) all[i] = i + 1;
    const int batches[3] = {1, 3, 8};
    double t0 = gen_now();
    long total = !G ? 0 : full ? dt_lossless(e, &o, label, all, maxd, batches, 3, pp, lens, np, bundled ? 24 : 32)
                                : dt_lossless(e, &o, label, all, maxd, batches + 2, 1, pp, lens, np, 16);
    printf("%s: %ld tokens compared in %.1f s\n", label, total, gen_now() - t0);
    if (full && G) {
        CHECKF(total >= 2000, "%s: only %ld tokens compared", label, total);
        o.max_seqs = 1;
        t0 = gen_now();
        dt_sampling(e, &o, label, pp[2] + lens[2] - 16, 16, G + 1, 1500, 1.0f, 6);
        printf("%s: sampling in %.1f s\n", label, gen_now() - t0);
    }
    for (int i = 0; i < np; i++) free(pr[i]);
}

/* A copy of ddir's checkpoint with config.json's `field` replaced by `value`
 * (JSON text), and tokenizer.json linked to `tok` if not NULL, must be
 * refused with an error containing `want`. */
static void refuse(gen_engine *e, const char *ddir, const char *field, const char *value, const char *tok,
                   const char *want) {
    char dir[] = "/tmp/specbed-dspark-XXXXXX", p[600], err[1024];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    cJSON *j = tu_read_config(ddir);
    if (!j) return;
    cJSON_ReplaceItemInObjectCaseSensitive(j, field, cJSON_Parse(value));
    tu_write_config(dir, j);
    cJSON_Delete(j);
    char src[600];
    snprintf(src, sizeof src, "%s/model.safetensors", tu_path(ddir));
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(symlink(src, p) == 0);
    char tp[600];
    snprintf(tp, sizeof tp, "%s/tokenizer.json", dir);
    if (tok) CHECK(symlink(tu_path(tok), tp) == 0);
    drafter *d = NULL;
    drafter_opts o = {.name = "dspark", .draft_model = dir, .quiet = 1};
    int rc = drafter_create(&d, &o, e, err, sizeof err);
    CHECKF(rc != 0 && !d && strstr(err, want), "%s = %s: %s", field, value, rc ? err : "accepted");
    if (rc) printf("refused %s = %s: %s\n", field, value, err);
    drafter_free(d);
    unlink(p);
    if (tok) unlink(tp);
    snprintf(p, sizeof p, "%s/config.json", dir);
    unlink(p);
    rmdir(dir);
}

/* The bundled checkpoint's embed_tokens and lm_head are DeepSpec's frozen
 * copies of the target's: the drafter uses the target's weights (one copy
 * in the cache, the same numbers; the goldens above pass through them).
 * A tensor of another shape, or of the same shape with other bytes (the
 * draft model's trained embedding), is not taken for the target's. */
static void shared_copies(const model *t) {
    char err[1024];
    dspark_ckpt c;
    if (dspark_ckpt_load(&c, tu_path("models/tiny-dspark"), t, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    CHECKF(c.shared_embed && c.shared_lm_head && !c.own_embed && !c.own_lm_head,
           "shared embed %d head %d, own embed %d head %d", c.shared_embed, c.shared_lm_head, c.own_embed,
           c.own_lm_head);
    CHECKF(c.embed.data == t->embed.data && c.lm_head.data == t->lm_head.data, "the target's weights are used");
    CHECKF(!model_tensor_is_target(c.st, "fc.weight", t, 1), "fc.weight is not the target's head");
    dspark_ckpt_free(&c);
    st_model *d;
    if (st_open_dir(&d, tu_path("models/tiny-draft"), err, sizeof err)) { CHECKF(0, "%s", err); return; }
    CHECKF(!model_tensor_is_target(d, "model.embed_tokens.weight", t, 0),
           "the draft model's embedding (same shape, other bytes) is not the target's");
    st_close(d);
}

/* A checkpoint tapping the target's final layer (make_drafter_fixture.py
 * --final-tap: target_layer_ids [0, 1] of the 2-layer fixture target) is
 * refused, naming DeepSpec's reason, unless --dspark-final-tap says which
 * state it was trained on; then the drafter feeds that state: the C target's
 * taps, drafts, logits and confidences match the golden made with the final
 * layer tapped raw (before the final norm) and the one made with it normed.
 * The two goldens' final-layer taps differ (checked), so a drafter feeding
 * the other state fails the taps comparison of golden_check. The option on a
 * checkpoint without a final-layer tap would be ignored: refused. */
static void final_tap(gen_engine *e) {
    const char *fin = "tests/fixtures/dspark-tiny-final";
    char err[1024] = "";
    drafter *d = NULL;
    drafter_opts o = {.name = "dspark", .draft_model = tu_path(fin), .quiet = 1};
    int rc = drafter_create(&d, &o, e, err, sizeof err);
    CHECKF(rc != 0 && !d && strstr(err, "final decoder layer") && strstr(err, "assert_no_final_target_layer") &&
               strstr(err, "--dspark-final-tap raw") && strstr(err, "--dspark-final-tap normed"),
           "a final-layer tap without --dspark-final-tap: %s", rc ? err : "accepted");
    if (rc) printf("refused without --dspark-final-tap: %s\n", err);
    drafter_free(d);
    d = NULL;
    drafter_opts ox = {.name = "dspark", .draft_model = tu_path("tests/fixtures/dspark-tiny"), .quiet = 1,
                       .dspark_final_tap = DSPARK_FINAL_TAP_RAW};
    rc = drafter_create(&d, &ox, e, err, sizeof err);
    CHECKF(rc != 0 && !d && strstr(err, "--dspark-final-tap") && strstr(err, "ignored"),
           "--dspark-final-tap on a checkpoint without a final-layer tap: %s", rc ? err : "accepted");
    drafter_free(d);

    const int L = e->m->cfg.n_layers;
    const int want[2] = {L - 1, FWD_TAP_FINAL_NORM};
    for (int i = 0; i < 2; i++) {
        drafter_opts oi = {.name = "dspark", .draft_model = tu_path(fin), .quiet = 1,
                           .dspark_final_tap = i ? DSPARK_FINAL_TAP_NORMED : DSPARK_FINAL_TAP_RAW};
        d = NULL;
        if (drafter_create(&d, &oi, e, err, sizeof err)) { CHECKF(0, "%s", err); continue; }
        CHECKF(d->n_taps == 2 && d->tap_layers[0] == 0 && d->tap_layers[1] == want[i],
               "final tap %s: taps %d (%d, %d)", i ? "normed" : "raw", d->n_taps, d->tap_layers[0], d->tap_layers[1]);
        drafter_free(d);
    }
    golden_check(e, fin, "tests/golden/dspark-final-raw", "final tap raw", DSPARK_FINAL_TAP_RAW);
    golden_check(e, fin, "tests/golden/dspark-final-normed", "final tap normed", DSPARK_FINAL_TAP_NORMED);

    /* the goldens' final-layer taps differ: raw and normed are told apart */
    dt_golden gr, gn;
    if (dt_golden_open(&gr, "tests/golden/dspark-final-raw")) return;
    if (dt_golden_open(&gn, "tests/golden/dspark-final-normed")) { dt_golden_close(&gr); return; }
    const int H = e->m->cfg.hidden_size, n1 = 20, a = n1 - 1;
    const float *tr = dt_get(&gr, "c0", "taps", (long)a * 2 * H, NULL), *tn = dt_get(&gn, "c0", "taps", (long)a * 2 * H, NULL);
    if (tr && tn) {
        double sc, d0 = 0, d1 = 0;
        for (int j = 0; j < a; j++) {
            double x0 = dt_max_diff(tr + (size_t)j * 2 * H, tn + (size_t)j * 2 * H, H, &sc);
            double x1 = dt_max_diff(tr + (size_t)j * 2 * H + H, tn + (size_t)j * 2 * H + H, H, &sc);
            if (x0 > d0) d0 = x0;
            if (x1 > d1) d1 = x1;
        }
        CHECKF(d0 == 0 && d1 > 0.1, "raw vs normed goldens: layer 0 taps differ by %g (want 0), the final layer's by "
               "%g (want > 0.1)", d0, d1);
        printf("final tap: raw and normed goldens' final-layer taps differ by up to %.3g\n", d1);
    }
    dt_golden_close(&gr);
    dt_golden_close(&gn);
}

static int bundled_part(int full) {
    char err[1024];
    gen_engine *e;
    if (!tu_have("models/tiny/model.safetensors", "models/tiny-dspark/model.safetensors",
                 "tests/golden/dspark/golden.json", "tests/golden/dspark-chain/golden.json", NULL))
        return tu_skip("test_drafter_dspark", "models/tiny, models/tiny-dspark or their goldens absent");
    gen_engine_opts bo = {.model_dir = tu_path("models/tiny"), .max_seqs = 8, .max_batch_rows = 96, .max_seq_len = 512};
    if (gen_engine_create(&e, &bo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_dspark"); }
    if (!full) {
        golden_check(e, "models/tiny-dspark", "tests/golden/dspark", "models/tiny-dspark", BUNDLED_FINAL_TAP);
        golden_check(e, "models/tiny-dspark", "tests/golden/dspark-chain", "models/tiny-dspark chained",
                     BUNDLED_FINAL_TAP);
        shared_copies(e->m);
    }
    lossless_and_sampling(e, "models/tiny-dspark", 1, full);
    gen_engine_free(e);
    return tu_done("test_drafter_dspark");
}

int main(int argc, char **argv) {
    char err[1024];
    gen_engine *e;
    const char *fix = "tests/fixtures/dspark-tiny";
    tu_part part = tu_parse_part(argc, argv);
    if (part != TU_FIXTURES) return bundled_part(part == TU_FULL);

    gen_engine_opts fo = {.model_dir = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 8, .max_batch_rows = 96,
                          .max_seq_len = 512};
    if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_dspark"); }
    golden_check(e, fix, "tests/golden/dspark-fixture", "fixture", 0);
    final_tap(e);
    lossless_and_sampling(e, fix, 0, 1);

    refuse(e, fix, "target_layer_ids", "[2]", NULL, "decoder layer 0..1");
    refuse(e, fix, "target_layer_ids", "[0, 0]", NULL, "target_layer_ids");
    refuse(e, fix, "hidden_size", "32", NULL, "hidden_size");
    refuse(e, fix, "mask_token_id", "4096", NULL, "mask_token_id");
    refuse(e, fix, "markov_head_type", "\"gated\"", NULL, "vanilla");
    refuse(e, fix, "architectures", "[\"Qwen3ForCausalLM\"]", NULL, "not a DSpark config");
    refuse(e, fix, "block_size", "4", "tests/fixtures/tokenizer/llama3/tokenizer.json", "tokenizer");
    drafter *d = NULL;
    drafter_opts no = {.name = "dspark", .draft_model = tu_path("tests/fixtures/qwen3-tied"), .quiet = 1};
    CHECK(drafter_create(&d, &no, e, err, sizeof err) != 0 && !d && strstr(err, "not a DSpark config"));
    no.draft_model = NULL;
    CHECK(drafter_create(&d, &no, e, err, sizeof err) != 0 && !d && strstr(err, "--draft-model"));
    gen_engine_free(e);
    return tu_done("test_drafter_dspark");
}
