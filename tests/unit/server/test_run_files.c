/* Unit tests of the one way into a run's directory (server/lib/run_files.c) and of
 * the bounded line reader (server/lib/line_reader.c), on a real directory made as a
 * hostile run would leave it: a link where its config or log was, a link on the way
 * (ranks/ pointing out), a FIFO where a file should be (refused at once, never waited
 * on: an alarm fails the test if an open blocks), a file of another account and a
 * hard link of the server's (as root), a file over its bound; a write over a link
 * replaces the link and leaves its target alone; a log opened for appending where a
 * link or a FIFO is; a hand-over that chowns by descriptors (never a hard link, never
 * a link's target); a removal that never follows a link, also while another process
 * renames a subdirectory away and puts a link to a directory outside in its place,
 * over and over; a journal line of 3 GiB of nothing skipped without being read or
 * buffered, and the lines around it read. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "line_reader.h"
#include "run_files.h"
#include "scratch_dir.h"

#define OTHER_UID 65534 /* nobody: a run's account, as root makes it */

static void put(const char *dir, const char *name, const char *text) {
    char *path = xasprintf("%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    REQUIRE(f, "cannot write %s", path);
    fputs(text, f);
    fclose(f);
    free(path);
}

static char *get(const char *dir, const char *name) {
    char *path = xasprintf("%s/%s", dir, name);
    char *text = scratch_read_file(path);
    free(path);
    return text;
}

static char *sub_dir(const char *dir, const char *name) {
    char *path = xasprintf("%s/%s", dir, name);
    REQUIRE(mkdir(path, 0700) == 0, "mkdir %s: %s", path, strerror(errno));
    return path;
}

static bool same_text(const char *dir, const char *name, const char *want) {
    char *got = get(dir, name);
    bool same = got && strcmp(got, want) == 0;
    free(got);
    return same;
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "test_run_files: an open blocked (a FIFO was waited on)\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(1);
}

/* Reads: links, FIFOs, bounds. */
static void test_reads(const char *scratch) {
    char *run = sub_dir(scratch, "reads"), *outside = sub_dir(scratch, "reads-outside"), err[512];
    put(outside, "secret", "{\"OPENAI_API_KEY\": \"sk-alice\"}");
    char *secret = xasprintf("%s/secret", outside);
    run_dir d;
    REQUIRE(run_dir_open(&d, run, err, sizeof err) == 0, "open the run directory: %s", err);

    char *cfg_link = xasprintf("%s/config.json", run);
    CHECK(symlink(secret, cfg_link) == 0, "a link where the config was");
    free(cfg_link);
    json_t *cfg = run_file_load_json(&d, "config.json", RUN_FILE_SMALL_MAX, err, sizeof err);
    CHECK(!cfg && errno == ELOOP && run_file_planted(errno) && strstr(err, "does not follow a run's links"),
          "a config that is a link is not read through: %s", err);
    json_decref(cfg);

    char *ranks = xasprintf("%s/ranks", run);
    CHECK(symlink(outside, ranks) == 0, "a link on the way");
    struct stat st;
    int fd = run_file_open(&d, "ranks/secret", RUN_FILE_ANY_SIZE, &st, err, sizeof err);
    CHECK(fd < 0 && errno == ELOOP, "a file beneath a link (ranks/ to elsewhere) is not reached: fd %d, %s", fd, err);
    free(ranks);

    char *fifo = xasprintf("%s/trainer.log", run);
    REQUIRE(mkfifo(fifo, 0600) == 0, "mkfifo");
    alarm(20);
    fd = run_file_open(&d, "trainer.log", RUN_FILE_ANY_SIZE, &st, err, sizeof err);
    CHECK(fd < 0 && errno == ENXIO && strstr(err, "a FIFO"), "a FIFO is refused at once, said so: %s", err);
    fd = run_file_open_append(&d, "trainer.log", err, sizeof err);
    CHECK(fd < 0 && errno == ENXIO && strstr(err, "FIFO"), "nor appended to: %s", err);
    alarm(0);
    free(fifo);

    put(run, "big.json", "{\"x\": \"0123456789012345678901234567890123456789\"}");
    cfg = run_file_load_json(&d, "big.json", 16, err, sizeof err);
    CHECK(!cfg && errno == EFBIG && strstr(err, "more than the 16"), "a file over its bound is refused: %s", err);
    cfg = run_file_load_json(&d, "big.json", RUN_FILE_SMALL_MAX, err, sizeof err);
    CHECK(cfg && json_is_object(cfg), "within the bound it is read: %s", cfg ? "" : err);
    json_decref(cfg);

    CHECK(run_file_open(&d, "../reads-outside/secret", RUN_FILE_ANY_SIZE, &st, err, sizeof err) < 0 && errno == EINVAL,
          "a path that climbs out is refused: %s", err);
    CHECK(run_file_open(&d, "/etc/passwd", RUN_FILE_ANY_SIZE, &st, err, sizeof err) < 0 && errno == EINVAL,
          "an absolute path is refused");

    char *planted = xasprintf("%s/planted", run);
    CHECK(mkdir(planted, 0700) == 0, "mkdir");
    CHECK(run_file_open(&d, "planted", RUN_FILE_ANY_SIZE, &st, err, sizeof err) < 0 && errno == ENXIO,
          "a directory is not a file: %s", err);
    free(planted);
    run_dir_close(&d);

    char *linked_dir = xasprintf("%s/reads-link", scratch);
    CHECK(symlink(run, linked_dir) == 0, "symlink");
    CHECK(run_dir_open(&d, linked_dir, err, sizeof err) != 0 && errno == ELOOP, "a run directory that is a link: %s", err);
    free(linked_dir);
    free(secret);
    free(run);
    free(outside);
}

/* As root: a file of another account, a hard link of the server's. */
static void test_owners(const char *scratch) {
    if (geteuid() != 0) {
        printf("test_run_files: owners: skipped (they need root to make another account's files)\n");
        return;
    }
    char *run = sub_dir(scratch, "owners"), *outside = sub_dir(scratch, "owners-outside"), err[512];
    put(outside, "root-only", "root's words");
    put(run, "mine", "the account's words");
    char *mine = xasprintf("%s/mine", run), *theirs = xasprintf("%s/theirs", run), *hard = xasprintf("%s/hard", run);
    put(run, "theirs", "another account's words");
    char *root_only = xasprintf("%s/root-only", outside);
    REQUIRE(chown(run, OTHER_UID, OTHER_UID) == 0 && chown(mine, OTHER_UID, OTHER_UID) == 0 &&
                chown(theirs, 12345, 12345) == 0 && link(root_only, hard) == 0,
            "set up: %s", strerror(errno));
    run_dir d;
    REQUIRE(run_dir_open(&d, run, err, sizeof err) == 0, "open: %s", err);
    CHECK(d.owner == OTHER_UID, "the directory's owner is the run's account: %d", (int)d.owner);
    struct stat st;
    int fd = run_file_open(&d, "mine", RUN_FILE_ANY_SIZE, &st, err, sizeof err);
    CHECK(fd >= 0, "the account's own file is read: %s", err);
    if (fd >= 0) close(fd);
    fd = run_file_open(&d, "theirs", RUN_FILE_ANY_SIZE, &st, err, sizeof err);
    CHECK(fd < 0 && errno == EXDEV && strstr(err, "belongs to uid 12345"), "another account's file is refused: %s", err);
    fd = run_file_open(&d, "hard", RUN_FILE_ANY_SIZE, &st, err, sizeof err);
    CHECK(fd < 0 && errno == EXDEV && strstr(err, "hard link"), "a hard link to a root file is refused: %s", err);

    /* a write is the account's file; a link in its place is replaced, its target untouched */
    char *cfg = xasprintf("%s/config.json", run);
    REQUIRE(symlink(root_only, cfg) == 0, "symlink");
    json_t *doc = json_pack("{s:s}", "name", "trial");
    CHECK(run_file_write_json(&d, "config.json", doc, err, sizeof err) == 0, "written: %s", err);
    json_decref(doc);
    CHECK(lstat(cfg, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == OTHER_UID && (st.st_mode & 0777) == 0600,
          "config.json is now the account's own file, 0600 (uid %d, mode %o)", (int)st.st_uid, st.st_mode & 0777);
    CHECK(same_text(outside, "root-only", "root's words"), "the link's target is unchanged");
    free(cfg);

    /* appending: a log made anew is the account's */
    fd = run_file_open_append(&d, "trainer.log", err, sizeof err);
    CHECK(fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == OTHER_UID, "a new log is the account's: %s", err);
    if (fd >= 0) close(fd);
    run_dir_close(&d);

    /* a hand-over by descriptors: the server's own file, not a hard link nor a link's target */
    char *given = sub_dir(scratch, "handed");
    put(given, "config.json", "{}");
    char *hard2 = xasprintf("%s/hard", given), *sym = xasprintf("%s/sym", given);
    REQUIRE(link(root_only, hard2) == 0 && symlink(root_only, sym) == 0, "set up");
    REQUIRE(run_dir_open(&d, given, err, sizeof err) == 0, "open: %s", err);
    CHECK(run_dir_hand_over(&d, OTHER_UID, 0, 0770, err, sizeof err) == 0, "handed over: %s", err);
    run_dir_close(&d);
    struct stat dir_st, cfg_st, target_st;
    char *given_cfg = xasprintf("%s/config.json", given);
    CHECK(stat(given, &dir_st) == 0 && dir_st.st_uid == OTHER_UID && (dir_st.st_mode & 0777) == 0770,
          "the directory is the account's, 0770");
    CHECK(stat(given_cfg, &cfg_st) == 0 && cfg_st.st_uid == OTHER_UID, "the server's config.json is the account's");
    CHECK(stat(root_only, &target_st) == 0 && target_st.st_uid == 0,
          "the root file a hard link and a link named stays root's (uid %d)", (int)target_st.st_uid);
    free(given_cfg);
    free(hard2);
    free(sym);
    free(given);
    free(root_only);
    free(mine);
    free(theirs);
    free(hard);
    free(run);
    free(outside);
}

/* A tree of n files under dir/sub. */
static void fill(const char *dir, int n) {
    char *sub = xasprintf("%s/sub", dir);
    mkdir(sub, 0700);
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%d", i);
        put(sub, name, "x");
    }
    free(sub);
}

static int count_files(const char *dir) {
    int n = 0;
    for (int i = 0; i < 1000; i++) {
        char *path = xasprintf("%s/f%d", dir, i);
        n += access(path, F_OK) == 0;
        free(path);
    }
    return n;
}

static void test_remove(const char *scratch) {
    char err[512];
    char *run = sub_dir(scratch, "removed"), *outside = sub_dir(scratch, "removed-outside");
    for (int i = 0; i < 10; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        put(outside, name, "keep");
    }
    fill(run, 5);
    char *deep = xasprintf("%s/sub/deeper", run), *to_out = xasprintf("%s/sub/out", run), *to_file = xasprintf("%s/lnk", run);
    char *outside_f0 = xasprintf("%s/f0", outside);
    CHECK(mkdir(deep, 0700) == 0 && symlink(outside, to_out) == 0 && symlink(outside_f0, to_file) == 0, "set up");
    put(deep, "x", "y");
    char *fifo = xasprintf("%s/fifo", run);
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo");
    alarm(20);
    CHECK(run_dir_remove(run, err, sizeof err) == 0, "removed: %s", err);
    alarm(0);
    CHECK(access(run, F_OK) != 0, "the run directory is gone");
    CHECK(count_files(outside) == 10, "every file the links named is still there: %d of 10", count_files(outside));
    CHECK(run_dir_remove(run, err, sizeof err) == 0, "a directory already gone: removed");
    free(run);

    /* the race: another process of the account renames the subdirectory away (into its
     * other run) and puts a link to the outside directory in its place, over and over */
    char *other = sub_dir(scratch, "removed-other-run");
    for (int round = 0; round < 3; round++) {
        run = xasprintf("%s/raced-%d", scratch, round);
        REQUIRE(mkdir(run, 0700) == 0, "mkdir");
        fill(run, 300);
        pid_t swapper = fork();
        if (swapper == 0) {
            char *sub = xasprintf("%s/sub", run);
            for (int i = 0; i < 20000; i++) {
                char *away = xasprintf("%s/moved-%d-%d", other, round, i);
                if (rename(sub, away) == 0) (void)symlink(outside, sub);
                free(away);
                struct stat st;
                if (lstat(run, &st) != 0) break; /* removed: done */
                if (lstat(sub, &st) == 0 && S_ISLNK(st.st_mode)) { /* put a real directory back, full */
                    unlink(sub);
                    mkdir(sub, 0700);
                    for (int k = 0; k < 20; k++) { /* (the removal may take them as they come) */
                        char *f = xasprintf("%s/f%d", sub, k);
                        int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
                        if (fd >= 0) close(fd);
                        free(f);
                    }
                }
            }
            _exit(0);
        }
        for (int tries = 0; tries < 50 && access(run, F_OK) == 0; tries++) (void)run_dir_remove(run, err, sizeof err);
        kill(swapper, SIGKILL);
        waitpid(swapper, NULL, 0);
        (void)run_dir_remove(run, err, sizeof err);
        CHECK(count_files(outside) == 10, "round %d: nothing outside was deleted through the swapped link: %d of 10 left",
              round, count_files(outside));
        free(run);
    }
    free(other);
    free(fifo);
    free(outside_f0);
    free(deep);
    free(to_out);
    free(to_file);
    free(outside);
}

static void test_lines(const char *scratch) {
    char *path = xasprintf("%s/events.jsonl", scratch);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0, "open");
    const off_t hole = (off_t)3 << 30; /* 3 GiB of nothing in one line */
    CHECK(write(fd, "a\n{", 3) == 3, "write");
    CHECK(pwrite(fd, "}\nb\nc", 5, hole) == 5, "pwrite past a hole");
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_blocks * 512 < (1 << 20), "sparse: %lld bytes on disk", (long long)st.st_blocks * 512);
    line_reader r;
    line_reader_init(&r, fd, 0, 1 << 20);
    const char *line;
    size_t len;
    int64_t budget = 64 << 20;
    CHECK(line_reader_next(&r, &line, &len, &budget) == 1 && len == 2 && memcmp(line, "a\n", 2) == 0, "first line");
    CHECK(line_reader_next(&r, &line, &len, &budget) == 1 && len == 2 && memcmp(line, "b\n", 2) == 0,
          "the line after the 3 GiB one: %.*s", (int)len, line);
    CHECK(r.skipped_lines == 1 && r.skipped_bytes == (int64_t)hole - 2 + 2, "one line skipped, all its bytes: %lld",
          (long long)r.skipped_bytes);
    CHECK(budget > (48 << 20), "its hole was jumped, not read: %lld bytes read", (long long)((64 << 20) - budget));
    CHECK(r.cap <= (2 << 20), "memory stays bounded: a buffer of %zu bytes", r.cap);
    CHECK(line_reader_next(&r, &line, &len, &budget) == 0 && line_reader_rest(&r) == 1, "the last line is not whole");
    CHECK(pwrite(fd, "\n", 1, hole + 5) == 1, "its newline comes");
    CHECK(line_reader_next(&r, &line, &len, &budget) == 1 && len == 2 && memcmp(line, "c\n", 2) == 0, "and it is read");
    CHECK(r.consumed == (int64_t)hole + 6, "consumed to the end: %lld", (long long)r.consumed);
    line_reader_free(&r);

    /* a dense overlong line, then a budget that runs out mid-line: come back later */
    CHECK(ftruncate(fd, 0) == 0, "truncate");
    char *block = xmalloc(1 << 20);
    memset(block, 'x', 1 << 20);
    for (int i = 0; i < 4; i++) CHECK(pwrite(fd, block, 1 << 20, (off_t)i << 20) == 1 << 20, "pwrite");
    CHECK(pwrite(fd, "\nd\n", 3, (off_t)4 << 20) == 3, "pwrite");
    line_reader_init(&r, fd, 0, 1 << 20);
    budget = 1 << 20;
    CHECK(line_reader_next(&r, &line, &len, &budget) == 0, "the budget ends mid-line: nothing yet");
    budget = 64 << 20;
    CHECK(line_reader_next(&r, &line, &len, &budget) == 1 && len == 2 && line[0] == 'd', "then the line after it");
    CHECK(r.skipped_lines == 1 && r.cap <= (2 << 20), "skipped (1 line), buffer %zu", r.cap);
    line_reader_drop_rest(&r);
    line_reader_free(&r);
    free(block);
    close(fd);
    unlink(path);
    free(path);
}

int main(void) {
    signal(SIGALRM, on_alarm);
    char *scratch = scratch_dir_make("run-files");
    REQUIRE(scratch, "a scratch directory");
    test_reads(scratch);
    test_owners(scratch);
    test_remove(scratch);
    test_lines(scratch);
    scratch_dir_remove(scratch);
    free(scratch);
    return test_done("test_run_files");
}
