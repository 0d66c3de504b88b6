/* safetensors.c — opens HF safetensors checkpoints (one file or the shards
 * of model.safetensors.index.json) and validates every header before
 * returning anything.
 *
 * Owns: one read-only anonymous mapping per distinct file holding its bytes,
 * the tensor table and the strings in it. Must not: copy tensor data beyond
 * that one read, interpret tensor names (model.c binds names to roles), or
 * know about configs.
 *
 * Why the files are read, not mmapped: a file mapping, MAP_PRIVATE included,
 * shares the file's page cache until a page is written. An operator who
 * rewrites the checkpoint in place (`cp` over it truncates the same inode)
 * then kills the server with SIGBUS at its next forward (pages past the new
 * end), or, when the sizes happen to match, has it silently compute with the
 * new file's bytes. Catching SIGBUS cannot fix the second, and cannot unwind
 * the kernels' worker threads cleanly for the first. Read into the process's
 * own memory, the weights are out of reach of anything done to the file.
 * The cost: the checkpoint counts as the process's memory (anonymous, not
 * reclaimable page cache, not shared with other processes mapping the same
 * file). On the CPU every weight is touched every step, so the resident set
 * is what the mmap reached anyway; ranks of a tensor-parallel run on one
 * machine each hold the whole file; on CUDA the host copy is held beside the
 * device copy until the model is freed. Replacing the file by rename
 * (write elsewhere, mv over) was harmless before and still is.
 *
 * File layout: u64 little-endian header length N, N bytes of JSON, then the
 * data section. The JSON maps tensor name -> {dtype, shape, data_offsets}
 * with offsets relative to the data section; "__metadata__" is skipped.
 *
 * Alignment: the data section starts at 8 + N. The Rust safetensors writer
 * (used by HF save_pretrained and the Python `safetensors` package) pads N to
 * a multiple of 8 with spaces, so data is 8-byte aligned in practice, and
 * tensors inside it are aligned to their element size when written in order.
 * The format does not promise this, so nothing here requires it:
 * st_tensor.data may be unaligned in a hand-made file. model.c checks each
 * tensor it binds is aligned to its element size (the kernels use typed
 * loads) and reports the tensor by name if not. The fixtures written by
 * scripts/goldens/make_fixture.py have 8-byte aligned data sections.
 *
 * Every error path frees what was built so far (st_close handles a partly
 * filled st_model). */
#include "safetensors.h"
#include "errmsg.h"
#include "json_strict.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
    char *path;        /* malloc'd; st_tensor.file points here */
    void *map;         /* MAP_FAILED-free: NULL when size 0 */
    size_t size;
} st_file;

struct st_model {
    st_file *files;
    int n_files, cap_files;
    st_tensor *tensors;  /* sorted by name after open (st_find bsearches) */
    int n_tensors, cap_tensors;
};

/* ---- small helpers ------------------------------------------------------ */

