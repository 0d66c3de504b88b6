/* outfile.c — atomic whole-file writes (see outfile.h). */
#include "outfile.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "errmsg.h"

int write_file_atomic(const char *path, const void *data, size_t len, char *err, size_t errlen) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
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
