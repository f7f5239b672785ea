/* lib/dir_usage.c, the walk behind each user's disk quota, on a directory this test
 * makes the way a hostile run would: a symlink to a big file elsewhere (another
 * user's) and one to a directory elsewhere, a hard link to its own file, a FIFO (which
 * a walk that opened files would hang on: an alarm fails the test instead), a sparse
 * file of 8 GiB holding one page, nested directories. The walk must count what the
 * directory itself holds on disk, each inode once, and nothing it points at; stop at
 * its depth and entry limits, saying so; and refuse a walked directory that is a link. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "dir_usage.h"
#include "scratch_dir.h"

static char *path_in(const char *dir, const char *name) {
    size_t n = strlen(dir) + strlen(name) + 2;
    char *p = malloc(n);
    if (!p) abort();
    snprintf(p, n, "%s/%s", dir, name);
    return p;
}

/* A file of `bytes` bytes really written (its blocks on disk). */
static void write_file(const char *path, size_t bytes) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0, "create %s: %s", path, strerror(errno));
    char chunk[4096];
    memset(chunk, 'x', sizeof chunk);
    for (size_t done = 0; done < bytes; done += sizeof chunk)
        REQUIRE(write(fd, chunk, sizeof chunk) == (ssize_t)sizeof chunk, "write %s", path);
    REQUIRE(fsync(fd) == 0, "fsync %s", path);
    close(fd);
}

