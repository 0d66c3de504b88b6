/* json_strict.h — cJSON with the checks it leaves out, so specbed reads a
 * JSON text the way Python's json (and so HF transformers, vLLM) does, or
 * refuses it by name:
 *   - the whole text is one value: trailing bytes after it are an error
 *     (cJSON stops at the end of the first value);
 *   - numbers follow RFC 8259 (cJSON's strtod also takes "01", "1.", "+1");
 *   - no NUL, raw or as \u0000 (cJSON's C strings would end there, so
 *     "ab\u0000cd" would silently become "ab");
 *   - duplicate keys in an object: the LAST one wins, as in Python
 *     (cJSON's lookup finds the first), when last_key_wins is set.
 * `what` names the input in messages ("config.json", "the request body"). */
#ifndef SPECBED_JSON_STRICT_H
#define SPECBED_JSON_STRICT_H
#include <stddef.h>
#include <cjson/cJSON.h>
/* *out: the parsed value (cJSON_Delete). 0 ok, -1 with a message. */
int json_parse_strict(cJSON **out, const char *text, size_t len, const char *what, int last_key_wins, char *err,
                      size_t errlen);
#endif
