/* tokenizer.c — loading and validating an HF tokenizer.json (byte-level
 * BPE), the id/string accessors, and decoding (whole and streaming).
 * Encoding lives in tokenizer_encode.c, Unicode helpers in
 * tokenizer_unicode.c.
 *
 * What is accepted (anything else is refused with a message naming the file
 * and the field, never silently tokenized differently from HF):
 *   model: BPE (vocab; merges as "a b" strings or [a, b] pairs; unk_token,
 *          fuse_unk, ignore_merges; no byte_fallback, no subword prefix or
 *          suffix, no dropout);
 *   normalizer: null, NFC, or a Sequence of NFC;
 *   pre_tokenizer: ByteLevel, or a Sequence of Split(Regex|String, Isolated,
 *          not inverted) ... ending in one ByteLevel;
 *   decoder: ByteLevel (or a Sequence of ByteLevel);
 *   added_tokens: id, content, special, normalized, lstrip, rstrip
 *          (single_word is refused).
 * post_processor is ignored: tok_encode is HF encode(text,
 * add_special_tokens=False); a caller that wants a BOS adds it.
 * Must not: keep any global state (cJSON is parsed without its global error
 * pointer); the loaded tokenizer is read-only and shared across threads. */
#include "tokenizer_internal.h"
#include "tokenizer_unicode.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errmsg.h"
#include "file.h"
#include "json_strict.h"

#define TOK_MAX_ID (1 << 24)   /* a vocabulary beyond 16M ids is a corrupt file */

static const char GPT2_PATTERN[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ULL; }
    return h;
}

int tok_vocab_find(const tokenizer *t, const char *s, size_t len) {
    for (uint32_t h = (uint32_t)fnv1a(s, len) & t->vmask;; h = (h + 1) & t->vmask) {
        int id = t->vhash[h];
        if (id < 0) return -1;
        if ((size_t)t->voc_len[id] == len && memcmp(t->voc[id], s, len) == 0) return id;
    }
}

/* ---- file and JSON helpers ----------------------------------------------- */

static const cJSON *jget(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }
static int jnull(const cJSON *v) { return v == NULL || cJSON_IsNull(v); }

/* Boolean field with a default; -1 (and a message) if present but not a bool. */
static int jbool(const tokenizer *t, const cJSON *o, const char *k, int dflt, const char *where,
                 char *err, size_t errlen) {
    const cJSON *v = jget(o, k);
    if (jnull(v)) return dflt;
    if (!cJSON_IsBool(v)) return errf(err, errlen, "%s: %s.%s must be true or false", t->path, where, k);
    return cJSON_IsTrue(v) ? 1 : 0;
}

