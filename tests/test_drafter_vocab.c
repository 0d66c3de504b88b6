/* label: model */
/* test_drafter_vocab.c — the reduced draft vocabulary (spec/draft_vocab.h)
 * of the MTP and DSpark drafters, on the fixtures written by
 * scripts/train/make_draft_vocab.py --fixtures (a 512-of-4096 d2t map counted on
 * the fixture drafters' training data): tests/fixtures/qwen3-tied-mtp-d2t
 * (MTP, the target's lm_head rows gathered), dspark-tiny-d2t (DSpark, the
 * target's lm_head and markov_w2 rows gathered) and dspark-tiny-d2t-head
 * (DSpark with lm_head.weight stored reduced, [512, 64], as EAGLE-3 does).
 *
 * (a) A map of all V ids, offsets 0 (written here): every draft, top
 *     probability, confidence and sampled q row is bit-identical to the
 *     drafter without a map — the mapped path changes nothing but the rows.
 * (b) The partial maps: the first draft's logits equal the unmapped
 *     drafter's at the mapped ids (the right rows, in draft-id order; -inf
 *     elsewhere) and its greedy draft is their argmax; every drafted id,
 *     greedy or sampled, is in the map, and a sampled draft's q is zero
 *     outside it and sums to 1; greedy speculation on == off at depths
 *     1, 2, 3, 5, 8 on batches 1 and 8, with drafts accepted at every depth
 *     (and for the two-module MTP fixture under the same map, batch 8);
 *     `full` (test_drafter_vocab_full, label slow): every depth 1..8 on
 *     batches 1, 3 and 8, and the sampling test (c) of the reduced lm_head
 *     too (by default only the gathered map's: the same rows).
 * (c) Sampling keeps the target's distribution (drafter_test.h
 *     dt_sampling: the chi-square of test_drafter_mtp/dspark).
 * (d) Malformed maps are refused, naming the file and the problem: wrong
 *     dtype or shape, empty or longer than V, out of range, duplicate
 *     targets, a t2d that disagrees, truncated data, no d2t; and, through
 *     the drafters, a DSpark config.json draft_vocab_size that disagrees
 *     with the map or has none, a reduced lm_head of the wrong length, and
 *     an MTP map with duplicates. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include "draft_vocab.h"
#include "drafter_mtp.h"
#include "drafter_dspark.h"
#include "drafter_test.h"

enum { V = 4096, K = 8 };

/* The lossless sweeps' depths and batches: every one in `full`; by default 1
 * (one draft), 2 (the second MTP module), 3, 5 (DSpark's γ + 1: a second
 * block) and 8 on batches 1 and 8. */
static const int all_depths[8] = {1, 2, 3, 4, 5, 6, 7, 8}, all_batches[3] = {1, 3, 8};
static const int some_depths[5] = {1, 2, 3, 5, 8}, some_batches[2] = {1, 8};
static int full;
#define SWEEP_DEPTHS (full ? all_depths : some_depths)
#define SWEEP_ND (full ? 8 : 5)

/* ---- small safetensors writer for the maps made here -------------------- */

typedef struct {
    const char *name, *dtype;
    int ndim;
    long shape[2];
    const void *data;
    size_t nbytes;
} st_entry;

/* Writes n tensors to path; the last `cut` bytes are left off (truncation). */
static void write_st(const char *path, const st_entry *t, int n, size_t cut) {
    char hdr[1024];
    size_t off = 0;
    int k = snprintf(hdr, sizeof hdr, "{\"__metadata__\":{\"format\":\"pt\"}");
    for (int i = 0; i < n; i++) {
        k += snprintf(hdr + k, sizeof hdr - (size_t)k, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t[i].name, t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++)
            k += snprintf(hdr + k, sizeof hdr - (size_t)k, "%s%ld", d ? "," : "", t[i].shape[d]);
        k += snprintf(hdr + k, sizeof hdr - (size_t)k, "],\"data_offsets\":[%zu,%zu]}", off, off + t[i].nbytes);
        off += t[i].nbytes;
    }
    k += snprintf(hdr + k, sizeof hdr - (size_t)k, "}");
    while (k % 8) hdr[k++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) { CHECKF(0, "%s: cannot write", path); return; }
    uint64_t hl = (uint64_t)k;
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)(hl >> (8 * i));
    fwrite(le, 1, 8, f);
    fwrite(hdr, 1, (size_t)k, f);
    size_t left = off > cut ? off - cut : 0;
    for (int i = 0; i < n && left; i++) {
        size_t w = t[i].nbytes < left ? t[i].nbytes : left;
        fwrite(t[i].data, 1, w, f);
        left -= w;
    }
    fclose(f);
}

