/* A cache of decompressed IDX datasets: see idx_load_cached in idx.h. The cache
 * file is a small header (magic, counts, shape, the source files' identity) then
 * the images and labels bytes; it is written to a temporary name and renamed, so
 * a reader sees a whole file or none. Mapping it read-only makes a dataset load
 * cost milliseconds, which is most of the time from submitting a run to its first
 * step. */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "idx.h"
#include "dirs.h"
#include "paths.h"

#define CACHE_MAGIC "DDPDIDX1"
#define CACHE_SUFFIX ".idxcache"

typedef struct {
    char magic[8];
    uint64_t count, rows, cols;
    uint64_t identity; /* hash of both source files' identity: a second check */
} cache_header;

static uint64_t fnv1a(uint64_t h, const void *data, size_t n) {
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}

/* The file's identity (its name, inode and times), opened the way idx_load opens it. */
static int file_identity(const data_roots *roots, const char *path, uint64_t *h) {
    char err[512];
    struct stat st;
    int fd = data_open(roots, path, err, sizeof err);
    if (fd < 0) return -1;
    int ok = fstat(fd, &st) == 0;
    close(fd);
    if (!ok) return -1;
    *h = fnv1a(*h, path, strlen(path) + 1);
    *h = fnv1a(*h, &st.st_ino, sizeof st.st_ino);
    *h = fnv1a(*h, &st.st_dev, sizeof st.st_dev);
    *h = fnv1a(*h, &st.st_size, sizeof st.st_size);
    *h = fnv1a(*h, &st.st_mtim, sizeof st.st_mtim);
    *h = fnv1a(*h, &st.st_ctim, sizeof st.st_ctim);
    return 0;
}

const char *idx_default_cache_dir(char *buf, size_t buflen) {
    const char *v;
    if ((v = getenv("DDPD_CACHE_DIR")) && *v) snprintf(buf, buflen, "%s", v);
    else if ((v = getenv("XDG_CACHE_HOME")) && *v) snprintf(buf, buflen, "%s/ddpd", v);
    else if ((v = getenv("HOME")) && *v) snprintf(buf, buflen, "%s/.cache/ddpd", v);
    else return NULL;
    return buf;
}

static int max_label_plus_one(const uint8_t *labels, size_t count) {
    int max = -1;
    for (size_t i = 0; i < count; i++)
        if (labels[i] > max) max = labels[i];
    return max + 1;
}

/* Maps a cache file; 0 on a hit. */
static int map_cache(const char *path, uint64_t identity, size_t limit, idx_dataset *out) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    cache_header h;
    int ok = fstat(fd, &st) == 0 && (size_t)st.st_size >= sizeof h && pread(fd, &h, sizeof h, 0) == sizeof h &&
             memcmp(h.magic, CACHE_MAGIC, 8) == 0 && h.identity == identity && h.rows > 0 && h.cols > 0 &&
             (uint64_t)st.st_size == sizeof h + h.count * h.rows * h.cols + h.count;
    void *map = ok ? mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
    if (map == MAP_FAILED) {
        close(fd);
        return -1;
    }
    size_t keep = (limit && limit < h.count) ? limit : h.count;
    uint8_t *base = (uint8_t *)map + sizeof h;
    memset(out, 0, sizeof *out);
    out->images = base;
    out->labels = base + h.count * h.rows * h.cols;
    out->count = keep;
    out->rows = (int)h.rows;
    out->cols = (int)h.cols;
    out->num_classes = max_label_plus_one(out->labels, keep);
    out->mapping = map;
    out->mapping_bytes = (size_t)st.st_size;
    snprintf(out->cache_path, sizeof out->cache_path, "%s", path);
    out->cache_fd = fd; /* kept: a SIGBUS is explained from the file mapped, not from whatever has its name then */
    out->cache_mtime = st.st_mtim;
    return 0;
}

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22 /* Linux 5.14; older kernels refuse it, and the pages are touched instead */
#endif

