/* server_text.c — byte-level text helpers for the server: UTF-8 validation
 * (request bodies must be UTF-8), character counting (OpenAI text offsets
 * are in characters) and token strings for logprobs. (Stop strings are
 * stop_match.c's.) Pure functions; no server state. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "server_internal.h"

/* RFC 3629: no overlongs, no surrogates, nothing above U+10FFFF. */
int srv_utf8_valid(const char *str, size_t n) {
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        int len;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c == 0xE0) { len = 3; lo = 0xA0; }
        else if (c == 0xED) { len = 3; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) len = 3;
        else if (c == 0xF0) { len = 4; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) len = 4;
        else if (c == 0xF4) { len = 4; hi = 0x8F; }
        else return 0;
        if (i + (size_t)len > n) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return 0;
        i += (size_t)len;
    }
    return 1;
}

size_t srv_utf8_chars(const char *str, size_t n) {
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += ((unsigned char)str[i] & 0xC0) != 0x80;
    return c;
}

/* JSON-escapes the bytes as cJSON does (quote, backslash, control
 * characters; other bytes as they are: the text is UTF-8), but by length,
 * so that a NUL becomes \u0000 instead of the end of the text, and hands
 * the result to cJSON as a raw value. */
cJSON *srv_json_text(const char *s, size_t n) {
    char *out = malloc(n * 6 + 3);   /* worst case: every byte \u00XX */
    if (!out) return NULL;
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default: break;
        }
        if (esc) { memcpy(out + o, esc, 2); o += 2; }
        else if (c < 0x20) o += (size_t)snprintf(out + o, 7, "\\u%04x", c);
        else out[o++] = (char)c;
    }
    out[o++] = '"';
    out[o] = 0;
    cJSON *j = cJSON_CreateRaw(out);
    free(out);
    return j;
}

void srv_token_str(const tokenizer *t, int id, char *buf, size_t cap) {
    size_t len = 0;
    const char *b = tok_bytes(t, id, &len);
    if (!cap) return;
    buf[0] = 0;
    if (!b) return;
    if (srv_utf8_valid(b, len) && memchr(b, 0, len) == NULL) {
        size_t n = len < cap - 1 ? len : cap - 1;
        memcpy(buf, b, n);
        buf[n] = 0;
        return;
    }
    /* a piece of a multi-byte character: name its bytes as OpenAI does */
    size_t o = (size_t)snprintf(buf, cap, "bytes:");
    for (size_t i = 0; i < len && o + 5 < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", (unsigned char)b[i]);
}

