/* tokenizer_unicode.c — the Unicode the tokenizer needs and nothing more:
 * UTF-8 validation / lossy replacement (Unicode §3.9 "maximal subpart", the
 * rule both Python's errors="replace" and Rust's from_utf8_lossy follow), NFC
 * (decompose, canonical order, compose — the UAX #15 algorithm over the
 * generated tables in tokenizer_unicode_data.c, which hold the Unicode 9.0
 * data HF's NFC uses, so characters newer than that pass through unchanged
 * exactly as in HF), White_Space, and the GPT-2 byte<->unicode map.
 * Must not: know about vocabularies, regexes or tokenizer.json; hold state. */
#include "tokenizer_unicode.h"

#include <stdlib.h>
#include <string.h>

/* ---- UTF-8 ---------------------------------------------------------------- */

/* Sequence length implied by a lead byte (0 = never a valid lead) and the
 * allowed range of the second byte (Unicode Table 3-7). */
static int utf8_lead(unsigned char b, unsigned char *lo, unsigned char *hi) {
    *lo = 0x80; *hi = 0xBF;
    if (b < 0x80) return 1;
    if (b < 0xC2) return 0;
    if (b < 0xE0) return 2;
    if (b < 0xF0) {
        if (b == 0xE0) *lo = 0xA0;
        if (b == 0xED) *hi = 0x9F;
        return 3;
    }
    if (b < 0xF5) {
        if (b == 0xF0) *lo = 0x90;
        if (b == 0xF4) *hi = 0x8F;
        return 4;
    }
    return 0;
}

/* Number of leading bytes of s[0..n) that are consistent with a valid
 * sequence, and the full length the lead asks for (via *need). */
static size_t utf8_valid_prefix(const unsigned char *s, size_t n, int *need) {
    unsigned char lo, hi;
    *need = utf8_lead(s[0], &lo, &hi);
    if (*need == 0) return 0;
    size_t k = 1;
    while (k < (size_t)*need && k < n) {
        unsigned char c = s[k];
        if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) break;
        k++;
    }
    return k;
}

int tku_utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    int need;
    size_t k = utf8_valid_prefix(s, n, &need);
    if (need == 0 || k < (size_t)need) return 0;
    uint32_t c;
    switch (need) {
    case 1: c = s[0]; break;
    case 2: c = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F); break;
    case 3: c = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F); break;
    default:
        c = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) |
            ((uint32_t)(s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    }
    *cp = c;
    return need;
}

size_t tku_utf8_invalid_len(const unsigned char *s, size_t n) {
    int need;
    size_t k = utf8_valid_prefix(s, n, &need);
    return k ? k : 1;
}

int tku_utf8_incomplete(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    int need;
    size_t k = utf8_valid_prefix(s, n, &need);
    return need > 1 && k == n && n < (size_t)need;
}

int tku_utf8_put(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) { o[0] = (unsigned char)cp; return 1; }
    if (cp < 0x800) { o[0] = (unsigned char)(0xC0 | (cp >> 6)); o[1] = (unsigned char)(0x80 | (cp & 0x3F)); return 2; }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12)); o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18)); o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F)); o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

char *tku_utf8_lossy(const char *str, size_t n, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    uint32_t cp;
    while (i < n) {                         /* fast scan: most input is valid */
        if (s[i] < 0x80) { i++; continue; }
        int k = tku_utf8_next(s + i, n - i, &cp);
        if (!k) break;
        i += (size_t)k;
    }
    if (i == n) { *out_len = n; return NULL; }
    /* Each invalid byte becomes at most 3 bytes. */
    char *out = malloc(3 * n + 1);
    if (!out) { *out_len = 0; return NULL; }
    memcpy(out, s, i);
    size_t o = i;
    while (i < n) {
        int k = tku_utf8_next(s + i, n - i, &cp);
        if (k) { memcpy(out + o, s + i, (size_t)k); o += (size_t)k; i += (size_t)k; continue; }
        i += tku_utf8_invalid_len(s + i, n - i);
        memcpy(out + o, "\xEF\xBF\xBD", 3);
        o += 3;
    }
    out[o] = 0;
    *out_len = o;
    return out;
}

int tku_is_whitespace(uint32_t c) {
    return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
           c == 0x205F || c == 0x3000;
}

/* ---- GPT-2 byte map ------------------------------------------------------ */
/* Printable bytes (33..126, 161..172, 174..255) stand for themselves; the
 * other 68 bytes get 256, 257, ... in byte order. */

uint32_t tku_byte_to_cp(unsigned char b) {
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) return b;
    if (b <= 32) return 256u + b;
    if (b <= 160) return 289u + (uint32_t)(b - 127);
    return 323;                                 /* 173, the soft hyphen */
}

int tku_cp_to_byte(uint32_t cp) {
    if (cp < 256) return ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || cp >= 174) ? (int)cp : -1;
    if (cp <= 288) return (int)(cp - 256);
    if (cp <= 322) return (int)(cp - 289 + 127);
    if (cp == 323) return 173;
    return -1;
}

/* ---- NFC ----------------------------------------------------------------- */

enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7,
       LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(uint32_t cp) {
    if (cp < 0x300) return 0;
    int lo = 0, hi = tku_ccc_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tku_ccc_table[mid].lo) hi = mid - 1;
        else if (cp > tku_ccc_table[mid].hi) lo = mid + 1;
        else return tku_ccc_table[mid].ccc;
    }
    return 0;
}

