/* label: unit */
/* test_model_load.c — model_load on the committed fixtures (tied f32,
 * untied bf16, sharded f16), and on altered copies made in a temp dir: a
 * renamed tensor (missing), a transposed tensor (wrong shape), tie flags
 * that contradict the checkpoint, a missing config, drafter-style prefixes.
 * Every failure must name the tensor and, for shapes, both shapes. */
#include "model.h"
#include "test_util.h"

#include <ftw.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECKF(f != NULL, "cannot write %s", path);
    if (!f) return;
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

/* Replaces the first occurrence of `from` at or after `after` (if given) by
 * `to` of the same length, in place. Returns 0 if found. */
static int patch(char *buf, size_t n, const char *after, const char *from, const char *to) {
    size_t fl = strlen(from);
    CHECK(fl == strlen(to));
    char *start = buf;
    if (after) {
        start = memmem(buf, n, after, strlen(after));
        if (!start) return -1;
    }
    char *p = memmem(start, n - (size_t)(start - buf), from, fl);
    if (!p) return -1;
    memcpy(p, to, fl);
    return 0;
}

/* Makes tmpdir/name with the fixture's config.json (text patched if
 * cfg_from) and model.safetensors (header patched if st_from, within the
 * entry of tensor st_after). Returns the new dir path (static slot). */
static const char *variant(const char *name, const char *fixture,
                           const char *cfg_from, const char *cfg_to,
                           const char *st_after, const char *st_from, const char *st_to) {
    static char dirs[4][512];
    static int slot;
    char *d = dirs[slot++ % 4];
    snprintf(d, sizeof dirs[0], "%s/%s", tmpdir, name);
    mkdir(d, 0700);
    char src[600], dst[600];
    size_t n;

    snprintf(src, sizeof src, "tests/fixtures/%s/config.json", fixture);
    char *cfg = tu_read_file(tu_path(src), &n);
    CHECK(cfg != NULL);
    if (!cfg) return d;
    if (cfg_from) CHECKF(patch(cfg, n, NULL, cfg_from, cfg_to) == 0, "%s: no '%s' in config", name, cfg_from);
    snprintf(dst, sizeof dst, "%s/config.json", d);
    write_bytes(dst, cfg, n);
    free(cfg);

    snprintf(src, sizeof src, "tests/fixtures/%s/model.safetensors", fixture);
    char *st = tu_read_file(tu_path(src), &n);
    CHECK(st != NULL);
    if (!st) return d;
    if (st_from) {
        /* Only the JSON header is patched: it sits between byte 8 and the
         * data section, so limit the search to it. */
        uint64_t hl = 0;
        for (int i = 7; i >= 0; i--) hl = (hl << 8) | (unsigned char)st[i];
        CHECKF(patch(st + 8, (size_t)hl, st_after, st_from, st_to) == 0, "%s: no '%s' in header", name, st_from);
    }
    snprintf(dst, sizeof dst, "%s/model.safetensors", d);
    write_bytes(dst, st, n);
    free(st);
    return d;
}

static model *load_ok(const char *dir) {
    model *m = NULL;
    char err[1024] = "";
    int rc = model_load(&m, dir, err, sizeof err);
    CHECKF(rc == 0 && m, "%s: %s", dir, err);
    return rc == 0 ? m : NULL;
}

static void expect_fail(const char *what, const char *dir, const char *n1, const char *n2, const char *n3) {
    model *m = (model *)1;
    char err[1024] = "";
    int rc = model_load(&m, dir, err, sizeof err);
    CHECKF(rc != 0, "%s: loaded a bad checkpoint", what);
    CHECKF(m == NULL, "%s: out not NULL on failure", what);
    if (rc == 0) model_free(m);
    printf("  %-30s -> %s\n", what, err);
    const char *needles[3] = { n1, n2, n3 };
    for (int i = 0; i < 3; i++)
        if (needles[i]) CHECKF(strstr(err, needles[i]) != NULL, "%s: message \"%s\" lacks \"%s\"",
                               what, err, needles[i]);
}

