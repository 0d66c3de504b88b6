/* draft_vocab.c — reads a draft-to-target map and gathers heads to it (see
 * draft_vocab.h).
 * Owns: the one-file safetensors read of d2t/t2d (u64 little-endian header
 * length, JSON header, data section; the layout engine/safetensors.c
 * reads, which takes float tensors only) and the gathered head rows.
 * Must not: compute anything (the drafters do), or accept a map that could
 * propose an id twice or outside the vocabulary. */
#include "draft_vocab.h"
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "errmsg.h"
#include "file.h"
#include "json_strict.h"

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* A JSON number that is an exact integer in [0, 2^53]. */
static int json_index(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || v != floor(v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* Header entry `name` as a 1-D tensor of dtype `dtype` and `elem`-byte
 * elements: its length in *len and its bytes at *data. */
static int tensor_1d(const cJSON *e, const char *name, const char *dtype, size_t elem, const unsigned char *base,
                     size_t dsize, uint64_t *len, const unsigned char **data, const char *path, char *err, size_t el) {
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsObject(e) || !cJSON_IsString(dt) || !cJSON_IsArray(sh) || !cJSON_IsArray(off))
        return errf(err, el, "%s: tensor '%s' needs \"dtype\", \"shape\" and \"data_offsets\"", path, name);
    if (strcmp(dt->valuestring, dtype))
        return errf(err, el, "%s: tensor '%s' has dtype %s; it must be %s (as EAGLE-3 stores it)", path, name,
                    dt->valuestring, dtype);
    uint64_t b, end;
    if (cJSON_GetArraySize(sh) != 1 || json_index(sh->child, len))
        return errf(err, el, "%s: tensor '%s' must be 1-D ([N] for d2t, [vocab] for t2d)", path, name);
    if (cJSON_GetArraySize(off) != 2 || json_index(off->child, &b) || json_index(off->child->next, &end) || b > end ||
        end > dsize || end - b != *len * elem)
        return errf(err, el, "%s: tensor '%s': data_offsets do not hold %llu elements inside the file", path, name,
                    (unsigned long long)*len);
    *data = base + b;
    return 0;
}

/* The map in buf[n] (the whole file). */
static int parse(draft_vocab *dv, const unsigned char *buf, size_t n, char *err, size_t el) {
    const char *path = dv->path;
    const int V = dv->vocab;
    if (n < 8) return errf(err, el, "%s: truncated (no safetensors header length)", path);
    uint64_t hlen = le64(buf);
    if (hlen > n - 8) return errf(err, el, "%s: header length %llu exceeds the file", path, (unsigned long long)hlen);
    cJSON *root;
    if (json_parse_strict(&root, (const char *)buf + 8, (size_t)hlen, path, 0, err, el)) return -1;
    const unsigned char *base = buf + 8 + hlen;
    size_t dsize = n - 8 - (size_t)hlen;
    const cJSON *jd = NULL, *jt = NULL;
    int rc = 0;
    unsigned char *seen = NULL;
    if (!cJSON_IsObject(root)) { rc = errf(err, el, "%s: the header is not a JSON object", path); goto done; }
    for (const cJSON *e = root->child; e; e = e->next) {
        const cJSON **slot = !strcmp(e->string, "d2t") ? &jd : !strcmp(e->string, "t2d") ? &jt : NULL;
        if (!slot) continue;   /* __metadata__ and anything else: not ours */
        if (*slot) { rc = errf(err, el, "%s: tensor '%s' appears twice in the header", path, e->string); goto done; }
        *slot = e;
    }
    if (!jd) { rc = errf(err, el, "%s: no tensor 'd2t' (the draft-to-target map)", path); goto done; }
    uint64_t N;
    const unsigned char *d;
    if ((rc = tensor_1d(jd, "d2t", "I64", 8, base, dsize, &N, &d, path, err, el))) goto done;
    if (N < 1 || N > (uint64_t)V) {
        rc = errf(err, el, "%s: d2t has %llu entries; a draft vocabulary has 1..%d (the target's vocabulary)", path,
                  (unsigned long long)N, V);
        goto done;
    }
    dv->d2t = malloc(sizeof(int) * (size_t)N);
    seen = calloc((size_t)V, 1);
    if (!dv->d2t || !seen) { rc = errf(err, el, "%s: out of memory", path); goto done; }
    for (uint64_t i = 0; i < N; i++) {
        int64_t t = (int64_t)i + (int64_t)le64(d + 8 * i);   /* EAGLE-3: target = draft + d2t[draft] */
        if (t < 0 || t >= V) {
            rc = errf(err, el, "%s: d2t[%llu] = %lld maps draft id %llu to target id %lld, outside [0, %d)", path,
                      (unsigned long long)i, (long long)(t - (int64_t)i), (unsigned long long)i, (long long)t, V);
            goto done;
        }
        if (seen[t]) {
            rc = errf(err, el, "%s: d2t maps two draft ids to target id %lld (draft id %llu is the second)", path,
                      (long long)t, (unsigned long long)i);
            goto done;
        }
        seen[t] = 1;
        dv->d2t[i] = (int)t;
    }
    if (jt) {
        uint64_t nt;
        const unsigned char *tb;
        if ((rc = tensor_1d(jt, "t2d", "BOOL", 1, base, dsize, &nt, &tb, path, err, el))) goto done;
        if (nt != (uint64_t)V) {
            rc = errf(err, el, "%s: t2d has %llu entries, the target's vocabulary %d", path, (unsigned long long)nt, V);
            goto done;
        }
        for (int v = 0; v < V; v++) {
            if (tb[v] > 1) { rc = errf(err, el, "%s: t2d[%d] = %d is not a bool", path, v, tb[v]); goto done; }
            if (tb[v] != seen[v]) {
                rc = errf(err, el, "%s: t2d[%d] = %d but d2t %s target id %d", path, v, tb[v],
                          seen[v] ? "maps a draft id to" : "has no draft id for", v);
                goto done;
            }
        }
    }
    dv->n = (int)N;
done:
    free(seen);
    cJSON_Delete(root);
    return rc;
}

int draft_vocab_load(draft_vocab *dv, const char *dir, int vocab, char *err, size_t el) {
    memset(dv, 0, sizeof *dv);
    dv->vocab = vocab;
    snprintf(dv->path, sizeof dv->path, "%s/%s", dir, DRAFT_VOCAB_FILE);
    if (access(dv->path, F_OK) != 0) return 0;
    char *buf;
    size_t n;
    /* 9 bytes per target id at most (an I64 offset and a BOOL), plus a header */
    if (read_file(dv->path, (size_t)vocab * 9 + (1u << 20), &buf, &n, err, el)) return -1;
    int rc = parse(dv, (const unsigned char *)buf, n, err, el);
    free(buf);
    if (rc) {
        free(dv->d2t);
        dv->d2t = NULL;
        dv->n = 0;
    }
    return rc ? -1 : 0;
}

void draft_vocab_free(draft_vocab *dv) {
    if (!dv) return;
    for (int i = 0; i < dv->n_gathered; i++) {
        kb_weight_release(&dv->gathered[i]);   /* the device copy (cuda only) */
        free(dv->gathered_host[i]);
    }
    free(dv->gathered);
    free(dv->gathered_src);
    free(dv->gathered_host);
    free(dv->d2t);
    memset(dv, 0, sizeof *dv);
}

int draft_vocab_gather(draft_vocab *dv, kb_weight *out, const kb_weight *full, const char *what, char *err,
                       size_t el) {
    for (int i = 0; i < dv->n_gathered; i++)
        if (dv->gathered_src[i] == full->data) { *out = dv->gathered[i]; return 0; }
    if (full->rows != dv->vocab)
        return errf(err, el, "%s: %s has %d rows; gathering the draft vocabulary needs one per target id (%d)",
                    dv->path, what, full->rows, dv->vocab);
    size_t row = (size_t)full->cols * kb_dtype_size(full->dt);
    kb_weight *g = realloc(dv->gathered, sizeof *g * (size_t)(dv->n_gathered + 1));
    if (g) dv->gathered = g;
    const void **src = realloc(dv->gathered_src, sizeof *src * (size_t)(dv->n_gathered + 1));
    if (src) dv->gathered_src = src;
    void **host = realloc(dv->gathered_host, sizeof *host * (size_t)(dv->n_gathered + 1));
    if (host) dv->gathered_host = host;
    unsigned char *rows = malloc(row * (size_t)dv->n);
    if (!g || !src || !host || !rows) {
        free(rows);
        return errf(err, el, "%s: out of memory gathering %s", dv->path, what);
    }
    /* the source may be device memory (cuda uploads every bound weight) */
    for (int i = 0; i < dv->n; i++)
        kb_copy_to_host(rows + row * (size_t)i, (const unsigned char *)full->data + row * (size_t)dv->d2t[i], row);
    kb_weight w = {.dt = full->dt, .data = rows, .rows = dv->n, .cols = full->cols};
    if (kb_weight_upload(&w, dv, err, el)) { free(rows); return -1; }
    dv->gathered[dv->n_gathered] = w;
    dv->gathered_src[dv->n_gathered] = full->data;
    dv->gathered_host[dv->n_gathered++] = rows;
    *out = w;
    return 0;
}

void draft_vocab_scatter(const draft_vocab *dv, float *row, const float *logits) {
    for (int v = 0; v < dv->vocab; v++) row[v] = -INFINITY;
    for (int i = 0; i < dv->n; i++) row[dv->d2t[i]] = logits[i];
}