static const char *jtype(const cJSON *o) {
    const cJSON *v = jget(o, "type");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* Copies n bytes into the pool (NUL-terminated). */
typedef struct { char *base; size_t used, cap; } pool_t;
static const char *pool_put(pool_t *p, const char *s, size_t n) {
    if (p->used + n + 1 > p->cap) return NULL;      /* sized up front; never happens */
    char *d = p->base + p->used;
    memcpy(d, s, n);
    d[n] = 0;
    p->used += n + 1;
    return d;
}

/* ---- sections ------------------------------------------------------------- */

static int load_vocab(tokenizer *t, const cJSON *vocab, const cJSON *added, pool_t *pool,
                      char *err, size_t errlen) {
    int n_voc = 0, max_id = -1;
    size_t need = 0;
    for (const cJSON *it = vocab->child; it; it = it->next) {
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d < 0 || d >= TOK_MAX_ID || d != floor(d))
            return errf(err, errlen, "%s: model.vocab['%.60s'] must be an integer id in [0, %d)", t->path,
                        it->string ? it->string : "", TOK_MAX_ID);
        if ((int)d > max_id) max_id = (int)d;
        need += 4 * strlen(it->string) + 2;             /* key + decoded bytes (+ NFC room) */
        n_voc++;
    }
    if (n_voc == 0) return errf(err, errlen, "%s: model.vocab is empty", t->path);
    int n_added = 0;
    if (added) {
        int i = 0;
        for (const cJSON *a = added->child; a; a = a->next, i++) {
            const cJSON *id = jget(a, "id"), *content = jget(a, "content");
            double d = cJSON_IsNumber(id) ? id->valuedouble : -1;
            if (!cJSON_IsObject(a) || d < 0 || d >= TOK_MAX_ID || d != floor(d))
                return errf(err, errlen, "%s: added_tokens[%d].id must be an integer in [0, %d)", t->path, i, TOK_MAX_ID);
            if (!cJSON_IsString(content) || !content->valuestring[0])
                return errf(err, errlen, "%s: added_tokens[%d].content must be a non-empty string", t->path, i);
            if ((int)d > max_id) max_id = (int)d;
            need += 9 * strlen(content->valuestring) + 3;  /* content, NFC form (<= 3x), decoded */
            n_added++;
        }
    }
    t->n_ids = max_id + 1;
    pool->cap = need + 16;
    pool->base = t->pool = malloc(pool->cap);
    t->voc = calloc((size_t)t->n_ids, sizeof *t->voc);
    t->voc_len = calloc((size_t)t->n_ids, sizeof *t->voc_len);
    t->dec = calloc((size_t)t->n_ids, sizeof *t->dec);
    t->dec_len = calloc((size_t)t->n_ids, sizeof *t->dec_len);
    t->added_of = malloc((size_t)t->n_ids * sizeof *t->added_of);
    uint32_t hcap = 16;
    while (hcap < 2u * (uint32_t)n_voc) hcap *= 2;
    t->vhash = malloc(hcap * sizeof *t->vhash);
    t->vmask = hcap - 1;
    t->added = calloc((size_t)n_added + 1, sizeof *t->added);
    t->order = calloc((size_t)n_added + 1, sizeof *t->order);
    if (!t->pool || !t->voc || !t->voc_len || !t->dec || !t->dec_len || !t->added_of || !t->vhash || !t->added || !t->order)
        return errf(err, errlen, "%s: out of memory for a vocabulary of %d ids", t->path, t->n_ids);
    memset(t->vhash, 0xff, hcap * sizeof *t->vhash);
    for (int i = 0; i < t->n_ids; i++) t->added_of[i] = -1;

    for (const cJSON *it = vocab->child; it; it = it->next) {
        int id = (int)it->valuedouble;
        size_t len = strlen(it->string);
        if (t->voc[id])
            return errf(err, errlen, "%s: model.vocab gives id %d to both '%.60s' and '%.60s'", t->path, id,
                        t->voc[id], it->string);
        if (tok_vocab_find(t, it->string, len) >= 0)
            return errf(err, errlen, "%s: model.vocab lists '%.60s' twice", t->path, it->string);
        t->voc[id] = pool_put(pool, it->string, len);
        t->voc_len[id] = (int32_t)len;
        uint32_t h = (uint32_t)fnv1a(it->string, len) & t->vmask;
        while (t->vhash[h] >= 0) h = (h + 1) & t->vmask;
        t->vhash[h] = id;
    }
    if (!added) return 0;
    int i = 0;
    for (const cJSON *a = added->child; a; a = a->next, i++) {
        tok_added *ad = &t->added[i];
        const char *c = jget(a, "content")->valuestring;
        int id = (int)jget(a, "id")->valuedouble;
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%d]", i);
        int sp = jbool(t, a, "special", 0, where, err, errlen);
        int no = jbool(t, a, "normalized", !sp, where, err, errlen);
        int ls = jbool(t, a, "lstrip", 0, where, err, errlen);
        int rs = jbool(t, a, "rstrip", 0, where, err, errlen);
        int sw = jbool(t, a, "single_word", 0, where, err, errlen);
        if (sp < 0 || no < 0 || ls < 0 || rs < 0 || sw < 0) return -1;
        if (sw) return errf(err, errlen, "%s: %s.single_word=true is not supported", t->path, where);
        if (t->added_of[id] >= 0)
            return errf(err, errlen, "%s: %s reuses id %d of an earlier added token", t->path, where, id);
        ad->content = pool_put(pool, c, strlen(c));
        ad->text = ad->content;
        ad->len = strlen(c);
        ad->id = id;
        ad->special = (unsigned char)sp;
        ad->normalized = (unsigned char)no;
        ad->lstrip = (unsigned char)ls;
        ad->rstrip = (unsigned char)rs;
        t->added_of[id] = i;
    }
    t->n_added = n_added;
    return 0;
}

