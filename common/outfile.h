/* outfile.h — result files are written whole or not at all: the data goes to
 * PATH.tmp.PID, is flushed, then renamed over PATH, so a crash or a full disk
 * never leaves a half-written result behind. */
#ifndef SPECBED_OUTFILE_H
#define SPECBED_OUTFILE_H
#include <stddef.h>
int write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen);
#endif