static char *dupstr(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static int dtype_from_name(const char *s, kb_dtype *dt) {
    if (strcmp(s, "F32") == 0)  { *dt = KB_F32;  return 0; }
    if (strcmp(s, "BF16") == 0) { *dt = KB_BF16; return 0; }
    if (strcmp(s, "F16") == 0)  { *dt = KB_F16;  return 0; }
    return -1;
}

/* Element size, kept here so this file does not need the kernels library
 * just to validate a header. */
static size_t dtype_bytes(kb_dtype dt) {
    return dt == KB_F32 ? 4 : 2;
}

/* A JSON number that is an exact non-negative integer (≤ 2^53, the range a
 * double represents exactly). */
static int json_u64(const cJSON *j, uint64_t *out) {
    if (!cJSON_IsNumber(j)) return -1;
    double v = j->valuedouble;
    if (!(v >= 0.0) || v > 9007199254740992.0 || v != floor(v)) return -1;
    *out = (uint64_t)v;
    return 0;
}

static int push_tensor(st_model *m, st_tensor **t) {
    if (m->n_tensors == m->cap_tensors) {
        int cap = m->cap_tensors ? m->cap_tensors * 2 : 64;
        st_tensor *nt = realloc(m->tensors, (size_t)cap * sizeof *nt);
        if (!nt) return -1;
        m->tensors = nt;
        m->cap_tensors = cap;
    }
    *t = &m->tensors[m->n_tensors++];
    memset(*t, 0, sizeof **t);
    return 0;
}

static int cmp_tensor_name(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

typedef struct { uint64_t begin, end; const char *name; } span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : (x->end > y->end);
}

/* ---- one file ------------------------------------------------------------ */

static int map_file(st_file *f, char *err, size_t errlen) {
    int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errf(err, errlen, "%s: cannot open: %s", f->path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return errf(err, errlen, "%s: cannot stat: %s", f->path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return errf(err, errlen, "%s: not a regular file", f->path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return errf(err, errlen, "%s: truncated: %lld bytes, a safetensors file needs at least 8",
                    f->path, (long long)sb.st_size);
    }
    f->size = (size_t)sb.st_size;
    /* Page-aligned anonymous memory, as an mmap of the file was: tensor
     * alignment is the same as before, and st_close still munmaps. */
    void *p = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        close(fd);
        return errf(err, errlen, "%s: cannot allocate %zu bytes for it: %s", f->path, f->size, strerror(e));
    }
    size_t got = 0;
    while (got < f->size) {
        ssize_t k = pread(fd, (char *)p + got, f->size - got, (off_t)got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            int e = errno;
            close(fd);
            munmap(p, f->size);
            return k < 0 ? errf(err, errlen, "%s: read failed at byte %zu: %s", f->path, got, strerror(e))
                         : errf(err, errlen, "%s: shrank to %zu bytes while being read (was %zu)", f->path, got,
                                f->size);
        }
        got += (size_t)k;
    }
    close(fd);
    mprotect(p, f->size, PROT_READ);   /* read-only, as the file mapping was */
    f->map = p;
    return 0;
}

/* Parses one tensor entry of the header into t (name already set). */
static int parse_entry(st_tensor *t, const cJSON *e, const char *path, uint64_t data_size,
                       uint64_t *begin, uint64_t *end, char *err, size_t errlen) {
    const char *name = t->name;
    if (!cJSON_IsObject(e))
        return errf(err, errlen, "%s: tensor '%s': header entry is not a JSON object", path, name);
    const cJSON *jd = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *jo = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(jd))
        return errf(err, errlen, "%s: tensor '%s': missing or non-string \"dtype\"", path, name);
    if (dtype_from_name(jd->valuestring, &t->dt) != 0)
        return errf(err, errlen, "%s: tensor '%s' has dtype %s; supported: F32, BF16, F16",
                    path, name, jd->valuestring);
    if (!cJSON_IsArray(js))
        return errf(err, errlen, "%s: tensor '%s': missing or non-array \"shape\"", path, name);
    int nd = cJSON_GetArraySize(js);
    if (nd > ST_MAX_DIMS)
        return errf(err, errlen, "%s: tensor '%s' has %d dims; at most %d supported",
                    path, name, nd, ST_MAX_DIMS);
    t->ndim = nd;
    uint64_t nelem = 1;
    int i = 0;
    for (const cJSON *d = js->child; d; d = d->next, i++) {
        uint64_t v;
        if (json_u64(d, &v) != 0 || v > (uint64_t)INT64_MAX)
            return errf(err, errlen, "%s: tensor '%s': shape[%d] is not a non-negative integer",
                        path, name, i);
        t->shape[i] = (int64_t)v;
        if (v && nelem > UINT64_MAX / v)
            return errf(err, errlen, "%s: tensor '%s': shape overflows", path, name);
        nelem *= v;
    }
    if (!cJSON_IsArray(jo) || cJSON_GetArraySize(jo) != 2)
        return errf(err, errlen, "%s: tensor '%s': \"data_offsets\" must be [begin, end]", path, name);
    if (json_u64(jo->child, begin) != 0 || json_u64(jo->child->next, end) != 0)
        return errf(err, errlen, "%s: tensor '%s': data_offsets are not non-negative integers",
                    path, name);
    if (*begin > *end)
        return errf(err, errlen, "%s: tensor '%s': data_offsets [%llu, %llu] have begin > end",
                    path, name, (unsigned long long)*begin, (unsigned long long)*end);
    if (*end > data_size)
        return errf(err, errlen, "%s: tensor '%s': data_offsets end %llu is beyond the data section (%llu bytes)",
                    path, name, (unsigned long long)*end, (unsigned long long)data_size);
    size_t es = dtype_bytes(t->dt);
    if (nelem > UINT64_MAX / es || *end - *begin != nelem * es)
        return errf(err, errlen, "%s: tensor '%s' occupies %llu bytes, but shape × %s size is %llu × %zu",
                    path, name, (unsigned long long)(*end - *begin), jd->valuestring,
                    (unsigned long long)nelem, es);
    t->nbytes = (size_t)(*end - *begin);
    return 0;
}

/* Maps path and appends its tensors to m. On error m keeps whatever was
 * appended (st_close frees it). */
static int add_file(st_model *m, const char *path, char *err, size_t errlen) {
    if (m->n_files == m->cap_files) {
        int cap = m->cap_files ? m->cap_files * 2 : 4;
        st_file *nf = realloc(m->files, (size_t)cap * sizeof *nf);
        if (!nf) return errf(err, errlen, "%s: out of memory", path);
        m->files = nf;
        m->cap_files = cap;
    }
    st_file *f = &m->files[m->n_files];
    memset(f, 0, sizeof *f);
    f->path = dupstr(path);
    if (!f->path) return errf(err, errlen, "%s: out of memory", path);
    m->n_files++;
    if (map_file(f, err, errlen) != 0) return -1;

    const unsigned char *b = f->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | b[i];
    if (hlen > f->size - 8)
        return errf(err, errlen, "%s: header length %llu is beyond the end of the file (%zu bytes)",
                    path, (unsigned long long)hlen, f->size);
    const char *hdr = (const char *)b + 8;
    const unsigned char *data = b + 8 + hlen;
    uint64_t data_size = f->size - 8 - hlen;

    cJSON *root;
    char what[4200];
    snprintf(what, sizeof what, "%s: header", path);
    if (json_parse_strict(&root, hdr, (size_t)hlen, what, 0, err, errlen)) return -1;   /* duplicates: refused below */
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return errf(err, errlen, "%s: header is not a JSON object", path);
    }

    int n = 0;
    for (const cJSON *e = root->child; e; e = e->next) n++;
    span *spans = calloc((size_t)n + 1, sizeof *spans);
    if (!spans) { cJSON_Delete(root); return errf(err, errlen, "%s: out of memory", path); }

    int ns = 0, rc = 0;
    for (const cJSON *e = root->child; e && rc == 0; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) continue;
        st_tensor *t;
        if (push_tensor(m, &t) != 0) { rc = errf(err, errlen, "%s: out of memory", path); break; }
        t->name = dupstr(e->string);
        t->file = f->path;
        if (!t->name) { rc = errf(err, errlen, "%s: out of memory", path); break; }
        uint64_t begin = 0, end = 0;
        rc = parse_entry(t, e, path, data_size, &begin, &end, err, errlen);
        if (rc) break;
        t->data = data + begin;
        spans[ns].begin = begin;
        spans[ns].end = end;
        spans[ns].name = t->name;
        ns++;
    }
    /* Overlap: sorted by begin, each tensor must end before the next
     * non-empty one starts. Empty tensors (begin == end) overlap nothing. */
    if (rc == 0 && ns > 0) {
        qsort(spans, (size_t)ns, sizeof *spans, cmp_span);
        const span *prev = NULL;
        for (int i = 0; i < ns && rc == 0; i++) {
            if (spans[i].begin == spans[i].end) continue;
            if (prev && spans[i].begin < prev->end)
                rc = errf(err, errlen, "%s: tensors '%s' [%llu, %llu) and '%s' [%llu, %llu) overlap",
                          path, prev->name, (unsigned long long)prev->begin,
                          (unsigned long long)prev->end, spans[i].name,
                          (unsigned long long)spans[i].begin, (unsigned long long)spans[i].end);
            prev = &spans[i];
        }
    }
    free(spans);
    cJSON_Delete(root);
    return rc;
}

