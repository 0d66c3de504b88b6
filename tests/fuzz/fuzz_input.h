/* fuzz_input.h — what the file-reading harnesses share: the fuzzer's bytes
 * as a named file (a memfd, so nothing touches the disk), because the
 * loaders under test take paths and mmap them, exactly as with a real
 * checkpoint. */
#ifndef SPECBED_FUZZ_INPUT_H
#define SPECBED_FUZZ_INPUT_H
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

/* Writes data to a fresh memfd; path gets "/proc/self/fd/N". Returns the fd (close it after). */
static inline int fuzz_as_file(const unsigned char *data, size_t n, char *path, size_t cap) {
    int fd = memfd_create("fuzz", 0);
    if (fd < 0) return -1;
    size_t off = 0;
    while (off < n) {
        ssize_t k = write(fd, data + off, n - off);
        if (k <= 0) { close(fd); return -1; }
        off += (size_t)k;
    }
    snprintf(path, cap, "/proc/self/fd/%d", fd);
    return fd;
}
#endif
