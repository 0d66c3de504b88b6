/* outfile.c — atomic whole-file writes (see outfile.h). */
#include "outfile.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "errmsg.h"

static void tmp_name(const char *path, char *tmp, size_t cap) {
    snprintf(tmp, cap, "%s.tmp.%ld", path, (long)getpid());
}

int write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    char tmp[4200];
    tmp_name(path, tmp, sizeof tmp);
    FILE *f = fopen(tmp, "wb");
    if (!f) return errf(err, errlen, "%s: cannot write: %s", path, strerror(errno));
    int ok = fwrite(data, 1, len, f) == len;
    ok = (fflush(f) == 0) && ok;
    ok = (fsync(fileno(f)) == 0) && ok;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return errf(err, errlen, "%s: write failed: %s", path, strerror(e));
    }
    return 0;
}

int outfile_check(const char *path, char *err, size_t errlen) {
    if (!*path) return errf(err, errlen, "an empty file name");
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) return errf(err, errlen, "%s: is a directory", path);
    char tmp[4200];
    tmp_name(path, tmp, sizeof tmp);
    int fd = open(tmp, O_WRONLY | O_CREAT, 0644);
    if (fd < 0) {
        int e = errno;
        const char *slash = strrchr(path, '/');
        int dlen = slash ? (slash == path ? 1 : (int)(slash - path)) : 1;
        const char *dir = slash ? path : ".";
        if (e == ENOENT || e == ENOTDIR)
            return errf(err, errlen, "%s: cannot write: the directory '%.*s' does not exist", path, dlen, dir);
        return errf(err, errlen, "%s: cannot write in '%.*s': %s", path, dlen, dir, strerror(e));
    }
    close(fd);
    unlink(tmp);
    return 0;
}