/* The pages of [p, p + n) into this process's page tables. */
static void map_in(const uint8_t *p, size_t n) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(page - 1);
    if (n == 0 || madvise((void *)lo, (uintptr_t)p + n - lo, MADV_POPULATE_READ) == 0) return;
    volatile uint8_t sink = 0;
    for (size_t o = 0; o < n; o += (size_t)page) sink ^= p[o];
    (void)sink;
}

void idx_cache_map_in(const idx_dataset *d) {
    if (!d->mapping) return;
    map_in(d->images, d->count * (size_t)d->rows * (size_t)d->cols);
    map_in(d->labels, d->count);
}

int idx_cache_explain_bus_error(const idx_dataset *d, char *out, size_t n) {
    struct stat now, named;
    if (!d->mapping || !d->cache_path[0] || fstat(d->cache_fd, &now) != 0) return 0;
    bool shorter = (size_t)now.st_size < d->mapping_bytes;
    bool modified = now.st_mtim.tv_sec != d->cache_mtime.tv_sec || now.st_mtim.tv_nsec != d->cache_mtime.tv_nsec;
    if (!shorter && !modified) return 0;
    /* Is the file mapped still the one by that name? */
    bool same = stat(d->cache_path, &named) == 0 && named.st_dev == now.st_dev && named.st_ino == now.st_ino;
    char how[160];
    if (shorter)
        snprintf(how, sizeof how, "was cut short while the run was reading it (%zu bytes when mapped, %lld now)",
                 d->mapping_bytes, (long long)now.st_size);
    else
        snprintf(how, sizeof how, "was rewritten in place while the run was reading it (modified after it was mapped)");
    snprintf(out, n, "the dataset cache file %s %s%s: %s", d->cache_path, how,
             same ? "" : "; it has since been removed or replaced",
             same ? "delete it (the next run rebuilds it) and start the run again"
                  : "start the run again (it rebuilds the cache if need be)");
    return 1;
}

static int write_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t w = write(fd, c, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_cache(const char *dir, const char *path, uint64_t identity, const idx_dataset *d) {
    char tmp[4200];
    if (mkdir_p(dir, 0755) != 0) return -1;
    snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return -1;
    cache_header h = {.count = d->count, .rows = (uint64_t)d->rows, .cols = (uint64_t)d->cols, .identity = identity};
    memcpy(h.magic, CACHE_MAGIC, 8);
    int ok = write_all(fd, &h, sizeof h) == 0 && write_all(fd, d->images, d->count * (size_t)d->rows * d->cols) == 0 &&
             write_all(fd, d->labels, d->count) == 0;
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

int idx_load_cached(const data_roots *roots, const char *images_path, const char *labels_path, size_t limit,
                    const char *cache_dir, idx_dataset *out, char *err, size_t errlen, char *note, size_t notelen) {
    if (note && notelen) note[0] = '\0';
    uint64_t identity = 0xcbf29ce484222325ULL;
    if (!cache_dir || file_identity(roots, images_path, &identity) != 0 ||
        file_identity(roots, labels_path, &identity) != 0)
        return idx_load(roots, images_path, labels_path, limit, out, err, errlen); /* it reports missing files */
    char path[4096];
    snprintf(path, sizeof path, "%s/%016llx" CACHE_SUFFIX, cache_dir, (unsigned long long)identity);
    if (map_cache(path, identity, limit, out) == 0) {
        if (note) snprintf(note, notelen, "mapped from the dataset cache");
        return 0;
    }
    /* A miss: load the whole dataset (so every limit can use the cache), keep a copy. */
    if (idx_load(roots, images_path, labels_path, 0, out, err, errlen) != 0) return -1;
    if (write_cache(cache_dir, path, identity, out) != 0) {
        if (note) snprintf(note, notelen, "could not write the dataset cache in %s (%s)", cache_dir, strerror(errno));
    } else if (note) {
        snprintf(note, notelen, "decompressed and cached in %s", cache_dir);
    }
    if (limit && limit < out->count) {
        out->count = limit;
        out->num_classes = max_label_plus_one(out->labels, limit);
    }
    return 0;
}
