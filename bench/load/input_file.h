/* input_file.h — the size limit of an input file, checked before any of it
 * is read. A path given on the command line (--workload, --intervals) may
 * be anything: /dev/zero, a tty, a directory, a 2 GB file. A regular file
 * over the limit, or something that is neither a regular file nor a pipe,
 * is refused at once, by name; a pipe (process substitution, a FIFO) has no
 * size to check, so its reader stops at the same limit (read_file's cap,
 * or the reader's own count). */
#ifndef SPECBED_BENCH_INPUT_FILE_H
#define SPECBED_BENCH_INPUT_FILE_H
#include <stddef.h>

#define WL_MAX_BYTES     (64u << 20)   /* a workload JSONL: the bundled ones are 12-35 KB */
#define IV_CSV_MAX_BYTES (64u << 20)   /* an intervals.csv: ~200 B a row, 300,000+ rows */

/* 0 when path can be read as `what` (e.g. "workload") within max_bytes;
 * -1 with "PATH: …" in err otherwise (missing, a directory, a device, or
 * a regular file larger than max_bytes). */
int input_file_check(const char *path, size_t max_bytes, const char *what, char *err, size_t errlen);
#endif
