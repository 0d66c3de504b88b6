/* label: unit */
/* test_tokenizer.c — the byte-level BPE tokenizer against HF `tokenizers`.
 *
 * For every golden file tests/golden/tokenizer/NAME.jsonl (made by
 * scripts/goldens/make_tokenizer_goldens.py; its first line names the tokenizer.json
 * it was made from, relative to the repo) and every string in it:
 *   - tok_encode gives exactly HF's ids;
 *   - tok_decode of those ids gives HF's decode (== the input whenever HF
 *     round-trips, i.e. unless NFC changed the string or it was invalid UTF-8);
 *   - streaming decode, one id at a time, concatenates to the same bytes.
 * Plus: added/special token accessors, streaming of split UTF-8, and
 * error cases (missing file, malformed JSON, missing vocab, merges naming
 * unknown tokens, unsupported sections) whose messages must name the file.
 * Arguments, if given, are golden files to use instead of the directory. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_util.h"
#include "tokenizer.h"

#define MAX_REPORTS 8     /* detailed messages per golden file; all failures still count */

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex into a malloc'd buffer; NULL on a malformed string. */
static unsigned char *unhex(const char *h, size_t *n) {
    size_t len = strlen(h);
    if (len % 2) return NULL;
    unsigned char *b = malloc(len / 2 + 1);
    for (size_t i = 0; i < len / 2; i++) {
        int hi = hexval(h[2 * i]), lo = hexval(h[2 * i + 1]);
        if (hi < 0 || lo < 0) { free(b); return NULL; }
        b[i] = (unsigned char)(hi * 16 + lo);
    }
    *n = len / 2;
    return b;
}