/* A map from target ids ids[n]: d2t offsets (as EAGLE-3 writes them). */
static void d2t_of(int64_t *d2t, const int *ids, int n) {
    for (int i = 0; i < n; i++) d2t[i] = (int64_t)ids[i] - i;
}

/* A fresh directory of links to every file of src (relative to the source
 * tree) except skip; dir receives the path. */
static int link_dir(char *dir, size_t cap, const char *src, const char *skip) {
    snprintf(dir, cap, "/tmp/specbed-d2t-XXXXXX");
    if (!mkdtemp(dir)) { CHECK(0); return -1; }
    char sdir[4200];
    snprintf(sdir, sizeof sdir, "%s", tu_path(src));
    DIR *dd = opendir(sdir);
    if (!dd) { CHECKF(0, "%s: cannot list", sdir); return -1; }
    for (struct dirent *de; (de = readdir(dd));) {
        char from[4600], to[4200];
        if (de->d_name[0] == '.' || (skip && !strcmp(de->d_name, skip))) continue;
        snprintf(from, sizeof from, "%s/%s", sdir, de->d_name);
        snprintf(to, sizeof to, "%s/%s", dir, de->d_name);
        CHECK(symlink(from, to) == 0);
    }
    closedir(dd);
    return 0;
}

/* Removes what link_dir (and the test) put in dir, and dir. */
static void rm_dir(const char *dir) {
    DIR *dd = opendir(dir);
    for (struct dirent *de; dd && (de = readdir(dd));) {
        char p[4200];
        if (de->d_name[0] == '.') continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        unlink(p);
    }
    if (dd) closedir(dd);
    rmdir(dir);
}

static void write_identity(const char *dir) {
    int64_t *z = calloc(V, sizeof *z);
    unsigned char *b = malloc(V);
    memset(b, 1, V);
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, DRAFT_VOCAB_FILE);
    st_entry t[2] = {{"d2t", "I64", 1, {V}, z, sizeof *z * V}, {"t2d", "BOOL", 1, {V}, b, V}};
    write_st(p, t, 2, 0);
    free(z);
    free(b);
}

/* ---- proposals ------------------------------------------------------------ */

typedef struct {
    spec_proposal p;
    float *q;       /* [K, V] */
    float *trace;   /* [K, V] */
} shot;

static void shot_init(shot *s) {
    s->q = calloc((size_t)K * V, sizeof(float));
    s->trace = calloc((size_t)K * V, sizeof(float));
}
static void shot_free(shot *s) { free(s->q); free(s->trace); }

static void set_trace(drafter *d, float *t) {
    if (!strcmp(d->ops->name, "mtp")) drafter_mtp_set_trace(d, t);
    else drafter_dspark_set_trace(d, t, NULL);
}

/* One proposal of up to K drafts after x[0..n) with taps [n, n_taps, H]
 * (sampled with an RNG seeded `seed` when sp is not greedy). */
static int shoot(drafter *d, shot *s, const int *x, int n, const float *taps, const sampler_params *sp,
                 uint64_t seed) {
    char err[1024];
    static rng_state rng;
    rng_seed(&rng, seed);
    if (d->ops->begin(d, 0, x, n, taps, err, sizeof err)) { CHECKF(0, "%s", err); return -1; }
    s->p = (spec_proposal){.slot = 0, .tokens = x, .n_tokens = n, .max_k = K, .sp = sp, .rng = &rng, .q = s->q};
    set_trace(d, s->trace);
    int rc = d->ops->propose(d, &s->p, 1, err, sizeof err);
    set_trace(d, NULL);
    d->ops->release(d, 0);
    CHECKF(!rc, "%s", err);
    return rc;
}

static int same_shot(const shot *a, const shot *b) {
    const spec_proposal *x = &a->p, *y = &b->p;
    size_t k = (size_t)x->k;
    return x->k == y->k && x->q_valid == y->q_valid && x->has_conf == y->has_conf &&
           !memcmp(x->draft, y->draft, sizeof(int) * k) && !memcmp(x->top_prob, y->top_prob, sizeof(float) * k) &&
           (!x->has_conf || !memcmp(x->conf, y->conf, sizeof(float) * k)) &&
           (!x->q_valid || !memcmp(a->q, b->q, sizeof(float) * k * V)) &&
           !memcmp(a->trace, b->trace, sizeof(float) * k * V);
}

