/* Opening data files beneath their data root (trainer/data_open.c), on a real
 * directory tree: files and in-root symlinks open; a directory swapped for a
 * symlink that leads out, "..", and absolute paths outside every root are refused
 * at open time, with messages that name the file relative to its root and never
 * show what lies outside. */
#include "check.h"
#include "data_open.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char base[256], root[300], outside[300];

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    REQUIRE(f, "create %s", path);
    fputs(text, f);
    fclose(f);
}

static char *join(const char *a, const char *b) {
    static char bufs[16][700];
    static int next;
    char *p = bufs[next++ % 16];
    snprintf(p, 700, "%s/%s", a, b);
    return p;
}

/* Opens and reads the first bytes, or returns err's text. */
static const char *open_and_read(const data_roots *r, const char *path, char *err, size_t n) {
    static char got[64];
    err[0] = '\0';
    int fd = data_open(r, path, err, n);
    if (fd < 0) return NULL;
    ssize_t k = read(fd, got, sizeof got - 1);
    close(fd);
    got[k > 0 ? k : 0] = '\0';
    return got;
}

int main(void) {
    char err[512];
    snprintf(base, sizeof base, "/tmp/ddpd-data-open-XXXXXX");
    REQUIRE(mkdtemp(base), "temp dir");
    snprintf(root, sizeof root, "%s/root", base);
    snprintf(outside, sizeof outside, "%s/outside", base);
    mkdir(root, 0700);
    mkdir(outside, 0700);
    mkdir(join(root, "fm"), 0700);
    put(join(root, "fm/train.idx"), "inside");
    put(join(outside, "train.idx"), "SECRET-outside");
    REQUIRE(symlink("fm/train.idx", join(root, "alias.idx")) == 0, "symlink inside the root");

    data_roots r = {0};
    REQUIRE(data_roots_add(&r, root, err, sizeof err) == 0, "%s", err);
    const char *got;

    got = open_and_read(&r, join(root, "fm/train.idx"), err, sizeof err);
    CHECK(got && strcmp(got, "inside") == 0, "an absolute path inside the root opens: %s", err);
    got = open_and_read(&r, "fm/train.idx", err, sizeof err);
    CHECK(got && strcmp(got, "inside") == 0, "a relative path opens from the root: %s", err);
    got = open_and_read(&r, join(root, "alias.idx"), err, sizeof err);
    CHECK(got && strcmp(got, "inside") == 0, "a symlink that stays inside the root opens: %s", err);

    /* The run was checked with fm/ a directory; then fm/ is swapped for a symlink out. */
    REQUIRE(rename(join(root, "fm"), join(base, "fm-was")) == 0, "move fm away");
    REQUIRE(symlink(outside, join(root, "fm")) == 0, "swap in a symlink");
    got = open_and_read(&r, join(root, "fm/train.idx"), err, sizeof err);
    CHECK(!got, "the swapped-in symlink out of the root is refused at open (read \"%s\")", got ? got : "");
    CHECK(strstr(err, "fm/train.idx: leads out of its data root") != NULL, "the reason says so: %s", err);
    CHECK(!strstr(err, "SECRET") && !strstr(err, outside) && !strstr(err, root),
          "and shows neither the target, its contents nor the server's paths: %s", err);

    got = open_and_read(&r, "../outside/train.idx", err, sizeof err);
    CHECK(!got && strstr(err, "leads out of its data root"), "\"..\" is refused: %s", err);
    got = open_and_read(&r, join(outside, "train.idx"), err, sizeof err);
    CHECK(!got && strstr(err, "is outside the data roots"), "an absolute path outside is refused: %s", err);
    got = open_and_read(&r, "fm-missing/x", err, sizeof err);
    CHECK(!got && strstr(err, "fm-missing/x: cannot open: No such file or directory"), "a missing file: %s", err);
    got = open_and_read(&r, root, err, sizeof err);
    CHECK(!got, "the root itself is no data file");

    /* Without roots (ddp-trainer on its own) paths open as given. */
    got = open_and_read(NULL, join(outside, "train.idx"), err, sizeof err);
    CHECK(got && strcmp(got, "SECRET-outside") == 0, "no roots: as given: %s", err);
    CHECK(strcmp(data_display_name(&r, join(root, "a/b")), "a/b") == 0, "names are shown relative to their root");

    unlink(join(root, "fm"));
    unlink(join(root, "alias.idx"));
    unlink(join(base, "fm-was/train.idx"));
    rmdir(join(base, "fm-was"));
    unlink(join(outside, "train.idx"));
    rmdir(outside);
    rmdir(root);
    rmdir(base);
    return test_done("test_data_open");
}