static void print_ids(const char *label, const int *ids, int n) {
    fprintf(stderr, "    %s (%d):", label, n);
    for (int i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

/* Streams ids one by one (plus the flush) and returns the concatenation. */
static char *stream_decode(const tokenizer *t, const int *ids, int n, size_t *len) {
    size_t cap = 64, o = 0;
    char *out = malloc(cap);
    tok_stream s = {0};
    for (int i = 0; i <= n; i++) {
        size_t tl = 0;
        if (i < n) tok_bytes(t, ids[i], &tl);
        size_t need = 3 * (tl + 8) + 64;
        if (o + need > cap) {
            while (o + need > cap) cap *= 2;
            out = realloc(out, cap);
        }
        o += i < n ? tok_stream_put(t, &s, ids[i], out + o, need) : tok_stream_flush(&s, out + o, need);
    }
    *len = o;
    return out;
}

static void check_meta(const tokenizer *t, const cJSON *meta, const char *gpath) {
    const cJSON *vs = cJSON_GetObjectItem(meta, "vocab_size");
    CHECKF(cJSON_IsNumber(vs) && tok_vocab_size(t) == vs->valueint, "%s: vocab size %d, HF says %d", gpath,
           tok_vocab_size(t), cJSON_IsNumber(vs) ? vs->valueint : -1);
    const cJSON *added = cJSON_GetObjectItem(meta, "added"), *a;
    int n = 0;
    cJSON_ArrayForEach(a, added) {
        const char *content = cJSON_GetObjectItem(a, "content")->valuestring;
        int id = cJSON_GetObjectItem(a, "id")->valueint;
        int special = cJSON_IsTrue(cJSON_GetObjectItem(a, "special"));
        CHECKF(tok_id(t, content) == id, "%s: tok_id(%s) = %d, want %d", gpath, content, tok_id(t, content), id);
        CHECKF(tok_is_special(t, id) == special, "%s: tok_is_special(%d) = %d", gpath, id, tok_is_special(t, id));
        size_t bl;
        const char *b = tok_bytes(t, id, &bl);
        int ascii = 1;
        for (const char *c = content; *c; c++) ascii &= (unsigned char)*c < 0x80;
        /* Non-ASCII content goes through HF's byte-level decoder (the goldens check that). */
        CHECKF(b && (!ascii || (bl == strlen(content) && memcmp(b, content, bl) == 0)),
               "%s: tok_bytes(%d) is not '%s'", gpath, id, content);
        n++;
    }
    CHECKF(n > 0, "%s: meta lists no added tokens", gpath);
    CHECK(tok_id(t, "this piece is surely not in any vocab") == -1);
    CHECK(tok_bytes(t, -1, NULL) == NULL && tok_bytes(t, tok_vocab_size(t), NULL) == NULL);
    CHECK(!tok_is_special(t, -1) && !tok_is_special(t, tok_vocab_size(t)));
}

static void run_golden(const char *gpath) {
    size_t flen;
    char *text = tu_read_file(gpath, &flen);
    CHECKF(text != NULL, "cannot read golden file %s", gpath);
    if (!text) return;
    char *save = NULL, *line = strtok_r(text, "\n", &save);
    cJSON *head = line ? cJSON_Parse(line) : NULL;
    const cJSON *meta = cJSON_GetObjectItem(head, "meta");
    const cJSON *tk = cJSON_GetObjectItem(meta, "tokenizer");
    CHECKF(cJSON_IsString(tk), "%s: first line has no meta.tokenizer", gpath);
    if (!cJSON_IsString(tk)) { cJSON_Delete(head); free(text); return; }
    const char *tpath = tk->valuestring[0] == '/' ? tk->valuestring : tu_path(tk->valuestring);
    char err[512] = "";
    tokenizer *t = NULL;
    int rc = tok_load(&t, tpath, err, sizeof err);
    CHECKF(rc == 0, "%s: cannot load %s: %s", gpath, tpath, err);
    if (rc) { cJSON_Delete(head); free(text); return; }
    check_meta(t, meta, gpath);
    int want_count = cJSON_GetObjectItem(meta, "count") ? cJSON_GetObjectItem(meta, "count")->valueint : -1;

    int count = 0, bad_ids = 0, bad_dec = 0, bad_stream = 0, bad_rt = 0, reports = 0, lineno = 1;
    for (line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        lineno++;
        cJSON *rec = cJSON_Parse(line);
        const cJSON *jin = cJSON_GetObjectItem(rec, "in"), *jids = cJSON_GetObjectItem(rec, "ids");
        const cJSON *jdec = cJSON_GetObjectItem(rec, "dec"), *jrt = cJSON_GetObjectItem(rec, "rt");
        const cJSON *jcat = cJSON_GetObjectItem(rec, "cat");
        size_t n_in = 0, n_dec = 0;
        unsigned char *in = cJSON_IsString(jin) ? unhex(jin->valuestring, &n_in) : NULL;
        unsigned char *dec = cJSON_IsString(jdec) ? unhex(jdec->valuestring, &n_dec) : NULL;
        CHECKF(in && cJSON_IsArray(jids) && (!jdec || dec), "%s:%d: malformed golden line", gpath, lineno);
        if (!in || !cJSON_IsArray(jids) || (jdec && !dec)) { free(in); free(dec); cJSON_Delete(rec); continue; }
        const char *cat = cJSON_IsString(jcat) ? jcat->valuestring : "?";
        int n_want = cJSON_GetArraySize(jids);
        int *want = malloc(sizeof(int) * (size_t)(n_want + 1));
        int k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, jids) want[k++] = e->valueint;
        count++;

        int *ids = NULL, n_ids = 0;
        rc = tok_encode(t, (const char *)in, n_in, &ids, &n_ids, err, sizeof err);
        int same = rc == 0 && n_ids == n_want && (n_ids == 0 || memcmp(ids, want, sizeof(int) * (size_t)n_ids) == 0);
        if (!same) {
            bad_ids++;
            if (reports++ < MAX_REPORTS) {
                fprintf(stderr, "%s:%d: [%s] ids differ from HF (rc %d %s); input %.80s%s\n", gpath, lineno, cat, rc,
                        rc ? err : "", jin->valuestring, strlen(jin->valuestring) > 80 ? "..." : "");
                print_ids("HF", want, n_want);
                if (rc == 0) print_ids("C ", ids, n_ids);
            }
        }
        /* Decode HF's ids, so a decode bug is not hidden behind an encode bug. */
        const unsigned char *exp = dec ? dec : in;
        size_t n_exp = dec ? n_dec : n_in;
        char *out = NULL;
        size_t n_out = 0;
        rc = tok_decode(t, want, n_want, &out, &n_out, err, sizeof err);
        if (rc || n_out != n_exp || memcmp(out, exp, n_exp) != 0) {
            bad_dec++;
            if (reports++ < MAX_REPORTS)
                fprintf(stderr, "%s:%d: [%s] decode differs from HF (rc %d %s): got %zu bytes, want %zu\n", gpath,
                        lineno, cat, rc, rc ? err : "", n_out, n_exp);
        }
        /* rt=1: HF gives back the (U+FFFD-repaired) input; then so must we. */
        if (cJSON_IsNumber(jrt) && jrt->valueint == 1 && rc == 0 && !dec && (n_out != n_in || memcmp(out, in, n_in)))
            bad_rt++;
        size_t n_st;
        char *st = stream_decode(t, want, n_want, &n_st);
        if (rc == 0 && (n_st != n_out || memcmp(st, out, n_out) != 0)) {
            bad_stream++;
            if (reports++ < MAX_REPORTS)
                fprintf(stderr, "%s:%d: [%s] streaming decode gives %zu bytes, whole decode %zu\n", gpath, lineno, cat,
                        n_st, n_out);
        }
        free(st);
        free(out);
        free(ids);
        free(want);
        free(in);
        free(dec);
        cJSON_Delete(rec);
    }
    CHECKF(bad_ids == 0, "%s: %d of %d strings encode differently from HF", gpath, bad_ids, count);
    CHECKF(bad_dec == 0, "%s: %d of %d decodes differ from HF", gpath, bad_dec, count);
    CHECKF(bad_rt == 0, "%s: %d round-trips fail where HF round-trips", gpath, bad_rt);
    CHECKF(bad_stream == 0, "%s: %d streaming decodes differ", gpath, bad_stream);
    CHECKF(count == want_count && count > 0, "%s: read %d strings, meta says %d", gpath, count, want_count);
    fprintf(stderr, "%s: %d strings checked against %s\n", gpath, count, tpath);
    tok_free(t);
    cJSON_Delete(head);
    free(text);
}

/* ---- streaming across split UTF-8 ---------------------------------------------- */

/* GPT-2's byte-to-unicode map, restated so the test does not share the code
 * under test: the byte-level spelling of one raw byte. */
static const char *byte_piece(unsigned char b, char buf[4]) {
    unsigned cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) cp = b;
    else if (b <= 32) cp = 256u + b;
    else if (b <= 160) cp = 289u + (b - 127u);
    else cp = 323;
    if (cp < 0x80) { buf[0] = (char)cp; buf[1] = 0; }
    else { buf[0] = (char)(0xC0 | (cp >> 6)); buf[1] = (char)(0x80 | (cp & 0x3F)); buf[2] = 0; }
    return buf;
}

