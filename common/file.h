/* file.h — reading a whole file into memory, the one way specbed does it:
 * streamed (works for pipes and /proc files whose size is unknown), capped
 * (a hostile or mistaken path cannot exhaust memory), NUL-terminated (text
 * parsers can use it as a string), and with an error that names the path. */
#ifndef SPECBED_FILE_H
#define SPECBED_FILE_H
#include <stddef.h>
/* *out (malloc'd, the caller frees) holds the bytes plus a NUL; *len (may
 * be NULL) the byte count. Fails with "PATH: cannot read (reason)" or
 * "PATH: larger than MAX bytes". */
int read_file(const char *path, size_t max_bytes, char **out, size_t *len, char *err, size_t errlen);
#endif