static const tku_decomp *decomp_of(uint32_t cp) {
    int lo = 0, hi = tku_decomp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tku_decomp_table[mid].cp) hi = mid - 1;
        else if (cp > tku_decomp_table[mid].cp) lo = mid + 1;
        else return &tku_decomp_table[mid];
    }
    return NULL;
}

/* Primary composite of a + b, or 0 if none. */
static uint32_t compose(uint32_t a, uint32_t b) {
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE && b < TBASE + TCOUNT)
        return a + (b - TBASE);
    int lo = 0, hi = tku_comp_count - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        const tku_comp *c = &tku_comp_table[mid];
        if (a < c->a || (a == c->a && b < c->b)) hi = mid - 1;
        else if (a > c->a || b > c->b) lo = mid + 1;
        else return c->c;
    }
    return 0;
}

typedef struct { uint32_t *cp; unsigned char *cc; size_t n, cap; } cpbuf;

static int cp_push(cpbuf *b, uint32_t cp) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        uint32_t *c = realloc(b->cp, cap * sizeof *c);
        if (!c) return -1;
        b->cp = c;
        unsigned char *k = realloc(b->cc, cap);
        if (!k) return -1;
        b->cc = k;
        b->cap = cap;
    }
    b->cp[b->n] = cp;
    b->cc[b->n] = (unsigned char)ccc_of(cp);
    b->n++;
    return 0;
}

static int decompose_into(cpbuf *b, uint32_t cp) {
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE, t = s % TCOUNT;
        if (cp_push(b, LBASE + s / NCOUNT) || cp_push(b, VBASE + (s % NCOUNT) / TCOUNT)) return -1;
        return t ? cp_push(b, TBASE + t) : 0;
    }
    const tku_decomp *d = cp < 0xC0 ? NULL : decomp_of(cp);
    if (!d) return cp_push(b, cp);
    for (int i = 0; i < d->len; i++)
        if (cp_push(b, tku_decomp_pool[d->off + i])) return -1;
    return 0;
}

/* Stable sort of cp[0..n) by cc. Runs are short in real text (insertion
 * sort); a long run, which hostile input can make, is counting-sorted so the
 * cost stays linear. */
static int sort_run(uint32_t *cp, unsigned char *cc, size_t n) {
    if (n <= 32) {
        for (size_t j = 1; j < n; j++)
            for (size_t m = j; m > 0 && cc[m - 1] > cc[m]; m--) {
                uint32_t tc = cp[m]; cp[m] = cp[m - 1]; cp[m - 1] = tc;
                unsigned char tk = cc[m]; cc[m] = cc[m - 1]; cc[m - 1] = tk;
            }
        return 0;
    }
    size_t start[257] = {0};
    for (size_t j = 0; j < n; j++) start[cc[j] + 1]++;
    for (int k = 1; k < 257; k++) start[k] += start[k - 1];
    uint32_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    for (size_t j = 0; j < n; j++) tmp[start[cc[j]]++] = cp[j];
    memcpy(cp, tmp, n * sizeof *tmp);
    free(tmp);
    /* start[k] now ends bucket k: rebuild cc from the bucket bounds. */
    size_t j = 0;
    for (int k = 0; k < 256; k++)
        while (j < start[k]) cc[j++] = (unsigned char)k;
    return 0;
}

char *tku_nfc(const char *str, size_t n, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)str;
    /* Quick check: a byte >= 0xCC is needed to spell any code point >= U+0300,
     * and everything below U+0300 is NFC-stable (checked by the generator). */
    size_t i = 0;
    while (i < n && s[i] < 0xCC) i++;
    if (i == n) { *out_len = n; return NULL; }

    cpbuf b = {0};
    char *out = NULL;
    for (i = 0; i < n;) {
        uint32_t cp;
        int k = tku_utf8_next(s + i, n - i, &cp);
        if (!k) { cp = 0xFFFD; k = 1; }      /* callers pass valid UTF-8 */
        if (decompose_into(&b, cp)) goto oom;
        i += (size_t)k;
    }
    /* Canonical ordering: stable sort of each run of non-starters by ccc. */
    for (size_t j = 0; j < b.n;) {
        if (b.cc[j] == 0) { j++; continue; }
        size_t end = j;
        while (end < b.n && b.cc[end] != 0) end++;
        if (sort_run(b.cp + j, b.cc + j, end - j)) goto oom;
        j = end;
    }
    /* Canonical composition: c joins the last starter unless blocked by a
     * character between them with ccc 0 or ccc >= ccc(c). */
    size_t w = 0;
    long starter = -1;
    int prev_cc = 0;
    for (size_t j = 0; j < b.n; j++) {
        uint32_t c = b.cp[j];
        int cc = b.cc[j];
        if (starter >= 0 && (w == (size_t)starter + 1 || (prev_cc != 0 && prev_cc < cc))) {
            uint32_t comp = compose(b.cp[starter], c);
            if (comp) { b.cp[starter] = comp; continue; }
        }
        if (cc == 0) starter = (long)w;
        b.cp[w] = c;
        b.cc[w] = (unsigned char)cc;
        w++;
        prev_cc = cc;
    }
    out = malloc(4 * w + 1);
    if (!out) goto oom;
    size_t o = 0;
    for (size_t j = 0; j < w; j++) o += (size_t)tku_utf8_put(b.cp[j], out + o);
    out[o] = 0;
    free(b.cp);
    free(b.cc);
    if (o == n && memcmp(out, s, n) == 0) { free(out); *out_len = n; return NULL; }
    *out_len = o;
    return out;
oom:
    free(b.cp);
    free(b.cc);
    *out_len = 0;
    return NULL;
}