static void test_stream_bytes(const tokenizer *t) {
    char pb[4], out[256];
    int id[256];
    for (int b = 0; b < 256; b++) id[b] = tok_id(t, byte_piece((unsigned char)b, pb));
    CHECK(id[0xF0] >= 0 && id[0x9F] >= 0 && id[0x98] >= 0 && id[0x80] >= 0 && id['a'] >= 0);
    for (int b = 0; b < 256; b++) {
        size_t n;
        const char *s = id[b] >= 0 ? tok_bytes(t, id[b], &n) : NULL;
        CHECKF(s && n == 1 && (unsigned char)s[0] == b, "byte token for 0x%02x", b);
    }
    tok_stream s = {0};
    size_t o = 0;
    o += tok_stream_put(t, &s, id[0xF0], out + o, sizeof out - o);
    CHECK(o == 0 && s.n_held == 1);
    o += tok_stream_put(t, &s, id[0x9F], out + o, sizeof out - o);
    o += tok_stream_put(t, &s, id[0x98], out + o, sizeof out - o);
    CHECK(o == 0 && s.n_held == 3);
    o += tok_stream_put(t, &s, id[0x80], out + o, sizeof out - o);
    CHECK(o == 4 && memcmp(out, "\xF0\x9F\x98\x80", 4) == 0 && s.n_held == 0);
    /* an interrupted sequence: one U+FFFD, then the interrupting byte */
    o = tok_stream_put(t, &s, id[0xF0], out, sizeof out);
    o += tok_stream_put(t, &s, id[0x9F], out + o, sizeof out - o);
    o += tok_stream_put(t, &s, id['a'], out + o, sizeof out - o);
    CHECK(o == 4 && memcmp(out, "\xEF\xBF\xBD" "a", 4) == 0);
    /* a lone continuation byte is replaced at once; a held prefix at flush */
    o = tok_stream_put(t, &s, id[0x80], out, sizeof out);
    CHECK(o == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0 && s.n_held == 0);
    o = tok_stream_put(t, &s, id[0xF0], out, sizeof out);
    o += tok_stream_flush(&s, out + o, sizeof out - o);
    CHECK(o == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0 && s.n_held == 0);
    CHECK(tok_stream_flush(&s, out, sizeof out) == 0);
    /* whole decode agrees: F0 9F then 'a' -> U+FFFD 'a' (one maximal subpart) */
    int ids3[3] = {id[0xF0], id[0x9F], id['a']};
    char *d = NULL;
    size_t dl = 0;
    char err[256];
    CHECK(tok_decode(t, ids3, 3, &d, &dl, err, sizeof err) == 0 && dl == 4 && memcmp(d, "\xEF\xBF\xBD" "a", 4) == 0);
    free(d);
    int badid = tok_vocab_size(t);
    CHECK(tok_decode(t, &badid, 1, &d, &dl, err, sizeof err) != 0 && d == NULL && strstr(err, "ids[0]"));
    /* empty input encodes to nothing */
    int *ids = NULL, n = -1;
    CHECK(tok_encode(t, "", 0, &ids, &n, err, sizeof err) == 0 && n == 0);
    free(ids);
}