/* The target taps drafter d wants for x[0..n). Caller frees. */
static float *taps_for(gen_engine *e, const drafter *d, const int *x, int n) {
    float *t = malloc(sizeof(float) * (size_t)n * d->n_taps * e->m->cfg.hidden_size);
    if (dt_target_taps(e, x, n, d->tap_layers, d->n_taps, t)) { free(t); return NULL; }
    return t;
}

static const sampler_params GREEDY = {0}, SAMPLED = {.temperature = 1.0f, .top_p = 1.0f, .top_k = 0};

/* (a): drafters a (no map) and b (identity map) propose bit-identically. */
static void identity_check(gen_engine *e, drafter *a, drafter *b, const char *label) {
    int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, 0, pr, lens), n_cmp = 0;
    shot sa, sb;
    shot_init(&sa);
    shot_init(&sb);
    for (int i = 0; i < np; i++) {
        float *taps = taps_for(e, a, pr[i], lens[i]);
        if (!taps) { CHECK(0); continue; }
        for (int m = 0; m < 2; m++) {
            const sampler_params *sp = m ? &SAMPLED : &GREEDY;
            if (shoot(a, &sa, pr[i], lens[i], taps, sp, 99 + i) || shoot(b, &sb, pr[i], lens[i], taps, sp, 99 + i))
                continue;
            CHECKF(sa.p.k == K && same_shot(&sa, &sb), "%s prompt %d (%s): the identity map changed the proposal",
                   label, i, m ? "sampled" : "greedy");
            n_cmp += sa.p.k;
        }
        free(taps);
    }
    printf("%s: identity map, %d drafts bit-identical to no map (greedy and sampled, q rows and logits)\n", label,
           n_cmp);
    shot_free(&sa);
    shot_free(&sb);
    for (int i = 0; i < np; i++) free(pr[i]);
}

/* (b), direct: mapped drafter b against unmapped a, map dv. */
static void partial_check(gen_engine *e, drafter *a, drafter *b, const draft_vocab *dv, const char *label) {
    unsigned char in[V] = {0};
    for (int i = 0; i < dv->n; i++) in[dv->d2t[i]] = 1;
    int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, 0, pr, lens);
    shot sa, sb;
    shot_init(&sa);
    shot_init(&sb);
    double worst = 0;
    long drafted = 0;
    for (int i = 0; i < np; i++) {
        float *taps = taps_for(e, a, pr[i], lens[i]);
        if (!taps) { CHECK(0); continue; }
        if (!shoot(a, &sa, pr[i], lens[i], taps, &GREEDY, 1) && !shoot(b, &sb, pr[i], lens[i], taps, &GREEDY, 1)) {
            /* first draft: same scores at the mapped ids, -inf elsewhere, argmax among them */
            int best = -1, inf_ok = 1;
            for (int v = 0; v < V; v++) {
                if (!in[v]) { inf_ok &= sb.trace[v] == -INFINITY; continue; }
                double dd = fabs((double)sb.trace[v] - sa.trace[v]);
                if (dd > worst) worst = dd;
                if (best < 0 || sa.trace[v] > sa.trace[best]) best = v;
            }
            CHECKF(inf_ok, "%s prompt %d: logits outside the map are not -inf", label, i);
            CHECKF(sb.p.draft[0] == best, "%s prompt %d: first draft %d, argmax over the map %d", label, i,
                   sb.p.draft[0], best);
        }
        for (int m = 0; m < 2; m++) {
            if (shoot(b, &sb, pr[i], lens[i], taps, m ? &SAMPLED : &GREEDY, 7 + i)) continue;
            CHECKF(sb.p.k == K && sb.p.q_valid == m, "%s prompt %d: k %d q_valid %d", label, i, sb.p.k, sb.p.q_valid);
            for (int k = 0; k < sb.p.k; k++, drafted++) {
                int t = sb.p.draft[k];
                CHECKF(t >= 0 && t < V && in[t], "%s prompt %d: draft %d is target id %d, not in the map", label, i, k,
                       t);
                if (!m) continue;
                const float *q = sb.q + (size_t)k * V;
                double sum = 0;
                int outside = 0;
                for (int v = 0; v < V; v++) {
                    sum += q[v];
                    outside += !in[v] && q[v] != 0.0f;
                }
                CHECKF(!outside && fabs(sum - 1) < 1e-4 && q[t] > 0,
                       "%s prompt %d draft %d: q has %d nonzero entries outside the map, sums to %g, q[draft] %g",
                       label, i, k, outside, sum, q[t]);
            }
        }
        free(taps);
    }
    printf("%s: %ld drafts all in the map of %d; first-draft logits at the mapped ids within %.3g of the "
           "unmapped drafter's\n", label, drafted, dv->n, worst);
    CHECKF(worst <= 1e-4, "%s: mapped logits differ from the unmapped ones by %g", label, worst);
    shot_free(&sa);
    shot_free(&sb);
    for (int i = 0; i < np; i++) free(pr[i]);
}

