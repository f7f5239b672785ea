/* One way into a run's directory: see run_files.h. */
#include "run_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base.h"

static int fail(int e, char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(int e, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    errno = e;
    return -1;
}

bool run_file_planted(int e) { return e == ELOOP || e == ENXIO || e == EXDEV || e == EFBIG; }

static const char *kind_of(mode_t m) {
    return S_ISLNK(m) ? "a link" : S_ISFIFO(m) ? "a FIFO" : S_ISSOCK(m) ? "a socket" : S_ISCHR(m) || S_ISBLK(m) ? "a device"
           : S_ISDIR(m) ? "a directory" : S_ISREG(m) ? "a file" : "something else";
}

/* `rel` is a relative path of plain names: no "", "." nor ".." component. */
static bool plain_relative(const char *rel) {
    if (!rel || !*rel || *rel == '/') return false;
    for (const char *c = rel; *c;) {
        const char *slash = strchr(c, '/');
        size_t n = slash ? (size_t)(slash - c) : strlen(c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.')) return false;
        c += n + (slash ? 1 : 0);
        if (slash && !*c) return false;
    }
    return true;
}

/* openat with O_NOFOLLOW at each step: the kernel without openat2 (or a seccomp
 * filter that refuses it). */
static int open_by_steps(int dfd, const char *rel, int flags, mode_t mode) {
    char *copy = xstrdup(rel), *save = NULL, *name = strtok_r(copy, "/", &save);
    int cur = dfd, fd = -1;
    while (name) {
        char *next = strtok_r(NULL, "/", &save);
        int f = next ? O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC : flags | O_NOFOLLOW;
        fd = openat(cur, name, f, mode);
        int e = errno;
        if (fd < 0 && (e == ENOTDIR || e == ELOOP)) { /* say a link as a link */
            struct stat st;
            if (fstatat(cur, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode)) e = ELOOP;
        }
        if (cur != dfd) close(cur);
        if (fd < 0) {
            free(copy);
            errno = e;
            return -1;
        }
        if (!next) break;
        cur = fd;
        fd = -1;
        name = next;
    }
    free(copy);
    return fd;
}

/* `rel` beneath dfd, no link followed anywhere on the way. */
static int open_beneath(int dfd, const char *rel, int flags, mode_t mode) {
    static int no_openat2; /* set once it said ENOSYS or EPERM */
#ifdef SYS_openat2
    if (!__atomic_load_n(&no_openat2, __ATOMIC_RELAXED)) {
        struct open_how how = {.flags = (uint64_t)(flags | O_NOFOLLOW),
                               .mode = (flags & O_CREAT) ? mode : 0,
                               .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS};
        long fd = syscall(SYS_openat2, dfd, rel, &how, sizeof how);
        if (fd >= 0 || (errno != ENOSYS && errno != EPERM)) return (int)fd;
        /* ENOSYS: an older kernel; EPERM: a seccomp filter that refuses it */
        __atomic_store_n(&no_openat2, 1, __ATOMIC_RELAXED);
    }
#endif
    return open_by_steps(dfd, rel, flags, mode);
}

/* Whether what fd opened may be taken as the run's: of the kind asked for, of the
 * directory's owner (or this process's, with one link), within max_bytes. */
static int check_opened(const run_dir *d, int fd, const char *rel, bool want_dir, int64_t max_bytes, struct stat *st,
                        char *err, size_t errlen) {
    if (fstat(fd, st) != 0) return fail(errno, err, errlen, "%s/%s: cannot be read: %s", d->path, rel, strerror(errno));
    if (want_dir ? !S_ISDIR(st->st_mode) : !S_ISREG(st->st_mode))
        return fail(ENXIO, err, errlen, "%s/%s is %s, not a %s", d->path, rel, kind_of(st->st_mode),
                    want_dir ? "directory" : "regular file");
    uid_t self = geteuid();
    bool owners = st->st_uid == d->owner || (st->st_uid == self && (S_ISDIR(st->st_mode) || st->st_nlink == 1));
    if (!owners)
        return fail(EXDEV, err, errlen, "%s/%s belongs to uid %d%s, not to the run's account (uid %d)", d->path, rel,
                    (int)st->st_uid, st->st_uid == self ? " with more than one link (a hard link)" : "", (int)d->owner);
    if (!want_dir && (int64_t)st->st_size > max_bytes)
        return fail(EFBIG, err, errlen, "%s/%s holds %lld bytes, more than the %lld a file of this kind may", d->path,
                    rel, (long long)st->st_size, (long long)max_bytes);
    return 0;
}

/* The refusal of an open that failed, in words. */
static int open_failed(const run_dir *d, const char *rel, char *err, size_t errlen) {
    int e = errno;
    if (e == ELOOP)
        return fail(ELOOP, err, errlen, "%s/%s: the run left a link there, and ddpd does not follow a run's links",
                    d->path, rel);
    if (e == ENXIO) /* O_WRONLY | O_NONBLOCK on a FIFO without a reader */
        return fail(ENXIO, err, errlen, "%s/%s is a FIFO, not a regular file", d->path, rel);
    return fail(e, err, errlen, "%s/%s: %s", d->path, rel, strerror(e));
}

static int set_blocking(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

int run_dir_open(run_dir *d, const char *path, char *err, size_t errlen) {
    d->fd = -1;
    d->path = NULL;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0) {
        int e = errno;
        if ((e == ENOTDIR || e == ELOOP) && lstat(path, &st) == 0)
            return fail(S_ISLNK(st.st_mode) ? ELOOP : ENXIO, err, errlen, "%s is %s, not a run's directory", path,
                        kind_of(st.st_mode));
        return fail(e, err, errlen, "%s: %s", path, strerror(e));
    }
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(e, err, errlen, "%s: %s", path, strerror(e));
    }
    d->fd = fd;
    d->owner = st.st_uid;
    d->path = xstrdup(path);
    return 0;
}

int run_dir_open_sub(const run_dir *d, const char *rel, run_dir *sub, char *err, size_t errlen) {
    sub->fd = -1;
    sub->path = NULL;
    if (!plain_relative(rel)) return fail(EINVAL, err, errlen, "%s: %s is not a name beneath it", d->path, rel);
    int fd = open_beneath(d->fd, rel, O_RDONLY | O_DIRECTORY | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0) {
        if (errno == ENOTDIR) errno = ENXIO;
        return open_failed(d, rel, err, errlen);
    }
    struct stat st;
    if (check_opened(d, fd, rel, true, 0, &st, err, errlen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    sub->fd = fd;
    sub->owner = d->owner; /* its files are the run's as the directory's are */
    sub->path = xasprintf("%s/%s", d->path, rel);
    return 0;
}

void run_dir_close(run_dir *d) {
    if (d->fd >= 0) close(d->fd);
    free(d->path);
    d->fd = -1;
    d->path = NULL;
}

int run_file_open(const run_dir *d, const char *rel, int64_t max_bytes, struct stat *st, char *err, size_t errlen) {
    if (!plain_relative(rel)) return fail(EINVAL, err, errlen, "%s: %s is not a name beneath it", d->path, rel);
    int fd = open_beneath(d->fd, rel, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    if (fd < 0) return open_failed(d, rel, err, errlen);
    if (check_opened(d, fd, rel, false, max_bytes, st, err, errlen) != 0 || set_blocking(fd) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

int run_file_open_in(const char *dir, const char *rel, int64_t max_bytes, struct stat *st, char *err, size_t errlen) {
    run_dir d;
    if (run_dir_open(&d, dir, err, errlen) != 0) return -1;
    int fd = run_file_open(&d, rel, max_bytes, st, err, errlen);
    int e = errno;
    run_dir_close(&d);
    errno = e;
    return fd;
}

int run_file_read(const run_dir *d, const char *rel, size_t max_bytes, char **data, size_t *len, char *err,
                  size_t errlen) {
    *data = NULL;
    *len = 0;
    struct stat st;
    int fd = run_file_open(d, rel, (int64_t)max_bytes, &st, err, errlen);
    if (fd < 0) return -1;
    /* read to its end, not to the size fstat said: it may grow, never past max_bytes */
    size_t cap = (size_t)st.st_size + 1, n = 0;
    char *buf = xmalloc(cap + 1);
    for (;;) {
        if (n == cap) {
            if (cap > max_bytes) {
                free(buf);
                close(fd);
                return fail(EFBIG, err, errlen, "%s/%s grew past the %zu bytes a file of this kind may hold", d->path,
                            rel, max_bytes);
            }
            cap *= 2;
            buf = xrealloc(buf, cap + 1);
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            return fail(e, err, errlen, "%s/%s: %s", d->path, rel, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (n > max_bytes) {
        free(buf);
        return fail(EFBIG, err, errlen, "%s/%s grew past the %zu bytes a file of this kind may hold", d->path, rel,
                    max_bytes);
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

json_t *run_file_load_json(const run_dir *d, const char *rel, size_t max_bytes, char *err, size_t errlen) {
    char *text;
    size_t len;
    if (run_file_read(d, rel, max_bytes, &text, &len, err, errlen) != 0) return NULL;
    json_error_t je;
    json_t *doc = json_loadb(text, len, 0, &je);
    free(text);
    if (!doc) fail(EINVAL, err, errlen, "%s/%s is not JSON: %s (line %d)", d->path, rel, je.text, je.line);
    return doc;
}

json_t *run_file_load_json_in(const char *dir, const char *rel, size_t max_bytes, char *err, size_t errlen) {
    run_dir d;
    if (run_dir_open(&d, dir, err, errlen) != 0) return NULL;
    json_t *doc = run_file_load_json(&d, rel, max_bytes, err, errlen);
    int e = errno;
    run_dir_close(&d);
    errno = e;
    return doc;
}

/* The directory that holds `rel` (d's own descriptor, or a subdirectory opened as
 * files are: close it when it is not d's) and rel's last name. */
static int parent_of(const run_dir *d, const char *rel, const char **name, char *err, size_t errlen) {
    const char *slash = strrchr(rel, '/');
    *name = slash ? slash + 1 : rel;
    if (!slash) return d->fd;
    char *parent = xstrndup(rel, (size_t)(slash - rel));
    run_dir sub;
    int rc = run_dir_open_sub(d, parent, &sub, err, errlen);
    free(parent);
    if (rc != 0) return -1;
    free(sub.path);
    return sub.fd;
}

static int write_whole(const run_dir *d, const char *rel, const void *data, size_t len, mode_t mode, bool flush,
                       char *err, size_t errlen) {
    if (!plain_relative(rel)) return fail(EINVAL, err, errlen, "%s: %s is not a name beneath it", d->path, rel);
    const char *name;
    int pfd = parent_of(d, rel, &name, err, errlen);
    if (pfd < 0) return -1;
    uint32_t r[2] = {0, 0};
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) r[0] = (uint32_t)getpid(), r[1] = (uint32_t)now_ms();
    char tmp[NAME_MAX + 1];
    snprintf(tmp, sizeof tmp, ".%.200s.tmp-%08x%08x", name, r[0], r[1]);
    int rc = -1, e = 0;
    const char *step = "create";
    int fd = openat(pfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd >= 0) {
        const char *p = data;
        size_t left = len;
        step = "write";
        while (left) {
            ssize_t w = write(fd, p, left);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) break;
            p += w;
            left -= (size_t)w;
        }
        if (!left) {
            step = "hand to the run's account";
            if (d->owner == geteuid() || fchown(fd, d->owner, (gid_t)-1) == 0) {
                step = "flush";
                if (!flush || fdatasync(fd) == 0) {
                    step = "rename";
                    rc = renameat(pfd, tmp, pfd, name);
                }
            }
        }
        e = errno;
        close(fd);
        if (rc != 0) unlinkat(pfd, tmp, 0);
    } else {
        e = errno;
    }
    if (pfd != d->fd) close(pfd);
    if (rc != 0) return fail(e ? e : EIO, err, errlen, "cannot write %s/%s (%s): %s", d->path, rel, step, strerror(e ? e : EIO));
    return 0;
}

int run_file_write(const run_dir *d, const char *rel, const void *data, size_t len, mode_t mode, char *err,
                   size_t errlen) {
    return write_whole(d, rel, data, len, mode, true, err, errlen);
}

static int write_json(const run_dir *d, const char *rel, const json_t *doc, bool flush, char *err, size_t errlen) {
    char *text = json_dumps(doc, JSON_INDENT(2));
    if (!text) return fail(ENOMEM, err, errlen, "cannot write %s/%s: out of memory", d->path, rel);
    size_t n = strlen(text);
    text = xrealloc(text, n + 2);
    text[n++] = '\n';
    int rc = write_whole(d, rel, text, n, 0600, flush, err, errlen);
    free(text);
    return rc;
}

int run_file_write_json(const run_dir *d, const char *rel, const json_t *doc, char *err, size_t errlen) {
    return write_json(d, rel, doc, true, err, errlen);
}

int run_file_write_json_unflushed(const run_dir *d, const char *rel, const json_t *doc, char *err, size_t errlen) {
    return write_json(d, rel, doc, false, err, errlen);
}

int run_file_open_append(const run_dir *d, const char *rel, char *err, size_t errlen) {
    if (!plain_relative(rel)) return fail(EINVAL, err, errlen, "%s: %s is not a name beneath it", d->path, rel);
    int fd = open_beneath(d->fd, rel, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0600);
    if (fd < 0) return open_failed(d, rel, err, errlen);
    struct stat st;
    if (check_opened(d, fd, rel, false, RUN_FILE_ANY_SIZE, &st, err, errlen) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    /* made just now by this process: the account's, as the run's other files */
    if ((st.st_uid != d->owner && fchown(fd, d->owner, (gid_t)-1) != 0) || set_blocking(fd) != 0) {
        int e = errno;
        close(fd);
        return fail(e, err, errlen, "%s/%s: cannot hand it to the run's account: %s", d->path, rel, strerror(e));
    }
    return fd;
}

int run_path_split(const char *root, const char *path, char **dir, const char **rel) {
    size_t n = strlen(root);
    while (n > 1 && root[n - 1] == '/') n--;
    const char *id = path + n + 1, *slash = strncmp(path, root, n) == 0 && path[n] == '/' ? strchr(id, '/') : NULL;
    if (!slash || slash == id || !slash[1]) {
        errno = EINVAL;
        return -1;
    }
    *dir = xstrndup(path, (size_t)(slash - path));
    *rel = slash + 1;
    return 0;
}

int run_dir_names(const run_dir *d, char ***names) {
    *names = NULL;
    int fd = openat(d->fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* its own offset */
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        int e = errno;
        if (fd >= 0) close(fd);
        errno = e;
        return -1;
    }
    int n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        if (n == cap) *names = xrealloc(*names, (size_t)(cap = cap ? cap * 2 : 16) * sizeof **names);
        (*names)[n++] = xstrdup(e->d_name);
    }
    closedir(dir);
    return n;
}

void run_dir_names_free(char **names, int n) {
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
}

int run_dir_stat(const run_dir *d, const char *name, struct stat *st) {
    return fstatat(d->fd, name, st, AT_SYMLINK_NOFOLLOW);
}

int run_dir_hand_over(run_dir *d, uid_t uid, gid_t gid, mode_t mode, char *err, size_t errlen) {
    if (fchown(d->fd, uid, gid) != 0 || fchmod(d->fd, mode) != 0)
        return fail(errno, err, errlen, "cannot hand %s to uid %d: %s", d->path, (int)uid, strerror(errno));
    uid_t self = geteuid();
    char **names;
    int n = run_dir_names(d, &names);
    for (int i = 0; i < n; i++) {
        struct stat st, now;
        if (fstatat(d->fd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_uid != self) continue;
        if (!S_ISDIR(st.st_mode) && !(S_ISREG(st.st_mode) && st.st_nlink == 1)) continue;
        int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0);
        int fd = openat(d->fd, names[i], flags);
        if (fd < 0) continue;
        /* what was opened is what was looked at: still this process's, one link */
        if (fstat(fd, &now) == 0 && now.st_ino == st.st_ino && now.st_dev == st.st_dev && now.st_uid == self &&
            (S_ISDIR(now.st_mode) || (S_ISREG(now.st_mode) && now.st_nlink == 1)))
            (void)fchown(fd, uid, gid);
        close(fd);
    }
    run_dir_names_free(names, n);
    d->owner = uid;
    return 0;
}

/* ---- removal by descriptors ---- */

#define WORDS_(x) #x
#define WORDS(x) WORDS_(x)
#define DEPTH_WORDS WORDS(RUN_DIR_MAX_DEPTH)

typedef struct {
    dev_t dev;       /* the run directory's filesystem: nothing on another is touched */
    long left;       /* entries that could not be removed */
    char why[256];   /* the first reason */
} removal;

static void left_one(removal *r, const char *name, const char *why) {
    if (!r->left++) snprintf(r->why, sizeof r->why, "%s: %s", name, why);
}

/* Empties the directory dfd (up to `depth` levels further down). */
static void empty_dir(int dfd, int depth, removal *r) {
    for (int pass = 0; pass < 3; pass++) { /* entries made meanwhile: a few passes, not for ever */
        run_dir d = {.fd = dfd};
        char **names;
        int n = run_dir_names(&d, &names), removed = 0;
        if (n < 0) {
            left_one(r, "a directory", strerror(errno));
            return;
        }
        for (int i = 0; i < n; i++) {
            struct stat st;
            if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* gone already */
            if (!S_ISDIR(st.st_mode)) { /* a file, a link, a FIFO: the name goes, nothing it names */
                if (unlinkat(dfd, names[i], 0) == 0) removed++;
                else left_one(r, names[i], strerror(errno));
                continue;
            }
            if (st.st_dev != r->dev) {
                left_one(r, names[i], "another filesystem is mounted there"); /* not ours to empty */
                continue;
            }
            if (depth <= 0) {
                left_one(r, names[i], "more than " DEPTH_WORDS " levels deep");
                continue;
            }
            int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
            if (sub < 0) { /* swapped for a link or a file since: remove that name, never follow it */
                if (unlinkat(dfd, names[i], 0) == 0) removed++;
                continue;
            }
            struct stat now;
            if (fstat(sub, &now) == 0 && now.st_dev == r->dev) empty_dir(sub, depth - 1, r);
            close(sub);
            if (unlinkat(dfd, names[i], AT_REMOVEDIR) == 0) removed++;
            else if (errno != ENOENT) left_one(r, names[i], strerror(errno));
        }
        run_dir_names_free(names, n);
        if (!removed) break;
    }
}

int run_dir_make_sub(const run_dir *d, const char *name, char *err, size_t errlen) {
    if (!plain_relative(name) || strchr(name, '/')) return fail(EINVAL, err, errlen, "%s: %s is not a name in it", d->path, name);
    if (mkdirat(d->fd, name, 0700) != 0)
        return errno == EEXIST ? 0 : fail(errno, err, errlen, "cannot create %s/%s: %s", d->path, name, strerror(errno));
    if (d->owner == geteuid()) return 0;
    int fd = openat(d->fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    int rc = fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid() ? fchown(fd, d->owner, (gid_t)-1) : 0;
    if (fd >= 0) close(fd);
    return rc == 0 ? 0 : fail(errno, err, errlen, "cannot hand %s/%s to the run's account: %s", d->path, name, strerror(errno));
}

int run_dir_make(const char *path, char *err, size_t errlen) {
    int rc = mkdir(path, 0700);
    if (rc != 0 && errno == EEXIST) {
        char *aside = xasprintf("%s.stale-%lld", path, (long long)now_ms());
        if (rename(path, aside) == 0) rc = mkdir(path, 0700);
        free(aside);
    }
    if (rc != 0) return fail(errno, err, errlen, "cannot create the run directory %s: %s", path, strerror(errno));
    return 0;
}

int run_dir_remove(const char *path, char *err, size_t errlen) {
    run_dir d;
    char why[512];
    if (run_dir_open(&d, path, why, sizeof why) != 0) {
        if (errno == ENOENT) return 0;
        return fail(errno, err, errlen, "%s", why);
    }
    struct stat st;
    removal r = {.dev = 0};
    if (fstat(d.fd, &st) == 0) r.dev = st.st_dev;
    empty_dir(d.fd, RUN_DIR_MAX_DEPTH, &r);
    run_dir_close(&d);
    /* the directory itself, from its parent (the server's own runs/) */
    const char *slash = strrchr(path, '/');
    char *parent = slash && slash != path ? xstrndup(path, (size_t)(slash - path)) : xstrdup("/");
    int pfd = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    free(parent);
    int rc = pfd >= 0 ? unlinkat(pfd, slash ? slash + 1 : path, AT_REMOVEDIR) : -1;
    int e = errno;
    if (pfd >= 0) close(pfd);
    if (rc == 0 || e == ENOENT) return 0;
    if (r.left) return fail(ENOTEMPTY, err, errlen, "%s: %ld entr%s left (%s)", path, r.left, r.left == 1 ? "y" : "ies", r.why);
    return fail(e, err, errlen, "%s: %s", path, strerror(e));
}