static void check_common(const model *m, kb_dtype dt) {
    const model_config *c = &m->cfg;
    CHECK(c->n_layers == 2 && c->hidden_size == 64 && c->vocab_size == 4096);
    CHECK(m->embed.dt == dt && m->embed.rows == 4096 && m->embed.cols == 64 && m->embed.data);
    CHECK(m->lm_head.rows == 4096 && m->lm_head.cols == 64 && m->lm_head.data);
    CHECK(m->final_norm != NULL);
    for (int l = 0; l < c->n_layers; l++) {
        const layer_weights *w = &m->layers[l];
        CHECK(w->wq.rows == 64 && w->wq.cols == 64 && w->wq.dt == dt);
        CHECK(w->wk.rows == 32 && w->wk.cols == 64 && w->wv.rows == 32 && w->wv.cols == 64);
        CHECK(w->wo.rows == 64 && w->wo.cols == 64);
        CHECK(w->w_gate.rows == 128 && w->w_gate.cols == 64 && w->w_up.rows == 128);
        CHECK(w->w_down.rows == 64 && w->w_down.cols == 128);
        CHECK(w->attn_norm && w->mlp_norm && w->q_norm && w->k_norm);
        CHECK(w->bq == NULL && w->bk == NULL && w->bv == NULL);
        /* Norm weights were written as 1 + 0.1·N(0,1). */
        for (int i = 0; i < 16 && w->q_norm; i++)
            CHECKF(w->q_norm[i] > 0.4f && w->q_norm[i] < 1.6f, "layer %d q_norm[%d] = %g", l, i, w->q_norm[i]);
        for (int i = 0; i < 64 && w->attn_norm; i++)
            CHECKF(w->attn_norm[i] > 0.4f && w->attn_norm[i] < 1.6f, "attn_norm[%d] = %g", i, w->attn_norm[i]);
    }
}

static void test_fixtures(void) {
    model *tied = load_ok(tu_path("tests/fixtures/qwen3-tied"));
    model *untied = load_ok(tu_path("tests/fixtures/qwen3-untied"));
    model *sh = load_ok(tu_path("tests/fixtures/qwen3-sharded"));
    if (tied) {
        check_common(tied, KB_F32);
        CHECK(tied->cfg.tie_word_embeddings == 1);
        CHECK(tied->lm_head.data == tied->embed.data && tied->lm_head.dt == KB_F32);
        CHECK(strstr(tied->dir, "qwen3-tied") != NULL);
    }
    if (untied) {
        check_common(untied, KB_BF16);
        CHECK(untied->lm_head.data != untied->embed.data && untied->lm_head.dt == KB_BF16);
    }
    if (sh) check_common(sh, KB_F16);
    if (untied && sh) {
        /* make_fixture.py writes the same bf16-rounded values into both
         * (bf16 -> f16 is exact here bar f16 subnormals), so rows and norm
         * vectors agree to 1e-6; this also checks shards were not swapped. */
        float a[64], b[64];
        int bad = 0;
        for (int r = 0; r < 4096; r += 511) {
            kb_weight_row(a, &untied->lm_head, r);
            kb_weight_row(b, &sh->lm_head, r);
            for (int i = 0; i < 64; i++) bad += !(fabsf(a[i] - b[i]) <= 1e-6f);
            kb_weight_row(a, &untied->embed, r);
            kb_weight_row(b, &sh->embed, r);
            for (int i = 0; i < 64; i++) bad += !(fabsf(a[i] - b[i]) <= 1e-6f);
        }
        for (int i = 0; i < 64; i++)
            bad += !(fabsf(untied->final_norm[i] - sh->final_norm[i]) <= 1e-6f);
        CHECKF(bad == 0, "%d values differ between the bf16 and f16 fixtures", bad);
        kb_weight_row(a, &sh->lm_head, 7);
        kb_weight_row(b, &sh->embed, 7);
        CHECK(memcmp(a, b, sizeof a) != 0);
    }
    model_free(tied);
    model_free(untied);
    model_free(sh);
}