/* (b) and (c) through the speculative step; sample_depth 0: (b) only. */
static void lossless_and_sampling(gen_engine *e, const drafter_opts *o, const char *label, int sample_depth) {
    int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, 0, pr, lens);
    const int *pp[DT_NP];
    for (int i = 0; i < np; i++) pp[i] = pr[i];
    double t0 = gen_now();
    long total = dt_lossless(e, o, label, SWEEP_DEPTHS, SWEEP_ND, full ? all_batches : some_batches, full ? 3 : 2, pp,
                             lens, np, 32);
    printf("%s: %ld tokens compared in %.1f s\n", label, total, gen_now() - t0);
    if (!sample_depth) {
        for (int i = 0; i < np; i++) free(pr[i]);
        return;
    }
    drafter_opts so = *o;
    so.max_seqs = 1;
    t0 = gen_now();
    dt_sampling(e, &so, label, pp[2] + lens[2] - 16, 16, sample_depth, 1500, 1.0f, 6);
    printf("%s: sampling in %.1f s\n", label, gen_now() - t0);
    for (int i = 0; i < np; i++) free(pr[i]);
}

/* ---- (d) malformed maps --------------------------------------------------- */

static void refuse_map(const st_entry *t, int n, size_t cut, const char *want, const char *what) {
    char dir[] = "/tmp/specbed-d2t-XXXXXX", p[4200], err[1024];
    if (!mkdtemp(dir)) { CHECK(0); return; }
    snprintf(p, sizeof p, "%s/%s", dir, DRAFT_VOCAB_FILE);
    write_st(p, t, n, cut);
    draft_vocab dv;
    int rc = draft_vocab_load(&dv, dir, V, err, sizeof err);
    CHECKF(rc != 0 && dv.n == 0 && strstr(err, want) && strstr(err, DRAFT_VOCAB_FILE), "%s: %s", what,
           rc ? err : "accepted");
    if (rc) printf("refused (%s): %s\n", what, err);
    draft_vocab_free(&dv);
    unlink(p);
    rmdir(dir);
}

