/* label: unit */
/* test_safetensors.c — the safetensors reader on the committed fixtures (f32,
 * bf16, f16, single file and sharded) and on corrupt files built in a temp
 * dir at run time: each must fail with a message naming the file and, where
 * there is one, the tensor — no crash, no leak (ASan checks the latter). */
#include "safetensors.h"
#include "test_util.h"

#include <ftw.h>
#include <math.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmpdir[256];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static const char *tmp(const char *name) {
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", tmpdir, name);
    return b;
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECKF(f != NULL, "cannot write %s", path);
    if (!f) return;
    if (n) fwrite(p, 1, n, f);
    fclose(f);
}

/* A safetensors file: 8-byte LE header length, header text, data_len bytes
 * of data (value i & 0xff at byte i). */
static void write_st(const char *path, const char *header, size_t data_len) {
    size_t hl = strlen(header);
    size_t n = 8 + hl + data_len;
    unsigned char *b = malloc(n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(b + 8, header, hl);
    for (size_t i = 0; i < data_len; i++) b[8 + hl + i] = (unsigned char)i;
    write_bytes(path, b, n);
    free(b);
}

/* Opens path (a file, or a dir when is_dir) expecting failure whose message
 * contains every non-NULL needle. */
static void expect_fail(const char *what, const char *path, int is_dir,
                        const char *n1, const char *n2, const char *n3) {
    st_model *m = (st_model *)1;
    char err[1024] = "";
    int rc = is_dir ? st_open_dir(&m, path, err, sizeof err) : st_open_file(&m, path, err, sizeof err);
    CHECKF(rc != 0, "%s: opened a bad checkpoint", what);
    CHECKF(m == NULL, "%s: out not NULL on failure", what);
    if (rc == 0) st_close(m);
    printf("  %-32s -> %s\n", what, err);
    const char *needles[3] = { n1, n2, n3 };
    for (int i = 0; i < 3; i++)
        if (needles[i]) CHECKF(strstr(err, needles[i]) != NULL, "%s: message \"%s\" lacks \"%s\"",
                               what, err, needles[i]);
}

static st_model *open_ok(const char *path, int is_dir) {
    st_model *m = NULL;
    char err[1024] = "";
    int rc = is_dir ? st_open_dir(&m, path, err, sizeof err) : st_open_file(&m, path, err, sizeof err);
    CHECKF(rc == 0 && m, "%s: %s", path, err);
    return rc == 0 ? m : NULL;
}

static float bf16f(uint16_t h) { float f; uint32_t u = (uint32_t)h << 16; memcpy(&f, &u, 4); return f; }

/* The committed fixtures: counts, dtypes, shapes, sorted order, alignment,
 * and that values read through the mapping are the weights (norm vectors are
 * 1 + small noise; the bf16 and f16 copies hold the same values). */
static void test_fixtures(void) {
    st_model *tied = open_ok(tu_path("tests/fixtures/qwen3-tied"), 1);
    st_model *untied = open_ok(tu_path("tests/fixtures/qwen3-untied"), 1);
    st_model *sh = open_ok(tu_path("tests/fixtures/qwen3-sharded"), 1);
    if (!tied || !untied || !sh) goto out;

    CHECKF(st_count(tied) == 24, "tied has %d tensors", st_count(tied));
    CHECKF(st_count(untied) == 25, "untied has %d tensors", st_count(untied));
    CHECKF(st_count(sh) == 25, "sharded has %d tensors", st_count(sh));
    CHECK(st_find(tied, "lm_head.weight") == NULL);
    CHECK(st_find(tied, "__metadata__") == NULL);
    CHECK(st_find(tied, "model.embed_tokens") == NULL);
    CHECK(st_at(tied, -1) == NULL && st_at(tied, 24) == NULL);

    const st_tensor *e = st_find(tied, "model.embed_tokens.weight");
    CHECK(e && e->dt == KB_F32 && e->ndim == 2 && e->shape[0] == 4096 && e->shape[1] == 64);
    CHECK(e && e->nbytes == 4096u * 64 * 4);
    CHECK(e && strstr(e->file, "qwen3-tied/model.safetensors"));
    e = st_find(untied, "lm_head.weight");
    CHECK(e && e->dt == KB_BF16 && e->nbytes == 4096u * 64 * 2);
    e = st_find(sh, "model.layers.1.mlp.down_proj.weight");
    CHECK(e && e->dt == KB_F16 && e->ndim == 2 && e->shape[0] == 64 && e->shape[1] == 128);

    /* Sharded: tensors come from the shard the index names. */
    const st_tensor *a = st_find(sh, "lm_head.weight"), *b = st_find(sh, "model.embed_tokens.weight");
    CHECK(a && strstr(a->file, "model-00002-of-00002.safetensors"));
    CHECK(b && strstr(b->file, "model-00001-of-00002.safetensors"));

    /* Table sorted by name; data aligned to its element size (observed for
     * files written by the Rust safetensors writer). */
    st_model *all[3] = { tied, untied, sh };
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < st_count(all[k]); i++) {
            const st_tensor *t = st_at(all[k], i);
            if (i) CHECK(strcmp(st_at(all[k], i - 1)->name, t->name) < 0);
            CHECKF((uintptr_t)t->data % kb_dtype_size(t->dt) == 0,
                   "%s unaligned", t->name);
        }

    const st_tensor *qn = st_find(tied, "model.layers.0.self_attn.q_norm.weight");
    CHECK(qn && qn->ndim == 1 && qn->shape[0] == 16);
    if (qn) {
        float v[16];
        memcpy(v, qn->data, sizeof v);
        for (int i = 0; i < 16; i++) CHECKF(v[i] > 0.5f && v[i] < 1.5f, "q_norm[%d] = %g", i, v[i]);
    }
    const st_tensor *ub = st_find(untied, "model.layers.1.mlp.up_proj.weight");
    const st_tensor *uh = st_find(sh, "model.layers.1.mlp.up_proj.weight");
    CHECK(ub && uh && ub->nbytes == uh->nbytes);
    if (ub && uh) {
        float x[128 * 64], y[128 * 64];
        kb_to_f32(y, uh->data, KB_F16, 128 * 64);
        int bad = 0;
        for (int i = 0; i < 128 * 64; i++) {
            uint16_t h;
            memcpy(&h, (const char *)ub->data + 2 * i, 2);
            x[i] = bf16f(h);
            if (!(fabsf(x[i] - y[i]) <= 1e-6f)) bad++;
        }
        CHECKF(bad == 0, "%d elements of up_proj differ between bf16 and f16 fixtures", bad);
    }
out:
    st_close(tied);
    st_close(untied);
    st_close(sh);
}

