/* prom.c — see prom.h. Pure parsing: no I/O, no HTTP. */
#include "prom.h"
#include "errmsg.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int is_name_char(int c, int first) {
    return isalpha(c) || c == '_' || c == ':' || (!first && isdigit(c));
}

/* Finds the end of a label block starting after '{'; returns pointer to the
 * closing '}' or NULL. Quoted values may hold '}' and escaped quotes. */
static const char *label_block_end(const char *p, const char *end) {
    int inq = 0;
    for (; p < end; p++) {
        if (inq) {
            if (*p == '\\' && p + 1 < end) p++;
            else if (*p == '"') inq = 0;
        } else if (*p == '"') inq = 1;
        else if (*p == '}') return p;
    }
    return NULL;
}

static char *dupn(const char *s, size_t n) {
    char *r = malloc(n + 1);
    if (r) { memcpy(r, s, n); r[n] = 0; }
    return r;
}

/* One sample line [p, end). 1 parsed, 0 not a sample, -1 out of memory. */
static int parse_line(const char *p, const char *end, prom_sample *out) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    if (p >= end || *p == '#') return 0;
    const char *n0 = p;
    if (!is_name_char((unsigned char)*p, 1)) return 0;
    while (p < end && is_name_char((unsigned char)*p, 0)) p++;
    const char *n1 = p;
    const char *l0 = p, *l1 = p;
    if (p < end && *p == '{') {
        l0 = p + 1;
        l1 = label_block_end(l0, end);
        if (!l1) return 0;
        p = l1 + 1;
    }
    if (p >= end || (*p != ' ' && *p != '\t')) return 0;
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    char num[64];
    size_t k = 0;
    while (p < end && *p != ' ' && *p != '\t' && k < sizeof num - 1) num[k++] = *p++;
    num[k] = 0;
    if (!k) return 0;
    char *e;
    double v = strtod(num, &e);
    if (*e) return 0;
    out->name = dupn(n0, (size_t)(n1 - n0));
    out->labels = dupn(l0, (size_t)(l1 - l0));
    if (!out->name || !out->labels) { free(out->name); free(out->labels); return -1; }
    out->value = v;
    return 1;
}

int prom_parse(const char *text, prom_doc *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    size_t cap = 0;
    const char *p = text ? text : "";
    while (*p) {
        const char *e = strchr(p, '\n');
        if (!e) e = p + strlen(p);
        const char *le = e;
        if (le > p && le[-1] == '\r') le--;
        prom_sample s;
        int r = parse_line(p, le, &s);
        if (r < 0) { prom_free(out); return errf(err, errlen, "metrics: out of memory"); }
        if (r == 0) {
            const char *q = p;
            while (q < le && (*q == ' ' || *q == '\t')) q++;
            if (q < le && *q != '#') out->n_bad++;
        } else {
            if (out->n == cap) {
                size_t nc = cap ? cap * 2 : 128;
                prom_sample *ns = realloc(out->s, nc * sizeof *ns);
                if (!ns) { free(s.name); free(s.labels); prom_free(out); return errf(err, errlen, "metrics: out of memory"); }
                out->s = ns;
                cap = nc;
            }
            out->s[out->n++] = s;
        }
        p = *e ? e + 1 : e;
    }
    return 0;
}

void prom_free(prom_doc *d) {
    for (size_t i = 0; i < d->n; i++) { free(d->s[i].name); free(d->s[i].labels); }
    free(d->s);
    memset(d, 0, sizeof *d);
}

int prom_label(const char *labels, const char *key, char *out, size_t outlen) {
    const char *p = labels;
    size_t kl = strlen(key);
    while (*p) {
        while (*p == ' ' || *p == ',') p++;
        const char *k0 = p;
        while (*p && *p != '=' && *p != ',') p++;
        const char *k1 = p;
        while (k1 > k0 && k1[-1] == ' ') k1--;
        if (*p != '=') return -1;
        p++;
        while (*p == ' ') p++;
        if (*p != '"') return -1;
        p++;
        int match = (size_t)(k1 - k0) == kl && !strncmp(k0, key, kl);
        size_t o = 0;
        while (*p && *p != '"') {
            char c = *p;
            if (c == '\\' && p[1]) { p++; c = *p == 'n' ? '\n' : *p; }
            if (match && o + 1 < outlen) out[o++] = c;
            p++;
        }
        if (*p == '"') p++;
        if (match) { if (outlen) out[o] = 0; return 0; }
    }
    return -1;
}

double prom_sum(const prom_doc *d, const char *name, const char *lkey, const char *lval, int *found) {
    double s = 0;
    int n = 0;
    char buf[256];
    for (size_t i = 0; i < d->n; i++) {
        if (strcmp(d->s[i].name, name)) continue;
        if (lkey && (prom_label(d->s[i].labels, lkey, buf, sizeof buf) || strcmp(buf, lval))) continue;
        s += d->s[i].value;
        n++;
    }
    if (found) *found = n;
    return s;
}

int prom_rank_key(const char *labels, char *out, size_t outlen) {
    static const char *const RANK[] = {"engine", "dp_rank", "tp_rank", "pp_rank", "attn_tp_rank", "rank"};
    size_t o = 0;
    int n = 0;
    if (outlen) out[0] = 0;
    for (const char *p = labels; *p;) {
        while (*p == ' ' || *p == ',') p++;
        const char *k0 = p;
        while (*p && *p != '=' && *p != ',') p++;
        const char *k1 = p;
        while (k1 > k0 && k1[-1] == ' ') k1--;
        if (*p != '=') break;
        p++;
        while (*p == ' ') p++;
        if (*p != '"') break;
        const char *v0 = ++p;
        while (*p && *p != '"') p += *p == '\\' && p[1] ? 2 : 1;
        const char *v1 = p;
        if (*p == '"') p++;
        size_t kl = (size_t)(k1 - k0);
        int is_rank = 0;
        for (size_t i = 0; i < sizeof RANK / sizeof *RANK; i++)
            if (kl == strlen(RANK[i]) && !strncmp(k0, RANK[i], kl)) is_rank = 1;
        if (!is_rank) continue;
        int w = snprintf(out + o, outlen > o ? outlen - o : 0, "%s%.*s=\"%.*s\"", n ? "," : "", (int)kl, k0,
                         (int)(v1 - v0), v0);
        if (w > 0) o = o + (size_t)w < outlen ? o + (size_t)w : (outlen ? outlen - 1 : 0);
        n++;
    }
    return n;
}

int prom_has_prefix(const prom_doc *d, const char *prefix) {
    size_t pl = strlen(prefix);
    for (size_t i = 0; i < d->n; i++)
        if (!strncmp(d->s[i].name, prefix, pl)) return 1;
    return 0;
}
