/* workload.c — see workload.h. Reads files and JSON; knows nothing of HTTP. */
#include "workload.h"
#include "errmsg.h"
#include "file.h"
#include "input_file.h"
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int exists(const char *p) { return access(p, R_OK) == 0; }

int workload_resolve(const char *s, char *out, size_t outlen) {
    size_t n = strlen(s);
    int bare = !strchr(s, '/') && !(n > 6 && !strcmp(s + n - 6, ".jsonl"));
    if (!bare) {
        snprintf(out, outlen, "%s", s);
        return exists(out) ? 0 : -1;
    }
    snprintf(out, outlen, "workloads/%s.jsonl", s);
    if (exists(out)) return 0;
    char exe[PATH_MAX];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *sl = strrchr(exe, '/');
        if (sl) *sl = 0;
        const char *ups[3] = {"..", "../..", "."};
        for (int i = 0; i < 3; i++) {
            snprintf(out, outlen, "%s/%s/workloads/%s.jsonl", exe, ups[i], s);
            if (exists(out)) return 0;
        }
    }
    snprintf(out, outlen, "workloads/%s.jsonl", s);
    return -1;
}

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *r = malloc(n + 1);
    if (r) memcpy(r, s, n + 1);
    return r;
}

static void item_free(wl_item *it) {
    free(it->id); free(it->category); free(it->prompt); free(it->expected);
}

void workload_free(workload *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) item_free(&w->items[i]);
    free(w->items);
    free(w->name);
    free(w->path);
    free(w);
}

/* Fills it from one JSON object; 0 ok, -1 with a message. */
static int parse_item(const cJSON *o, const char *name, int line, wl_item *it, char *err, size_t errlen) {
    memset(it, 0, sizeof *it);
    it->n_back = -1;
    if (!cJSON_IsObject(o)) return errf(err, errlen, "%s:%d: not a JSON object", name, line);
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "turns");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages");
    const char *text = NULL;
    if (cJSON_IsString(p)) { text = p->valuestring; it->n_turns = 1; }
    else if (cJSON_IsArray(t) && cJSON_GetArraySize(t) > 0) {
        const cJSON *t0 = cJSON_GetArrayItem(t, 0);
        if (cJSON_IsObject(t0)) t0 = cJSON_GetObjectItemCaseSensitive(t0, "content");
        if (!cJSON_IsString(t0)) return errf(err, errlen, "%s:%d: \"turns\"[0] is not a string", name, line);
        text = t0->valuestring;
        it->n_turns = cJSON_GetArraySize(t);
    } else if (cJSON_IsArray(m)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, m) {
            const cJSON *role = cJSON_GetObjectItemCaseSensitive(e, "role");
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "content");
            if (cJSON_IsString(role) && !strcmp(role->valuestring, "user") && cJSON_IsString(c)) {
                if (!text) text = c->valuestring;
                it->n_turns++;
            }
        }
        if (!text) return errf(err, errlen, "%s:%d: \"messages\" has no user message with string content", name, line);
    } else
        return errf(err, errlen, "%s:%d: row has no \"prompt\" string, \"turns\" array or \"messages\" array", name, line);
    if (!*text) return errf(err, errlen, "%s:%d: empty prompt", name, line);
    char idbuf[64];
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(o, "id");
    if (!id) id = cJSON_GetObjectItemCaseSensitive(o, "question_id");
    if (cJSON_IsString(id)) snprintf(idbuf, sizeof idbuf, "%s", id->valuestring);
    else if (cJSON_IsNumber(id)) snprintf(idbuf, sizeof idbuf, "%.0f", id->valuedouble);
    else snprintf(idbuf, sizeof idbuf, "%s-%d", name, line);
    const cJSON *cat = cJSON_GetObjectItemCaseSensitive(o, "category");
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(o, "max_tokens");
    if (mt && !(cJSON_IsNumber(mt) && mt->valuedouble >= 1 && mt->valuedouble <= 1e6))
        return errf(err, errlen, "%s:%d: \"max_tokens\" must be a number in 1..1000000", name, line);
    const cJSON *ex = cJSON_GetObjectItemCaseSensitive(o, "expected");
    const cJSON *nb = cJSON_GetObjectItemCaseSensitive(o, "n_back");
    it->id = dup_str(idbuf);
    it->category = dup_str(cJSON_IsString(cat) ? cat->valuestring : "");
    it->prompt = dup_str(text);
    it->expected = cJSON_IsString(ex) ? dup_str(ex->valuestring) : NULL;
    it->max_tokens = mt ? (int)mt->valuedouble : 0;
    it->n_back = cJSON_IsNumber(nb) ? (int)nb->valuedouble : -1;
    if (!it->id || !it->category || !it->prompt || (cJSON_IsString(ex) && !it->expected)) {
        item_free(it);
        return errf(err, errlen, "out of memory");
    }
    return 0;
}

int workload_parse(workload **out, const char *name, const char *text, char *err, size_t errlen) {
    *out = NULL;
    workload *w = calloc(1, sizeof *w);
    if (!w) return errf(err, errlen, "out of memory");
    w->name = dup_str(name);
    int cap = 0, line = 0;
    const char *p = text;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t n = e ? (size_t)(e - p) : strlen(p);
        line++;
        const char *q = p;
        while (q < p + n && (*q == ' ' || *q == '\t' || *q == '\r')) q++;
        if (q < p + n) {
            cJSON *o = cJSON_ParseWithLength(p, n);
            if (!o) { workload_free(w); return errf(err, errlen, "%s:%d: not valid JSON", name, line); }
            if (w->n == cap) {
                cap = cap ? cap * 2 : 64;
                wl_item *ni = realloc(w->items, (size_t)cap * sizeof *ni);
                if (!ni) { cJSON_Delete(o); workload_free(w); return errf(err, errlen, "out of memory"); }
                w->items = ni;
            }
            int r = parse_item(o, name, line, &w->items[w->n], err, errlen);
            cJSON_Delete(o);
            if (r) { workload_free(w); return -1; }
            w->n++;
        }
        p = e ? e + 1 : p + n;
    }
    if (!w->n) { workload_free(w); return errf(err, errlen, "%s: no prompts", name); }
    *out = w;
    return 0;
}

int workload_load(workload **out, const char *s, char *err, size_t errlen) {
    *out = NULL;
    char path[4096];
    if (workload_resolve(s, path, sizeof path))
        return errf(err, errlen, "workload '%s': %s not found (a bare NAME means workloads/NAME.jsonl)", s, path);
    char *buf;
    /* the limit before a byte is read (a regular file's size), and while
     * reading (a pipe): --workload /dev/zero is refused at once */
    if (input_file_check(path, WL_MAX_BYTES, "workload", err, errlen)) return -1;
    if (read_file(path, WL_MAX_BYTES, &buf, NULL, err, errlen)) return -1;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char name[256];
    snprintf(name, sizeof name, "%.200s", base);
    size_t bl = strlen(name);
    if (bl > 6 && !strcmp(name + bl - 6, ".jsonl")) name[bl - 6] = 0;
    workload *w;
    int r = workload_parse(&w, name, buf, err, errlen);
    free(buf);
    if (r) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err ? err : "");
        return errf(err, errlen, "%s (file %s)", tmp, path);
    }
    w->path = dup_str(path);
    *out = w;
    return 0;
}
