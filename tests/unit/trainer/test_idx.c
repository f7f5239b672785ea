/* Tests for the IDX loader: small files built here (plain and gzipped), every way a file
 * can be wrong (each error must name the file and the problem), and the real
 * Fashion-MNIST files from Debian's dataset-fashion-mnist package, which must be
 * installed (scripts/install-deps.sh does it): a missing dataset fails the test.
 * check.h's REQUIRE evaluates its condition twice: conditions here have no side effects. */
#include "check.h"
#include "idx.h"

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

static char tmp_dir[512];

/* ------------------------------------------------------------ building files */

typedef struct {
    unsigned char *bytes;
    size_t len;
} blob;

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* An IDX file with the given magic and dims whose data is `data_len` bytes of a
 * pattern (or of `data` when given). */
static blob idx_blob(uint32_t magic, const uint32_t *dims, int ndims, const uint8_t *data,
                     size_t data_len) {
    blob b = {malloc(4 + 4 * (size_t)ndims + data_len + 1), 4 + 4 * (size_t)ndims + data_len};
    REQUIRE(b.bytes, "out of memory");
    put_be32(b.bytes, magic);
    for (int i = 0; i < ndims; i++) put_be32(b.bytes + 4 + 4 * i, dims[i]);
    for (size_t i = 0; i < data_len; i++)
        b.bytes[4 + 4 * ndims + i] = data ? data[i] : (uint8_t)(i * 7 + 3);
    return b;
}

static blob images_blob(uint32_t count, uint32_t rows, uint32_t cols, size_t data_len) {
    uint32_t dims[3] = {count, rows, cols};
    return idx_blob(0x00000803, dims, 3, NULL, data_len);
}

static blob labels_blob(const uint8_t *labels, uint32_t count) {
    return idx_blob(0x00000801, &count, 1, labels, count);
}

/* Each path gets its own slot, so the pointers stay valid for the whole test. */
static const char *tmp_path(const char *name) {
    static char paths[512][600];
    static int next;
    REQUIRE(next < 512, "test made too many paths");
    char *p = paths[next++];
    snprintf(p, 600, "%s/%s", tmp_dir, name);
    return p;
}

static const char *write_plain(const char *name, const void *bytes, size_t len) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "cannot create %s", path);
    int written = fwrite(bytes, 1, len, f) == len;
    int closed = fclose(f) == 0;
    REQUIRE(written && closed, "cannot write %s", path);
    return path;
}

static const char *write_gz(const char *name, const void *bytes, size_t len) {
    const char *path = tmp_path(name);
    gzFile gz = gzopen(path, "wb");
    REQUIRE(gz, "cannot create %s", path);
    int written = len == 0 || gzwrite(gz, bytes, (unsigned)len) == (int)len;
    int closed = gzclose(gz) == Z_OK;
    REQUIRE(written && closed, "cannot write %s", path);
    return path;
}

static blob read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    REQUIRE(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    blob b = {NULL, (size_t)ftell(f)};
    rewind(f);
    b.bytes = malloc(b.len + 1);
    int read_ok = b.bytes && fread(b.bytes, 1, b.len, f) == b.len;
    REQUIRE(read_ok, "cannot read %s", path);
    fclose(f);
    return b;
}

static void make_tmp_dir(void) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/ddpd-test-idx-XXXXXX", base);
    int made = mkdtemp(tmp_dir) != NULL;
    REQUIRE(made, "mkdtemp in %s failed", base);
}

