/* input_file.c — see input_file.h. stat() only: reads nothing. */
#include "input_file.h"
#include "errmsg.h"
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

int input_file_check(const char *path, size_t max_bytes, const char *what, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st)) return errf(err, errlen, "%s: cannot read the %s (%s)", path, what, strerror(errno));
    if (S_ISFIFO(st.st_mode)) return 0;   /* no size yet: the reader counts against max_bytes */
    if (!S_ISREG(st.st_mode))
        return errf(err, errlen, "%s: not a regular file or a pipe (%s), refused as the %s", path,
                    S_ISDIR(st.st_mode) ? "a directory" : S_ISCHR(st.st_mode) ? "a character device" :
                    S_ISBLK(st.st_mode) ? "a block device" : S_ISSOCK(st.st_mode) ? "a socket" : "not a file", what);
    if ((unsigned long long)st.st_size > max_bytes)
        return errf(err, errlen, "%s: %lld bytes, more than the %zu MiB allowed for the %s; refused before reading", path,
                    (long long)st.st_size, max_bytes >> 20, what);
    return 0;
}