static int load_merges(tokenizer *t, const cJSON *merges, char *err, size_t errlen) {
    int n = cJSON_GetArraySize(merges);
    uint64_t cap = 16;
    while (cap < 2ull * (uint64_t)n + 2) cap *= 2;
    t->mhash = calloc(cap, sizeof *t->mhash);
    t->mmask = cap - 1;
    char *buf = NULL;
    size_t bufcap = 0;
    if (!t->mhash) return errf(err, errlen, "%s: out of memory for %d merges", t->path, n);
    int rank = 0, rc = 0;
    for (const cJSON *m = merges->child; m; m = m->next, rank++) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(m)) {
            /* "a b": exactly one space, as HF splits it */
            const char *s = m->valuestring, *sp = strchr(s, ' ');
            if (!sp || strchr(sp + 1, ' ')) {
                rc = errf(err, errlen, "%s: model.merges[%d] '%.60s' is not two tokens separated by one space",
                          t->path, rank, s);
                break;
            }
            a = s; la = (size_t)(sp - s); b = sp + 1; lb = strlen(b);
        } else if (cJSON_IsArray(m) && cJSON_GetArraySize(m) == 2 && cJSON_IsString(m->child) &&
                   cJSON_IsString(m->child->next)) {
            a = m->child->valuestring; la = strlen(a);
            b = m->child->next->valuestring; lb = strlen(b);
        } else {
            rc = errf(err, errlen, "%s: model.merges[%d] must be \"a b\" or [\"a\", \"b\"]", t->path, rank);
            break;
        }
        int ia = tok_vocab_find(t, a, la), ib = tok_vocab_find(t, b, lb);
        if (ia < 0 || ib < 0) {
            rc = errf(err, errlen, "%s: model.merges[%d] names '%.*s', which is not in model.vocab", t->path,
                      rank, (int)(ia < 0 ? (la > 60 ? 60 : la) : (lb > 60 ? 60 : lb)), ia < 0 ? a : b);
            break;
        }
        if (la + lb + 1 > bufcap) {
            bufcap = 2 * (la + lb + 1);
            char *nb = realloc(buf, bufcap);
            if (!nb) { rc = errf(err, errlen, "%s: out of memory", t->path); break; }
            buf = nb;
        }
        memcpy(buf, a, la);
        memcpy(buf + la, b, lb);
        int ic = tok_vocab_find(t, buf, la + lb);
        if (ic < 0) {
            rc = errf(err, errlen, "%s: model.merges[%d] makes '%.*s', which is not in model.vocab", t->path,
                      rank, (int)(la + lb > 60 ? 60 : la + lb), buf);
            break;
        }
        /* A repeated pair keeps its last rank, as HF's HashMap collect does. */
        uint64_t key = (((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib) + 1;
        uint64_t h = tok_mix64(key) & t->mmask;
        while (t->mhash[h].key && t->mhash[h].key != key) h = (h + 1) & t->mmask;
        t->mhash[h].key = key;
        t->mhash[h].rank = rank;
        t->mhash[h].new_id = ic;
    }
    free(buf);
    return rc;
}

static int load_model_options(tokenizer *t, const cJSON *model, char *err, size_t errlen) {
    const cJSON *v;
    t->unk_id = -1;
    v = jget(model, "unk_token");
    if (!jnull(v)) {
        if (!cJSON_IsString(v)) return errf(err, errlen, "%s: model.unk_token must be a string or null", t->path);
        t->unk_id = tok_vocab_find(t, v->valuestring, strlen(v->valuestring));
        if (t->unk_id < 0)
            return errf(err, errlen, "%s: model.unk_token '%.60s' is not in model.vocab", t->path, v->valuestring);
    }
    if ((t->fuse_unk = jbool(t, model, "fuse_unk", 0, "model", err, errlen)) < 0) return -1;
    if ((t->ignore_merges = jbool(t, model, "ignore_merges", 0, "model", err, errlen)) < 0) return -1;
    int bf = jbool(t, model, "byte_fallback", 0, "model", err, errlen);
    if (bf < 0) return -1;
    if (bf) return errf(err, errlen, "%s: model.byte_fallback=true is not supported (byte-level BPE only)", t->path);
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = jget(model, affixes[i]);
        if (!jnull(v) && !(cJSON_IsString(v) && v->valuestring[0] == 0))
            return errf(err, errlen, "%s: model.%s is set; only byte-level BPE without affixes is supported",
                        t->path, affixes[i]);
    }
    v = jget(model, "dropout");
    if (!jnull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
        return errf(err, errlen, "%s: model.dropout is set; BPE dropout is not supported", t->path);
    for (int b = 0; b < 256; b++) {
        char u[4];
        int n = tku_utf8_put(tku_byte_to_cp((unsigned char)b), u);
        t->byte_id[b] = tok_vocab_find(t, u, (size_t)n);
    }
    return 0;
}