static void test_good_handmade(void) {
    /* __metadata__ skipped, an empty tensor allowed, offsets unordered. */
    write_st(tmp("ok.safetensors"),
             "{\"__metadata__\":{\"format\":\"pt\"},"
             "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
             "\"a\":{\"dtype\":\"BF16\",\"shape\":[2,2],\"data_offsets\":[0,8]},"
             "\"z\":{\"dtype\":\"F16\",\"shape\":[0,5],\"data_offsets\":[8,8]}}", 16);
    st_model *m = open_ok(tmp("ok.safetensors"), 0);
    if (!m) return;
    CHECK(st_count(m) == 3);
    const st_tensor *a = st_find(m, "a"), *b = st_find(m, "b"), *z = st_find(m, "z");
    CHECK(a && a->dt == KB_BF16 && a->ndim == 2 && a->nbytes == 8);
    CHECK(b && b->dt == KB_F32 && b->ndim == 1 && ((const unsigned char *)b->data)[0] == 8);
    CHECK(z && z->nbytes == 0 && z->shape[0] == 0 && z->shape[1] == 5);
    CHECK(a && b && (const char *)b->data - (const char *)a->data == 8);
    st_close(m);

    /* A header of "{}" is a valid, empty checkpoint. */
    write_st(tmp("empty.safetensors"), "{}", 0);
    m = open_ok(tmp("empty.safetensors"), 0);
    if (m) {
        CHECK(st_count(m) == 0 && st_find(m, "x") == NULL);
        st_close(m);
    }
}

