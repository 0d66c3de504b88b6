/* json_utf8.c — see json_utf8.h. No I/O. */
#include "json_utf8.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Length of the valid UTF-8 sequence at s (1..4), 0 when s[0] starts none. */
static size_t seq_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t len = c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
    if (!len || len > n) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && s[1] < 0xA0) return 0;   /* overlong */
    if (c == 0xED && s[1] > 0x9F) return 0;   /* a UTF-16 surrogate */
    if (c == 0xF0 && s[1] < 0x90) return 0;   /* overlong */
    if (c == 0xF4 && s[1] > 0x8F) return 0;   /* above U+10FFFF */
    return len;
}

size_t utf8_seq_len(const char *s, size_t n) { return n ? seq_len((const unsigned char *)s, n) : 0; }

size_t utf8_invalid_bytes(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t bad = 0;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(u + i, n - i);
        if (!k) { bad++; k = 1; }
        i += k;
    }
    return bad;
}

char *utf8_fix(const char *s, size_t *n_bad) {
    size_t n = strlen(s), bad = utf8_invalid_bytes(s, n);
    *n_bad = bad;
    char *o = malloc(n + 2 * bad + 1);   /* each bad byte grows to 3 */
    if (!o) return NULL;
    const unsigned char *u = (const unsigned char *)s;
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        size_t k = seq_len(u + i, n - i);
        if (!k) { memcpy(o + w, "\xEF\xBF\xBD", 3); w += 3; i++; continue; }
        memcpy(o + w, s + i, k);
        w += k;
        i += k;
    }
    o[w] = 0;
    return o;
}

/* Fixes every string under j; returns the bytes replaced. Members of an
 * object that were fixed get a "KEY_invalid_utf8" sibling. */
static size_t fix_tree(cJSON *j) {
    size_t total = 0;
    for (cJSON *c = j->child; c; c = c->next) {
        if (c->string && utf8_invalid_bytes(c->string, strlen(c->string))) {
            size_t b;
            char *k = utf8_fix(c->string, &b);
            if (k) {
                if (!(c->type & cJSON_StringIsConst)) free(c->string);
                c->string = k;
                c->type &= ~cJSON_StringIsConst;
                total += b;
            }
        }
        if (cJSON_IsString(c) && c->valuestring && utf8_invalid_bytes(c->valuestring, strlen(c->valuestring))) {
            size_t b;
            char *v = utf8_fix(c->valuestring, &b);
            if (!v || !cJSON_SetValuestring(c, v)) { free(v); continue; }
            free(v);
            total += b;
            if (cJSON_IsObject(j) && c->string) {
                char key[512];
                snprintf(key, sizeof key, "%s_invalid_utf8", c->string);
                cJSON *flag = cJSON_CreateNumber((double)b);
                /* inserted right after c: the walk skips it (a number) */
                if (flag) {
                    flag->string = malloc(strlen(key) + 1);
                    if (flag->string) {
                        strcpy(flag->string, key);
                        flag->next = c->next;
                        flag->prev = c;
                        if (c->next) c->next->prev = flag;
                        else j->child->prev = flag;
                        c->next = flag;
                        c = flag;
                    } else cJSON_Delete(flag);
                }
            }
        }
        if (cJSON_IsObject(c) || cJSON_IsArray(c)) total += fix_tree(c);
    }
    return total;
}

char *json_print_utf8(const cJSON *j, int pretty) {
    char *s = pretty ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    if (!s || !utf8_invalid_bytes(s, strlen(s))) return s;
    free(s);
    cJSON *d = cJSON_Duplicate(j, 1);
    if (!d) return NULL;
    size_t n = fix_tree(d);
    if (cJSON_IsObject(d)) cJSON_AddNumberToObject(d, "invalid_utf8_replaced", (double)n);
    s = pretty ? cJSON_Print(d) : cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    return s;
}