static int load_normalizer(tokenizer *t, const cJSON *root, char *err, size_t errlen) {
    const cJSON *n = jget(root, "normalizer");
    if (jnull(n)) return 0;
    const char *ty = jtype(n);
    if (ty && strcmp(ty, "NFC") == 0) { t->nfc = 1; return 0; }
    if (ty && strcmp(ty, "Sequence") == 0) {
        const cJSON *list = jget(n, "normalizers");
        int i = 0;
        for (const cJSON *e = list ? list->child : NULL; e; e = e->next, i++) {
            const char *et = jtype(e);
            if (!et || strcmp(et, "NFC") != 0)
                return errf(err, errlen, "%s: normalizer.normalizers[%d].type '%s' is not supported (only NFC)",
                            t->path, i, et ? et : "?");
            t->nfc = 1;
        }
        return 0;
    }
    return errf(err, errlen, "%s: normalizer.type '%s' is not supported (only NFC or none)", t->path, ty ? ty : "?");
}

static int compile_re(tokenizer *t, const char *pat, size_t len, uint32_t extra, const char *where, pcre2_code **out,
                      char *err, size_t errlen) {
    int ec;
    PCRE2_SIZE off;
    char *patched = NULL;
    if (!(extra & PCRE2_LITERAL)) {
        /* Same meaning as in HF's Oniguruma despite PCRE2's older Unicode data. */
        if (!(patched = tku_regex_patch(pat, len, &len))) return errf(err, errlen, "%s: out of memory", t->path);
        pat = patched;
    }
    *out = pcre2_compile((PCRE2_SPTR)pat, len, PCRE2_UTF | PCRE2_UCP | extra, &ec, &off, NULL);
    free(patched);
    if (!*out) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(ec, msg, sizeof msg);
        return errf(err, errlen, "%s: %s: PCRE2 cannot compile the pattern (at offset %zu of the rewritten "
                    "pattern): %s", t->path, where, (size_t)off, (const char *)msg);
    }
    /* JIT is an optimisation: without it pcre2_match interprets the same pattern. */
    (void)pcre2_jit_compile(*out, PCRE2_JIT_COMPLETE);
    return 0;
}

static int load_stage(tokenizer *t, const cJSON *p, const char *where, char *err, size_t errlen) {
    const char *ty = jtype(p);
    if (t->n_stages == TOK_MAX_STAGES)
        return errf(err, errlen, "%s: %s: more than %d pre-tokenizers", t->path, where, TOK_MAX_STAGES);
    tok_stage *st = &t->stages[t->n_stages];
    if (ty && strcmp(ty, "Split") == 0) {
        const cJSON *pat = jget(p, "pattern"), *beh = jget(p, "behavior");
        const cJSON *re = pat ? jget(pat, "Regex") : NULL, *lit = pat ? jget(pat, "String") : NULL;
        if (!cJSON_IsString(re) && !cJSON_IsString(lit))
            return errf(err, errlen, "%s: %s.pattern must be {\"Regex\": ...} or {\"String\": ...}", t->path, where);
        if (!cJSON_IsString(beh) || strcmp(beh->valuestring, "Isolated") != 0)
            return errf(err, errlen, "%s: %s.behavior '%s' is not supported (only Isolated)", t->path, where,
                        cJSON_IsString(beh) ? beh->valuestring : "?");
        int inv = jbool(t, p, "invert", 0, where, err, errlen);
        if (inv < 0) return -1;
        if (inv) return errf(err, errlen, "%s: %s.invert=true is not supported", t->path, where);
        char w[96];
        snprintf(w, sizeof w, "%s.pattern", where);
        const char *s = cJSON_IsString(re) ? re->valuestring : lit->valuestring;
        st->kind = TOK_STAGE_SPLIT;
        if (compile_re(t, s, strlen(s), cJSON_IsString(re) ? 0 : PCRE2_LITERAL, w, &st->re, err, errlen)) return -1;
        t->n_stages++;
        return 0;
    }
    if (ty && strcmp(ty, "ByteLevel") == 0) {
        /* HF's defaults for a ByteLevel that omits the fields. */
        int aps = jbool(t, p, "add_prefix_space", 1, where, err, errlen);
        int ure = jbool(t, p, "use_regex", 1, where, err, errlen);
        if (aps < 0 || ure < 0) return -1;
        st->kind = TOK_STAGE_BYTELEVEL;
        st->add_prefix_space = aps;
        if (ure && compile_re(t, GPT2_PATTERN, sizeof GPT2_PATTERN - 1, 0, where, &st->re, err, errlen)) return -1;
        t->n_stages++;
        return 0;
    }
    return errf(err, errlen, "%s: %s.type '%s' is not supported (Split, ByteLevel)", t->path, where, ty ? ty : "?");
}

