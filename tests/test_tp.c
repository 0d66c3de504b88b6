/* label: model */
/* test_tp.c — tensor parallelism, run by ctest as `mpirun -np 2 test_tp
 * [bundled|full]`. Every rank creates the same sequence of TP=2 engines;
 * rank 0 tests, the other rank serves its forwards (gen_engine_serve).
 *
 * 1. TP=2 vs TP=1 logits at every position of a 300-token sequence (past
 *    the 128 and 256 boundaries): the argmax agrees wherever the TP=1 top
 *    two are further apart than the tolerance, and max |Δlogit| ≤ TOL.
 *    Why they differ at all: o_proj and down are summed as two half-length
 *    dot products plus one addition instead of one full-length one, so each
 *    of those outputs rounds differently by a few f32 ulps, and the
 *    difference propagates through the later layers. Measured: max
 *    |Δlogit| 5.5e-6 to 6.7e-6 on the fixtures and models/tiny (printed on
 *    every run). TOL = 1e-4 leaves 15× headroom for other CPUs' SIMD paths
 *    and stays four orders below what a real sharding bug does (a wrong
 *    head, a missing all-reduce or a mis-ordered vocab shard moves logits
 *    by O(1)).
 * 2. Batch invariance within TP=2: a row's logits are bit-identical alone
 *    and beside another sequence's rows (the all-reduce adds in rank
 *    order, whatever the message size).
 * 3. Greedy spec-on ≡ spec-off under TP=2 (tests/lossless.h) for every
 *    drafter: ngram, draft model, MTP (one module, two modules, a draft
 *    vocabulary), DSpark (whole and reduced draft-vocabulary heads); on the
 *    fixtures (no argument) depths 1, 2, 3, 5, 8 on batches 1 and 8, on the
 *    bundled family with code prompts (`bundled`) depths 1–8 on batches
 *    1/3/8; `full` runs the fixtures at every depth × batch too and adds the
 *    prose prompts.
 * 4. The sharded MTP and DSpark drafters (engine/draft_stack.h) against the
 *    same drafters under TP=1, fed the same prompt and the same target
 *    taps (TP=1's): rank 0 must hold only its rows of the head (fewer than
 *    the vocabulary, so the logits of the upper ids can only have come
 *    from rank 1's shard through the gather, and the old whole-on-rank-0
 *    path fails here), every draft's logits within TOL of TP=1's and the
 *    drafts equal, up to the first step whose TP=1 top two are within
 *    2·TOL (a near-tie may flip, and the chain after it differs). The
 *    same TOL as 1 and for the same reason, with less to propagate: the
 *    inputs are identical, and only the draft layers' o_proj and down
 *    round differently (two half-length dot products plus one add); the
 *    head's logits are each computed whole by one rank. Measured: printed
 *    on every run. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "comm.h"
#include "draft_stack.h"
#include "drafter_dspark.h"
#include "drafter_mtp.h"
#include "lossless.h"
#include "test_util.h"

#define TOL 1e-4
enum { NTOK = 300 };

typedef struct {
    const char *dir;
    ll_config lossless[5];   /* drafters checked under TP=2 (label NULL ends) */
} model_case;

static gen_engine_opts opts(const char *dir, kb_comm *c) {
    return (gen_engine_opts){.model_dir = tu_path(dir), .max_seqs = 8, .max_batch_rows = 320, .max_seq_len = 512,
                             .comm = c};
}

enum { DPROMPT = 40, DDEPTH = 8 };

static int keep_all(void *ctx, const spec_proposal *p) { (void)ctx; (void)p; return 1; }

/* One greedy proposal of DDEPTH drafts from a fresh slot, with the logits
 * behind each draft traced into trace[DDEPTH, V]. lazy: with a keep hook
 * (one that wants every draft), so DSpark scores each slot in a head-only
 * pass of its own once it is wanted (drafting that stops early). */
