/* json_utf8.h — evidence files stay valid JSON and valid UTF-8 whatever a
 * server sends. cJSON copies the bytes of a JSON string as they come
 * (invalid UTF-8 included) and prints them back the same way, so one bad
 * byte from a hostile or corrupted server would make outputs.jsonl,
 * reference.jsonl or canary.json unreadable to a strict parser.
 *
 * The rule (bench/RECORD.md): every byte that does not begin a valid UTF-8
 * sequence (stray continuation bytes, truncated or overlong sequences,
 * encoded surrogates, code points above U+10FFFF) is replaced by U+FFFD,
 * one per byte; the string's object gets a sibling "KEY_invalid_utf8": N
 * (bytes replaced in that member), and the document's top-level object
 * "invalid_utf8_replaced": N (in all of it, keys and array items included).
 * Text that was valid is left byte for byte as it was, so U+FFFD the
 * server itself sent is not flagged. The live content checks read the raw
 * bytes before any of this (an invalid byte is a bad character there). */
#ifndef SPECBED_BENCH_JSON_UTF8_H
#define SPECBED_BENCH_JSON_UTF8_H
#include <stddef.h>
#include <cjson/cJSON.h>

/* Length of the valid UTF-8 sequence at s (1..4; n bytes left), 0 when s[0] begins none. */
size_t utf8_seq_len(const char *s, size_t n);
/* Bytes of s (n of them) that are not valid UTF-8. */
size_t utf8_invalid_bytes(const char *s, size_t n);
/* A copy of s with each invalid byte replaced by U+FFFD (caller frees);
 * *n_bad = bytes replaced. NULL when out of memory. */
char *utf8_fix(const char *s, size_t *n_bad);
/* cJSON_Print (pretty) or cJSON_PrintUnformatted of j, valid UTF-8 by the
 * rule above (j itself is not changed; a copy is fixed when needed).
 * Caller frees; NULL when out of memory. */
char *json_print_utf8(const cJSON *j, int pretty);
#endif
