/* canary_checks.c — see canary_checks.h. Pure functions: no I/O. */
#include "canary_checks.h"
#include "stats.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the UTF-8 sequence at s (1..4), 0 when invalid; *cp = code point. */
static int utf8_seq(const unsigned char *s, size_t n, unsigned *cp) {
    unsigned c = s[0];
    if (c < 0x80) { *cp = c; return 1; }
    int len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? (c < 0xF0 ? 3 : 0) : c >= 0xC2 ? 2 : 0;
    if (!len || (size_t)len > n) return 0;
    unsigned v = c & (0x7F >> len);
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if ((len == 3 && v < 0x800) || (len == 4 && (v < 0x10000 || v > 0x10FFFF)) || (v >= 0xD800 && v <= 0xDFFF)) return 0;
    *cp = v;
    return len;
}

int cc_bad_chars(const char *text, size_t *first_at) {
    const unsigned char *s = (const unsigned char *)text;
    size_t n = strlen(text), i = 0;
    int bad = 0;
    if (first_at) *first_at = 0;
    while (i < n) {
        unsigned cp;
        int k = utf8_seq(s + i, n - i, &cp);
        int is_bad = !k || cp == 0xFFFD || (cp < 0x20 && cp != '\t' && cp != '\n' && cp != '\r') || cp == 0x7F ||
                     (cp >= 0x80 && cp <= 0x9F);
        if (is_bad) {
            if (!bad && first_at) *first_at = i;
            bad++;
        }
        i += k ? (size_t)k : 1;
    }
    return bad;
}

double cc_spray(const char *text) {
    const unsigned char *s = (const unsigned char *)text;
    int nonspace = 0, spray = 0;
    unsigned char prev = 0;
    for (; *s; s++) {
        if (isspace(*s)) continue;
        if ((*s & 0xC0) == 0x80) continue;          /* UTF-8 continuation: counted with its lead byte */
        nonspace++;
        if (*s < 0x80 && ispunct(*s) && *s != prev) spray++;
        prev = *s;
    }
    return nonspace < 20 ? 0.0 : (double)spray / nonspace;
}

typedef struct { const char *w[3]; int l[3]; } trigram;

static int tri_cmp(const void *a, const void *b) {
    const trigram *x = a, *y = b;
    for (int i = 0; i < 3; i++) {
        int m = x->l[i] < y->l[i] ? x->l[i] : y->l[i];
        int c = memcmp(x->w[i], y->w[i], (size_t)m);
        if (c) return c;
        if (x->l[i] != y->l[i]) return x->l[i] - y->l[i];
    }
    return 0;
}

static int cmp8(const void *a, const void *b) { return memcmp(*(const char *const *)a, *(const char *const *)b, 8); }

/* 1 − distinct ÷ all character 8-grams (loops inside one "word", such as
 * "foofoofoo", or runs of newlines, which word trigrams cannot see). */
static double char_loop(const char *text, size_t n) {
    if (n < 8 + 31) return 0;
    size_t m = n - 7;
    const char **g = malloc(sizeof *g * m);
    if (!g) return 0;
    for (size_t i = 0; i < m; i++) g[i] = text + i;
    qsort(g, m, sizeof *g, cmp8);
    size_t distinct = 1;
    for (size_t i = 1; i < m; i++) distinct += memcmp(g[i - 1], g[i], 8) != 0;
    free(g);
    return 1.0 - (double)distinct / (double)m;
}

