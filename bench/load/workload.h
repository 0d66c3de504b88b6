/* workload.h — prompt suites from JSONL: one request per line,
 * {"prompt": "..."} (completion) or {"turns": ["...", ...]} (Spec-Bench,
 * MT-Bench, DeepSpec eval sets) or {"messages": [{"role","content"}...]},
 * with optional "id" (or "question_id"), "category", "max_tokens", and the
 * copy suite's "expected" / "n_back". Multi-turn rows send their first turn
 * (as vLLM's benchmark does); the other turns are counted, not replayed.
 *
 * A bare NAME (no '/', no ".jsonl") means workloads/NAME.jsonl, looked up
 * in ./workloads, then next to the executable (../workloads, ../../workloads). */
#ifndef SPECBED_BENCH_WORKLOAD_H
#define SPECBED_BENCH_WORKLOAD_H
#include <stddef.h>

typedef struct {
    char *id;          /* the row's id, or "<name>-<line>" */
    char *category;    /* "" when absent */
    char *prompt;      /* text sent: the prompt, or the first turn / first user message */
    int n_turns;       /* 1 for prompt rows */
    int max_tokens;    /* 0 = not given */
    char *expected;    /* copy suite: the continuation that reproduces the passphrase; NULL otherwise */
    int n_back;        /* copy suite: tokens between the passphrase and the prompt's end; -1 otherwise */
} wl_item;

typedef struct {
    char *name;        /* file name without directory and .jsonl */
    char *path;
    wl_item *items;
    int n;
} workload;

/* Resolves name_or_path into out; 0 when the file exists. */
int  workload_resolve(const char *name_or_path, char *out, size_t outlen);
/* The file is checked before it is read (input_file.h): at most
 * WL_MAX_BYTES (64 MiB), a regular file or a pipe — --workload /dev/zero
 * is refused at once. */
int  workload_load(workload **out, const char *name_or_path, char *err, size_t errlen);
/* Parses JSONL text already in memory (name used in messages and ids). */
int  workload_parse(workload **out, const char *name, const char *text, char *err, size_t errlen);
void workload_free(workload *w);
#endif
