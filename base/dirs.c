/* Making a directory and the ones above it: see dirs.h. */
#include "dirs.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <sys/stat.h>

static int make(const char *dir, mode_t mode) { return mkdir(dir, mode) == 0 || errno == EEXIST ? 0 : -1; }

int mkdir_p(const char *path, mode_t mode) {
    char tmp[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s", path) >= (int)sizeof tmp) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (make(tmp, mode) != 0) return -1;
        *p = '/';
    }
    return make(tmp, mode);
}