static void malformed_maps(void) {
    enum { N = 8 };
    int ids[N] = {3, 5, 8, 13, 21, 34, 55, 89};
    int64_t d[N], bad[N];
    int32_t d32[N];
    d2t_of(d, ids, N);
    for (int i = 0; i < N; i++) d32[i] = (int32_t)d[i];
    unsigned char t2d[V] = {0};
    for (int i = 0; i < N; i++) t2d[ids[i]] = 1;
    st_entry e[2] = {{"d2t", "I64", 1, {N}, d, sizeof d}, {"t2d", "BOOL", 1, {V}, t2d, V}};

    /* the well-formed map loads, and its ids are the targets */
    char dir[] = "/tmp/specbed-d2t-XXXXXX", p[4200], err[1024];
    if (mkdtemp(dir)) {
        snprintf(p, sizeof p, "%s/%s", dir, DRAFT_VOCAB_FILE);
        write_st(p, e, 2, 0);
        draft_vocab dv;
        CHECKF(!draft_vocab_load(&dv, dir, V, err, sizeof err) && dv.n == N && !memcmp(dv.d2t, ids, sizeof ids),
               "a well-formed map: %s", err);
        draft_vocab_free(&dv);
        unlink(p);
        CHECK(!draft_vocab_load(&dv, dir, V, err, sizeof err) && dv.n == 0);   /* absent: no map */
        rmdir(dir);
    }

    st_entry x = {"d2t", "I32", 1, {N}, d32, sizeof d32};
    refuse_map(&x, 1, 0, "dtype I32", "d2t int32");
    x = (st_entry){"d2t", "F32", 1, {N}, d32, sizeof d32};
    refuse_map(&x, 1, 0, "must be I64", "d2t float32");
    x = (st_entry){"d2t", "I64", 2, {N, 1}, d, sizeof d};
    refuse_map(&x, 1, 0, "1-D", "d2t [N, 1]");
    x = (st_entry){"d2t", "I64", 1, {0}, d, 0};
    refuse_map(&x, 1, 0, "0 entries", "empty d2t");
    int64_t *big = calloc(V + 1, sizeof *big);
    x = (st_entry){"d2t", "I64", 1, {V + 1}, big, sizeof *big * (V + 1)};
    refuse_map(&x, 1, 0, "4097 entries", "d2t longer than the vocabulary");
    free(big);
    memcpy(bad, d, sizeof d);
    bad[5] = V;   /* target 5 + 4096: out of range */
    x = (st_entry){"d2t", "I64", 1, {N}, bad, sizeof bad};
    refuse_map(&x, 1, 0, "outside [0, 4096)", "target id past the vocabulary");
    memcpy(bad, d, sizeof d);
    bad[2] = -3;   /* target -1 */
    refuse_map(&x, 1, 0, "target id -1", "negative target id");
    memcpy(bad, d, sizeof d);
    bad[4] = ids[3] - 4;   /* draft 4 -> target 13, as draft 3 */
    refuse_map(&x, 1, 0, "two draft ids to target id 13", "duplicate target id");
    unsigned char t2[V];
    memcpy(t2, t2d, V);
    t2[4] = 1;
    st_entry y[2] = {e[0], {"t2d", "BOOL", 1, {V}, t2, V}};
    refuse_map(y, 2, 0, "t2d[4] = 1", "t2d marks an unmapped id");
    y[1] = (st_entry){"t2d", "U8", 1, {V}, t2d, V};
    refuse_map(y, 2, 0, "must be BOOL", "t2d uint8");
    y[1] = (st_entry){"t2d", "BOOL", 1, {V - 1}, t2d, V - 1};
    refuse_map(y, 2, 0, "t2d has 4095 entries", "t2d shorter than the vocabulary");
    refuse_map(e, 1, 4, "data_offsets", "truncated data");
    x = (st_entry){"map", "I64", 1, {N}, d, sizeof d};
    refuse_map(&x, 1, 0, "no tensor 'd2t'", "no d2t");
}

/* A drafter over dir (DSpark: draft_model = dir; MTP: the target in dir)
 * must be refused with a message containing want. */
static void refuse_drafter(gen_engine *e, const char *name, const char *dir, const char *want, const char *what) {
    char err[1024];
    drafter *d = NULL;
    int rc;
    if (!strcmp(name, "mtp")) {
        model *m = NULL;
        if (model_load(&m, dir, err, sizeof err)) { CHECKF(0, "%s", err); return; }
        mtp_opts mo = {.max_seqs = 1, .quiet = 1};
        rc = drafter_mtp_create(&d, &mo, m, NULL, err, sizeof err);
        model_free(m);
    } else {
        drafter_opts o = {.name = name, .draft_model = dir, .max_seqs = 1, .quiet = 1};
        rc = drafter_create(&d, &o, e, err, sizeof err);
    }
    CHECKF(rc != 0 && !d && strstr(err, want), "%s: %s", what, rc ? err : "accepted");
    if (rc) printf("refused (%s): %s\n", what, err);
    drafter_free(d);
}

/* dir/config.json := src's with "draft_vocab_size" set to n (0: removed). */
static void write_config(const char *dir, const char *src, int n) {
    cJSON *j = tu_read_config(src);
    if (!j) return;
    cJSON_DeleteItemFromObjectCaseSensitive(j, "draft_vocab_size");
    if (n) cJSON_AddNumberToObject(j, "draft_vocab_size", n);
    tu_write_config(dir, j);
    cJSON_Delete(j);
}

