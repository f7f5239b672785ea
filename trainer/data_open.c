/* Opening data files beneath their data root: see data_open.h. */
#include "data_open.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

int data_roots_add(data_roots *r, const char *dir, char *err, size_t errlen) {
    if (r->n >= DATA_ROOTS_MAX) {
        snprintf(err, errlen, "at most %d data roots", DATA_ROOTS_MAX);
        return -1;
    }
    r->dirs[r->n++] = dir;
    return 0;
}

/* The part of `path` below `root`, or NULL when path is not inside it. */
static const char *below(const char *root, const char *path) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    if (strncmp(path, root, n) != 0 || path[n] != '/') return NULL;
    while (path[n] == '/') n++;
    return path + n;
}

const char *data_display_name(const data_roots *roots, const char *path) {
    if (!roots) return path;
    for (int i = 0; i < roots->n; i++) {
        const char *rel = below(roots->dirs[i], path);
        if (rel) return rel;
    }
    return path;
}

/* Without openat2: walks `rel` one component at a time, following no symlink. */
static int open_no_symlinks(int dirfd, const char *rel) {
    char part[4096];
    int fd = dup(dirfd);
    const char *p = rel;
    while (fd >= 0 && *p) {
        size_t n = strcspn(p, "/");
        const char *next = p + n;
        while (*next == '/') next++;
        if (n >= sizeof part || (n == 2 && p[0] == '.' && p[1] == '.')) {
            close(fd);
            errno = EXDEV;
            return -1;
        }
        memcpy(part, p, n);
        part[n] = '\0';
        int last = *next == '\0';
        int child = openat(fd, part, (last ? O_RDONLY : O_PATH | O_DIRECTORY) | O_NOFOLLOW | O_CLOEXEC);
        int e = errno;
        close(fd);
        errno = e;
        fd = child;
        p = next;
    }
    return fd;
}

static int open_beneath(const char *root, const char *rel) {
    int dirfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (dirfd < 0) return -1;
    struct open_how how = {.flags = O_RDONLY | O_CLOEXEC, .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS};
    int fd = (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM)) fd = open_no_symlinks(dirfd, rel); /* EPERM: a seccomp filter */
    int e = errno;
    close(dirfd);
    errno = e;
    return fd;
}

static int refuse(char *err, size_t errlen, const char *name, const char *why) {
    snprintf(err, errlen, "%s: %s", name, why);
    return -1;
}

int data_open(const data_roots *roots, const char *path, char *err, size_t errlen) {
    const char *name = data_display_name(roots, path);
    int fd = -1;
    if (!roots || roots->n == 0) {
        fd = open(path, O_RDONLY | O_CLOEXEC);
    } else if (path[0] == '/') {
        const char *rel = NULL;
        int i;
        for (i = 0; i < roots->n && !rel; i++) rel = below(roots->dirs[i], path);
        if (!rel) return refuse(err, errlen, path, "is outside the data roots: refusing to open it");
        fd = open_beneath(roots->dirs[i - 1], rel);
    } else {
        for (int i = 0; i < roots->n; i++) {
            fd = open_beneath(roots->dirs[i], path);
            if (fd >= 0 || errno != ENOENT) break;
        }
    }
    if (fd < 0) {
        char why[256];
        if (errno == EXDEV || errno == ELOOP)
            return refuse(err, errlen, name,
                          "leads out of its data root (a symlink swapped in after the run was submitted?): refusing "
                          "to open it");
        snprintf(why, sizeof why, "cannot open: %s", strerror(errno));
        return refuse(err, errlen, name, why);
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        int dir = S_ISDIR(st.st_mode);
        close(fd);
        return refuse(err, errlen, name, dir ? "cannot read: Is a directory" : "is not a regular file");
    }
    return fd;
}