/* What `path` itself holds on disk, as lstat says (a link's own blocks). */
static uint64_t own_bytes(const char *path) {
    struct stat st;
    REQUIRE(lstat(path, &st) == 0, "lstat %s: %s", path, strerror(errno));
    return (uint64_t)st.st_blocks * 512u;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_dir_usage: FAILED: the walk did not return (it opened the FIFO?)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* The hostile run directory: what the walk must count, and must not. */
static void links_fifo_sparse(const char *scratch) {
    char *outside = path_in(scratch, "outside"), *run = path_in(scratch, "run");
    REQUIRE(mkdir(outside, 0755) == 0 && mkdir(run, 0755) == 0, "mkdir");
    char *big = path_in(outside, "big");
    write_file(big, 4u << 20); /* another user's big file */
    if (chown(big, 65534, 65534) != 0) { /* not root: still a file outside the walked directory */
    }
    char *data = path_in(run, "data"), *hard = path_in(run, "hard-link"), *sym = path_in(run, "to-big");
    char *dirlink = path_in(run, "to-outside"), *fifo = path_in(run, "fifo"), *sparse = path_in(run, "sparse");
    char *sub = path_in(run, "sub"), *deeper = path_in(sub, "deeper"), *inner = path_in(deeper, "file");
    write_file(data, 256u << 10);
    REQUIRE(link(data, hard) == 0, "link: %s", strerror(errno));
    REQUIRE(symlink(big, sym) == 0 && symlink(outside, dirlink) == 0, "symlink: %s", strerror(errno));
    REQUIRE(mkfifo(fifo, 0600) == 0, "mkfifo: %s", strerror(errno));
    int fd = open(sparse, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    REQUIRE(fd >= 0 && ftruncate(fd, 8LL << 30) == 0, "an 8 GiB sparse file: %s", strerror(errno));
    char page[4096];
    memset(page, 's', sizeof page);
    REQUIRE(pwrite(fd, page, sizeof page, 1LL << 30) == (ssize_t)sizeof page && fsync(fd) == 0, "its one page");
    close(fd);
    REQUIRE(mkdir(sub, 0755) == 0 && mkdir(deeper, 0755) == 0, "mkdir sub");
    write_file(inner, 64u << 10);
    /* each entry once (the hard link is the data file again), links and the FIFO by their own blocks */
    uint64_t want = own_bytes(run) + own_bytes(data) + own_bytes(sym) + own_bytes(dirlink) + own_bytes(fifo) +
                    own_bytes(sparse) + own_bytes(sub) + own_bytes(deeper) + own_bytes(inner);

    signal(SIGALRM, on_alarm);
    alarm(30);
    dir_usage du;
    int rc = dir_usage_measure(run, NULL, &du);
    alarm(0);
    CHECK(rc == 0, "the walk succeeds: %s", du.why);
    CHECK(du.bytes == want, "it counts what the directory holds, each inode once: %llu, want %llu",
          (unsigned long long)du.bytes, (unsigned long long)want);
    CHECK(du.bytes < (4u << 20), "not the big file a link names (%llu bytes)", (unsigned long long)du.bytes);
    CHECK(du.bytes < (1u << 20), "the sparse file by its blocks, not its 8 GiB (%llu bytes)", (unsigned long long)du.bytes);
    CHECK(du.entries == 9, "nine entries (the hard link seen, counted once): %llu", (unsigned long long)du.entries);
    CHECK(!du.incomplete, "complete: %s", du.why);
    struct stat st;
    CHECK(lstat(hard, &st) == 0 && st.st_nlink == 2, "the data file has two names");
    CHECK(lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), "the FIFO is left as it was");

    /* the walked directory itself a link: refused, not followed */
    char *runlink = path_in(scratch, "run-link");
    REQUIRE(symlink(outside, runlink) == 0, "symlink");
    rc = dir_usage_measure(runlink, NULL, &du);
    CHECK(rc == -1 && strstr(du.why, "symbolic link"), "a walked directory that is a link is refused: %d %s", rc, du.why);
    free(runlink);
    free(outside);
    free(run);
    free(big);
    free(data);
    free(hard);
    free(sym);
    free(dirlink);
    free(fifo);
    free(sparse);
    free(sub);
    free(deeper);
    free(inner);
}

/* A directory too deep, or with too many entries: counted down to the limit, and said. */
static void limits(const char *scratch) {
    char *deep = path_in(scratch, "deep");
    REQUIRE(mkdir(deep, 0755) == 0, "mkdir deep");
    char path[4096];
    snprintf(path, sizeof path, "%s", deep);
    for (int i = 0; i < 10; i++) {
        size_t n = strlen(path);
        snprintf(path + n, sizeof path - n, "/d");
        REQUIRE(mkdir(path, 0755) == 0, "mkdir %s", path);
    }
    char *bottom = path_in(path, "bottom");
    write_file(bottom, 1u << 20);
    dir_usage du;
    CHECK(dir_usage_measure(deep, &(dir_usage_limits){.max_depth = 5, .max_entries = 1000}, &du) == 0, "walked");
    CHECK(du.incomplete && strstr(du.why, "more than 5 directories deep"), "too deep, said: %d %s", du.incomplete,
          du.why);
    CHECK(du.bytes < (1u << 20), "what lies below the limit is not counted: %llu", (unsigned long long)du.bytes);
    CHECK(dir_usage_measure(deep, NULL, &du) == 0 && !du.incomplete && du.bytes >= (1u << 20),
          "the default limits walk it all: %llu %s", (unsigned long long)du.bytes, du.why);

    char *wide = path_in(scratch, "wide");
    REQUIRE(mkdir(wide, 0755) == 0, "mkdir wide");
    for (int i = 0; i < 100; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%d", i);
        char *f = path_in(wide, name);
        write_file(f, 4096);
        free(f);
    }
    CHECK(dir_usage_measure(wide, &(dir_usage_limits){.max_depth = 5, .max_entries = 50}, &du) == 0, "walked");
    CHECK(du.incomplete && du.entries == 50 && strstr(du.why, "more than 50 entries"),
          "too many entries, said: %d %llu %s", du.incomplete, (unsigned long long)du.entries, du.why);
    CHECK(dir_usage_measure(wide, NULL, &du) == 0 && !du.incomplete && du.entries == 100, "all of them by default: %llu",
          (unsigned long long)du.entries);
    char *missing = path_in(scratch, "missing");
    CHECK(dir_usage_measure(missing, NULL, &du) == -1 && strstr(du.why, "cannot open"), "a missing one: %s", du.why);
    free(missing);
    free(wide);
    free(bottom);
    free(deep);
}

int main(void) {
    char *scratch = scratch_dir_make("dir-usage");
    REQUIRE(scratch, "a scratch directory");
    links_fifo_sparse(scratch);
    limits(scratch);
    scratch_dir_remove(scratch);
    free(scratch);
    return test_done("test_dir_usage");
}