static int load_pre_tokenizer(tokenizer *t, const cJSON *root, char *err, size_t errlen) {
    const cJSON *p = jget(root, "pre_tokenizer");
    if (jnull(p)) return errf(err, errlen, "%s: pre_tokenizer is missing; byte-level BPE needs ByteLevel", t->path);
    const char *ty = jtype(p);
    if (ty && strcmp(ty, "Sequence") == 0) {
        const cJSON *list = jget(p, "pretokenizers");
        if (!cJSON_IsArray(list)) return errf(err, errlen, "%s: pre_tokenizer.pretokenizers must be an array", t->path);
        int i = 0;
        for (const cJSON *e = list->child; e; e = e->next, i++) {
            char where[64];
            snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", i);
            if (load_stage(t, e, where, err, errlen)) return -1;
        }
    } else if (load_stage(t, p, "pre_tokenizer", err, errlen)) {
        return -1;
    }
    /* ByteLevel rewrites the text into its byte alphabet, so a Split after it
     * would see different characters; only "Splits, then one ByteLevel" is
     * supported (GPT-2, Llama-3, Qwen2/3, DeepSeek all fit). */
    for (int i = 0; i < t->n_stages; i++)
        if ((t->stages[i].kind == TOK_STAGE_BYTELEVEL) != (i == t->n_stages - 1))
            return errf(err, errlen, "%s: pre_tokenizer must be Split stages followed by exactly one ByteLevel",
                        t->path);
    if (t->n_stages == 0) return errf(err, errlen, "%s: pre_tokenizer has no ByteLevel stage", t->path);
    return 0;
}

static int load_decoder(tokenizer *t, const cJSON *root, char *err, size_t errlen) {
    const cJSON *d = jget(root, "decoder");
    const char *ty = jnull(d) ? NULL : jtype(d);
    if (ty && strcmp(ty, "ByteLevel") == 0) return 0;
    if (ty && strcmp(ty, "Sequence") == 0) {
        const cJSON *list = jget(d, "decoders");
        int i = 0, ok = 0;
        for (const cJSON *e = list ? list->child : NULL; e; e = e->next, i++) {
            const char *et = jtype(e);
            if (!et || strcmp(et, "ByteLevel") != 0)
                return errf(err, errlen, "%s: decoder.decoders[%d].type '%s' is not supported (ByteLevel)", t->path,
                            i, et ? et : "?");
            ok = 1;
        }
        if (ok) return 0;
    }
    return errf(err, errlen, "%s: decoder.type '%s' is not supported (ByteLevel)", t->path, ty ? ty : "missing");
}

/* What HF's ByteLevel decoder makes of one token string: each char mapped
 * back to its byte, or, if any char is outside the byte alphabet, the
 * token's own UTF-8 (HF applies this to added tokens too). */
static const char *decode_piece(pool_t *pool, const char *s, size_t n, int32_t *out_len) {
    char *d = pool->base + pool->used;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int k = tku_utf8_next((const unsigned char *)s + i, n - i, &cp);
        int b = k ? tku_cp_to_byte(cp) : -1;
        if (b < 0) { *out_len = (int32_t)n; return pool_put(pool, s, n); }
        d[o++] = (char)b;
        i += (size_t)k;
    }
    d[o] = 0;
    pool->used += o + 1;
    *out_len = (int32_t)o;
    return d;
}

static int cmp_added(const void *pa, const void *pb, void *ctx) {
    const tokenizer *t = ctx;
    const tok_added *a = &t->added[*(const int *)pa], *b = &t->added[*(const int *)pb];
    if (a->normalized != b->normalized) return a->normalized - b->normalized;
    if ((unsigned char)a->text[0] != (unsigned char)b->text[0])
        return (unsigned char)a->text[0] - (unsigned char)b->text[0];
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    return *(const int *)pa - *(const int *)pb;
}