double cc_loop(const char *text) {
    size_t n = strlen(text);
    double cl = char_loop(text, n);
    int cap = 64, nw = 0;
    const char **w = malloc(sizeof *w * (size_t)cap);
    int *wl = malloc(sizeof *wl * (size_t)cap);
    if (!w || !wl) { free(w); free(wl); return 0; }
    for (size_t i = 0; i < n;) {
        while (i < n && isspace((unsigned char)text[i])) i++;
        if (i >= n) break;
        size_t j = i;
        while (j < n && !isspace((unsigned char)text[j])) j++;
        if (nw == cap) {
            cap *= 2;
            const char **nw2 = realloc(w, sizeof *w * (size_t)cap);
            int *nl2 = realloc(wl, sizeof *wl * (size_t)cap);
            if (nw2) w = nw2;
            if (nl2) wl = nl2;
            if (!nw2 || !nl2) { free(w); free(wl); return 0; }
        }
        w[nw] = text + i;
        wl[nw++] = (int)(j - i);
        i = j;
    }
    int nt = nw - 2;
    double score = 0;
    if (nt >= 10) {
        trigram *t = malloc(sizeof *t * (size_t)nt);
        if (t) {
            for (int i = 0; i < nt; i++)
                for (int k = 0; k < 3; k++) { t[i].w[k] = w[i + k]; t[i].l[k] = wl[i + k]; }
            qsort(t, (size_t)nt, sizeof *t, tri_cmp);
            int distinct = 1;
            for (int i = 1; i < nt; i++) distinct += tri_cmp(&t[i - 1], &t[i]) != 0;
            score = 1.0 - (double)distinct / nt;
            free(t);
        }
    }
    free(w);
    free(wl);
    return score > cl ? score : cl;
}

double cc_flat(const double *top1, int n, int *at) {
    enum { WIN = 8 };
    double best = 0;
    if (at) *at = -1;
    double nb[2 * WIN];
    for (int i = 0; i < n; i++) {
        if (isnan(top1[i]) || top1[i] > -2.0) continue;
        int k = 0;
        for (int j = i - WIN; j <= i + WIN; j++)
            if (j >= 0 && j < n && j != i && !isnan(top1[j])) nb[k++] = top1[j];
        if (k < 4) continue;
        double drop = st_percentile(nb, (size_t)k, 50) - top1[i];
        if (drop > best) { best = drop; if (at) *at = i; }
    }
    return best;
}

int cc_ctxfree(const unsigned long long *sig, int n, int *at) {
    int rep = 0;
    if (at) *at = -1;
    for (int i = 1; i < n; i++) {
        if (!sig[i]) continue;
        for (int j = 0; j < i; j++)
            if (sig[j] == sig[i]) {
                if (!rep && at) *at = i;
                rep++;
                break;
            }
    }
    return rep;
}

/* Next whitespace-separated word of s, trailing . , ; : ! ? stripped. */
static const char *next_word(const char *s, int *len) {
    while (*s && isspace((unsigned char)*s)) s++;
    const char *e = s;
    while (*e && !isspace((unsigned char)*e)) e++;
    int l = (int)(e - s);
    while (l > 0 && strchr(".,;:!?\"'", s[l - 1])) l--;
    *len = l;
    return *s ? s : NULL;
}

int cc_copy_ok(const char *text, const char *expected) {
    const char *a = text, *b = expected;
    int any = 0;
    for (;;) {
        int la, lb;
        const char *wb = next_word(b, &lb);
        if (!wb) return any;
        const char *wa = next_word(a, &la);
        if (!wa || la != lb || memcmp(wa, wb, (size_t)la)) return 0;
        any = 1;
        a = wa + la;
        while (*a && !isspace((unsigned char)*a)) a++;
        b = wb + lb;
        while (*b && !isspace((unsigned char)*b)) b++;
    }
}

int cc_copy_pick(const int *n_back, int n, int lo, int hi, int want, int *out) {
    int *cand = malloc((size_t)(n > 0 ? n : 1) * sizeof *cand), nc = 0, got = 0;
    if (!cand) return 0;
    for (int i = 0; i < n; i++) {   /* insertion by distance, stable */
        if (n_back[i] < lo || n_back[i] > hi) continue;
        int j = nc++;
        while (j > 0 && n_back[cand[j - 1]] > n_back[i]) { cand[j] = cand[j - 1]; j--; }
        cand[j] = i;
    }
    for (int k = 0; k < want && k < nc; k++) out[got++] = cand[nc <= want ? k : (int)((long)k * nc / want)];
    free(cand);
    return got;
}

long cc_first_diff(const char *a, const char *b) {
    long i = 0;
    while (a[i] && a[i] == b[i]) i++;
    return a[i] == b[i] ? -1 : i;
}