static void test_bad(void) {
    const char *d;
    d = variant("renamed", "qwen3-tied", NULL, NULL, NULL,
                "\"model.layers.1.mlp.up_proj.weight\"", "\"model.layers.1.mlp.up_proj.weighX\"");
    expect_fail("missing tensor", d, "'model.layers.1.mlp.up_proj.weight'", "missing", d);

    /* [128, 64] -> [64, 128]: same bytes, wrong shape. */
    d = variant("transposed", "qwen3-untied", NULL, NULL, "\"model.layers.0.mlp.gate_proj.weight\"",
                "\"shape\":[128,64]", "\"shape\":[64,128]");
    expect_fail("wrong shape", d, "'model.layers.0.mlp.gate_proj.weight'",
                "has shape [64, 128], config.json says [128, 64]", "/model.safetensors");

    /* The config disagrees with the weights: every matrix is checked. */
    d = variant("cfg_inter", "qwen3-tied", "\"intermediate_size\": 128", "\"intermediate_size\": 256", NULL, NULL, NULL);
    expect_fail("config intermediate_size", d, "'model.layers.0.mlp.gate_proj.weight'",
                "has shape [128, 64], config.json says [256, 64]", NULL);
    d = variant("cfg_vocab", "qwen3-tied", "\"vocab_size\": 4096", "\"vocab_size\": 4095", NULL, NULL, NULL);
    expect_fail("config vocab_size", d, "'model.embed_tokens.weight'", "[4096, 64]", "[4095, 64]");
    d = variant("cfg_kv", "qwen3-tied", "\"num_key_value_heads\": 2", "\"num_key_value_heads\": 4", NULL, NULL, NULL);
    expect_fail("config kv heads", d, "'model.layers.0.self_attn.k_proj.weight'", "[32, 64]", "[64, 64]");
    d = variant("cfg_layers", "qwen3-tied", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3", NULL, NULL, NULL);
    expect_fail("config has an extra layer", d, "'model.layers.2.self_attn.q_proj.weight'", "missing", NULL);
    d = variant("cfg_qwen2", "qwen3-tied", "\"Qwen3ForCausalLM\"", "\"Qwen2ForCausalLM\"",
                NULL, NULL, NULL);
    /* model_type "qwen3" now contradicts the architecture: a config error. */
    expect_fail("qwen2 arch on qwen3 config", d, "config.json", "model_type", NULL);

    /* Untied config, checkpoint without lm_head. */
    d = variant("untie", "qwen3-tied", "\"tie_word_embeddings\": true", "\"tie_word_embeddings\":false",
                NULL, NULL, NULL);
    expect_fail("untied without lm_head", d, "'lm_head.weight'", "tie_word_embeddings", NULL);

    /* Tied config, checkpoint with lm_head: lm_head is used (and checked). */
    d = variant("tie", "qwen3-untied", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true ",
                NULL, NULL, NULL);
    model *m = load_ok(d);
    if (m) {
        CHECK(m->cfg.tie_word_embeddings == 1 && m->lm_head.data != m->embed.data);
        model_free(m);
    }
    d = variant("tie_badhead", "qwen3-untied", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": true ",
                "\"lm_head.weight\"", "\"shape\":[4096,64]", "\"shape\":[64,4096]");
    expect_fail("tied, lm_head wrong shape", d, "'lm_head.weight'", "[64, 4096]", "[4096, 64]");

    /* A norm vector with the wrong length. */
    d = variant("normlen", "qwen3-tied", "\"head_dim\": 16", "\"head_dim\": 32", NULL, NULL, NULL);
    expect_fail("config head_dim", d, "'model.layers.0.self_attn.q_proj.weight'", "[64, 64]", "[128, 64]");

    /* No config.json; no weights. */
    char p[700];
    d = variant("noconfig", "qwen3-tied", NULL, NULL, NULL, NULL, NULL);
    snprintf(p, sizeof p, "%s/config.json", d);
    remove(p);
    expect_fail("no config.json", d, p, NULL, NULL);
    d = variant("noweights", "qwen3-tied", NULL, NULL, NULL, NULL, NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    remove(p);
    expect_fail("no weights", d, d, "model.safetensors", NULL);
    /* A valid but empty safetensors file ("{}" header): the message names it. */
    d = variant("emptyst", "qwen3-tied", NULL, NULL, NULL, NULL, NULL);
    snprintf(p, sizeof p, "%s/model.safetensors", d);
    unsigned char empty[10] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
    write_bytes(p, empty, sizeof empty);
    expect_fail("empty safetensors", d, p, "no tensors", NULL);
}

/* The pieces drafters reuse: layer_weights_bind with a prefix, and the
 * matrix/vector binders on their own. */
static void test_parts(void) {
    model *m = load_ok(tu_path("tests/fixtures/qwen3-tied"));
    if (!m) return;
    char err[512] = "";
    layer_weights lw;
    CHECKF(layer_weights_bind(&lw, m->st, "model.layers.1.", &m->cfg, err, sizeof err) == 0, "%s", err);
    CHECK(lw.wq.data == m->layers[1].wq.data && lw.q_norm && lw.q_norm[3] == m->layers[1].q_norm[3]);
    layer_weights_free(&lw);
    CHECK(lw.q_norm == NULL && lw.attn_norm == NULL);

    CHECK(layer_weights_bind(&lw, m->st, "mtp.0.", &m->cfg, err, sizeof err) != 0);
    CHECKF(strstr(err, "'mtp.0.self_attn.q_proj.weight'") && strstr(err, "missing"), "%s", err);
    CHECK(lw.wq.data == NULL && lw.attn_norm == NULL);

    /* A Qwen2-flavoured config over Qwen3 weights: the biases are missing. */
    model_config c2 = m->cfg;
    c2.qk_norm = 0;
    c2.qkv_bias = 1;
    CHECK(layer_weights_bind(&lw, m->st, "model.layers.0.", &c2, err, sizeof err) != 0);
    CHECKF(strstr(err, "'model.layers.0.self_attn.q_proj.bias'"), "%s", err);

    kb_weight w;
    CHECK(model_bind_matrix(&w, m->st, "model.norm.weight", 64, 1, err, sizeof err) != 0);
    CHECKF(strstr(err, "has shape [64], config.json says [64, 1]"), "%s", err);
    float *v = (float *)1;
    CHECK(model_copy_vector(&v, m->st, "model.layers.0.mlp.up_proj.weight", 128, err, sizeof err) != 0);
    CHECKF(v == NULL && strstr(err, "has shape [128, 64], config.json says [128]"), "%s", err);
    CHECK(model_copy_vector(&v, m->st, "model.norm.weight", 64, err, sizeof err) == 0);
    CHECK(v && v[0] == m->final_norm[0] && v[63] == m->final_norm[63]);
    kb_free(v);
    model_free(m);
    model_free(NULL);

    /* Unaligned data (legal in the format) is refused by name, not read. */
    char path[600];
    snprintf(path, sizeof path, "%s/unaligned.safetensors", tmpdir);
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";   /* odd length */
    size_t hl = strlen(hdr);
    CHECK(hl % 4 != 0);
    unsigned char buf[256] = { 0 };
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    write_bytes(path, buf, 8 + hl + 16);
    st_model *st = NULL;
    CHECKF(st_open_file(&st, path, err, sizeof err) == 0, "%s", err);
    if (st) {
        CHECK(model_bind_matrix(&w, st, "w", 2, 2, err, sizeof err) != 0);
        CHECKF(strstr(err, "'w'") && strstr(err, "aligned"), "%s", err);
        st_close(st);
    }
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/specbed_model_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_fixtures();
    test_bad();
    test_parts();
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tu_done("test_model_load");
}
