/* launch_off.h — the speculation-off launch derived from a sweep's
 * speculative launch template, for the four engines a template may start:
 *   specbed serve   --drafter X --depth {depth} [--draft-model D --ngram-* --verify-schedule S --p-min P
 *                   --adaptive-alpha A --cost-table F]   (serve refuses --depth 0: the flags go, and
 *                   with no drafter it does not speculate)
 *   vLLM            --speculative-config '{...}' (or --speculative_config, and the older
 *                   --speculative-model, --num-speculative-tokens, --ngram-prompt-lookup-max/min)
 *   SGLang          every --speculative-* flag (--speculative-algorithm, -num-steps, -draft-model-path …)
 *   llama-server    -md/--model-draft, --draft-max/--draft/--draft-n, --draft-min/--draft-n-min,
 *                   --draft-p-min, -cd/--ctx-size-draft, -devd/--device-draft,
 *                   -ngld/--gpu-layers-draft/--n-gpu-layers-draft, -td/--threads-draft,
 *                   -tbd/--threads-batch-draft, -ctkd/-ctvd, -hfd/--hf-repo-draft, --spec-type,
 *                   --spec-draft-n-max/-n-min (every --spec-draft-* and --draft-*), --spec-replace A B
 * Every such flag is removed with its value (the next word, unless it starts with "-"; or
 * "--flag=value" as one word), as is a bare {drafter_args} word. Words are split the
 * way /bin/sh splits them (quotes and backslashes kept as written, so a
 * quoted JSON value goes as one word). What is left must name neither
 * {depth} nor {drafter} nor {drafter_args}: a template whose speculation
 * lives elsewhere (a wrapper script, an unknown flag) cannot be turned off
 * from here, and the caller is told to give --launch-off instead of being
 * handed a launch that still speculates. */
#ifndef SPECBED_BENCH_LAUNCH_OFF_H
#define SPECBED_BENCH_LAUNCH_OFF_H
#include <stddef.h>

/* out: the template without its speculation flags; removed: the words taken
 * out, space-separated (for the log and sweep.json). 0 ok, -1 with err. */
int launch_off_derive(const char *tmpl, char *out, size_t outlen, char *removed, size_t removed_len, char *err,
                      size_t errlen);
#endif