static void malformed_drafters(gen_engine *e) {
    char dir[64], p[4200];
    /* config says 511, the map has 512 */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/dspark-tiny-d2t", "config.json")) {
        write_config(dir, "tests/fixtures/dspark-tiny-d2t", 511);
        refuse_drafter(e, "dspark", dir, "draft_vocab_size 511", "DSpark draft_vocab_size differs from the map");
        rm_dir(dir);
    }
    /* config promises a reduced vocabulary, no map */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/dspark-tiny-d2t", "draft_vocab.safetensors")) {
        refuse_drafter(e, "dspark", dir, "there is no", "DSpark draft_vocab_size without a map");
        rm_dir(dir);
    }
    /* a reduced lm_head [512, 64] with a map of 511 */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/dspark-tiny-d2t-head", "draft_vocab.safetensors")) {
        int ids[511];
        int64_t d[511];
        for (int i = 0; i < 511; i++) ids[i] = 2 * i;
        d2t_of(d, ids, 511);
        st_entry t = {"d2t", "I64", 1, {511}, d, sizeof d};
        snprintf(p, sizeof p, "%s/%s", dir, DRAFT_VOCAB_FILE);
        write_st(p, &t, 1, 0);
        snprintf(p, sizeof p, "%s/config.json", dir);
        unlink(p);   /* the link, never the fixture's file: a config without draft_vocab_size */
        write_config(dir, "tests/fixtures/dspark-tiny-d2t-head", 0);
        refuse_drafter(e, "dspark", dir, "lm_head.weight", "DSpark lm_head of neither N nor V rows");
        rm_dir(dir);
    }
    /* MTP: a map with a duplicate */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/qwen3-tied-mtp", NULL)) {
        int64_t d[3] = {7, 6, 0};   /* targets 7, 7, 2 */
        st_entry t = {"d2t", "I64", 1, {3}, d, sizeof d};
        snprintf(p, sizeof p, "%s/%s", dir, DRAFT_VOCAB_FILE);
        write_st(p, &t, 1, 0);
        refuse_drafter(e, "mtp", dir, "two draft ids to target id 7", "MTP map with a duplicate");
        rm_dir(dir);
    }
}

/* ---- the drafters --------------------------------------------------------- */

static drafter *make(gen_engine *e, const char *name, const char *ddir, const model *m) {
    char err[1024];
    drafter *d = NULL;
    if (!strcmp(name, "mtp")) {
        mtp_opts mo = {.max_seqs = 2};
        if (drafter_mtp_create(&d, &mo, m, NULL, err, sizeof err)) CHECKF(0, "%s", err);
    } else {
        drafter_opts o = {.name = "dspark", .draft_model = ddir, .max_seqs = 2};
        if (drafter_create(&d, &o, e, err, sizeof err)) CHECKF(0, "%s", err);
    }
    return d;
}

static void mtp_part(void) {
    char err[1024], dir[64], mapped_dir[4200];
    gen_engine *e;
    gen_engine_opts fo = {.model_dir = tu_path("tests/fixtures/qwen3-tied-mtp"), .max_seqs = 8, .max_batch_rows = 96,
                          .max_seq_len = 512};
    if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    drafter *plain = make(e, "mtp", NULL, e->m);
    model *mi = NULL, *mp = NULL;
    /* (a) identity */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/qwen3-tied-mtp", NULL)) {
        write_identity(dir);
        if (model_load(&mi, dir, err, sizeof err)) CHECKF(0, "%s", err);
        drafter *id = mi ? make(e, "mtp", NULL, mi) : NULL;
        if (plain && id) identity_check(e, plain, id, "mtp(identity map)");
        drafter_free(id);
        model_free(mi);
        rm_dir(dir);
    }
    /* (b) partial, against the same weights without a map */
    snprintf(mapped_dir, sizeof mapped_dir, "%s", tu_path("tests/fixtures/qwen3-tied-mtp-d2t"));
    draft_vocab dv;
    if (draft_vocab_load(&dv, mapped_dir, V, err, sizeof err) || !dv.n) CHECKF(0, "%s: no map: %s", mapped_dir, err);
    if (model_load(&mp, mapped_dir, err, sizeof err)) CHECKF(0, "%s", err);
    drafter *mapped = mp ? make(e, "mtp", NULL, mp) : NULL;
    if (plain && mapped && dv.n) partial_check(e, plain, mapped, &dv, "mtp(512-id map)");
    drafter_free(mapped);
    model_free(mp);
    draft_vocab_free(&dv);
    drafter_free(plain);
    gen_engine_free(e);
    /* (b), (c) through the speculative step, target and map from the -d2t dir */
    fo.model_dir = mapped_dir;
    if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return; }
    drafter_opts o = {.name = "mtp", .max_seqs = 8, .quiet = 1};
    lossless_and_sampling(e, &o, "mtp(512-id map)", 3);
    gen_engine_free(e);
    /* two modules, one map: each module's head gathered (module 1 shares the target's) */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/qwen3-tied-mtp2", NULL)) {
        char from[4600], to[4200];
        snprintf(from, sizeof from, "%s/%s", mapped_dir, DRAFT_VOCAB_FILE);
        snprintf(to, sizeof to, "%s/%s", dir, DRAFT_VOCAB_FILE);
        CHECK(symlink(from, to) == 0);
        fo.model_dir = dir;
        if (!gen_engine_create(&e, &fo, err, sizeof err)) {
            int *pr[DT_NP] = {0}, lens[DT_NP] = {0}, np = dt_prompts(e, 0, pr, lens);
            const int *pp[DT_NP];
            for (int i = 0; i < np; i++) pp[i] = pr[i];
            const int b8 = 8;
            dt_lossless(e, &o, "mtp(2 modules, 512-id map)", SWEEP_DEPTHS, SWEEP_ND, &b8, 1, pp, lens, np, 24);
            for (int i = 0; i < np; i++) free(pr[i]);
            gen_engine_free(e);
        } else {
            CHECKF(0, "%s", err);
        }
        rm_dir(dir);
    }
}