static int propose_traced(drafter *d, const int *tok, const float *taps, float *trace, int *drafts, int lazy) {
    char err[1024];
    const int V = d->vocab_size;
    for (int i = 0; i < DDEPTH * V; i++) trace[i] = NAN;
    if (!strcmp(d->ops->name, "mtp")) drafter_mtp_set_trace(d, trace);
    else drafter_dspark_set_trace(d, trace, NULL);
    sampler_params sp = {.temperature = 0};
    spec_proposal p = {.slot = 0, .tokens = tok, .n_tokens = DPROMPT, .max_k = DDEPTH, .sp = &sp,
                       .keep = lazy ? keep_all : NULL};
    int rc = d->ops->begin(d, 0, tok, DPROMPT, taps, err, sizeof err) || d->ops->propose(d, &p, 1, err, sizeof err);
    if (rc) CHECKF(0, "%s: %s", d->ops->name, err);
    else memcpy(drafts, p.draft, sizeof(int) * DDEPTH);
    d->ops->release(d, 0);
    return rc ? -1 : p.k;
}

static void compare_drafter(gen_engine *tp2, const char *dir, const drafter_opts *dop) {
    char err[1024];
    gen_engine *tp1;
    gen_engine_opts o1 = opts(dir, NULL);
    if (gen_engine_create(&tp1, &o1, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    drafter *d1 = NULL, *d2 = NULL;
    if (drafter_create(&d1, dop, tp1, err, sizeof err) || drafter_create(&d2, dop, tp2, err, sizeof err)) {
        CHECKF(0, "%s: %s", dop->name, err);
        drafter_free(d2); drafter_free(d1); gen_engine_free(tp1);
        return;
    }
    const int V = tp1->m->cfg.vocab_size, H = tp1->m->cfg.hidden_size, nt = d1->n_taps;
    const int N = draft_stack_vocab(d2->stack), rows = draft_stack_head_rows(d2->stack);
    CHECKF(draft_stack_tp_size(d2->stack) == 2 && rows < N && rows == (N + 1) / 2,
           "%s %s: rank 0 holds %d of the head's %d rows over %d ranks: not sharded", dir, dop->name, rows, N,
           draft_stack_tp_size(d2->stack));
    CHECKF(draft_stack_tp_size(d1->stack) == 1 && draft_stack_head_rows(d1->stack) == N, "%s: TP=1 head rows", dir);
    int tok[DPROMPT];
    for (int i = 0; i < DPROMPT; i++) tok[i] = (int)((i * 40503u + 977u) % (unsigned)V);
    /* the prompt's taps, TP=1's, fed to both */
    float *taps = malloc(sizeof(float) * (size_t)(DPROMPT - 1) * nt * H);
    float *a = malloc(sizeof(float) * (size_t)DDEPTH * V), *b = malloc(sizeof(float) * (size_t)DDEPTH * V);
    int seq = kv_seq_new(tp1->kv);
    fwd_span sp = {.seq = seq, .n = DPROMPT - 1, .tokens = tok};
    fwd_batch bt = {.spans = &sp, .n_spans = 1};
    fwd_out fo = {.tap_layers = d1->tap_layers, .n_taps = nt, .taps = taps};
    int da[DDEPTH], db[DDEPTH];
    if (!fwd_run(tp1->fwd, tp1->kv, &bt, &fo, err, sizeof err)) {
        int ka = propose_traced(d1, tok, taps, a, da, 0), kb = propose_traced(d2, tok, taps, b, db, 0);
        if (!strcmp(dop->name, "dspark")) {
            /* each slot's head alone (a head-only pass, whose rows the other
             * rank must be sent) gives the same bits as the block's heads */
            float *c = malloc(sizeof(float) * (size_t)DDEPTH * V);
            int dc[DDEPTH], kc = c ? propose_traced(d2, tok, taps, c, dc, 1) : -1;
            CHECKF(kc == kb && !memcmp(dc, db, sizeof dc) && !memcmp(c, b, sizeof(float) * (size_t)DDEPTH * V),
                   "%s %s, TP=2: the slots' heads one at a time differ from the block's", dir, dop->name);
            free(c);
        }
        CHECKF(ka == DDEPTH && kb == DDEPTH, "%s %s: %d and %d drafts, wanted %d", dir, dop->name, ka, kb, DDEPTH);
        double maxd = 0;
        int compared = 0;
        for (int k = 0; k < DDEPTH && ka == DDEPTH && kb == DDEPTH; k++) {
            const float *x = a + (size_t)k * V, *y = b + (size_t)k * V;
            int ax = -1;
            float best = -INFINITY, second = -INFINITY;
            for (int v = 0; v < V; v++) {
                if (isinf(x[v]) || isinf(y[v])) {   /* outside a draft vocabulary: both -inf */
                    CHECKF(x[v] == y[v], "%s %s step %d id %d: %g vs %g", dir, dop->name, k, v, x[v], y[v]);
                    continue;
                }
                double dd = fabs((double)x[v] - y[v]);
                if (dd > maxd || dd != dd) maxd = dd != dd ? INFINITY : dd;
                if (x[v] > best) { second = best; best = x[v]; ax = v; }
                else if (x[v] > second) second = x[v];
            }
            compared++;
            if (best - second <= 2 * TOL) break;   /* a near-tie: the chains may part here */
            CHECKF(da[k] == db[k] && da[k] == ax, "%s %s step %d: TP=1 drafts %d, TP=2 %d", dir, dop->name, k, da[k],
                   db[k]);
            if (da[k] != db[k]) break;
        }
        printf("%s: sharded %s drafter vs TP=1, %d of %d steps compared: max |dlogit| %.3g (tolerance %g); "
               "rank 0 holds %d of %d head rows\n", dir, dop->name, compared, DDEPTH, maxd, TOL, rows, N);
        CHECKF(maxd <= TOL, "%s %s: max |dlogit| %.3g > %g", dir, dop->name, maxd, TOL);
        CHECKF(compared >= DDEPTH / 2, "%s %s: only %d steps compared", dir, dop->name, compared);
    } else {
        CHECKF(0, "%s", err);
    }
    free(taps); free(a); free(b);
    drafter_free(d2);
    drafter_free(d1);
    gen_engine_free(tp1);
}

/* Logits of every row of one NTOK-token sequence. */
static int all_logits(gen_engine *e, const int *tok, float *out) {
    char err[1024];
    int seq = kv_seq_new(e->kv), rows[NTOK];
    for (int i = 0; i < NTOK; i++) rows[i] = i;
    fwd_span sp = {.seq = seq, .n = NTOK, .tokens = tok};
    fwd_batch b = {.spans = &sp, .n_spans = 1};
    fwd_out o = {.logit_rows = rows, .n_logit_rows = NTOK, .logits = out};
    int rc = fwd_run(e->fwd, e->kv, &b, &o, err, sizeof err);
    if (rc) CHECKF(0, "%s", err);
    kv_seq_free(e->kv, seq);
    return rc;
}

static void compare_tp1(gen_engine *tp2, const char *dir) {
    char err[1024];
    gen_engine *tp1;
    gen_engine_opts o1 = opts(dir, NULL);
    if (gen_engine_create(&tp1, &o1, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    const int V = tp1->m->cfg.vocab_size;
    int *tok = malloc(sizeof(int) * NTOK);
    float *a = malloc(sizeof(float) * (size_t)NTOK * V), *b = malloc(sizeof(float) * (size_t)NTOK * V);
    for (int i = 0; i < NTOK; i++) tok[i] = (int)((i * 2654435761u + 12345u) % (unsigned)V);
    if (!all_logits(tp1, tok, a) && !all_logits(tp2, tok, b)) {
        double maxd = 0;
        int ties = 0, flips = 0;
        for (int r = 0; r < NTOK; r++) {
            const float *x = a + (size_t)r * V, *y = b + (size_t)r * V;
            int ax = 0, ay = 0;
            for (int v = 0; v < V; v++) {
                double d = fabs((double)x[v] - y[v]);
                if (d > maxd || d != d) maxd = d != d ? INFINITY : d;
                if (x[v] > x[ax]) ax = v;
                if (y[v] > y[ay]) ay = v;
            }
            float second = -INFINITY;
            for (int v = 0; v < V; v++)
                if (v != ax && x[v] > second) second = x[v];
            if (x[ax] - second <= 2 * TOL) ties++;
            else if (ax != ay) flips++;
        }
        printf("%s: TP=2 vs TP=1 over %d positions: max |dlogit| %.3g (tolerance %g), argmax flips %d, "
               "near-ties skipped %d\n", dir, NTOK, maxd, TOL, flips, ties);
        CHECKF(maxd <= TOL, "%s: max |dlogit| %.3g > %g", dir, maxd, TOL);
        CHECKF(flips == 0, "%s: argmax differs at %d positions", dir, flips);
        CHECKF(ties < NTOK / 10, "%s: %d near-ties: the comparison says little", dir, ties);
    }
    free(tok); free(a); free(b);
    gen_engine_free(tp1);
}

/* One row alone, then the same row beside 5 rows of another sequence. */
static void batch_invariance(gen_engine *e) {
    char err[1024];
    const int V = e->m->cfg.vocab_size;
    int a = kv_seq_new(e->kv), b = kv_seq_new(e->kv);
    int ta[40], tb[45];
    for (int i = 0; i < 40; i++) ta[i] = (i * 31 + 7) % V;
    for (int i = 0; i < 45; i++) tb[i] = (i * 17 + 3) % V;
    float *alone = malloc(sizeof(float) * V), *among = malloc(sizeof(float) * V);
    fwd_span s1 = {.seq = a, .n = 39, .tokens = ta}, s2 = {.seq = b, .n = 40, .tokens = tb};
    fwd_span both[2] = {s1, s2};
    fwd_batch pre = {.spans = both, .n_spans = 2};
    CHECK(!fwd_run(e->fwd, e->kv, &pre, NULL, err, sizeof err));
    int r0 = 0;
    fwd_span one = {.seq = a, .n = 1, .tokens = ta + 39};
    fwd_batch b1 = {.spans = &one, .n_spans = 1};
    fwd_out o1 = {.logit_rows = &r0, .n_logit_rows = 1, .logits = alone};
    CHECK(!fwd_run(e->fwd, e->kv, &b1, &o1, err, sizeof err));
    kv_truncate(e->kv, a, 39);
    fwd_span mix[2] = {{.seq = b, .n = 5, .tokens = tb + 40}, one};
    fwd_batch b2 = {.spans = mix, .n_spans = 2};
    int r5 = 5;
    fwd_out o2 = {.logit_rows = &r5, .n_logit_rows = 1, .logits = among};
    CHECK(!fwd_run(e->fwd, e->kv, &b2, &o2, err, sizeof err));
    CHECKF(!memcmp(alone, among, sizeof(float) * V), "TP=2: a row's logits depend on the batch it is in");
    kv_seq_free(e->kv, a);
    kv_seq_free(e->kv, b);
    free(alone); free(among);
}

/* every: every depth 1..8 on batches 1, 3, 8; else 1 (one draft), 2 (the
 * second MTP module), 3, 5 (DSpark's second block) and 8 on batches 1 and 8,
 * about a third of the sweep (test_tp runs alone on both cores). */
static void run_case(gen_engine *e, const model_case *mc, const char *workload, int every) {
    static const int all_depths[8] = {1, 2, 3, 4, 5, 6, 7, 8}, all_batches[3] = {1, 3, 8};
    static const int some_depths[5] = {1, 2, 3, 5, 8}, some_batches[2] = {1, 8};
    if (!strcmp(workload, "code")) {
        compare_tp1(e, mc->dir);
        batch_invariance(e);
        for (int c = 0; c < 5 && mc->lossless[c].label; c++)
            if (!mc->lossless[c].policy &&
                (!strcmp(mc->lossless[c].dopt.name, "mtp") || !strcmp(mc->lossless[c].dopt.name, "dspark")))
                compare_drafter(e, mc->dir, &mc->lossless[c].dopt);
    }
    static int prompts[LL_NP][LL_MAXP];
    int lens[LL_NP];
    int got = ll_load_prompts(e, workload, prompts, lens, LL_NP);
    if (got < LL_NP) ll_synthetic_prompts(e->m->cfg.vocab_size, prompts, lens);   /* fixtures */
    for (int c = 0; c < 5 && mc->lossless[c].label; c++) {
        long n = ll_check(e, &mc->lossless[c], prompts, lens, every ? all_depths : some_depths, every ? 8 : 5,
                          every ? all_batches : some_batches, every ? 3 : 2);
        printf("%s, TP=2, %s, %s prompts: %ld tokens compared\n", mc->dir, mc->lossless[c].label,
               got < LL_NP ? "fixture" : workload, n);
    }
}

int main(int argc, char **argv) {
    tu_part part = tu_parse_part(argc, argv);
    kb_comm *c;
    char err[1024];
    if (kb_comm_open_mpi(&c, 2, err, sizeof err)) {
        fprintf(stderr, "test_tp: %s\n", err);
        return 1;
    }
    const char *tied = "tests/fixtures/qwen3-tied";
    /* tu_path's buffers are reused; these paths must live to the end */
    char p_tied[4096], p_fdspark[4096], p_dspark[4096], p_draft[4096], p_dhead[4096];
    snprintf(p_tied, sizeof p_tied, "%s", tu_path(tied));
    snprintf(p_fdspark, sizeof p_fdspark, "%s", tu_path("tests/fixtures/dspark-tiny"));
    snprintf(p_dspark, sizeof p_dspark, "%s", tu_path("models/tiny-dspark"));
    snprintf(p_draft, sizeof p_draft, "%s", tu_path("models/tiny-draft"));
    snprintf(p_dhead, sizeof p_dhead, "%s", tu_path("tests/fixtures/dspark-tiny-d2t-head"));
    model_case fixtures[] = {
        {tied, {{"ngram", {.name = "ngram"}, 0, NULL},
                {"draft(self)", {.name = "draft", .draft_model = p_tied, .max_seqs = 8}, 1, NULL},
                {"dspark", {.name = "dspark", .draft_model = p_fdspark, .max_seqs = 8,
                            .quiet = 1}, 0, NULL},
                {"dspark(d2t, reduced head)", {.name = "dspark", .draft_model = p_dhead, .max_seqs = 8,
                                               .quiet = 1}, 0, NULL},
                /* drafting that stops early: each wanted slot's head is a
                 * head-only pass, which the other rank must run too */
                {"dspark(confidence)", {.name = "dspark", .draft_model = p_fdspark, .max_seqs = 8, .quiet = 1}, 0,
                 "confidence"}}},
        {"tests/fixtures/qwen3-untied", {{NULL}}},
        /* Qwen3-MoE: every expert split across the ranks, the router whole */
        {"tests/fixtures/qwen3-moe-tiny", {{"ngram", {.name = "ngram"}, 0, NULL}}},
        {"tests/fixtures/qwen3-sharded", {{NULL}}},
        {"tests/fixtures/qwen3-tied-mtp", {{"mtp", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 0, NULL}}},
        {"tests/fixtures/qwen3-tied-mtp2", {{"mtp(2 modules)", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 0, NULL}}},
        {"tests/fixtures/qwen3-tied-mtp-d2t", {{"mtp(d2t)", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 0, NULL}}},
    };
    model_case bundled[] = {
        {"models/tiny", {{"ngram", {.name = "ngram"}, 1, NULL},
                         {"mtp", {.name = "mtp", .max_seqs = 8, .quiet = 1}, 1, NULL},
                         {"dspark", {.name = "dspark", .draft_model = p_dspark, .max_seqs = 8,
                                     .quiet = 1}, 1, NULL},
                         {"draft", {.name = "draft", .draft_model = p_draft, .max_seqs = 8}, 1, NULL}}},
    };
    if (part != TU_FIXTURES && !tu_have("models/tiny/model.safetensors", "models/tiny-draft/model.safetensors",
                                        "models/tiny-dspark/model.safetensors", "workloads/code.jsonl",
                                        "workloads/prose.jsonl", NULL)) {
        kb_comm_free(c);
        return tu_skip("test_tp", "models/tiny family or workloads/ absent");
    }
    /* The passes, the same on every rank: (cases, how many, workload, every depth × batch). */
    typedef struct { const model_case *cases; int n; const char *workload; int every; } pass;
    pass passes[3];
    int np = 0, nfix = (int)(sizeof fixtures / sizeof *fixtures);
    if (part == TU_FIXTURES) passes[np++] = (pass){fixtures, nfix, "code", 0};
    if (part == TU_FULL) passes[np++] = (pass){fixtures, nfix, "code", 1};
    if (part != TU_FIXTURES) passes[np++] = (pass){bundled, 1, "code", 1};
    if (part == TU_FULL) passes[np++] = (pass){bundled, 1, "prose", 1};
    for (int p = 0; p < np; p++)
        for (int i = 0; i < passes[p].n; i++) {
            const model_case *mc = &passes[p].cases[i];
            gen_engine *e;
            gen_engine_opts o = opts(mc->dir, c);
            if (gen_engine_create(&e, &o, err, sizeof err)) kb_comm_abort(c, 1, err);
            if (kb_comm_rank(c) > 0) {
                drafter_tp_host(e);
                gen_engine_serve(e);
            }
            else run_case(e, mc, passes[p].workload, passes[p].every);
            gen_engine_free(e);
        }
    int rank = kb_comm_rank(c);
    kb_comm_free(c);
    return rank == 0 ? tu_done("test_tp") : 0;
}
