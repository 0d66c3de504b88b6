/* json_strict.c — see json_strict.h. A lexical pass over the raw text (for
 * what cJSON's tree no longer shows: number spelling, NUL escapes, trailing
 * bytes), then cJSON for the structure. */
#include "json_strict.h"
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"

/* RFC 8259: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; returns the length, or 0 if malformed. */
static size_t number_len(const char *s, size_t n) {
    size_t i = 0;
    if (i < n && s[i] == '-') i++;
    if (i < n && s[i] == '0') i++;
    else if (i < n && s[i] >= '1' && s[i] <= '9')
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
    else return 0;
    if (i < n && s[i] == '.') {
        size_t d = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        size_t d = i;
        while (i < n && s[i] >= '0' && s[i] <= '9') i++;
        if (i == d) return 0;
    }
    /* a number token ends at a delimiter; "01" reads as 0 then a stray 1 */
    if (i < n && ((s[i] >= '0' && s[i] <= '9') || s[i] == '.' || s[i] == '+' || s[i] == '-' || s[i] == 'e' ||
                  s[i] == 'E'))
        return 0;
    return i;
}

static int lex(const char *t, size_t n, const char *what, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        char c = t[i];
        if (c == 0) return errf(err, errlen, "%s: NUL byte at byte %zu", what, i);
        if (c == '"') {
            for (i++; i < n && t[i] != '"'; i++) {
                if (t[i] == 0) return errf(err, errlen, "%s: NUL byte at byte %zu", what, i);
                if (t[i] != '\\') continue;
                if (i + 5 < n && t[i + 1] == 'u' && !memcmp(t + i + 2, "0000", 4))
                    return errf(err, errlen, "%s: a string contains NUL (\\u0000) at byte %zu", what, i);
                i++;   /* skip the escaped character (a \" does not end the string) */
            }
            continue;
        }
        if (c == '-' || (c >= '0' && c <= '9') || c == '+' || c == '.') {
            size_t k = number_len(t + i, n - i);
            if (!k) return errf(err, errlen, "%s: malformed number at byte %zu", what, i);
            i += k - 1;
        }
    }
    return 0;
}

typedef struct { cJSON *item; size_t index; } keyed;

static int by_key(const void *a, const void *b) {
    const keyed *x = a, *y = b;
    int c = strcmp(x->item->string, y->item->string);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Python's json keeps the last of duplicate keys: drop the earlier ones.
 * Sorting the keys keeps a hostile object of 10^5 keys at n log n. */
static int last_key_wins(cJSON *o) {
    for (cJSON *c = o ? o->child : NULL; c; c = c->next)
        if (last_key_wins(c)) return -1;
    if (!cJSON_IsObject(o)) return 0;
    size_t n = 0;
    for (cJSON *c = o->child; c; c = c->next) n++;
    if (n < 2) return 0;
    keyed *k = malloc(n * sizeof *k);
    if (!k) return -1;
    size_t i = 0;
    for (cJSON *c = o->child; c; c = c->next, i++) k[i] = (keyed){c, i};
    qsort(k, n, sizeof *k, by_key);
    for (i = 0; i + 1 < n; i++)
        if (!strcmp(k[i].item->string, k[i + 1].item->string)) cJSON_Delete(cJSON_DetachItemViaPointer(o, k[i].item));
    free(k);
    return 0;
}

int json_parse_strict(cJSON **out, const char *text, size_t len, const char *what, int last_wins, char *err,
                      size_t errlen) {
    *out = NULL;
    if (lex(text, len, what, err, errlen)) return -1;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        long at = end && end >= text && end <= text + len ? (long)(end - text) : 0L;
        return errf(err, errlen, "%s: not valid JSON (near byte %ld)", what, at);
    }
    size_t i = (size_t)(end - text);
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    if (i < len) {
        cJSON_Delete(j);
        return errf(err, errlen, "%s: unexpected data after the JSON value at byte %zu", what, i);
    }
    if (last_wins && last_key_wins(j)) {
        cJSON_Delete(j);
        return errf(err, errlen, "%s: out of memory", what);
    }
    *out = j;
    return 0;
}
