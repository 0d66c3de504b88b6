/* launch_off.c — see launch_off.h. */
#include "launch_off.h"
#include "errmsg.h"
#include <ctype.h>
#include <stdio.h>
#include <string.h>

/* Flags that make a server speculate, with how many values each takes.
 * Sources: specbed tools/cli_serve.c; vLLM's --speculative-config
 * (vllm/engine/arg_utils.py) and its pre-V1 flags; llama.cpp
 * common/arg.cpp (the speculative examples' options). SGLang's are every
 * --speculative-* flag (python/sglang/srt/server_args.py), matched by
 * prefix below. */
static const struct { const char *flag; int n_val; } SPEC_FLAGS[] = {
    /* specbed serve */
    {"--drafter", 1}, {"--depth", 1}, {"--draft-model", 1}, {"--ngram-max", 1}, {"--ngram-min", 1},
    {"--ngram-spec-factor", 1}, {"--verify-schedule", 1}, {"--p-min", 1}, {"--adaptive-alpha", 1},
    {"--cost-table", 1}, {"--dspark-final-tap", 1},
    /* vLLM (older releases) */
    {"--num-speculative-tokens", 1}, {"--ngram-prompt-lookup-max", 1}, {"--ngram-prompt-lookup-min", 1},
    {"--spec-decoding-acceptance-method", 1},
    /* llama-server */
    {"-md", 1}, {"--model-draft", 1}, {"--draft-max", 1}, {"--draft", 1}, {"--draft-n", 1}, {"--draft-min", 1},
    {"--draft-n-min", 1}, {"--draft-p-min", 1}, {"-cd", 1}, {"--ctx-size-draft", 1}, {"-devd", 1},
    {"--device-draft", 1}, {"-ngld", 1}, {"--gpu-layers-draft", 1}, {"--n-gpu-layers-draft", 1}, {"-td", 1},
    {"--threads-draft", 1}, {"-tbd", 1}, {"--threads-batch-draft", 1}, {"-ctkd", 1}, {"--cache-type-k-draft", 1},
    {"-ctvd", 1}, {"--cache-type-v-draft", 1}, {"-hfd", 1}, {"-hfrd", 1}, {"--hf-repo-draft", 1},
    {"--spec-type", 1}, {"--spec-draft-n-max", 1}, {"--spec-replace", 2},
};

/* Splits t into words as sh would (quotes, backslashes), recording each
 * word's [start, end) in t. Returns the count, or -1 past max / on an
 * unterminated quote. */
static int split_words(const char *t, int *st, int *en, int max) {
    int n = 0;
    size_t i = 0, L = strlen(t);
    while (i < L) {
        if (isspace((unsigned char)t[i])) { i++; continue; }
        if (t[i] == '\\' && t[i + 1] == '\n') { i += 2; continue; }
        if (n == max) return -1;
        st[n] = (int)i;
        char q = 0;
        while (i < L) {
            char c = t[i];
            if (q == '\'') { if (c == '\'') q = 0; i++; continue; }
            if (q == '"') {
                if (c == '\\' && i + 1 < L) { i += 2; continue; }
                if (c == '"') q = 0;
                i++;
                continue;
            }
            if (c == '\\' && i + 1 < L) { i += 2; continue; }
            if (c == '\'' || c == '"') { q = c; i++; continue; }
            if (isspace((unsigned char)c)) break;
            i++;
        }
        if (q) return -1;
        en[n++] = (int)i;
    }
    return n;
}

static int word_is(const char *t, int s, int e, const char *w) {
    size_t n = strlen(w);
    return (size_t)(e - s) == n && !strncmp(t + s, w, n);
}

/* Values a speculation flag at word [s, e) takes: -1 not such a flag, -2 a
 * "--flag=value" word (takes nothing more), else 1 or 2. */
static int spec_flag(const char *t, int s, int e) {
    const char *eq = memchr(t + s, '=', (size_t)(e - s));
    int fe = eq ? (int)(eq - t) : e;
    for (size_t k = 0; k < sizeof SPEC_FLAGS / sizeof *SPEC_FLAGS; k++)
        if (word_is(t, s, fe, SPEC_FLAGS[k].flag)) return eq ? -2 : SPEC_FLAGS[k].n_val;
    /* SGLang's --speculative-*, llama.cpp's newer --spec-draft-* and every --draft-* */
    static const char *const PREFIX[] = {"--speculative-", "--speculative_", "--spec-draft-", "--draft-"};
    for (size_t k = 0; k < sizeof PREFIX / sizeof *PREFIX; k++) {
        size_t n = strlen(PREFIX[k]);
        if ((size_t)(fe - s) > n && !strncmp(t + s, PREFIX[k], n)) return eq ? -2 : 1;
    }
    return -1;
}

/* A value, not the next flag: does not start with '-', or is a negative number. */
static int is_value(const char *t, int s) {
    return t[s] != '-' || isdigit((unsigned char)t[s + 1]) || t[s + 1] == '.';
}

static void append(char *out, size_t outlen, size_t *o, const char *src, int len, int *overflow) {
    if (*o + (size_t)len + 2 > outlen) { *overflow = 1; return; }
    if (*o) out[(*o)++] = ' ';
    memcpy(out + *o, src, (size_t)len);
    *o += (size_t)len;
    out[*o] = 0;
}

int launch_off_derive(const char *tmpl, char *out, size_t outlen, char *removed, size_t removed_len, char *err,
                      size_t errlen) {
    enum { MAXW = 512 };
    int st[MAXW], en[MAXW];
    int n = split_words(tmpl, st, en, MAXW);
    if (n < 0) return errf(err, errlen, "--launch: unterminated quote or over %d words; give --launch-off CMD", MAXW);
    size_t o = 0, ro = 0;
    int overflow = 0, n_removed = 0;
    if (outlen) out[0] = 0;
    if (removed_len) removed[0] = 0;
    for (int i = 0; i < n; i++) {
        int k = spec_flag(tmpl, st[i], en[i]);
        int drop = k != -1 || word_is(tmpl, st[i], en[i], "{drafter_args}");
        if (!drop) { append(out, outlen, &o, tmpl + st[i], en[i] - st[i], &overflow); continue; }
        n_removed++;
        append(removed, removed_len, &ro, tmpl + st[i], en[i] - st[i], &overflow);
        for (int v = 0; v < k && i + 1 < n && is_value(tmpl, st[i + 1]); v++) {
            i++;
            append(removed, removed_len, &ro, tmpl + st[i], en[i] - st[i], &overflow);
        }
    }
    if (overflow) return errf(err, errlen, "--launch: the derived speculation-off command is too long");
    static const char *const PH[] = {"{depth}", "{drafter}", "{drafter_args}"};
    for (size_t k = 0; k < sizeof PH / sizeof *PH; k++)
        if (strstr(out, PH[k]))
            return errf(err, errlen,
                        "cannot derive the speculation-off launch: after removing the speculation flags "
                        "(specbed's --drafter/--depth, vLLM's --speculative-config, SGLang's --speculative-*, "
                        "llama-server's -md/--draft-*) the command still holds %s: '%s'; give --launch-off CMD",
                        PH[k], out);
    if (!n_removed)
        return errf(err, errlen,
                    "cannot derive the speculation-off launch: --launch has none of the speculation flags this "
                    "sweep knows (specbed's --drafter/--depth, vLLM's --speculative-config, SGLang's "
                    "--speculative-*, llama-server's -md/--draft-*), so it would still speculate; give --launch-off CMD");
    return 0;
}