void cc_observed_init(cc_observed *o) {
    memset(o, 0, sizeof *o);
    o->accept_len_min = NAN;
}

static double mx(double a, double b) { return isnan(a) ? b : isnan(b) ? a : a > b ? a : b; }

void cc_observed_merge(cc_observed *a, const cc_observed *b) {
    a->n_intervals += b->n_intervals;
    if (!isnan(b->accept_len_min) && !(b->accept_len_min >= a->accept_len_min)) a->accept_len_min = b->accept_len_min;
    a->n_texts += b->n_texts;
    a->bad_frac = mx(a->bad_frac, b->bad_frac);
    a->spray_max = mx(a->spray_max, b->spray_max);
    a->loop_max = mx(a->loop_max, b->loop_max);
    a->n_flat += b->n_flat;
    a->flat_max = mx(a->flat_max, b->flat_max);
    a->ctxfree_max = mx(a->ctxfree_max, b->ctxfree_max);
    a->n_copy += b->n_copy;
    a->copy_fail_frac = mx(a->copy_fail_frac, b->copy_fail_frac);
    a->n_spec += b->n_spec;
    a->spec_mismatch_frac = mx(a->spec_mismatch_frac, b->spec_mismatch_frac);
    a->n_det += b->n_det;
    a->nondet_frac = mx(a->nondet_frac, b->nondet_frac);
}

void cc_thresholds_default(cc_thresholds *t, double accept_len) {
    t->accept_len = accept_len;
    t->bad_frac = 0;
    t->spray = 0.5;
    t->loop = 0.6;
    /* 4 nats: the top token ~55x less likely than at the neighbouring
     * positions. A healthy model's most uncertain positions (the start of an
     * identifier, a name) sit 3-3.5 nats below their neighbours — the bundled
     * tiny model's code-012 position 42 sits 3.09 below, top-1 -3.53 — while a
     * distribution flattened over hundreds of tokens (top-1 below -5.5) sits
     * 5 and more below. The context-free check, not this one, catches the
     * injected `flat` fault (its top-1 is -2.25). */
    t->flat = 4.0;
    t->ctxfree = 0;
    t->copy_fail_frac = 0;
    t->spec_mismatch_frac = 0;
    t->nondet_frac = 0;
}

static double frac_thr(double clean) { return clean > 0 ? clean + 0.1 : 0; }

/* A threshold at or beyond the top of its quantity's range can never be
 * exceeded: the check is off, and says so (INFINITY, cc_disabled_list). */
static double in_range(double thr, double top) { return thr < top ? thr : INFINITY; }

int cc_disabled_list(const cc_thresholds *t, char *buf, size_t n) {
    const struct { const char *name; double v; } c[] = {
        {"bad_chars", t->bad_frac}, {"spray", t->spray}, {"loop", t->loop}, {"flat", t->flat},
        {"context_free", t->ctxfree}, {"copy", t->copy_fail_frac}, {"spec_mismatch", t->spec_mismatch_frac},
        {"nondeterminism", t->nondet_frac}};
    size_t o = 0;
    int k = 0;
    if (n) buf[0] = 0;
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        if (!isinf(c[i].v)) continue;
        if (o < n) {
            int w = snprintf(buf + o, n - o, "%s%s", k ? ", " : "", c[i].name);
            if (w > 0) o += (size_t)w;
        }
        k++;
    }
    return k;
}