static void dspark_part(gen_engine *e) {
    char dir[64], d2t[4200], head[4200];
    drafter *plain = make(e, "dspark", tu_path("tests/fixtures/dspark-tiny"), NULL);
    /* (a) identity */
    if (!link_dir(dir, sizeof dir, "tests/fixtures/dspark-tiny", NULL)) {
        write_identity(dir);
        drafter *id = make(e, "dspark", dir, NULL);
        if (plain && id) identity_check(e, plain, id, "dspark(identity map)");
        drafter_free(id);
        rm_dir(dir);
    }
    /* (b) partial: the target's rows gathered, and lm_head stored reduced */
    snprintf(d2t, sizeof d2t, "%s", tu_path("tests/fixtures/dspark-tiny-d2t"));
    snprintf(head, sizeof head, "%s", tu_path("tests/fixtures/dspark-tiny-d2t-head"));
    char err[1024];
    draft_vocab dv;
    if (draft_vocab_load(&dv, d2t, V, err, sizeof err) || !dv.n) CHECKF(0, "%s: no map: %s", d2t, err);
    drafter *g = make(e, "dspark", d2t, NULL), *h = make(e, "dspark", head, NULL);
    if (plain && g && dv.n) partial_check(e, plain, g, &dv, "dspark(512-id map, gathered)");
    if (plain && h && dv.n) partial_check(e, plain, h, &dv, "dspark(512-id map, reduced lm_head)");
    drafter_free(g);
    drafter_free(h);
    draft_vocab_free(&dv);
    drafter_free(plain);
    drafter_opts o = {.name = "dspark", .draft_model = d2t, .max_seqs = 8, .quiet = 1};
    lossless_and_sampling(e, &o, "dspark(512-id map, gathered)", 5);   /* γ + 1: a chained block */
    /* The reduced lm_head holds the gathered rows, so its draws are the
     * gathered map's (partial_check above: the same logits); its sampling
     * run (a third of this test's time) is in `full` only. */
    o.draft_model = head;
    lossless_and_sampling(e, &o, "dspark(512-id map, reduced lm_head)", full ? 5 : 0);
}

int main(int argc, char **argv) {
    char err[1024];
    tu_part part = tu_parse_part(argc, argv);
    if (part == TU_BUNDLED) return tu_skip("test_drafter_vocab", "fixtures only");
    full = part == TU_FULL;
    malformed_maps();
    mtp_part();
    gen_engine *e;
    gen_engine_opts fo = {.model_dir = tu_path("tests/fixtures/qwen3-tied"), .max_seqs = 8, .max_batch_rows = 96,
                          .max_seq_len = 512};
    if (gen_engine_create(&e, &fo, err, sizeof err)) { CHECKF(0, "%s", err); return tu_done("test_drafter_vocab"); }
    dspark_part(e);
    malformed_drafters(e);
    gen_engine_free(e);
    return tu_done("test_drafter_vocab");
}
