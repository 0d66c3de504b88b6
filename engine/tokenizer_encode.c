/* tokenizer_encode.c — text -> ids, step for step as HF `tokenizers` does
 * encode(text, add_special_tokens=False):
 *   1. invalid UTF-8 -> U+FFFD per maximal subpart;
 *   2. added tokens with normalized=false are cut out of the raw text,
 *      leftmost match first, longest at that position (HF: Aho-Corasick,
 *      LeftmostLongest), honouring lstrip/rstrip;
 *   3. each remaining segment is normalized (NFC if the file says so), then
 *      added tokens with normalized=true are cut out of it the same way;
 *   4. each remaining piece runs through the pre-tokenizer stages: Split
 *      (regex, Isolated: matches and the gaps between them are pieces), then
 *      ByteLevel (optional leading space, optional GPT-2 regex);
 *   5. each piece is byte-mapped and merged by rank exactly like HF's
 *      Word::merge_all (min-heap on (rank, position), stale entries skipped),
 *      with ignore_merges and unk/fuse_unk handled as HF does.
 * All scratch lives in a per-call context: the tokenizer stays read-only.
 * Must not: touch the file format (tokenizer.c) or Unicode tables. */
#include "tokenizer_internal.h"
#include "tokenizer_unicode.h"

#include <stdlib.h>
#include <string.h>

#include "errmsg.h"

typedef struct { int32_t c, prev, next, alive; } bpe_sym;
typedef struct { int32_t rank, pos, new_id; } bpe_ent;

typedef struct {
    const tokenizer *t;
    int *ids;
    size_t n, cap;
    pcre2_match_data *md;
    bpe_sym *sym;
    size_t sym_cap;
    bpe_ent *heap;
    size_t heap_cap;
    char *mapped;                 /* ignore_merges: the piece in byte-level spelling */
    size_t mapped_cap;
    char *err;
    size_t errlen;
} enc_ctx;

static int oom(enc_ctx *c) { return errf(c->err, c->errlen, "tok_encode: out of memory"); }

static int push_id(enc_ctx *c, int id) {
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 256;
        int *p = realloc(c->ids, cap * sizeof *p);
        if (!p) return oom(c);
        c->ids = p;
        c->cap = cap;
    }
    c->ids[c->n++] = id;
    return 0;
}

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, n * elem);
    if (!q) return -1;
    *p = q;
    *cap = n;
    return 0;
}

/* ---- BPE ------------------------------------------------------------------- */

static int ent_less(const bpe_ent *a, const bpe_ent *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_ent *h, size_t *n, bpe_ent e) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!ent_less(&e, &h[p])) break;
        h[i] = h[p];
        i = p;
    }
    h[i] = e;
}

static bpe_ent heap_pop(bpe_ent *h, size_t *n) {
    bpe_ent top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const bpe_ent *best = &last;
        if (l < *n && ent_less(&h[l], best)) { m = l; best = &h[l]; }
        if (r < *n && ent_less(&h[r], best)) { m = r; }
        if (m == i) break;
        h[i] = h[m];
        i = m;
    }
    if (*n) h[i] = last;
    return top;
}

static void try_pair(const tokenizer *t, const bpe_sym *s, int pos, bpe_ent *h, size_t *nh) {
    int rank, new_id;
    int nx = s[pos].next;
    if (nx >= 0 && tok_merge_find(t, s[pos].c, s[nx].c, &rank, &new_id))
        heap_push(h, nh, (bpe_ent){rank, pos, new_id});
}