/* ---- error cases ------------------------------------------------------------------ */

static void expect_load_error(const char *dir, const char *name, const char *json, const char *field) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (json) {
        FILE *f = fopen(path, "wb");
        CHECKF(f != NULL, "cannot write %s", path);
        if (!f) return;
        fputs(json, f);
        fclose(f);
    }
    char err[512] = "";
    tokenizer *t = (tokenizer *)1;
    int rc = tok_load(&t, path, err, sizeof err);
    CHECKF(rc != 0 && t == NULL, "%s: tok_load accepted it", name);
    CHECKF(strstr(err, path) != NULL, "%s: message does not name the file: %s", name, err);
    CHECKF(!field || strstr(err, field) != NULL, "%s: message does not name '%s': %s", name, field, err);
    if (json) unlink(path);
}

#define PT_OK "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}," \
              "\"decoder\":{\"type\":\"ByteLevel\"}"

static void test_errors(void) {
    char dir[] = "/tmp/test_tokenizer.XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    expect_load_error(dir, "does_not_exist.json", NULL, NULL);
    expect_load_error(dir, "malformed.json", "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0,", "JSON");
    expect_load_error(dir, "not_object.json", "[1, 2]", NULL);
    expect_load_error(dir, "no_model.json", "{" PT_OK "}", "model");
    expect_load_error(dir, "no_vocab.json", "{\"model\":{\"type\":\"BPE\",\"merges\":[]}," PT_OK "}", "model.vocab");
    expect_load_error(dir, "empty_vocab.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}," PT_OK "}",
                      "model.vocab");
    expect_load_error(dir, "bad_id.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}," PT_OK "}",
                      "model.vocab");
    expect_load_error(dir, "no_merges.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0}}," PT_OK "}",
                      "model.merges");
    expect_load_error(dir, "merge_unknown.json",
                      "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\",\"a c\"]},"
                      PT_OK "}", "model.merges[1]");
    expect_load_error(dir, "merge_unknown_list.json",
                      "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[[\"x\",\"b\"]]}," PT_OK "}",
                      "model.merges[0]");
    expect_load_error(dir, "merge_result_unknown.json",
                      "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}," PT_OK "}",
                      "model.merges[0]");
    expect_load_error(dir, "merge_malformed.json",
                      "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1},\"merges\":[\"ab\"]}," PT_OK "}",
                      "model.merges[0]");
    expect_load_error(dir, "wordpiece.json", "{\"model\":{\"type\":\"WordPiece\",\"vocab\":{\"a\":0}}," PT_OK "}",
                      "model.type");
    expect_load_error(dir, "dup_id.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}," PT_OK
                      "}", "model.vocab");
    expect_load_error(dir, "normalizer.json", "{\"normalizer\":{\"type\":\"Lowercase\"},\"model\":{\"type\":\"BPE\","
                      "\"vocab\":{\"a\":0},\"merges\":[]}," PT_OK "}", "normalizer");
    expect_load_error(dir, "no_pretok.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"decoder\":{\"type\":\"ByteLevel\"}}", "pre_tokenizer");
    expect_load_error(dir, "bad_regex.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                      "{\"Regex\":\"(\\\\p{L\"},\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\"}]},"
                      "\"decoder\":{\"type\":\"ByteLevel\"}}", "pretokenizers[0].pattern");
    expect_load_error(dir, "split_behavior.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":"
                      "{\"Regex\":\"a\"},\"behavior\":\"Removed\",\"invert\":false},{\"type\":\"ByteLevel\"}]},"
                      "\"decoder\":{\"type\":\"ByteLevel\"}}", "behavior");
    expect_load_error(dir, "decoder.json", "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},"
                      "\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"decoder\":{\"type\":\"WordPiece\"}}", "decoder");
    expect_load_error(dir, "added_bad.json", "{\"added_tokens\":[{\"id\":5}],\"model\":{\"type\":\"BPE\","
                      "\"vocab\":{\"a\":0},\"merges\":[]}," PT_OK "}", "added_tokens[0]");
    expect_load_error(dir, "unk_missing.json", "{\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"a\":0},"
                      "\"merges\":[]}," PT_OK "}", "unk_token");
    /* and a minimal valid file loads: the checks above fail for the named reason */
    char path[512];
    snprintf(path, sizeof path, "%s/ok.json", dir);
    FILE *f = fopen(path, "wb");
    if (f) {
        fputs("{\"added_tokens\":[{\"id\":3,\"content\":\"<x>\",\"special\":true}],\"model\":{\"type\":\"BPE\","
              "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}," PT_OK "}", f);
        fclose(f);
    }
    char err[512] = "";
    tokenizer *t = NULL;
    CHECKF(tok_load(&t, path, err, sizeof err) == 0, "minimal tokenizer: %s", err);
    if (t) {
        int *ids = NULL, n = 0;
        /* "c" is not in the vocab and there is no unk token: HF drops it. */
        CHECK(tok_encode(t, "ab<x>bca", 8, &ids, &n, err, sizeof err) == 0);
        CHECK(n == 4 && ids[0] == 2 && ids[1] == 3 && ids[2] == 1 && ids[3] == 0);
        CHECK(tok_vocab_size(t) == 4 && tok_is_special(t, 3) && !tok_is_special(t, 2));
        free(ids);
        tok_free(t);
    }
    unlink(path);
    rmdir(dir);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    test_errors();
    char err[512];
    tokenizer *t = NULL;
    const char *fix = tu_path("tests/fixtures/tokenizer/tokenizer.json");
    CHECKF(tok_load(&t, fix, err, sizeof err) == 0, "%s", err);
    if (t) {
        test_stream_bytes(t);
        tok_free(t);
    }
    if (argc > 1) {
        for (int i = 1; i < argc; i++) run_golden(argv[i]);
        return tu_done("tokenizer");
    }
    char gdir[1024];
    snprintf(gdir, sizeof gdir, "%s", tu_path("tests/golden/tokenizer"));
    DIR *d = opendir(gdir);
    CHECKF(d != NULL, "cannot open %s", gdir);
    char *names[64];
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d)) && n < 64;) {
        size_t l = strlen(e->d_name);
        if (l > 6 && strcmp(e->d_name + l - 6, ".jsonl") == 0) names[n++] = strdup(e->d_name);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof *names, cmp_str);
    CHECKF(n >= 2, "expected the qwen2 and llama3 goldens in %s, found %d files", gdir, n);
    for (int i = 0; i < n; i++) {
        char p[1300];
        snprintf(p, sizeof p, "%s/%s", gdir, names[i]);
        run_golden(p);
        free(names[i]);
    }
    return tu_done("tokenizer");
}