void cc_calibrate(const cc_observed *c, cc_thresholds *t, char *ex, size_t exl) {
    cc_thresholds d;
    cc_thresholds_default(&d, 2.0);
    *t = d;
    size_t o = 0;
#define SAY(...) do { if (o < exl) { int w_ = snprintf(ex + o, exl - o, __VA_ARGS__); if (w_ > 0) o += (size_t)w_; } } while (0)
    if (exl) ex[0] = 0;
    if (!c->n_intervals || isnan(c->accept_len_min)) {
        SAY("accept length: no clean intervals with an accept length; default %.2f kept\n", d.accept_len);
    } else if (c->accept_len_min <= 1.05) {
        t->accept_len = 0;
        SAY("accept length: clean minimum %.3f (nothing accepted); interval check disabled\n", c->accept_len_min);
    } else {
        t->accept_len = 1.0 + (c->accept_len_min - 1.0) / 2.0;
        SAY("accept length: flag <= %.3f (halfway from 1 to the clean minimum %.3f over %d intervals)\n",
            t->accept_len, c->accept_len_min, c->n_intervals);
    }
    /* shares and the text scores live in [0, 1]: a threshold at 1 or above
     * could never be exceeded, so the check is reported as disabled */
    if (c->n_texts) {
        t->bad_frac = in_range(frac_thr(c->bad_frac), 1.0);
        t->spray = in_range(fmax(d.spray, c->spray_max + 0.1), 1.0);
        t->loop = in_range(fmax(d.loop, c->loop_max + 0.1), 1.0);
        if (isinf(t->bad_frac)) SAY("bad characters: DISABLED: %.3f of the %d clean texts had bad characters; no share "
                                    "threshold below 1 leaves room\n", c->bad_frac, c->n_texts);
        else SAY("bad characters: flag a share of texts > %.3f (clean %.3f of %d texts)\n", t->bad_frac, c->bad_frac, c->n_texts);
        if (isinf(t->spray)) SAY("punctuation spray: DISABLED: the clean max %.3f + 0.1 is not below 1, the score's top\n",
                                 c->spray_max);
        else SAY("punctuation spray: flag > %.3f (clean max %.3f)\n", t->spray, c->spray_max);
        if (isinf(t->loop)) SAY("trigram loop: DISABLED: the clean max %.3f + 0.1 is not below 1, the score's top (a "
                                "share of repeated trigrams cannot exceed 1)\n", c->loop_max);
        else SAY("trigram loop: flag > %.3f (clean max %.3f)\n", t->loop, c->loop_max);
    } else
        SAY("text checks: no clean texts; defaults kept\n");
    if (c->n_flat) {
        t->flat = fmax(d.flat, c->flat_max + 1.0);
        SAY("flat distribution: flag a drop > %.2f nats (clean max %.2f over %d probes)\n", t->flat, c->flat_max, c->n_flat);
        t->ctxfree = c->ctxfree_max > 0 ? c->ctxfree_max : 0;
        SAY("context-free distribution: flag > %.0f repeated top-k position(s) in a probe (clean max %.0f)\n", t->ctxfree,
            c->ctxfree_max);
    }
    if (c->n_copy) {
        t->copy_fail_frac = in_range(frac_thr(c->copy_fail_frac), 1.0);
        if (isinf(t->copy_fail_frac)) SAY("passphrase copy: DISABLED: %.3f of %d clean copies failed; no share below 1 "
                                          "leaves room\n", c->copy_fail_frac, c->n_copy);
        else SAY("passphrase copy: flag a failure share > %.3f (clean %.3f of %d)\n", t->copy_fail_frac, c->copy_fail_frac,
                 c->n_copy);
    }
    if (c->n_spec) {
        t->spec_mismatch_frac = in_range(frac_thr(c->spec_mismatch_frac), 1.0);
        if (isinf(t->spec_mismatch_frac)) SAY("spec on/off: DISABLED: %.3f of %d clean pairs differed; no share below 1 "
                                              "leaves room\n", c->spec_mismatch_frac, c->n_spec);
        else SAY("spec on/off: flag a mismatch share > %.3f (clean %.3f of %d)\n", t->spec_mismatch_frac,
                 c->spec_mismatch_frac, c->n_spec);
    }
    if (c->n_det) {
        t->nondet_frac = in_range(frac_thr(c->nondet_frac), 1.0);
        if (isinf(t->nondet_frac)) SAY("determinism: DISABLED: %.3f of %d clean pairs differed; no share below 1 leaves "
                                       "room\n", c->nondet_frac, c->n_det);
        else SAY("determinism: flag a mismatch share > %.3f (clean %.3f of %d)\n", t->nondet_frac, c->nondet_frac, c->n_det);
    }
#undef SAY
}
