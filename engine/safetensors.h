/* safetensors.h — read-only access to HF safetensors checkpoints.
 * Each file is read once into read-only anonymous memory (not mmapped: a
 * checkpoint rewritten in place must not change or SIGBUS a running server;
 * safetensors.c says why and what it costs); tensor data pointers point into
 * it and stay valid until st_close(). A checkpoint is one
 * `model.safetensors` or the shards listed by `model.safetensors.index.json`.
 * Headers are validated before anything is returned: JSON shape, dtypes
 * (F32, BF16, F16 accepted), offsets in range, sizes = product(shape) × dtype
 * size, and no two tensors overlapping. */
#ifndef SPECBED_SAFETENSORS_H
#define SPECBED_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>
#include "backend.h"

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;              /* owned by the st_model */
    kb_dtype dt;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;              /* points into the file's copy in memory */
    size_t nbytes;
    const char *file;              /* path of the shard holding it */
} st_tensor;

typedef struct st_model st_model;

/* Opens dir/model.safetensors.index.json if present, else dir/model.safetensors. */
int st_open_dir(st_model **out, const char *dir, char *err, size_t errlen);
/* Opens one .safetensors file. */
int st_open_file(st_model **out, const char *path, char *err, size_t errlen);
void st_close(st_model *m);

const st_tensor *st_find(const st_model *m, const char *name);   /* NULL if absent */
int st_count(const st_model *m);
const st_tensor *st_at(const st_model *m, int i);
/* The file (or, for a sharded checkpoint, the first shard) the model was
 * opened from, for messages; NULL if none. */
const char *st_source(const st_model *m);

#endif
