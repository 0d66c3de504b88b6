/* server_chat.c — ChatML rendering of OpenAI chat messages for
 * Qwen-family tokenizers, exactly the template their tokenizer_config.json
 * carries: "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then
 * "<|im_start|>assistant\n" (add_generation_prompt). Owns the text only;
 * tokenization and the check that the tokenizer has these tokens are the
 * caller's. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "server_internal.h"

typedef struct { char *p; size_t n, cap; int oom; } sbuf;

static void put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void puts_(sbuf *b, const char *s) { put(b, s, strlen(s)); }

static const char *const roles[] = {"system", "developer", "user", "assistant", "tool"};

int srv_render_chatml(const void *messages_json, char **out, size_t *len, const char **param,
                      char *err, size_t errlen) {
    const cJSON *msgs = messages_json;
    *out = NULL;
    *param = "messages";
    if (!cJSON_IsArray(msgs)) return errf(err, errlen, "'messages' must be an array of message objects");
    if (cJSON_GetArraySize(msgs) == 0) return errf(err, errlen, "'messages' must not be empty");
    sbuf b = {0};
    int i = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        const cJSON *content = cJSON_GetObjectItemCaseSensitive(m, "content");
        if (!cJSON_IsObject(m) || !cJSON_IsString(role)) {
            free(b.p);
            return errf(err, errlen, "messages[%d] must be an object with a string 'role'", i);
        }
        int known = 0;
        for (size_t r = 0; r < sizeof roles / sizeof *roles; r++) known |= !strcmp(role->valuestring, roles[r]);
        if (!known) {
            free(b.p);
            return errf(err, errlen, "messages[%d].role '%.64s' is not one of system, developer, user, "
                        "assistant, tool", i, role->valuestring);
        }
        /* developer is OpenAI's newer name for system */
        const char *rname = strcmp(role->valuestring, "developer") ? role->valuestring : "system";
        puts_(&b, "<|im_start|>");
        puts_(&b, rname);
        puts_(&b, "\n");
        if (cJSON_IsString(content)) {
            puts_(&b, content->valuestring);
        } else if (cJSON_IsArray(content)) {
            const cJSON *part;
            int j = 0;
            cJSON_ArrayForEach(part, content) {
                const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
                const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
                if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text)) {
                    free(b.p);
                    return errf(err, errlen, "messages[%d].content[%d]: only {\"type\": \"text\", \"text\": "
                                "...} parts are supported", i, j);
                }
                puts_(&b, text->valuestring);
                j++;
            }
        } else {
            free(b.p);
            return errf(err, errlen, "messages[%d].content must be a string or an array of text parts", i);
        }
        puts_(&b, "<|im_end|>\n");
        i++;
    }
    puts_(&b, "<|im_start|>assistant\n");
    if (b.oom) {
        free(b.p);
        return errf(err, errlen, "out of memory");
    }
    *out = b.p;
    *len = b.n;
    *param = NULL;
    return 0;
}
