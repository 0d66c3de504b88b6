/* label: unit */
/* test_json_strict.c — common/json_strict.c reads JSON as Python's json
 * does (HF transformers reads config.json with it) or refuses it by name:
 * trailing data, non-RFC-8259 numbers, NUL (raw or \u0000) and duplicate
 * keys (the last wins) — each accepted or misread by cJSON alone. */
#include <stdlib.h>
#include <string.h>
#include "json_strict.h"
#include "test_util.h"

static void bad(const char *text, size_t len, const char *needle) {
    cJSON *j = NULL;
    char err[256] = "";
    int rc = json_parse_strict(&j, text, len, "in", 1, err, sizeof err);
    CHECKF(rc == -1 && !j && strstr(err, needle) && !strncmp(err, "in: ", 4), "'%.40s': rc %d, \"%s\"", text, rc, err);
    cJSON_Delete(j);
}

static cJSON *good(const char *text) {
    cJSON *j = NULL;
    char err[256] = "";
    CHECKF(!json_parse_strict(&j, text, strlen(text), "in", 1, err, sizeof err) && j, "'%s': %s", text, err);
    return j;
}

int main(void) {
    /* accepted as Python accepts them */
    const char *ok[] = {"0", "-0", "1.5", "1e5", "1E+5", "-2.5e-3", "[1, 20, 300]", "{\"a\": \"01\"}",
                        "{\"k\": \"\\\\u0000\"}", "  {\"a\": 1}  \n", "\"x\\\"y\"", "{\"n\": 10}"};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) cJSON_Delete(good(ok[i]));
    /* refused */
    bad("{\"a\": 1} x", 10, "after the JSON value");
    bad("{\"a\": 1}{}", 10, "after the JSON value");
    bad("01", 2, "malformed number");
    bad("[1.]", 4, "malformed number");
    bad("[.5]", 4, "malformed number");
    bad("[+1]", 4, "malformed number");
    bad("{\"a\": 1e}", 9, "malformed number");
    bad("{\"a\": \"ab\\u0000cd\"}", 19, "NUL");
    bad("{\"a\\u0000\": 1}", 14, "NUL");
    bad("{\"a\": \"ab\0cd\"}", 14, "NUL byte");
    bad("{\"a\": 1", 7, "not valid JSON");
    /* duplicate keys: the last wins, at every depth */
    cJSON *j = good("{\"a\": 1, \"b\": {\"c\": 1, \"c\": 2}, \"a\": 3}");
    CHECK(cJSON_GetArraySize(j) == 2 && cJSON_GetObjectItem(j, "a")->valueint == 3);
    const cJSON *b = cJSON_GetObjectItem(j, "b");
    CHECK(cJSON_GetArraySize(b) == 1 && cJSON_GetObjectItem(b, "c")->valueint == 2);
    cJSON_Delete(j);
    /* a hostile object of 10^5 keys, all alike, resolves in n log n */
    size_t n = 100000, cap = n * 12 + 16, k = 0;
    char *big = malloc(cap);
    big[k++] = '{';
    for (size_t i = 0; i < n; i++) k += (size_t)snprintf(big + k, cap - k, "%s\"x\": %zu", i ? ", " : "", i);
    big[k++] = '}';
    big[k] = 0;
    j = good(big);
    CHECK(cJSON_GetArraySize(j) == 1 && cJSON_GetObjectItem(j, "x")->valuedouble == (double)(n - 1));
    cJSON_Delete(j);
    free(big);
    return tu_done("test_json_strict");
}
