/* tokenizer_regex.c — makes a tokenizer.json pre-tokenizer regex mean in
 * PCRE2 what it means in HF `tokenizers` (Oniguruma). The constructs the
 * GPT-2 / Llama-3 / Qwen2 patterns use are identical in both engines except
 * for Unicode data: Oniguruma's is newer (characters assigned after PCRE2's
 * Unicode version are letters/numbers there) and PCRE2's \s also takes
 * U+180E. So \s, \S, \p{L}, \p{N} (and \pL, \pN, \P{L}, \P{N} outside
 * classes) are spelled out; everything else is copied byte for byte.
 * Not handled (copied unchanged): \P{..} inside a class, \p{..} for other
 * properties, \w/\d/\h, extended mode (?x) comments.
 * Must not: compile or run regexes (tokenizer.c does). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer_unicode.h"

typedef struct { char *s; size_t n, cap; int oom; } sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (b->n + n + 1 > cap) cap *= 2;
        char *p = realloc(b->s, cap);
        if (!p) { b->oom = 1; return; }
        b->s = p;
        b->cap = cap;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

/* Unicode White_Space, the set Oniguruma's \s matches (as class items). */
static const char WS_ITEMS[] =
    "\\x{9}-\\x{D}\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

static void put_ranges(sbuf *b, const tku_range *r, int n) {
    char tmp[48];
    for (int i = 0; i < n; i++) {
        if (r[i].lo == r[i].hi) snprintf(tmp, sizeof tmp, "\\x{%X}", (unsigned)r[i].lo);
        else snprintf(tmp, sizeof tmp, "\\x{%X}-\\x{%X}", (unsigned)r[i].lo, (unsigned)r[i].hi);
        puts_(b, tmp);
    }
}

/* Class items for \p{L} or \p{N} plus what PCRE2's Unicode lacks. */
static void put_prop_items(sbuf *b, char prop) {
    puts_(b, prop == 'L' ? "\\p{L}" : "\\p{N}");
    if (prop == 'L') put_ranges(b, tku_extra_L, tku_extra_L_count);
    else put_ranges(b, tku_extra_N, tku_extra_N_count);
}

/* At pat[i] == '\\' followed by p or P: the property letter if it is exactly
 * L or N (\pL, \p{L}), with *adv set to the escape's length; else 0. */
static char prop_escape(const char *pat, size_t len, size_t i, size_t *adv) {
    if (i + 2 < len && (pat[i + 2] == 'L' || pat[i + 2] == 'N')) { *adv = 3; return pat[i + 2]; }
    if (i + 4 < len && pat[i + 2] == '{' && (pat[i + 3] == 'L' || pat[i + 3] == 'N') && pat[i + 4] == '}') {
        *adv = 5;
        return pat[i + 3];
    }
    return 0;
}

char *tku_regex_patch(const char *pat, size_t len, size_t *out_len) {
    sbuf b = {0};
    int in_class = 0;
    put(&b, "", 0);
    for (size_t i = 0; i < len;) {
        char c = pat[i];
        if (c == '\\' && i + 1 < len) {
            char e = pat[i + 1];
            size_t adv;
            char prop;
            if (e == 'Q') {                       /* \Q...\E is literal: copy through \E */
                const char *end = NULL;
                for (size_t j = i + 2; j + 1 < len; j++)
                    if (pat[j] == '\\' && pat[j + 1] == 'E') { end = pat + j + 2; break; }
                size_t stop = end ? (size_t)(end - pat) : len;
                put(&b, pat + i, stop - i);
                i = stop;
            } else if (e == 's') {
                if (!in_class) puts_(&b, "[");
                puts_(&b, WS_ITEMS);
                if (!in_class) puts_(&b, "]");
                i += 2;
            } else if (e == 'S') {
                if (in_class) puts_(&b, "\\S\\x{180E}");   /* PCRE2's \S lacks only U+180E */
                else { puts_(&b, "[^"); puts_(&b, WS_ITEMS); puts_(&b, "]"); }
                i += 2;
            } else if ((e == 'p' || (e == 'P' && !in_class)) && (prop = prop_escape(pat, len, i, &adv))) {
                if (!in_class) puts_(&b, e == 'P' ? "[^" : "[");
                put_prop_items(&b, prop);
                if (!in_class) puts_(&b, "]");
                i += adv;
            } else {
                put(&b, pat + i, 2);
                i += 2;
            }
        } else if (c == '[' && !in_class) {
            in_class = 1;
            size_t j = i + 1;
            if (j < len && pat[j] == '^') j++;
            if (j < len && pat[j] == ']') j++;    /* a leading ] is a literal */
            put(&b, pat + i, j - i);
            i = j;
        } else if (c == '[' && in_class && i + 1 < len && pat[i + 1] == ':') {
            const char *end = NULL;               /* POSIX [:name:] */
            for (size_t j = i + 2; j + 1 < len; j++)
                if (pat[j] == ':' && pat[j + 1] == ']') { end = pat + j + 2; break; }
            size_t stop = end ? (size_t)(end - pat) : i + 1;
            put(&b, pat + i, stop - i);
            i = stop;
        } else {
            if (c == ']' && in_class) in_class = 0;
            put(&b, pat + i, 1);
            i++;
        }
    }
    if (b.oom) { free(b.s); return NULL; }
    *out_len = b.n;
    return b.s;
}
