/* workload_tokens.h — a workload's prompts as the model's token ids: the real
 * text the engine benchmarks measure on. bench_spec generates from them;
 * bench_engine and profile take their histories and verify rows from them,
 * because a mixture-of-experts step's cost follows the experts its rows
 * route to, and hashed token ids route as no text does (uncorrelated from
 * one token to the next). The file is parsed by bench/load's workload.h
 * (names, formats and size limits as `specbed load --workload`). */
#ifndef SPECBED_TOOLS_WORKLOAD_TOKENS_H
#define SPECBED_TOOLS_WORKLOAD_TOKENS_H
#include <stddef.h>
#include "tokenizer.h"

typedef struct {
    int **ids;    /* [count] each prompt's ids (malloc'd) */
    int *n;       /* [count] */
    int count;
    long total;   /* Σ n */
    char name[256];
} wl_tokens;

/* The first max prompts (≤ 0: all) of workload name_or_path, encoded. A
 * prompt the tokenizer refuses, or a file with no non-empty prompt, is an
 * error; empty prompts are left out. */
int  wl_tokens_load(wl_tokens *t, const char *name_or_path, const tokenizer *tok, int max, char *err, size_t errlen);
void wl_tokens_free(wl_tokens *t);
/* dst[0..want) = the prompts' ids one after another. -1 when they hold
 * fewer than want tokens: repeating the text would make its routing repeat
 * too, so the caller asks for a shorter measurement or a bigger file. */
int  wl_tokens_stream(const wl_tokens *t, int want, int *dst, char *err, size_t errlen);
#endif
