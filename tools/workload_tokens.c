/* workload_tokens.c — a workload's prompts encoded (workload_tokens.h). */
#include "workload_tokens.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "errmsg.h"
#include "workload.h"

void wl_tokens_free(wl_tokens *t) {
    for (int i = 0; i < t->count; i++) free(t->ids[i]);
    free(t->ids);
    free(t->n);
    memset(t, 0, sizeof *t);
}

int wl_tokens_load(wl_tokens *t, const char *name_or_path, const tokenizer *tok, int max, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    workload *w;
    if (workload_load(&w, name_or_path, err, errlen)) return -1;
    snprintf(t->name, sizeof t->name, "%s", w->name);
    const int want = max > 0 && max < w->n ? max : w->n;
    t->ids = calloc((size_t)want + 1, sizeof *t->ids);
    t->n = calloc((size_t)want + 1, sizeof *t->n);
    if (!t->ids || !t->n) {
        workload_free(w);
        wl_tokens_free(t);
        return errf(err, errlen, "%s: out of memory", name_or_path);
    }
    for (int i = 0; i < w->n && t->count < want; i++) {
        const char *p = w->items[i].prompt;
        char why[256];
        int *ids = NULL, n = 0;
        if (tok_encode(tok, p, strlen(p), &ids, &n, why, sizeof why)) {
            errf(err, errlen, "%s: prompt %s: %s", w->path, w->items[i].id, why);
            workload_free(w);
            wl_tokens_free(t);
            return -1;
        }
        if (n == 0) { free(ids); continue; }
        t->ids[t->count] = ids;
        t->n[t->count++] = n;
        t->total += n;
    }
    if (!t->count) errf(err, errlen, "%s: no non-empty prompt", w->path);
    workload_free(w);
    if (!t->count) { wl_tokens_free(t); return -1; }
    return 0;
}

int wl_tokens_stream(const wl_tokens *t, int want, int *dst, char *err, size_t errlen) {
    if (t->total < want)
        return errf(err, errlen, "workload %s holds %ld prompt tokens; this measurement needs %d (fewer sequences "
                    "or a shorter history, or a bigger workload)", t->name, t->total, want);
    for (int i = 0, k = 0; k < want; i++)
        for (int j = 0; j < t->n[i] && k < want; j++) dst[k++] = t->ids[i][j];
    return 0;
}