static int finish(tokenizer *t, pool_t *pool, char *err, size_t errlen) {
    /* Added tokens matched after normalization are matched in NFC form, as
     * HF normalizes their content when it builds that trie. */
    for (int i = 0; i < t->n_added; i++) {
        tok_added *a = &t->added[i];
        if (!a->normalized || !t->nfc) continue;
        size_t n;
        char *s = tku_nfc(a->content, a->len, &n);
        if (!s && n != a->len) return errf(err, errlen, "%s: out of memory", t->path);
        if (s) { a->text = pool_put(pool, s, n); a->len = n; free(s); }
    }
    for (int id = 0; id < t->n_ids; id++) {
        int ai = t->added_of[id];
        const char *s = ai >= 0 ? t->added[ai].content : t->voc[id];
        if (!s) { t->dec_len[id] = -1; continue; }
        t->dec[id] = decode_piece(pool, s, ai >= 0 ? strlen(s) : (size_t)t->voc_len[id], &t->dec_len[id]);
    }
    for (int i = 0; i < t->n_added; i++) t->order[i] = i;
    qsort_r(t->order, (size_t)t->n_added, sizeof *t->order, cmp_added, t);
    for (int i = 0; i < t->n_added; i++) {
        const tok_added *a = &t->added[t->order[i]];
        int *b = t->bucket[a->normalized][(unsigned char)a->text[0]];
        if (b[1] == 0) b[0] = i;
        b[1] = i + 1;
    }
    return 0;
}

static int build(tokenizer *t, const cJSON *root, char *err, size_t errlen) {
    if (!cJSON_IsObject(root)) return errf(err, errlen, "%s: top level is not a JSON object", t->path);
    const cJSON *model = jget(root, "model");
    if (!cJSON_IsObject(model)) return errf(err, errlen, "%s: missing object 'model'", t->path);
    const char *ty = jtype(model);
    if (ty && strcmp(ty, "BPE") != 0)
        return errf(err, errlen, "%s: model.type is '%s'; only BPE is supported", t->path, ty);
    const cJSON *vocab = jget(model, "vocab"), *merges = jget(model, "merges"), *added = jget(root, "added_tokens");
    if (!cJSON_IsObject(vocab)) return errf(err, errlen, "%s: missing object 'model.vocab'", t->path);
    if (!cJSON_IsArray(merges)) return errf(err, errlen, "%s: missing array 'model.merges'", t->path);
    if (!jnull(added) && !cJSON_IsArray(added)) return errf(err, errlen, "%s: added_tokens must be an array", t->path);
    pool_t pool = {0};
    if (load_vocab(t, vocab, jnull(added) ? NULL : added, &pool, err, errlen)) return -1;
    if (load_merges(t, merges, err, errlen)) return -1;
    if (load_model_options(t, model, err, errlen)) return -1;
    if (load_normalizer(t, root, err, errlen)) return -1;
    if (load_pre_tokenizer(t, root, err, errlen)) return -1;
    if (load_decoder(t, root, err, errlen)) return -1;
    return finish(t, &pool, err, errlen);
}

int tok_load(tokenizer **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    size_t len;
    char *buf;
    /* the largest real tokenizer.json files (Llama-3, Qwen3) are ~10 MB */
    if (read_file(path, 256u << 20, &buf, &len, err, errlen)) return -1;
    cJSON *root;
    if (json_parse_strict(&root, buf, len, path, 1, err, errlen)) {
        free(buf);
        return -1;
    }
    tokenizer *t = calloc(1, sizeof *t);
    int rc = -1;
    if (t && (t->path = strdup(path))) rc = build(t, root, err, errlen);
    else errf(err, errlen, "%s: out of memory", path);
    cJSON_Delete(root);
    free(buf);
    if (rc) { tok_free(t); return -1; }
    *out = t;
    return 0;
}

void tok_free(tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_stages; i++) pcre2_code_free(t->stages[i].re);
    free(t->path); free(t->pool); free(t->voc); free(t->voc_len); free(t->dec); free(t->dec_len);
    free(t->added_of); free(t->vhash); free(t->mhash); free(t->added); free(t->order);
    free(t);
}

/* ---- accessors ------------------------------------------------------------- */

int tok_vocab_size(const tokenizer *t) { return t->n_ids; }

