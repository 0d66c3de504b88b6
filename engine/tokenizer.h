/* tokenizer.h — HF tokenizer.json byte-level BPE, as HF `tokenizers` does it:
 * added/special tokens matched first (longest match, in text order), then
 * the pre-tokenizer regex (PCRE2, UTF + Unicode properties) splits the rest,
 * each piece is mapped bytes → GPT-2 byte-to-unicode chars and merged by rank.
 * Loads Qwen2/Qwen3 and Llama-3 tokenizer.json files.
 * Invalid UTF-8 in the input is replaced by U+FFFD per maximal invalid
 * subsequence (as Python's bytes.decode(errors="replace") does) before
 * encoding. The tokenizer is read-only after load; share it freely. */
#ifndef SPECBED_TOKENIZER_H
#define SPECBED_TOKENIZER_H
#include <stddef.h>

typedef struct tokenizer tokenizer;

int  tok_load(tokenizer **out, const char *path, char *err, size_t errlen);
void tok_free(tokenizer *t);

int  tok_vocab_size(const tokenizer *t);     /* highest id + 1, added tokens included */
int  tok_id(const tokenizer *t, const char *piece); /* id of a vocab/added token string, -1 if none */
int  tok_is_special(const tokenizer *t, int id);

/* Encodes text[len] (special tokens recognised) as HF encode(text,
 * add_special_tokens=False) does: the post-processor is not applied, so no
 * BOS/EOS is added (Llama-3 callers add <|begin_of_text|> themselves).
 * *ids is malloc'd (also when *n_ids is 0); caller frees. */
int  tok_encode(const tokenizer *t, const char *text, size_t len, int **ids, int *n_ids,
                char *err, size_t errlen);

/* Raw bytes of one token (special tokens give their text). NULL if id invalid. */
const char *tok_bytes(const tokenizer *t, int id, size_t *len);

/* Decodes ids to a malloc'd NUL-terminated string (caller frees); invalid
 * UTF-8 sequences become U+FFFD as HF decode does. */
int  tok_decode(const tokenizer *t, const int *ids, int n_ids, char **out, size_t *len,
                char *err, size_t errlen);

/* Streaming decode: bytes of an incomplete UTF-8 sequence are held back until
 * the tokens that complete it arrive. Start from a zeroed tok_stream. Returns
 * bytes written to out; cap >= 3 * (the token's length + 3) always suffices
 * (64 + the length does for any token of up to 27 bytes); with less, output
 * stops short of cap. An invalid id writes nothing. tok_stream_flush emits
 * what is held (as one U+FFFD). */
typedef struct { unsigned char held[8]; int n_held; } tok_stream;
size_t tok_stream_put(const tokenizer *t, tok_stream *s, int id, char *out, size_t cap);
size_t tok_stream_flush(tok_stream *s, char *out, size_t cap);

#endif