static void test_bad_files(void) {
    const char *p;
    write_bytes(p = tmp("short.safetensors"), "\x10\0\0", 3);
    expect_fail("truncated below 8 bytes", p, 0, p, "truncated", NULL);

    /* Header length claims more bytes than the file holds. */
    write_st(p = tmp("hlen.safetensors"), "{}", 0);
    {
        FILE *f = fopen(p, "r+b");
        unsigned char big[8] = { 0x00, 0x10, 0, 0, 0, 0, 0, 0 };
        fwrite(big, 1, 8, f);
        fclose(f);
    }
    expect_fail("header length beyond file", p, 0, p, "header length", NULL);
    {
        unsigned char huge[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
        write_bytes(p = tmp("hlen2.safetensors"), huge, 8);
        expect_fail("header length 2^64-1", p, 0, p, "header length", NULL);
    }

    write_st(p = tmp("badjson.safetensors"), "{\"a\":{\"dtype\":\"F32\",", 0);
    expect_fail("bad JSON", p, 0, p, "JSON", NULL);
    write_st(p = tmp("array.safetensors"), "[1,2]", 0);
    expect_fail("header not an object", p, 0, p, "object", NULL);

    write_st(p = tmp("i8.safetensors"), "{\"w.q\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4);
    expect_fail("dtype I8", p, 0, p, "'w.q'", "I8");
    write_st(p = tmp("f64.safetensors"), "{\"w.d\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]}}", 8);
    expect_fail("dtype F64", p, 0, p, "'w.d'", "F64");
    write_st(p = tmp("nodtype.safetensors"), "{\"w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4);
    expect_fail("missing dtype", p, 0, p, "'w'", "dtype");
    write_st(p = tmp("noshape.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", 4);
    expect_fail("missing shape", p, 0, p, "'w'", "shape");
    write_st(p = tmp("nooff.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4);
    expect_fail("missing data_offsets", p, 0, p, "'w'", "data_offsets");
    write_st(p = tmp("entry.safetensors"), "{\"w\":[1,2]}", 4);
    expect_fail("entry not object", p, 0, p, "'w'", NULL);
    write_st(p = tmp("neg.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4);
    expect_fail("negative dim", p, 0, p, "'w'", "shape");
    write_st(p = tmp("frac.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4);
    expect_fail("fractional dim", p, 0, p, "'w'", "shape");
    write_st(p = tmp("ndim.safetensors"),
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4);
    expect_fail("9 dims", p, 0, p, "'w'", "dims");
    write_st(p = tmp("overflow.safetensors"),
             "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4294967296],\"data_offsets\":[0,4]}}", 4);
    expect_fail("shape overflow", p, 0, p, "'w'", NULL);

    write_st(p = tmp("range.safetensors"), "{\"w.r\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 12);
    expect_fail("offsets beyond data", p, 0, p, "'w.r'", "beyond");
    write_st(p = tmp("order.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,4]}}", 12);
    expect_fail("begin > end", p, 0, p, "'w'", "begin > end");
    write_st(p = tmp("offs3.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 12);
    expect_fail("3 offsets", p, 0, p, "'w'", "data_offsets");
    write_st(p = tmp("offneg.safetensors"), "{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 12);
    expect_fail("negative offset", p, 0, p, "'w'", "data_offsets");
    write_st(p = tmp("size.safetensors"), "{\"w.s\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8);
    expect_fail("size mismatch", p, 0, p, "'w.s'", "BF16");
    write_st(p = tmp("overlap.safetensors"),
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
             "\"y\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12);
    expect_fail("overlapping tensors", p, 0, p, "'x'", "'y'");
    write_st(p = tmp("dup.safetensors"),
             "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
             "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    expect_fail("duplicate name in one header", p, 0, p, "'x'", "twice");

    /* A real fixture cut in half: the header is intact, the data is not. */
    size_t n = 0;
    char *full = tu_read_file(tu_path("tests/fixtures/qwen3-tied/model.safetensors"), &n);
    CHECK(full != NULL);
    if (full) {
        write_bytes(p = tmp("half.safetensors"), full, n / 2);
        expect_fail("fixture truncated", p, 0, p, "beyond the data section", "'model.");
        free(full);
    }

    p = tmp("nope.safetensors");
    expect_fail("no such file", p, 0, p, NULL, NULL);
    expect_fail("a directory", tmpdir, 0, tmpdir, NULL, NULL);
}

/* A sharded dir named d with the given index text and two shards a/b. */
static const char *shard_dir(const char *d, const char *index) {
    char sub[600];
    snprintf(sub, sizeof sub, "%s", tmp(d));
    mkdir(sub, 0700);
    char p[700];
    snprintf(p, sizeof p, "%s/model-a.safetensors", sub);
    write_st(p, "{\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                "\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8);
    snprintf(p, sizeof p, "%s/model-b.safetensors", sub);
    write_st(p, "{\"z\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", sub);
    write_bytes(p, index, strlen(index));
    return tmp(d);
}

static void test_shards(void) {
    const char *d = shard_dir("sh_ok", "{\"metadata\":{},\"weight_map\":{\"x\":\"model-a.safetensors\","
                              "\"z\":\"model-b.safetensors\",\"y\":\"model-a.safetensors\"}}");
    st_model *m = open_ok(d, 1);
    if (m) {
        CHECK(st_count(m) == 3);
        const st_tensor *x = st_find(m, "x"), *z = st_find(m, "z");
        CHECK(x && strstr(x->file, "model-a.safetensors"));
        CHECK(z && strstr(z->file, "model-b.safetensors") && z->dt == KB_F16);
        st_close(m);
    }
    d = shard_dir("sh_missing_shard", "{\"weight_map\":{\"x\":\"model-a.safetensors\","
                  "\"q\":\"model-c.safetensors\"}}");
    expect_fail("missing shard", d, 1, "model-c.safetensors", "cannot open", NULL);
    d = shard_dir("sh_missing_tensor", "{\"weight_map\":{\"x\":\"model-a.safetensors\","
                  "\"w.gone\":\"model-b.safetensors\"}}");
    expect_fail("index names absent tensor", d, 1, "model.safetensors.index.json", "'w.gone'", "model-b.safetensors");
    d = shard_dir("sh_wrong_shard", "{\"weight_map\":{\"x\":\"model-a.safetensors\","
                  "\"z\":\"model-a.safetensors\",\"y\":\"model-b.safetensors\"}}");
    expect_fail("index names the wrong shard", d, 1, "'z'", "model-a.safetensors", "found in");
    d = shard_dir("sh_badjson", "{\"weight_map\":");
    expect_fail("index bad JSON", d, 1, "model.safetensors.index.json", "JSON", NULL);
    d = shard_dir("sh_nomap", "{\"metadata\":{}}");
    expect_fail("index without weight_map", d, 1, "model.safetensors.index.json", "weight_map", NULL);
    d = shard_dir("sh_escape", "{\"weight_map\":{\"x\":\"../sh_ok/model-a.safetensors\"}}");
    expect_fail("shard path escapes dir", d, 1, "'x'", "shard", NULL);
    d = shard_dir("sh_nonstr", "{\"weight_map\":{\"x\":3}}");
    expect_fail("shard not a string", d, 1, "'x'", NULL, NULL);

    /* Same tensor name in two shards. */
    d = shard_dir("sh_dup", "{\"weight_map\":{\"x\":\"model-a.safetensors\",\"z\":\"model-b.safetensors\"}}");
    char p[700];
    snprintf(p, sizeof p, "%s/model-b.safetensors", d);
    write_st(p, "{\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4);
    expect_fail("duplicate tensor across shards", d, 1, "'x'", "model-a.safetensors", "model-b.safetensors");

    /* A bad shard fails the whole open with that shard's message. */
    d = shard_dir("sh_badshard", "{\"weight_map\":{\"x\":\"model-a.safetensors\",\"z\":\"model-b.safetensors\"}}");
    snprintf(p, sizeof p, "%s/model-b.safetensors", d);
    write_st(p, "{\"z\":{\"dtype\":\"I8\",\"shape\":[2],\"data_offsets\":[0,2]}}", 4);
    expect_fail("bad shard", d, 1, "model-b.safetensors", "'z'", "I8");

    /* A dir with neither file. */
    d = tmp("emptydir");
    mkdir(d, 0700);
    expect_fail("empty dir", d, 1, d, "model.safetensors", NULL);
}

/* Deterministic byte mutations of a small valid file: every result must be
 * a clean open or an error with a message — never a crash (ASan/UBSan watch
 * the reads) and never a success with a tensor outside the file. */
static void test_mutations(void) {
    const char *hdr = "{\"__metadata__\":{\"format\":\"pt\"},"
                      "\"a.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
                      "\"b.weight\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
                      "\"c.bias\":{\"dtype\":\"F16\",\"shape\":[8],\"data_offsets\":[32,48]}}";
    size_t hl = strlen(hdr), n = 8 + hl + 48;
    unsigned char *orig = malloc(n), *b = malloc(n);
    for (int i = 0; i < 8; i++) orig[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(orig + 8, hdr, hl);
    memset(orig + 8 + hl, 0x3c, 48);
    const char *p = tmp("mut.safetensors");
    const char alphabet[] = "{}[],:\"0123456789-.eE FBI";
    uint32_t rng = 12345;
    int ok = 0, failed = 0;
    for (int it = 0; it < 800; it++) {
        memcpy(b, orig, n);
        int muts = 1 + it % 3;
        for (int k = 0; k < muts; k++) {
            rng = rng * 1664525u + 1013904223u;
            size_t pos = (rng >> 8) % (8 + hl);
            rng = rng * 1664525u + 1013904223u;
            b[pos] = pos < 8 ? (unsigned char)(rng >> 24) : (unsigned char)alphabet[(rng >> 16) % (sizeof alphabet - 1)];
        }
        size_t len = n;
        if (it % 7 == 6) { rng = rng * 1664525u + 1013904223u; len = (rng >> 8) % n; }
        write_bytes(p, b, len);
        st_model *m = NULL;
        char err[512] = "";
        if (st_open_file(&m, p, err, sizeof err) == 0) {
            ok++;
            for (int i = 0; i < st_count(m); i++) {
                const st_tensor *t = st_at(m, i);
                const unsigned char *d = t->data;
                size_t ne = 1;
                for (int k = 0; k < t->ndim; k++) ne *= (size_t)t->shape[k];
                CHECKF(ne * kb_dtype_size(t->dt) == t->nbytes && t->nbytes <= len, "mutation %d: '%s'", it, t->name);
                /* Reading every byte of every tensor must stay in the mapping. */
                unsigned sum = 0;
                for (size_t j = 0; j < t->nbytes; j++) sum += d[j];
                (void)sum;
            }
            st_close(m);
        } else {
            failed++;
            CHECKF(strstr(err, p) != NULL || strstr(err, "tensor") != NULL, "mutation %d: message \"%s\"", it, err);
        }
    }
    printf("  mutations: %d opened, %d rejected\n", ok, failed);
    CHECK(ok > 0 && failed > 0);
    free(orig);
    free(b);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/specbed_st_XXXXXX");
    if (!mkdtemp(tmpdir)) { perror("mkdtemp"); return 1; }
    test_fixtures();
    test_good_handmade();
    test_bad_files();
    test_shards();
    test_mutations();
    nftw(tmpdir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    return tu_done("test_safetensors");
}