/* Sorts the table by name and rejects duplicates (within one header — cJSON
 * keeps repeated keys — or across shards). */
static int finish(st_model *m, char *err, size_t errlen) {
    if (m->n_tensors == 0) return 0;
    qsort(m->tensors, (size_t)m->n_tensors, sizeof *m->tensors, cmp_tensor_name);
    for (int i = 1; i < m->n_tensors; i++) {
        const st_tensor *a = &m->tensors[i - 1], *b = &m->tensors[i];
        if (strcmp(a->name, b->name) != 0) continue;
        if (a->file == b->file)
            return errf(err, errlen, "%s: tensor '%s' appears twice in the header", a->file, a->name);
        return errf(err, errlen, "tensor '%s' appears twice: in %s and in %s",
                    a->name, a->file, b->file);
    }
    return 0;
}

static st_model *model_new(void) {
    return calloc(1, sizeof(st_model));
}

int st_open_file(st_model **out, const char *path, char *err, size_t errlen) {
    *out = NULL;
    st_model *m = model_new();
    if (!m) return errf(err, errlen, "%s: out of memory", path);
    if (add_file(m, path, err, errlen) != 0 || finish(m, err, errlen) != 0) {
        st_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

/* ---- sharded checkpoints ------------------------------------------------ */

/* Shard names come from a file we did not write: keep them inside dir. */
static int shard_name_ok(const char *s) {
    return s[0] && s[0] != '/' && !strstr(s, "..");
}

static int open_index(st_model *m, const char *dir, const char *ipath, char *err, size_t errlen) {
    int fd = open(ipath, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return errf(err, errlen, "%s: cannot open: %s", ipath, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size > (1 << 28)) {
        close(fd);
        return errf(err, errlen, "%s: not a readable regular file of sane size", ipath);
    }
    size_t n = (size_t)sb.st_size;
    char *txt = malloc(n + 1);
    if (!txt) { close(fd); return errf(err, errlen, "%s: out of memory", ipath); }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, txt + got, n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    if (got != n) { free(txt); return errf(err, errlen, "%s: short read", ipath); }
    txt[n] = 0;
    cJSON *root;
    int jrc = json_parse_strict(&root, txt, n, ipath, 1, err, errlen);
    free(txt);
    if (jrc) return -1;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    int rc = 0;
    if (!cJSON_IsObject(wm)) {
        rc = errf(err, errlen, "%s: missing or non-object \"weight_map\"", ipath);
        goto done;
    }
    /* Open each distinct shard once, in first-mention order. */
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        if (!cJSON_IsString(e) || !shard_name_ok(e->valuestring)) {
            rc = errf(err, errlen, "%s: weight_map['%s'] is not a plain shard file name", ipath, e->string);
            break;
        }
        char p[4096];
        int k = snprintf(p, sizeof p, "%s/%s", dir, e->valuestring);
        if (k < 0 || (size_t)k >= sizeof p) { rc = errf(err, errlen, "%s: shard path too long", ipath); break; }
        int seen = 0;
        for (int i = 0; i < m->n_files && !seen; i++) seen = strcmp(m->files[i].path, p) == 0;
        if (!seen) rc = add_file(m, p, err, errlen);
    }
    if (rc == 0) rc = finish(m, err, errlen);
    /* Every tensor the index lists must be in the shard it names. */
    for (const cJSON *e = wm->child; e && rc == 0; e = e->next) {
        const st_tensor *t = st_find(m, e->string);
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", dir, e->valuestring);
        if (!t)
            rc = errf(err, errlen, "%s: tensor '%s' is listed in weight_map but absent from %s",
                      ipath, e->string, p);
        else if (strcmp(t->file, p) != 0)
            rc = errf(err, errlen, "%s: tensor '%s' is listed in %s but found in %s",
                      ipath, e->string, p, t->file);
    }
done:
    cJSON_Delete(root);
    return rc;
}

int st_open_dir(st_model **out, const char *dir, char *err, size_t errlen) {
    *out = NULL;
    char p[4096];
    int k = snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    if (k < 0 || (size_t)k >= sizeof p) return errf(err, errlen, "%s: path too long", dir);
    if (access(p, F_OK) != 0) {
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        if (access(p, F_OK) != 0)
            return errf(err, errlen, "%s: neither model.safetensors nor model.safetensors.index.json found", dir);
        return st_open_file(out, p, err, errlen);
    }
    st_model *m = model_new();
    if (!m) return errf(err, errlen, "%s: out of memory", dir);
    if (open_index(m, dir, p, err, errlen) != 0) {
        st_close(m);
        return -1;
    }
    *out = m;
    return 0;
}

void st_close(st_model *m) {
    if (!m) return;
    for (int i = 0; i < m->n_tensors; i++) free((char *)m->tensors[i].name);
    free(m->tensors);
    for (int i = 0; i < m->n_files; i++) {
        if (m->files[i].map) munmap(m->files[i].map, m->files[i].size);
        free(m->files[i].path);
    }
    free(m->files);
    free(m);
}

const st_tensor *st_find(const st_model *m, const char *name) {
    if (m->n_tensors == 0) return NULL;
    st_tensor key;
    key.name = name;
    return bsearch(&key, m->tensors, (size_t)m->n_tensors, sizeof *m->tensors, cmp_tensor_name);
}

int st_count(const st_model *m) { return m->n_tensors; }
const char *st_source(const st_model *m) { return m->n_files ? m->files[0].path : NULL; }

const st_tensor *st_at(const st_model *m, int i) {
    return (i >= 0 && i < m->n_tensors) ? &m->tensors[i] : NULL;
}