static void remove_tmp_dir(void) {
    DIR *d = opendir(tmp_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlink(tmp_path(e->d_name));
    closedir(d);
    rmdir(tmp_dir);
}

/* ------------------------------------------------------------ the small good pair */

#define N 5
#define ROWS 3
#define COLS 2
static const uint8_t LABELS[N] = {0, 3, 1, 2, 1};
static const char *good_images, *good_labels, *good_images_gz, *good_labels_gz;

static void write_good_pair(void) {
    blob im = images_blob(N, ROWS, COLS, N * ROWS * COLS), lb = labels_blob(LABELS, N);
    good_images = write_plain("images", im.bytes, im.len);
    good_labels = write_plain("labels", lb.bytes, lb.len);
    /* named without .gz on purpose: the loader must look at the bytes, not the name */
    good_images_gz = write_gz("images-gzipped", im.bytes, im.len);
    good_labels_gz = write_gz("labels.gz", lb.bytes, lb.len);
    free(im.bytes);
    free(lb.bytes);
}

static void check_good_dataset(const idx_dataset *d, size_t count, int classes) {
    CHECK(d->count == count, "count %zu, expected %zu", d->count, count);
    CHECK(d->rows == ROWS && d->cols == COLS, "dims %dx%d", d->rows, d->cols);
    CHECK(d->num_classes == classes, "num_classes %d, expected %d", d->num_classes, classes);
    int pixels_ok = 1, labels_ok = 1;
    for (size_t i = 0; i < count * ROWS * COLS; i++)
        if (d->images[i] != (uint8_t)(i * 7 + 3)) pixels_ok = 0;
    for (size_t i = 0; i < count; i++)
        if (d->labels[i] != LABELS[i]) labels_ok = 0;
    CHECK(pixels_ok, "pixels differ from what was written");
    CHECK(labels_ok, "labels differ from what was written");
}

static void test_good_files(void) {
    char err[512];
    const char *pairs[4][2] = {{good_images, good_labels},
                               {good_images_gz, good_labels_gz},
                               {good_images_gz, good_labels},
                               {good_images, good_labels_gz}};
    for (int p = 0; p < 4; p++) {
        idx_dataset d;
        int rc = idx_load(NULL, pairs[p][0], pairs[p][1], 0, &d, err, sizeof err);
        CHECK(rc == 0, "pair %d: %s", p, err);
        if (rc == 0) check_good_dataset(&d, N, 4);
        idx_free(&d);
    }
    /* limit: the first N examples; num_classes counts only those kept */
    size_t limits[] = {1, 2, N, N + 100};
    size_t counts[] = {1, 2, N, N};
    int classes[] = {1, 4, 4, 4};
    for (int i = 0; i < 4; i++) {
        idx_dataset d;
        int rc = idx_load(NULL, good_images_gz, good_labels_gz, limits[i], &d, err, sizeof err);
        CHECK(rc == 0, "limit %zu: %s", limits[i], err);
        if (rc == 0) check_good_dataset(&d, counts[i], classes[i]);
        idx_free(&d);
    }
}

/* ------------------------------------------------------------ errors */

/* Loading must fail, zero *out, and the error must name `named` and contain each of
 * the phrases. */
static void expect_error(const char *images, const char *labels, size_t limit, const char *named,
                         const char *phrase1, const char *phrase2) {
    char err[1024] = "";
    idx_dataset d;
    memset(&d, 0xab, sizeof d);
    int rc = idx_load(NULL, images, labels, limit, &d, err, sizeof err);
    CHECK(rc == -1, "loading %s should fail (%s expected)", named, phrase1);
    CHECK(d.images == NULL && d.labels == NULL && d.count == 0, "out not cleared on failure");
    CHECK(strstr(err, named) != NULL, "error does not name %s: %s", named, err);
    CHECK(strstr(err, phrase1) != NULL, "error lacks \"%s\": %s", phrase1, err);
    CHECK(!phrase2 || strstr(err, phrase2) != NULL, "error lacks \"%s\": %s", phrase2, err);
    printf("  ok: %s\n", err);
    if (rc == 0) idx_free(&d);
}

static void expect_images_error(const char *images, const char *phrase1, const char *phrase2) {
    expect_error(images, good_labels, 0, images, phrase1, phrase2);
}

static void test_open_and_empty(void) {
    expect_images_error(tmp_path("no-such-file"), "cannot open: No such file or directory", NULL);
    expect_error(good_images, tmp_path("no-labels"), 0, tmp_path("no-labels"),
                 "cannot open: No such file or directory", NULL);
    expect_images_error(write_plain("empty", "", 0), "is empty", "expected an IDX images file");
    expect_images_error(write_gz("empty.gz", "", 0), "is empty once decompressed", NULL);
    expect_images_error(tmp_dir, "cannot read: ", NULL); /* a directory */
}

static void test_bad_headers(void) {
    blob b = images_blob(N, ROWS, COLS, N * ROWS * COLS);
    put_be32(b.bytes, 0x12345678);
    expect_images_error(write_plain("bad-magic", b.bytes, b.len),
                        "is not an IDX images file: magic 0x12345678 (expected 0x00000803)", NULL);
    expect_images_error(write_gz("bad-magic.gz", b.bytes, b.len),
                        "is not an IDX images file: magic 0x12345678 (expected 0x00000803)", NULL);
    put_be32(b.bytes, 0x00000d03);
    expect_images_error(write_plain("float-images", b.bytes, b.len),
                        "holds 32-bit float values (magic 0x00000d03)", "unsigned bytes");
    put_be32(b.bytes, 0x00000802);
    expect_images_error(write_plain("two-dims", b.bytes, b.len),
                        "has 2 dimensions (magic 0x00000802)", "has 3 (expected 0x00000803)");
    free(b.bytes);

    /* the two paths swapped */
    expect_error(good_labels, good_images, 0, good_labels, "is an IDX labels file", "swapped");

    uint8_t labels[3] = {1, 2, 3};
    b = labels_blob(labels, 3);
    put_be32(b.bytes, 0x00000c01);
    const char *int_labels = write_plain("int-labels", b.bytes, b.len);
    expect_error(good_images, int_labels, 0, int_labels, "holds 32-bit integer values",
                 "an IDX labels file must hold unsigned bytes (expected 0x00000801)");
    free(b.bytes);

    uint8_t header[10] = {0, 0, 8, 3, 0, 0, 0, 5, 0, 0};
    expect_images_error(write_plain("short-header", header, sizeof header),
                        "truncated header: the file holds 10 bytes", "needs 16");
    expect_images_error(write_plain("short-magic", header, 3),
                        "truncated header: the file holds 3 bytes", NULL);
}

static void test_bad_dimensions(void) {
    blob b = images_blob(0, ROWS, COLS, 0);
    expect_images_error(write_plain("zero-images", b.bytes, b.len),
                        "header says 0 images of 3x2: every dimension must be at least 1", NULL);
    free(b.bytes);
    b = images_blob(N, 0, COLS, 0);
    expect_images_error(write_gz("zero-rows.gz", b.bytes, b.len), "header says 5 images of 0x2",
                        NULL);
    free(b.bytes);
    b = images_blob(0xffffffffu, 0xffffffffu, 0xffffffffu, 0);
    expect_images_error(write_plain("huge", b.bytes, b.len),
                        "header says 4294967295 images of 4294967295x4294967295: too large", NULL);
    free(b.bytes);
    b = images_blob(1, 0x80000000u, 1, 0);
    expect_images_error(write_plain("huge-rows", b.bytes, b.len), "too large to load", NULL);
    free(b.bytes);
    /* fits in memory's arithmetic but not in this file: fails cleanly, allocated or not */
    b = images_blob(0xffffffffu, 28, 28, 100);
    expect_images_error(write_plain("lying-count", b.bytes, b.len), "4294967295 images of 28x28",
                        NULL);
    free(b.bytes);
    /* A header within the caps that asks for 3 TB is held against the file's size
     * before anything is allocated: the reason is the lie, not "cannot allocate". */
    b = images_blob(100000000u, 150, 200, 100);
    expect_images_error(write_plain("three-tb", b.bytes, b.len),
                        "truncated: header says 100000000 images of 150x200 (3000000000016 bytes) but the file "
                        "holds 116 bytes", NULL);
    expect_images_error(write_gz("three-tb.gz", b.bytes, b.len), "truncated or corrupt: header says 100000000",
                        "cannot hold more than");
    free(b.bytes);
}

/* ------------------------------------------------------------ lies that would cost memory */

/* Runs fn with the address space capped at what the process has now plus 512 MB, so
 * an allocation the file cannot justify fails (and the error says "cannot allocate")
 * instead of passing unseen. Not under AddressSanitizer, whose shadow memory needs
 * terabytes of address space. */
#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
static void with_little_memory(void (*fn)(void)) {
#ifndef UNDER_ASAN
    struct rlimit was;
    REQUIRE(getrlimit(RLIMIT_AS, &was) == 0, "getrlimit: %s", strerror(errno));
    unsigned long long pages = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    REQUIRE(f && fscanf(f, "%llu", &pages) == 1, "cannot read /proc/self/statm");
    fclose(f);
    struct rlimit little = was;
    little.rlim_cur = (rlim_t)(pages * (unsigned long long)sysconf(_SC_PAGESIZE) + (512ull << 20));
    if (was.rlim_cur != RLIM_INFINITY && was.rlim_cur < little.rlim_cur) little.rlim_cur = was.rlim_cur;
    REQUIRE(setrlimit(RLIMIT_AS, &little) == 0, "setrlimit: %s", strerror(errno));
    fn();
    REQUIRE(setrlimit(RLIMIT_AS, &was) == 0, "restoring RLIMIT_AS: %s", strerror(errno));
#else
    fn();
#endif
}

/* 2^31 images of 4096x4096 (2^55 bytes): refused from the header alone, naming the
 * file and the numbers, plain or gzipped, whatever the file's size. */
static void absurd_header(void) {
    blob b = images_blob(0x80000000u, 4096, 4096, 100);
    const char *want = "header says 2147483648 images of 4096x4096: too large to load (at most 100000000 images, "
                       "of at most 1000000 pixels each)";
    expect_images_error(write_plain("absurd", b.bytes, b.len), want, NULL);
    expect_images_error(write_gz("absurd.gz", b.bytes, b.len), want, NULL);
    free(b.bytes);
    b = images_blob(60000, 2000, 1000, 100);
    expect_images_error(write_plain("big-images", b.bytes, b.len), "header says 60000 images of 2000x1000: too large",
                        "of at most 1000000 pixels each");
    free(b.bytes);
    uint32_t count = 100000001u;
    b = idx_blob(0x00000801, &count, 1, NULL, 10);
    expect_error(good_images, write_plain("absurd-labels", b.bytes, b.len), 0, tmp_path("absurd-labels"),
                 "header says 100000001 labels: too large to load (at most 100000000 labels)", NULL);
    free(b.bytes);
}

/* A gzipped file whose header claims 1 GB, within what its size allows (1 MB of
 * incompressible data, at most 1100:1), but which holds 1 MB: refused as truncated,
 * with no buffer of the size claimed (the cap above would make that "cannot allocate"). */
static void gzip_lie_within_ratio(void) {
    const uint32_t count = 1000000u, rows = 1000u, cols = 1u; /* 10^9 bytes */
    const size_t real = 1u << 20;
    blob b = images_blob(count, rows, cols, real);
    uint64_t x = 88172645463325252ull;
    for (size_t i = 0; i < real; i++) { /* xorshift: deflate cannot shrink it */
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        b.bytes[16 + i] = (uint8_t)(x >> 24);
    }
    expect_images_error(write_gz("lie-within-ratio.gz", b.bytes, b.len),
                        "truncated: header says 1000000 images of 1000x1 (1000000016 bytes) but the file holds "
                        "1048592 bytes once decompressed", NULL);
    free(b.bytes);
}

static void test_lying_headers(void) {
    with_little_memory(absurd_header);
    with_little_memory(gzip_lie_within_ratio);
}

static void test_wrong_sizes(void) {
    blob b = images_blob(N, ROWS, COLS, 20);
    const char *want = "truncated: header says 5 images of 3x2 (46 bytes) but the file holds 36 bytes";
    expect_images_error(write_plain("truncated", b.bytes, b.len), want, NULL);
    expect_images_error(write_gz("truncated.gz", b.bytes, b.len), want, "once decompressed");
    /* a limit does not hide a truncated file */
    expect_error(tmp_path("truncated"), good_labels, 1, tmp_path("truncated"), want, NULL);
    free(b.bytes);

    b = images_blob(N, ROWS, COLS, N * ROWS * COLS + 3);
    expect_images_error(write_plain("trailing", b.bytes, b.len),
                        "3 bytes of trailing garbage after the data",
                        "header says 5 images of 3x2 (46 bytes) but the file holds 49 bytes");
    free(b.bytes);

    uint8_t labels[N + 1] = {0, 1, 2, 3, 4, 5};
    b = labels_blob(labels, N);
    b.len -= 2;
    const char *short_labels = write_plain("short-labels", b.bytes, b.len);
    expect_error(good_images, short_labels, 0, short_labels,
                 "truncated: header says 5 labels (13 bytes) but the file holds 11 bytes", NULL);
    free(b.bytes);

    b = labels_blob(labels, N - 1);
    const char *four_labels = write_plain("four-labels", b.bytes, b.len);
    char want_mismatch[1200];
    snprintf(want_mismatch, sizeof want_mismatch,
             "images file %s has 5 examples but labels file %s has 4", good_images, four_labels);
    expect_error(good_images, four_labels, 0, four_labels, want_mismatch, NULL);
    expect_error(good_images, four_labels, 2, four_labels, want_mismatch, NULL);
    free(b.bytes);
}

static void test_corrupt_gzip(void) {
    /* big enough that the deflate stream has a body to damage */
    blob b = images_blob(200, 28, 28, 200 * 28 * 28);
    const char *gz_path = write_gz("source.gz", b.bytes, b.len);
    free(b.bytes);
    blob gz = read_file(gz_path);

    size_t half = gz.len / 2;
    expect_images_error(write_plain("cut.gz", gz.bytes, half),
                        "corrupt gzip data: unexpected end of file", "cut short");
    expect_images_error(write_plain("cut-header.gz", gz.bytes, 5), "corrupt gzip data", NULL);

    unsigned char saved = gz.bytes[gz.len - 6];
    gz.bytes[gz.len - 6] ^= 0x55; /* inside the CRC-32 trailer */
    expect_images_error(write_plain("bad-crc.gz", gz.bytes, gz.len),
                        "corrupt gzip data: incorrect data check", NULL);
    gz.bytes[gz.len - 6] = saved;

    for (size_t i = 20; i < 60; i++) gz.bytes[i] = 0xff; /* garble the deflate stream */
    expect_images_error(write_plain("garbled.gz", gz.bytes, gz.len), "corrupt gzip data: ", NULL);
    free(gz.bytes);
}

/* ------------------------------------------------------------ real data */

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) * 1e-9;
}