static int bpe_piece(enc_ctx *c, const unsigned char *p, size_t n) {
    const tokenizer *t = c->t;
    if (t->ignore_merges) {
        /* A piece that is itself a vocabulary word is taken whole. */
        if (grow((void **)&c->mapped, &c->mapped_cap, 2 * n, 1)) return oom(c);
        size_t m = 0;
        for (size_t i = 0; i < n; i++) m += (size_t)tku_utf8_put(tku_byte_to_cp(p[i]), c->mapped + m);
        int id = tok_vocab_find(t, c->mapped, m);
        if (id >= 0) return push_id(c, id);
    }
    if (grow((void **)&c->sym, &c->sym_cap, n, sizeof *c->sym)) return oom(c);
    bpe_sym *s = c->sym;
    int ns = 0, unk_open = 0;
    for (size_t i = 0; i < n; i++) {
        int id = t->byte_id[p[i]];
        if (id >= 0) {
            unk_open = 0;
            s[ns] = (bpe_sym){id, ns - 1, -1, 1};
            ns++;
        } else if (t->unk_id >= 0) {
            /* HF: an unknown char becomes unk; consecutive ones fuse if fuse_unk. */
            if (!(unk_open && t->fuse_unk)) { s[ns] = (bpe_sym){t->unk_id, ns - 1, -1, 1}; ns++; }
            unk_open = 1;
        }                                     /* no unk token: HF drops the char */
    }
    for (int i = 0; i + 1 < ns; i++) s[i].next = i + 1;
    if (ns > 1) {
        if (grow((void **)&c->heap, &c->heap_cap, 3 * (size_t)ns, sizeof *c->heap)) return oom(c);
        bpe_ent *h = c->heap;
        size_t nh = 0;
        for (int i = 0; i + 1 < ns; i++) try_pair(t, s, i, h, &nh);
        while (nh) {
            bpe_ent e = heap_pop(h, &nh);
            bpe_sym *a = &s[e.pos];
            if (!a->alive || a->next < 0) continue;
            int rank, new_id;
            /* Stale entry: the pair at pos changed since it was pushed. */
            if (!tok_merge_find(t, a->c, s[a->next].c, &rank, &new_id) || new_id != e.new_id) continue;
            bpe_sym *b = &s[a->next];
            a->c = new_id;
            b->alive = 0;
            a->next = b->next;
            if (b->next >= 0) s[b->next].prev = e.pos;
            if (a->prev >= 0) try_pair(t, s, a->prev, h, &nh);
            try_pair(t, s, e.pos, h, &nh);
        }
    }
    for (int i = 0; i < ns; i++)
        if (s[i].alive && push_id(c, s[i].c)) return -1;
    return 0;
}

/* ---- pre-tokenizer stages ---------------------------------------------------- */

static int run_stage(enc_ctx *c, int k, const char *s, size_t n);

/* Split, behavior Isolated: each match and each gap between matches is a
 * piece; empty matches add nothing (HF drops empty splits). */
static int regex_split(enc_ctx *c, const pcre2_code *re, int next_stage, const char *s, size_t n) {
    size_t start = 0, prev = 0;
    while (start < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK, c->md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)s, n, start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, c->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return errf(c->err, c->errlen, "tok_encode: %s: pre-tokenizer regex failed: %s", c->t->path,
                        (const char *)msg);
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {                       /* empty: step one character */
            start = ms + 1;
            while (start < n && ((unsigned char)s[start] & 0xC0) == 0x80) start++;
            continue;
        }
        if (ms > prev && run_stage(c, next_stage, s + prev, ms - prev)) return -1;
        if (run_stage(c, next_stage, s + ms, me - ms)) return -1;
        prev = start = me;
    }
    if (prev < n && run_stage(c, next_stage, s + prev, n - prev)) return -1;
    return 0;
}

static int run_stage(enc_ctx *c, int k, const char *s, size_t n) {
    const tokenizer *t = c->t;
    if (n == 0) return 0;
    if (k == t->n_stages) return bpe_piece(c, (const unsigned char *)s, n);
    const tok_stage *st = &t->stages[k];
    if (st->kind == TOK_STAGE_SPLIT) return regex_split(c, st->re, k + 1, s, n);
    char *tmp = NULL;
    if (st->add_prefix_space && s[0] != ' ') {
        if (!(tmp = malloc(n + 1))) return oom(c);
        tmp[0] = ' ';
        memcpy(tmp + 1, s, n);
        s = tmp;
        n++;
    }
    int rc = st->re ? regex_split(c, st->re, k + 1, s, n) : run_stage(c, k + 1, s, n);
    free(tmp);
    return rc;
}

