/* The decompressed-dataset cache: a miss loads and writes it, a hit maps the same
 * bytes, `limit` applies to both, a changed source file is a new key, and a damaged
 * cache file is ignored (the data comes from the source again); a SIGBUS is blamed on a
 * mapped cache file only when that file changed. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "idx.h"

#define DATA "/usr/share/datasets/fashion-mnist"

static int same(const idx_dataset *a, const idx_dataset *b) {
    return a->count == b->count && a->rows == b->rows && a->cols == b->cols && a->num_classes == b->num_classes &&
           memcmp(a->images, b->images, a->count * (size_t)a->rows * a->cols) == 0 &&
           memcmp(a->labels, b->labels, a->count) == 0;
}

static int count_files(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "ls %s | wc -l", dir);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p && fscanf(p, "%d", &n) != 1) n = -1;
    if (p) pclose(p);
    return n;
}

int main(void) {
    char tmpl[] = "/tmp/ddpd-idx-cache-XXXXXX";
    char *dir = mkdtemp(tmpl);
    REQUIRE(dir != NULL, "mkdtemp");
    char cache[600], err[1024], note[1024];
    snprintf(cache, sizeof cache, "%s/cache/nested", dir);
    const char *images = DATA "/t10k-images-idx3-ubyte.gz", *labels = DATA "/t10k-labels-idx1-ubyte.gz";

    idx_dataset plain, miss, hit, limited;
    REQUIRE(idx_load(NULL, images, labels, 0, &plain, err, sizeof err) == 0, "plain load: %s", err);
    CHECK(idx_load_cached(NULL, images, labels, 0, cache, &miss, err, sizeof err, note, sizeof note) == 0, "%s", err);
    CHECK(strstr(note, "cached in") != NULL, "first load writes the cache: %s", note);
    CHECK(miss.mapping == NULL && same(&plain, &miss), "a miss returns the data");
    CHECK(count_files(cache) == 1, "one cache file, no temporary left: %d", count_files(cache));
    CHECK(idx_load_cached(NULL, images, labels, 0, cache, &hit, err, sizeof err, note, sizeof note) == 0, "%s", err);
    CHECK(hit.mapping != NULL && strstr(note, "mapped") != NULL, "second load maps the cache: %s", note);
    CHECK(same(&plain, &hit), "a hit returns the very same bytes");
    CHECK(idx_load_cached(NULL, images, labels, 100, cache, &limited, err, sizeof err, note, sizeof note) == 0, "%s", err);
    CHECK(limited.count == 100 && memcmp(limited.labels, plain.labels, 100) == 0, "limit on a hit");
    /* A SIGBUS is blamed on the cache only when the file mapped changed under it. */
    char why[2048] = "";
    CHECK(idx_cache_explain_bus_error(&hit, why, sizeof why) == 0, "an unchanged cache is not blamed: %s", why);
    CHECK(idx_cache_explain_bus_error(&miss, why, sizeof why) == 0, "nor data that is not mapped: %s", why);
    struct timespec later[2] = {{0, UTIME_OMIT}, {1, 0}}; /* mtime: 1970, so surely not what it was */
    CHECK(utimensat(AT_FDCWD, hit.cache_path, later, 0) == 0, "touch %s", hit.cache_path);
    CHECK(idx_cache_explain_bus_error(&hit, why, sizeof why) == 1 && strstr(why, hit.cache_path) &&
              strstr(why, "rewritten in place while the run was reading it") && strstr(why, "delete it"),
          "a cache file modified after it was mapped is named: %s", why);
    idx_free(&miss);
    idx_free(&hit);
    idx_free(&limited);

    /* A source file that changes is another key: copy, load, touch, load again. */
    char img_copy[700], lab_copy[700], cmd[2048];
    snprintf(img_copy, sizeof img_copy, "%s/img.gz", dir);
    snprintf(lab_copy, sizeof lab_copy, "%s/lab.gz", dir);
    snprintf(cmd, sizeof cmd, "cp %s %s && cp %s %s", images, img_copy, labels, lab_copy);
    REQUIRE(system(cmd) == 0, "copy");
    CHECK(idx_load_cached(NULL, img_copy, lab_copy, 0, cache, &miss, err, sizeof err, note, sizeof note) == 0, "%s", err);
    idx_free(&miss);
    CHECK(count_files(cache) == 2, "the copy has its own entry");
    snprintf(cmd, sizeof cmd, "touch -d '2001-01-01' %s", lab_copy);
    REQUIRE(system(cmd) == 0, "touch");
    CHECK(idx_load_cached(NULL, img_copy, lab_copy, 0, cache, &miss, err, sizeof err, note, sizeof note) == 0, "%s", err);
    CHECK(strstr(note, "cached in") != NULL, "a changed source is a miss: %s", note);
    idx_free(&miss);

    /* A damaged cache file is not trusted. */
    snprintf(cmd, sizeof cmd, "for f in %s/*.idxcache; do truncate -s 1000 $f; done", cache);
    REQUIRE(system(cmd) == 0, "truncate");
    CHECK(idx_load_cached(NULL, images, labels, 0, cache, &hit, err, sizeof err, note, sizeof note) == 0, "%s", err);
    CHECK(hit.mapping == NULL && same(&plain, &hit), "a truncated cache file is reloaded from the source");
    idx_free(&hit);

    /* A missing source is reported as such, cache or not. */
    CHECK(idx_load_cached(NULL, DATA "/nope.gz", labels, 0, cache, &hit, err, sizeof err, note, sizeof note) != 0 &&
              strstr(err, "nope.gz") != NULL,
          "missing file: %s", err);
    idx_free(&plain);
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return test_done("test_idx_cache");
}