static void check_balanced(const idx_dataset *d, size_t per_class, uint64_t label_sum) {
    size_t per[256] = {0};
    uint64_t sum = 0;
    for (size_t i = 0; i < d->count; i++) per[d->labels[i]]++, sum += d->labels[i];
    CHECK(sum == label_sum, "label sum %llu, expected %llu", (unsigned long long)sum,
          (unsigned long long)label_sum);
    for (int c = 0; c < 10; c++) CHECK(per[c] == per_class, "class %d has %zu", c, per[c]);
}

static uint64_t pixel_sum(const uint8_t *p, size_t n) {
    uint64_t s = 0;
    for (size_t i = 0; i < n; i++) s += p[i];
    return s;
}

static void test_fashion_mnist(void) {
    const char *t10k_images = FASHION_MNIST_DIR "/t10k-images-idx3-ubyte.gz";
    const char *t10k_labels = FASHION_MNIST_DIR "/t10k-labels-idx1-ubyte.gz";
    const char *train_images = FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz";
    const char *train_labels = FASHION_MNIST_DIR "/train-labels-idx1-ubyte.gz";
    int installed = access(t10k_images, R_OK) == 0 && access(train_images, R_OK) == 0;
    REQUIRE(installed,
            "Fashion-MNIST is not installed at %s: install the Debian package "
            "dataset-fashion-mnist (scripts/install-deps.sh does)", FASHION_MNIST_DIR);
    char err[512];
    idx_dataset d;

    int rc = idx_load(NULL, t10k_images, t10k_labels, 0, &d, err, sizeof err);
    REQUIRE(rc == 0, "%s", err);
    CHECK(d.count == 10000 && d.rows == 28 && d.cols == 28, "t10k: %zu of %dx%d", d.count,
          d.rows, d.cols);
    CHECK(d.num_classes == 10, "t10k: %d classes", d.num_classes);
    check_balanced(&d, 1000, 45000);
    const uint8_t first_labels[5] = {9, 2, 1, 1, 6};
    CHECK(memcmp(d.labels, first_labels, 5) == 0, "t10k: first labels differ");
    CHECK(pixel_sum(d.images, 784) == 33456, "t10k: first image's pixel sum");
    CHECK(pixel_sum(d.images, d.count * 784) == 573469082ull, "t10k: pixel sum");
    idx_free(&d);

    rc = idx_load(NULL, t10k_images, t10k_labels, 100, &d, err, sizeof err);
    REQUIRE(rc == 0, "%s", err);
    CHECK(d.count == 100 && memcmp(d.labels, first_labels, 5) == 0, "t10k limit 100");
    CHECK(pixel_sum(d.images, 784) == 33456, "t10k limit 100: first image's pixel sum");
    idx_free(&d);

    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = idx_load(NULL, train_images, train_labels, 0, &d, err, sizeof err);
    REQUIRE(rc == 0, "%s", err);
    double seconds = seconds_since(&t0);
    printf("  loaded the 60000-image training set in %.3f s\n", seconds);
    CHECK(d.count == 60000 && d.rows == 28 && d.cols == 28 && d.num_classes == 10,
          "train: %zu of %dx%d, %d classes", d.count, d.rows, d.cols, d.num_classes);
    check_balanced(&d, 6000, 270000);
    CHECK(pixel_sum(d.images, d.count * 784) == 3431114169ull, "train: pixel sum");
    CHECK(seconds < 3.0, "loading the training set took %.3f s", seconds);
    idx_free(&d);
}

int main(void) {
    make_tmp_dir();
    write_good_pair();
    test_good_files();
    test_open_and_empty();
    test_bad_headers();
    test_bad_dimensions();
    test_wrong_sizes();
    test_lying_headers();
    test_corrupt_gzip();
    remove_tmp_dir();
    test_fashion_mnist();
    return test_done("test_idx");
}
