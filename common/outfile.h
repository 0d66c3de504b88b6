/* outfile.h — result files are written whole or not at all: the data goes to
 * PATH.tmp.PID, is flushed, then renamed over PATH, so a crash or a full disk
 * never leaves a half-written result behind. */
#ifndef SPECBED_OUTFILE_H
#define SPECBED_OUTFILE_H
#include <stddef.h>
int write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
/* Before a long job: creates and removes the temporary file that
 * write_file_atomic(path) will write, so a destination that cannot be
 * written (a missing directory, no permission, PATH a directory) fails at
 * once, naming it, not after the work. */
int outfile_check(const char *path, char *err, size_t errlen);
#endif
