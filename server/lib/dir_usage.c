/* What a directory holds on disk: see dir_usage.h. */
#include "dir_usage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"

/* The files with several links already counted: (device, inode), open addressing. */
typedef struct {
    dev_t dev;
    ino_t ino;
    bool used;
} inode_slot;

typedef struct {
    inode_slot *slots;
    size_t cap, n;
} inode_set;

static size_t slot_of(const inode_set *s, dev_t dev, ino_t ino) {
    uint64_t h = ((uint64_t)ino * 0x9E3779B97F4A7C15ull) ^ (uint64_t)dev;
    size_t i = (size_t)(h & (s->cap - 1));
    while (s->slots[i].used && !(s->slots[i].dev == dev && s->slots[i].ino == ino)) i = (i + 1) & (s->cap - 1);
    return i;
}

/* True the first time (dev, ino) is seen. */
static bool inode_first(inode_set *s, dev_t dev, ino_t ino) {
    if (2 * (s->n + 1) > s->cap) {
        inode_set grown = {.cap = s->cap ? 2 * s->cap : 64};
        grown.slots = xcalloc(grown.cap, sizeof *grown.slots);
        for (size_t i = 0; i < s->cap; i++)
            if (s->slots[i].used) grown.slots[slot_of(&grown, s->slots[i].dev, s->slots[i].ino)] = s->slots[i];
        grown.n = s->n;
        free(s->slots);
        *s = grown;
    }
    size_t i = slot_of(s, dev, ino);
    if (s->slots[i].used) return false;
    s->slots[i] = (inode_slot){.dev = dev, .ino = ino, .used = true};
    s->n++;
    return true;
}

/* One entry's blocks, once per inode. */
static void count(dir_usage *out, inode_set *seen, const struct stat *st) {
    if (!S_ISDIR(st->st_mode) && st->st_nlink > 1 && !inode_first(seen, st->st_dev, st->st_ino)) return;
    out->bytes += (uint64_t)st->st_blocks * 512u;
}

static void stop(dir_usage *out, const char *why) {
    if (out->incomplete) return;
    out->incomplete = true;
    snprintf(out->why, sizeof out->why, "%s", why);
}

int dir_usage_measure(const char *path, const dir_usage_limits *limits, dir_usage *out) {
    memset(out, 0, sizeof *out);
    dir_usage_limits lim = limits ? *limits : DIR_USAGE_LIMITS_DEFAULT;
    if (lim.max_depth < 0) lim.max_depth = 0;
    int root = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    if (root < 0 || fstat(root, &st) != 0) {
        int err = errno;
        bool link = lstat(path, &st) == 0 && S_ISLNK(st.st_mode); /* O_DIRECTORY says ENOTDIR of one */
        snprintf(out->why, sizeof out->why, "cannot open %.100s: %s", path, link ? "it is a symbolic link" : strerror(err));
        if (root >= 0) close(root);
        return -1;
    }
    dev_t dev = st.st_dev;
    out->bytes = (uint64_t)st.st_blocks * 512u;
    /* the open directories, from the walked one down: one descriptor a level */
    DIR **stack = xcalloc((size_t)lim.max_depth + 1, sizeof *stack);
    inode_set seen = {0};
    int depth = 0;
    stack[0] = fdopendir(root);
    if (!stack[0]) {
        snprintf(out->why, sizeof out->why, "cannot read %.100s: %s", path, strerror(errno));
        close(root);
        free(stack);
        return -1;
    }
    while (depth >= 0) {
        errno = 0;
        struct dirent *e = readdir(stack[depth]);
        if (!e) {
            closedir(stack[depth--]);
            continue;
        }
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (out->entries >= lim.max_entries) {
            char why[96];
            snprintf(why, sizeof why, "it holds more than %llu entries", (unsigned long long)lim.max_entries);
            stop(out, why);
            break;
        }
        int fd = dirfd(stack[depth]);
        if (fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone meanwhile */
        out->entries++;
        count(out, &seen, &st);
        if (!S_ISDIR(st.st_mode) || st.st_dev != dev) continue; /* another filesystem is not the run's */
        if (depth == lim.max_depth) {
            char why[96];
            snprintf(why, sizeof why, "it is more than %d directories deep", lim.max_depth);
            stop(out, why);
            continue;
        }
        /* a directory swapped for a link or a FIFO since the fstatat fails here (O_NOFOLLOW,
         * O_DIRECTORY: nothing else is ever opened) */
        int sub = openat(fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        if (sub < 0) continue;
        DIR *d = fdopendir(sub);
        if (!d) {
            close(sub);
            continue;
        }
        stack[++depth] = d;
    }
    while (depth >= 0) closedir(stack[depth--]);
    free(stack);
    free(seen.slots);
    return 0;
}
