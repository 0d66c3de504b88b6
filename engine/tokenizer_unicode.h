/* tokenizer_unicode.h — private to the tokenizer (engine/tokenizer*.c):
 * UTF-8 validation with U+FFFD replacement, Unicode NFC, the White_Space
 * predicate, and the GPT-2 byte<->unicode map. Nothing here allocates except
 * the functions that say they return malloc'd memory. */
#ifndef SPECBED_TOKENIZER_UNICODE_H
#define SPECBED_TOKENIZER_UNICODE_H
#include <stddef.h>
#include <stdint.h>

/* Generated tables (tokenizer_unicode_data.c), taken from what HF
 * `tokenizers` does: its NFC uses Unicode 9.0 data, its regex engine
 * (Oniguruma) Unicode 16.0, while PCRE2 10.42 has Unicode 14.0. */
typedef struct { uint32_t lo, hi; uint8_t ccc; } tku_ccc_range;   /* hi inclusive */
typedef struct { uint32_t cp; uint16_t off; uint8_t len; } tku_decomp; /* into tku_decomp_pool */
typedef struct { uint32_t a, b, c; } tku_comp;                      /* a + b -> c, sorted by (a, b) */
typedef struct { uint32_t lo, hi; } tku_range;                      /* hi inclusive */
extern const tku_range tku_extra_L[], tku_extra_N[];                /* in HF's \p{L} / \p{N}, not PCRE2's */
extern const int tku_extra_L_count, tku_extra_N_count;
extern const tku_ccc_range tku_ccc_table[];
extern const int tku_ccc_count;
extern const uint32_t tku_decomp_pool[];
extern const tku_decomp tku_decomp_table[];
extern const int tku_decomp_count;
extern const tku_comp tku_comp_table[];
extern const int tku_comp_count;

/* Length of the valid UTF-8 sequence starting at s[0] (1..4), or 0 if s[0..n)
 * does not start with one. *cp gets the code point when valid. */
int tku_utf8_next(const unsigned char *s, size_t n, uint32_t *cp);

/* Length of the maximal subpart of an ill-formed sequence at s[0] (Unicode
 * §3.9, the unit that becomes one U+FFFD in Python's and Rust's lossy decode).
 * Call only where tku_utf8_next returned 0. Always >= 1. */
size_t tku_utf8_invalid_len(const unsigned char *s, size_t n);

/* 1 if s[0..n) is a proper prefix of some valid UTF-8 sequence (a sequence
 * that more bytes could complete). */
int tku_utf8_incomplete(const unsigned char *s, size_t n);

/* Lossy UTF-8: returns s[0..n) with each maximal invalid subpart replaced by
 * U+FFFD, malloc'd and NUL-terminated (caller frees), or NULL when s is
 * already valid (then *out_len is n) or allocation failed (*out_len = 0). */
char *tku_utf8_lossy(const char *s, size_t n, size_t *out_len);

/* Encodes cp as UTF-8 into out (4 bytes room); returns the length. */
int tku_utf8_put(uint32_t cp, char *out);

/* Unicode White_Space (what Rust's char::is_whitespace tests). */
int tku_is_whitespace(uint32_t cp);

/* NFC of valid UTF-8 s[0..n). Returns NULL with *out_len = n when s is
 * already NFC by the quick check; else a malloc'd NUL-terminated string the
 * caller frees (NULL with *out_len = 0 on allocation failure: check it). */
char *tku_nfc(const char *s, size_t n, size_t *out_len);

/* Rewrites a tokenizer.json regex so PCRE2 matches what HF's Oniguruma
 * matches: \s and \S become the Unicode White_Space set (PCRE2 also counts
 * U+180E), \p{L} and \p{N} gain the code points assigned after PCRE2's
 * Unicode version (tku_extra_*). Other constructs are copied unchanged.
 * Returns a malloc'd NUL-terminated pattern (caller frees), NULL if out of
 * memory. */
char *tku_regex_patch(const char *pat, size_t len, size_t *out_len);

/* GPT-2 bytes_to_unicode: byte b is shown as code point tku_byte_to_cp(b);
 * tku_cp_to_byte returns the byte, or -1 for a code point outside the map. */
uint32_t tku_byte_to_cp(unsigned char b);
int tku_cp_to_byte(uint32_t cp);

#endif
