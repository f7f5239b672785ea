/* trainer/run_io/log_cap.c, the cap on each of a run's logs: two writers of one file
 * (a built-in run's launcher and rank, or ddp-run's own lines and its copies of the
 * ranks' output), each with a descriptor and a cap of its own. Writes that fit go
 * through whole; the one that would pass the cap less the room is cut there and the
 * line that says so follows, once; after it nothing from either writer fits, so the
 * file stays at or under the cap with that line last, and its size says it reached
 * the cap (what the server looks at: run_dir.h). A cap that is not a size, or none,
 * caps nothing. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "log_cap.h"
#include "run_dir.h"
#include "scratch_dir.h"

static char *read_all(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = calloc(1, 1 << 20);
    *len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
    fclose(f);
    return buf;
}

static int open_log(const char *path) { return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600); }

int main(void) {
    char *dir = scratch_dir_make("log-cap");
    REQUIRE(dir, "a scratch directory: %s", strerror(errno));
    char path[600];
    snprintf(path, sizeof path, "%s/trainer.log", dir);
    setenv(RUN_DIR_LOG_CAP_ENV, "4K", 1);
    log_cap a, b;
    log_cap_init(&a);
    log_cap_init(&b);
    CHECK(a.cap == 4096 && !a.capped, "the cap from the environment, as a size: %llu", (unsigned long long)a.cap);
    int fa = open_log(path), fb = open_log(path);
    REQUIRE(fa >= 0 && fb >= 0, "open");
    char line[100];
    memset(line, 'x', sizeof line - 1);
    line[sizeof line - 1] = '\n';
    /* whole lines from both, 3000 bytes of the 3584 the cap leaves before its room */
    int written = 0;
    for (int i = 0; i < 30; i++) log_cap_write(i % 2 ? &b : &a, i % 2 ? fb : fa, line, sizeof line), written++;
    char big[3000];
    memset(big, 'y', sizeof big);
    log_cap_write(&a, fa, big, sizeof big); /* a big chunk crosses: cut to the byte */
    CHECK(a.capped, "the writer that met the cap knows it");
    log_cap_write(&b, fb, "a short line\n", 13); /* the other finds no room left */
    log_cap_write(&a, fa, "another\n", 8);
    CHECK(b.capped, "and so does the other, at its next write");
    log_cap b_later;
    log_cap_init(&b_later);
    log_cap_write(&b_later, fb, "late\n", 5); /* a writer that starts after (a restart's launcher) */
    size_t len = 0;
    char *text = read_all(path, &len);
    REQUIRE(text, "read the log");
    struct stat st;
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == len, "read whole");
    CHECK(len <= 4096, "the log is no longer than its cap: %zu", len);
    CHECK(len + RUN_DIR_LOG_CAP_ROOM > 4096, "and its size says it reached the cap: %zu", len);
    const char *notice = "ddpd: this log reached its cap of 4 KiB (ddpd serve --max-log-bytes-per-run";
    const char *first = strstr(text, notice);
    CHECK(first && !strstr(first + 1, notice), "the line that says so, once");
    CHECK(first && text[len - 1] == '\n' && !strchr(first, '\n')[1], "and last");
    CHECK(first && first > text && first[-1] == '\n', "on a line of its own after the cut chunk");
    CHECK(strstr(text, "yyyy") != NULL, "the chunk that crossed was cut, not dropped");
    CHECK(!strstr(text, "a short line") && !strstr(text, "another") && !strstr(text, "late"),
          "nothing after it, from any writer");
    int lines_of_x = 0;
    for (const char *p = text; (p = strstr(p, "xxxxxxxxxx\n")); p++) lines_of_x++;
    CHECK(lines_of_x == written, "every whole line before it is there: %d of %d", lines_of_x, written);
    free(text);
    close(fa);
    close(fb);

    /* no cap, and a value that is not a size: nothing is capped */
    setenv(RUN_DIR_LOG_CAP_ENV, "0", 1);
    log_cap none;
    log_cap_init(&none);
    CHECK(none.cap == 0, "0: no cap");
    setenv(RUN_DIR_LOG_CAP_ENV, "12q", 1);
    log_cap_init(&none);
    CHECK(none.cap == 0, "not a size: no cap (said on stderr)");
    unsetenv(RUN_DIR_LOG_CAP_ENV);
    log_cap_init(&none);
    int fd = open_log(path);
    log_cap_write(&none, fd, big, sizeof big);
    close(fd);
    CHECK(stat(path, &st) == 0 && (size_t)st.st_size == len + sizeof big, "without a cap every write goes through: %lld",
          (long long)st.st_size);
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_log_cap");
}