/* ---- added tokens and normalization ------------------------------------------ */

static int segment(enc_ctx *c, const char *s, size_t n);

/* Cuts added tokens of class cls (0: matched on raw text, 1: on normalized
 * text) out of s; gaps go to the next step. */
static int split_added(enc_ctx *c, int cls, const char *s, size_t n) {
    const tokenizer *t = c->t;
    size_t done = 0, i = 0;
    while (i < n) {
        const int *b = t->bucket[cls][(unsigned char)s[i]];
        const tok_added *hit = NULL;
        for (int j = b[0]; j < b[1]; j++) {        /* longest first */
            const tok_added *a = &t->added[t->order[j]];
            if (a->len <= n - i && memcmp(s + i, a->text, a->len) == 0) { hit = a; break; }
        }
        if (!hit) { i++; continue; }
        size_t ms = i, me = i + hit->len;
        if (hit->lstrip) {                         /* swallow whitespace before, not past the last cut */
            size_t j = ms;
            while (j > done) {
                size_t q = j - 1;
                while (q > done && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
                uint32_t cp;
                if (!tku_utf8_next((const unsigned char *)s + q, j - q, &cp) || !tku_is_whitespace(cp)) break;
                j = q;
            }
            ms = j;
        }
        size_t stop = me;
        if (hit->rstrip) {
            uint32_t cp;
            int k;
            while (stop < n && (k = tku_utf8_next((const unsigned char *)s + stop, n - stop, &cp)) &&
                   tku_is_whitespace(cp))
                stop += (size_t)k;
        }
        if (ms > done) {
            int rc = cls == 0 ? segment(c, s + done, ms - done) : run_stage(c, 0, s + done, ms - done);
            if (rc) return rc;
        }
        if (push_id(c, hit->id)) return -1;
        done = stop;
        i = me > stop ? me : stop;
    }
    if (n > done) return cls == 0 ? segment(c, s + done, n - done) : run_stage(c, 0, s + done, n - done);
    return 0;
}

static int segment(enc_ctx *c, const char *s, size_t n) {
    const tokenizer *t = c->t;
    char *norm = NULL;
    if (t->nfc) {
        size_t m;
        norm = tku_nfc(s, n, &m);
        if (!norm && m != n) return oom(c);
        if (norm) { s = norm; n = m; }
    }
    int has_norm_added = t->n_added > 0 && t->added[t->order[t->n_added - 1]].normalized;
    int rc = has_norm_added ? split_added(c, 1, s, n) : run_stage(c, 0, s, n);
    free(norm);
    return rc;
}

int tok_encode(const tokenizer *t, const char *text, size_t len, int **ids, int *n_ids, char *err, size_t errlen) {
    *ids = NULL;
    *n_ids = 0;
    if (len > (size_t)1 << 30) return errf(err, errlen, "tok_encode: text of %zu bytes is too long (max 1 GiB)", len);
    size_t n;
    char *clean = tku_utf8_lossy(text, len, &n);
    if (!clean && n != len) return errf(err, errlen, "tok_encode: out of memory");
    enc_ctx c = {.t = t, .err = err, .errlen = errlen};
    c.md = pcre2_match_data_create(16, NULL);
    int rc = c.md ? split_added(&c, 0, clean ? clean : text, n) : oom(&c);
    pcre2_match_data_free(c.md);
    free(clean);
    free(c.sym);
    free(c.heap);
    free(c.mapped);
    if (rc) { free(c.ids); return -1; }
    if (!c.ids && !(c.ids = malloc(sizeof *c.ids))) return errf(err, errlen, "tok_encode: out of memory");
    *ids = c.ids;
    *n_ids = (int)c.n;
    return 0;
}
