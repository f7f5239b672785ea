/* Opening a run's file with no symlink on the way: see open_exact.h. */
#include "open_exact.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int open_exact(const char *path, int flags) { return open_exact_mode(path, flags, 0600); }

int open_exact_mode(const char *path, int flags, mode_t mode) {
    int fd = open(path, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0) return -1;
    char self[64], real[PATH_MAX];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(self, real, sizeof real - 1);
    if (n >= 0) real[n] = '\0';
    if (n < 0 || strcmp(real, path) != 0) { /* no /proc to say which file it is: not taken either */
        close(fd);
        errno = ELOOP;
        return -1;
    }
    return fd;
}

FILE *fopen_exact(const char *path) {
    int fd = open_exact(path, O_RDONLY);
    if (fd < 0) return NULL;
    FILE *f = fdopen(fd, "re");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}