/* Accepts an added token's content or a model.vocab key in its byte-level
 * spelling (e.g. "Ġthe"), as tokenizer.json writes them. */
int tok_id(const tokenizer *t, const char *piece) {
    size_t n = strlen(piece);
    for (int i = 0; i < t->n_added; i++)
        if (strcmp(t->added[i].content, piece) == 0) return t->added[i].id;
    return tok_vocab_find(t, piece, n);
}

int tok_is_special(const tokenizer *t, int id) {
    if (id < 0 || id >= t->n_ids || t->added_of[id] < 0) return 0;
    return t->added[t->added_of[id]].special;
}

/* For an added token this is what HF's decoder makes of its content, which is
 * the content itself for every ASCII token such as <|im_end|>. */
const char *tok_bytes(const tokenizer *t, int id, size_t *len) {
    if (id < 0 || id >= t->n_ids || !t->dec[id]) { if (len) *len = 0; return NULL; }
    if (len) *len = (size_t)t->dec_len[id];
    return t->dec[id];
}

/* ---- decoding ---------------------------------------------------------------- */

int tok_decode(const tokenizer *t, const int *ids, int n_ids, char **out, size_t *len, char *err, size_t errlen) {
    *out = NULL;
    if (len) *len = 0;
    size_t total = 0;
    for (int i = 0; i < n_ids; i++) {
        size_t k;
        if (!tok_bytes(t, ids[i], &k))
            return errf(err, errlen, "tok_decode: ids[%d] = %d is not a token of %s (vocab size %d)", i, ids[i],
                        t->path, t->n_ids);
        total += k;
    }
    char *buf = malloc(total + 1);
    if (!buf) return errf(err, errlen, "tok_decode: out of memory for %zu bytes", total);
    size_t o = 0;
    for (int i = 0; i < n_ids; i++) {
        size_t k;
        const char *b = tok_bytes(t, ids[i], &k);
        memcpy(buf + o, b, k);
        o += k;
    }
    buf[o] = 0;
    size_t n2;
    char *lossy = tku_utf8_lossy(buf, o, &n2);
    if (!lossy && n2 != o) { free(buf); return errf(err, errlen, "tok_decode: out of memory"); }
    if (lossy) { free(buf); buf = lossy; o = n2; }
    *out = buf;
    if (len) *len = o;
    return 0;
}

/* Writes the lossy decoding of s[0..n) except a trailing incomplete sequence,
 * whose length it returns through *keep. Output stops short of cap rather
 * than overflow (cap >= 3 * n always suffices). */
static size_t emit_lossy(const unsigned char *s, size_t n, char *out, size_t cap, size_t *keep) {
    size_t i = 0, o = 0;
    *keep = 0;
    while (i < n) {
        uint32_t cp;
        int k = tku_utf8_next(s + i, n - i, &cp);
        if (k) {
            if (o + (size_t)k > cap) break;
            memcpy(out + o, s + i, (size_t)k);
            o += (size_t)k;
            i += (size_t)k;
        } else if (tku_utf8_incomplete(s + i, n - i)) {
            *keep = n - i;
            break;
        } else {
            if (o + 3 > cap) break;
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += tku_utf8_invalid_len(s + i, n - i);
        }
    }
    return o;
}

size_t tok_stream_put(const tokenizer *t, tok_stream *s, int id, char *out, size_t cap) {
    size_t n;
    const char *b = tok_bytes(t, id, &n);
    if (!b) return 0;                     /* an invalid id adds nothing */
    unsigned char local[64], *buf = local;
    size_t h = (size_t)s->n_held, total = h + n;
    if (total > sizeof local && !(buf = malloc(total))) return 0;
    memcpy(buf, s->held, h);
    memcpy(buf + h, b, n);
    size_t keep;
    size_t o = emit_lossy(buf, total, out, cap, &keep);
    /* keep <= 3: an incomplete sequence is shorter than the longest (4). */
    memcpy(s->held, buf + total - keep, keep);
    s->n_held = (int)keep;
    if (buf != local) free(buf);
    return o;
}

size_t tok_stream_flush(tok_stream *s, char *out, size_t cap) {
    /* What is held is one incomplete sequence: one maximal subpart, one U+FFFD. */
    if (s->n_held == 0 || cap < 3) return 0;
    s->n_held = 0;
    memcpy(out, "\xEF\xBF\xBD", 3);
    return 3;
}
