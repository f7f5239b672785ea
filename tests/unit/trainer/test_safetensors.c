/* Tests for safetensors files: a round trip of several tensors (a scalar and an empty one
 * among them) and metadata, the exact byte layout, every kind of damaged file (each
 * error must name the file), the atomic write (no temporary file left behind, an
 * existing file kept whole when a write fails), and, where python3 is installed, a
 * reading of our file by an independent parser (struct + json; the safetensors package
 * too if present).
 * check.h's REQUIRE evaluates its condition twice: conditions here have no side effects. */
#include "check.h"
#include "safetensors.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char tmp_dir[512];

/* ------------------------------------------------------------ helpers */

/* Each path gets its own slot, so the pointers stay valid for the whole test. */
static const char *tmp_path(const char *name) {
    static char paths[256][600];
    static int next;
    REQUIRE(next < 256, "test made too many paths");
    char *p = paths[next++];
    snprintf(p, 600, "%s/%s", tmp_dir, name);
    return p;
}

typedef struct {
    unsigned char *bytes;
    size_t len;
} blob;

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

static const char *write_bytes(const char *name, const void *bytes, size_t len) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    REQUIRE(f, "cannot create %s", path);
    int written = fwrite(bytes, 1, len, f) == len;
    int closed = fclose(f) == 0;
    REQUIRE(written && closed, "cannot write %s", path);
    return path;
}

/* A hand-made file: the 8-byte length, `header` padded to `header_len` bytes with
 * spaces (its own length if 0), then data_len bytes of zeros. */
static const char *write_raw(const char *name, const char *header, size_t header_len,
                             size_t data_len) {
    size_t json_len = strlen(header);
    if (header_len == 0) header_len = json_len;
    size_t len = 8 + header_len + data_len;
    unsigned char *b = calloc(1, len);
    REQUIRE(b, "out of memory");
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)header_len >> (8 * i));
    memset(b + 8, ' ', header_len);
    memcpy(b + 8, header, json_len);
    const char *path = write_bytes(name, b, len);
    free(b);
    return path;
}

static int files_in_dir(const char *dir, char names[][256], int max) {
    DIR *d = opendir(dir);
    REQUIRE(d, "cannot list %s", dir);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && n < max)
            snprintf(names[n++], 256, "%s", e->d_name);
    closedir(d);
    return n;
}

static void remove_tree(const char *dir) {
    char names[64][256];
    int n = files_in_dir(dir, names, 64);
    for (int i = 0; i < n; i++) {
        char path[1024];
        int len = snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (len < 0 || (size_t)len >= sizeof path) continue;
        struct stat st;
        if (lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
            remove_tree(path);
        else
            unlink(path);
    }
    rmdir(dir);
}

static void make_tmp_dir(void) {
    const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(tmp_dir, sizeof tmp_dir, "%s/ddpd-test-safetensors-XXXXXX", base);
    int made = mkdtemp(tmp_dir) != NULL;
    REQUIRE(made, "mkdtemp in %s failed", base);
}

/* ------------------------------------------------------------ the tensors */

#define NT 6
static float weight[12], bias[4], step_scalar[1], block[12], odd[3];
static st_tensor tensors[NT];
static json_t *metadata;

static size_t tensor_count(const st_tensor *t) {
    size_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

static void make_tensors(void) {
    for (int i = 0; i < 12; i++) weight[i] = 0.25f * (float)i - 1.0f, block[i] = (float)i * 1e-3f;
    for (int i = 0; i < 4; i++) bias[i] = -3.5f + (float)i;
    step_scalar[0] = 812.0f;
    odd[0] = 1e30f, odd[1] = -0.0f, odd[2] = 1.17549435e-38f;
    /* "odd" (12 bytes) comes before "layer0.bias", so offsets are not all multiples of 8 */
    st_tensor t[NT] = {
        {"layer0.weight", weight, {3, 4}, 2},
        {"odd", odd, {3}, 1},
        {"layer0.bias", bias, {4}, 1},
        {"step", step_scalar, {0}, 0},
        {"empty", NULL, {0, 5}, 2},
        {"block", block, {2, 1, 3, 2}, 4},
    };
    memcpy(tensors, t, sizeof t);
    metadata = json_pack("{s:s, s:s, s:s}", "epoch", "3", "format", "pt", "note", "caf\xc3\xa9 \"quoted\"");
}

static void check_error_names(int rc, const char *err, const char *path, const char *phrase) {
    CHECK(rc == -1, "expected a failure mentioning \"%s\"", phrase);
    CHECK(strstr(err, path) != NULL, "error does not name %s: %s", path, err);
    CHECK(strstr(err, phrase) != NULL, "error lacks \"%s\": %s", phrase, err);
    printf("  ok: %s\n", err);
}

/* ------------------------------------------------------------ tests */

static void test_round_trip(void) {
    char err[512];
    const char *path = tmp_path("model.safetensors");
    int rc = safetensors_write(path, tensors, NT, metadata, err, sizeof err);
    REQUIRE(rc == 0, "write: %s", err);

    st_file f;
    rc = st_open(path, &f, err, sizeof err);
    REQUIRE(rc == 0, "open: %s", err);
    for (int i = 0; i < NT; i++) {
        size_t n = tensor_count(&tensors[i]);
        const float *p = st_get_f32(&f, tensors[i].name, n, err, sizeof err);
        CHECK(p != NULL, "%s: %s", tensors[i].name, err);
        if (p && n) CHECK(memcmp(p, tensors[i].data, n * sizeof(float)) == 0, "%s differs", tensors[i].name);
    }
    CHECK(st_metadata(&f, "epoch") && strcmp(st_metadata(&f, "epoch"), "3") == 0, "epoch");
    CHECK(st_metadata(&f, "note") && strcmp(st_metadata(&f, "note"), "caf\xc3\xa9 \"quoted\"") == 0,
          "note");
    CHECK(st_metadata(&f, "missing") == NULL, "missing metadata key");

    rc = st_get_f32(&f, "layer0.weight", 13, err, sizeof err) != NULL ? 0 : -1;
    check_error_names(rc, err, path, "tensor \"layer0.weight\" holds 12 elements but 13 were expected");
    rc = st_get_f32(&f, "nope", 1, err, sizeof err) != NULL ? 0 : -1;
    check_error_names(rc, err, path, "no tensor named \"nope\"");
    rc = st_get_f32(&f, "__metadata__", 3, err, sizeof err) != NULL ? 0 : -1;
    check_error_names(rc, err, path, "no tensor named \"__metadata__\"");
    st_close(&f);
    CHECK(f.buf == NULL && f.header == NULL, "st_close clears the struct");

    /* no metadata, no tensors: still a valid file */
    path = tmp_path("nothing.safetensors");
    rc = safetensors_write(path, NULL, 0, NULL, err, sizeof err);
    CHECK(rc == 0, "empty write: %s", err);
    rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0, "empty open: %s", err);
    if (rc == 0) {
        CHECK(st_metadata(&f, "epoch") == NULL, "no metadata in an empty file");
        CHECK(json_object_size(f.header) == 0, "empty header");
        CHECK(f.size == 16, "empty file is %zu bytes, expected 8 + \"{}\" padded to 8", f.size);
        st_close(&f);
    }
}

/* Reads the round-trip file byte by byte, as a foreign reader would. */
static void test_layout(void) {
    blob b = read_file(tmp_path("model.safetensors"));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | b.bytes[i];
    REQUIRE(8 + n <= b.len, "header length %llu past the file", (unsigned long long)n);
    CHECK((8 + n) % 8 == 0, "data starts at %llu, not 8-byte aligned", (unsigned long long)(8 + n));
    const char *header = (const char *)b.bytes + 8;
    size_t json_end = (size_t)n;
    while (json_end > 0 && header[json_end - 1] == ' ') json_end--;
    CHECK(json_end > 0 && header[json_end - 1] == '}' && n - json_end < 8,
          "header padded with %zu spaces", (size_t)(n - json_end));

    json_error_t jerr;
    json_t *root = json_loadb(header, (size_t)n, 0, &jerr);
    REQUIRE(root, "header JSON: %s", jerr.text);
    const unsigned char *data = b.bytes + 8 + n;
    uint64_t offset = 0;
    for (int i = 0; i < NT; i++) {
        const st_tensor *t = &tensors[i];
        json_int_t begin = -1, end = -1;
        const char *dtype = "";
        json_t *shape = NULL;
        int unpacked = json_unpack(json_object_get(root, t->name), "{s:s, s:o, s:[II]}", "dtype",
                                   &dtype, "shape", &shape, "data_offsets", &begin, &end) == 0;
        CHECK(unpacked, "entry for %s", t->name);
        if (!unpacked) continue;
        CHECK(strcmp(dtype, "F32") == 0, "%s dtype %s", t->name, dtype);
        CHECK(json_array_size(shape) == (size_t)t->ndim, "%s ndim", t->name);
        for (int d = 0; d < t->ndim; d++)
            CHECK(json_integer_value(json_array_get(shape, d)) == (json_int_t)t->shape[d],
                  "%s shape[%d]", t->name, d);
        size_t bytes = tensor_count(t) * sizeof(float);
        CHECK((uint64_t)begin == offset && (uint64_t)end == offset + bytes,
              "%s offsets [%lld, %lld], expected [%llu, %llu]", t->name, (long long)begin,
              (long long)end, (unsigned long long)offset, (unsigned long long)(offset + bytes));
        if (bytes) CHECK(memcmp(data + offset, t->data, bytes) == 0, "%s bytes", t->name);
        offset += bytes;
    }
    CHECK(8 + n + offset == b.len, "file is %zu bytes, expected %llu", b.len,
          (unsigned long long)(8 + n + offset));
    json_t *meta = json_object_get(root, "__metadata__");
    CHECK(json_is_object(meta) && json_equal(meta, metadata), "__metadata__ as written");
    CHECK(json_object_size(root) == NT + 1, "header has %zu keys", json_object_size(root));
    json_decref(root);
    free(b.bytes);
}

/* Both readers refuse it, with the same words: the whole file's and the header's. */
static void expect_open_error(const char *path, const char *phrase) {
    char err[1024] = "";
    st_file f;
    int rc = st_open(path, &f, err, sizeof err);
    check_error_names(rc, err, path, phrase);
    CHECK(f.buf == NULL && f.header == NULL, "st_file cleared after a failed open");
    if (rc == 0) st_close(&f);
    json_t *header = (json_t *)1;
    err[0] = '\0';
    rc = st_read_header(path, &header, err, sizeof err);
    check_error_names(rc, err, path, phrase);
    CHECK(header == NULL, "no header after a refused st_read_header of %s", path);
    if (rc == 0) json_decref(header);
}

/* The header alone is the whole file's header. */
static void test_header_only(void) {
    const char *path = tmp_path("model.safetensors");
    st_file f;
    char err[1024] = "";
    json_t *header = NULL;
    REQUIRE(st_open(path, &f, err, sizeof err) == 0, "st_open: %s", err);
    CHECK(st_read_header(path, &header, err, sizeof err) == 0, "st_read_header: %s", err);
    CHECK(header && json_equal(header, f.header), "st_read_header reads the header st_open does");
    json_decref(header);
    st_close(&f);
}

static void test_damaged_files(void) {
    blob good = read_file(tmp_path("model.safetensors"));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | good.bytes[i];

    expect_open_error(tmp_path("no-such.safetensors"), "cannot open: No such file or directory");
    expect_open_error(write_bytes("empty.st", "", 0), "too short for a safetensors file: 0 bytes");
    expect_open_error(write_bytes("short.st", good.bytes, 5), "too short for a safetensors file: 5 bytes");
    expect_open_error(write_bytes("cut-header.st", good.bytes, 8 + n / 2),
                      "runs past the end of the file");
    expect_open_error(write_bytes("cut-data.st", good.bytes, (size_t)(8 + n + 20)),
                      "lie outside the data area (20 bytes)");
    expect_open_error(tmp_dir, "is not a regular file");

    unsigned char saved = good.bytes[5];
    good.bytes[5] = 0x01; /* header length about 2^40 */
    expect_open_error(write_bytes("bad-length.st", good.bytes, good.len),
                      "header length 1099511628" /* 1099511627776 + n */);
    good.bytes[5] = saved;
    free(good.bytes);

    expect_open_error(write_raw("bad-json.st", "{\"w\": {\"dtype\": ", 24, 0),
                      "header is not valid JSON");
    expect_open_error(write_raw("zero-header.st", "", 0, 0), "header is not valid JSON");
    expect_open_error(write_raw("array.st", "[1, 2]", 8, 0), "header is not a JSON object");
    expect_open_error(write_raw("dup.st", "{\"a\": 1, \"a\": 2}", 0, 0), "header is not valid JSON");
    expect_open_error(write_raw("entry.st", "{\"w\": 5}", 0, 0),
                      "tensor \"w\": header entry is not a JSON object");
    expect_open_error(write_raw("no-dtype.st", "{\"w\": {\"shape\": [1], \"data_offsets\": [0, 4]}}", 0, 4),
                      "tensor \"w\": missing \"dtype\"");
    expect_open_error(write_raw("dtype.st",
                                "{\"w\": {\"dtype\": \"F31\", \"shape\": [1], \"data_offsets\": [0, 4]}}", 0, 4),
                      "tensor \"w\": unknown dtype \"F31\"");
    expect_open_error(write_raw("no-shape.st", "{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 4]}}", 0, 4),
                      "tensor \"w\": \"shape\" must be a list");
    expect_open_error(write_raw("neg-shape.st",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [-1], \"data_offsets\": [0, 4]}}", 0, 4),
                      "tensor \"w\": \"shape\" must be a list of non-negative integers");
    expect_open_error(write_raw("no-offsets.st", "{\"w\": {\"dtype\": \"F32\", \"shape\": [1]}}", 0, 4),
                      "tensor \"w\": \"data_offsets\" must be [begin, end]");
    expect_open_error(write_raw("three-offsets.st",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [1], \"data_offsets\": [0, 4, 8]}}", 0, 8),
                      "tensor \"w\": \"data_offsets\" must be [begin, end]");
    expect_open_error(write_raw("outside.st",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [4, 12]}}", 0, 8),
                      "tensor \"w\": data_offsets [4, 12] lie outside the data area (8 bytes)");
    expect_open_error(write_raw("backwards.st",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [0], \"data_offsets\": [8, 4]}}", 0, 8),
                      "tensor \"w\": data_offsets [8, 4] lie outside the data area");
    expect_open_error(write_raw("span.st",
                                "{\"w\": {\"dtype\": \"F32\", \"shape\": [3], \"data_offsets\": [0, 8]}}", 0, 8),
                      "tensor \"w\": data_offsets [0, 8] span 8 bytes but a F32 tensor of 3 elements needs 12");
    expect_open_error(write_raw("meta.st", "{\"__metadata__\": {\"epoch\": 3}}", 0, 0),
                      "metadata \"epoch\" is not a string");
    expect_open_error(write_raw("meta-array.st", "{\"__metadata__\": [\"epoch\"]}", 0, 0),
                      "\"__metadata__\" is not a JSON object");
}

/* Files that open fine but whose tensors st_get_f32 must refuse. */
static void test_refused_tensors(void) {
    char err[512];
    st_file f;
    const char *path = write_raw("i32.st",
                                 "{\"w\": {\"dtype\": \"I32\", \"shape\": [2], \"data_offsets\": [0, 8]}}", 0, 8);
    int rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        rc = st_get_f32(&f, "w", 2, err, sizeof err) ? 0 : -1;
        check_error_names(rc, err, path, "tensor \"w\" is I32, not F32");
        st_close(&f);
    }
    /* header padded to an odd length: the data starts at an odd byte, misaligned for floats */
    const char *header = "{\"w\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [0, 8]}}";
    REQUIRE(strlen(header) == 61, "the test below expects the data at byte 8 + 61 = 69");
    path = write_raw("misaligned.st", header, 61, 8);
    rc = st_open(path, &f, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        rc = st_get_f32(&f, "w", 2, err, sizeof err) ? 0 : -1;
        check_error_names(rc, err, path, "tensor \"w\" is not 4-byte aligned: it starts at byte 69");
        st_close(&f);
    }
}

static int same_file(const char *path, const blob *expected) {
    blob now = read_file(path);
    int same = now.len == expected->len && memcmp(now.bytes, expected->bytes, now.len) == 0;
    free(now.bytes);
    return same;
}

/* Only `keep` in dir: no temporary file left behind. */
static void check_only_file(const char *dir, const char *keep) {
    char names[16][256];
    int n = files_in_dir(dir, names, 16);
    CHECK(n == 1 && strcmp(names[0], keep) == 0, "%s holds %d files (first: %s), expected only %s",
          dir, n, n ? names[0] : "-", keep);
}

/* In a child, so the file-size limit cannot touch the rest of the test. */
static void write_past_file_size_limit(const char *path) {
    fflush(stdout); /* or the child would print the parent's buffered lines again */
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork failed");
    if (pid == 0) {
        static float big[100000];
        st_tensor t = {"big", big, {100000}, 1};
        struct rlimit limit = {4096, 4096};
        signal(SIGXFSZ, SIG_IGN);
        setrlimit(RLIMIT_FSIZE, &limit);
        char err[512] = "";
        int rc = safetensors_write(path, &t, 1, NULL, err, sizeof err);
        printf("  ok: %s\n", err);
        int right = rc == -1 && strstr(err, path) && strstr(err, "File too large");
        fflush(stdout);
        _exit(right ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a write past RLIMIT_FSIZE should fail with \"File too large\" naming the file");
}

static void test_atomic_write(void) {
    char err[512];
    char dir[600];
    snprintf(dir, sizeof dir, "%s/atomic", tmp_dir);
    int made = mkdir(dir, 0700) == 0;
    REQUIRE(made, "mkdir %s", dir);
    const char *path = tmp_path("atomic/ckpt.safetensors");

    int rc = safetensors_write(path, tensors, 2, NULL, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    check_only_file(dir, "ckpt.safetensors");
    blob first = read_file(path);

    /* overwriting works and leaves nothing behind either */
    rc = safetensors_write(path, tensors, NT, metadata, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    check_only_file(dir, "ckpt.safetensors");
    CHECK(!same_file(path, &first), "the second write replaced the file");
    free(first.bytes);
    blob before = read_file(path);

    const char *missing = tmp_path("no-such-dir/ckpt.safetensors");
    rc = safetensors_write(missing, tensors, NT, metadata, err, sizeof err);
    check_error_names(rc, err, missing, "No such file or directory");

    write_past_file_size_limit(path);
    CHECK(same_file(path, &before), "a failed write damaged the existing file");
    check_only_file(dir, "ckpt.safetensors");

    /* the temporary name is taken by a directory: the write fails, the file stays */
    char tmp_name[700];
    snprintf(tmp_name, sizeof tmp_name, "%s.tmp.%ld", path, (long)getpid());
    made = mkdir(tmp_name, 0700) == 0;
    REQUIRE(made, "mkdir %s", tmp_name);
    rc = safetensors_write(path, tensors, NT, metadata, err, sizeof err);
    check_error_names(rc, err, path, "cannot create temporary file");
    CHECK(same_file(path, &before), "a failed write damaged the existing file");
    rmdir(tmp_name);

    /* bad arguments are refused before the disk is touched */
    st_tensor bad[2] = {tensors[0], tensors[0]};
    rc = safetensors_write(path, bad, 2, NULL, err, sizeof err);
    check_error_names(rc, err, path, "two tensors are called \"layer0.weight\"");
    bad[1].name = "__metadata__";
    rc = safetensors_write(path, bad, 2, NULL, err, sizeof err);
    check_error_names(rc, err, path, "a tensor may not be called \"__metadata__\"");
    bad[1] = (st_tensor){"five", weight, {1, 1, 1, 1}, 5};
    rc = safetensors_write(path, bad, 2, NULL, err, sizeof err);
    check_error_names(rc, err, path, "tensor \"five\" has 5 dimensions");
    bad[1] = (st_tensor){"nodata", NULL, {2}, 1};
    rc = safetensors_write(path, bad, 2, NULL, err, sizeof err);
    check_error_names(rc, err, path, "tensor \"nodata\" has 2 elements but no data");
    json_t *bad_meta = json_pack("{s:i}", "epoch", 3);
    rc = safetensors_write(path, tensors, 1, bad_meta, err, sizeof err);
    check_error_names(rc, err, path, "metadata \"epoch\" is not a string");
    json_decref(bad_meta);
    CHECK(same_file(path, &before), "a refused write changed the existing file");
    check_only_file(dir, "ckpt.safetensors");
    free(before.bytes);
}

/* An independent reader: Python's struct and json, and the safetensors package if it
 * is installed. Skipped (with a note) where python3 is not. */
static const char *PY_READER =
    "import json, struct, sys\n"
    "path = sys.argv[1]\n"
    "raw = open(path, 'rb').read()\n"
    "n, = struct.unpack('<Q', raw[:8])\n"
    "assert (8 + n) % 8 == 0, 'data not 8-byte aligned'\n"
    "header = json.loads(raw[8:8 + n].decode('utf-8'))\n"
    "data = raw[8 + n:]\n"
    "meta = header.pop('__metadata__', {})\n"
    "for name, t in header.items():\n"
    "    b, e = t['data_offsets']\n"
    "    count = 1\n"
    "    for d in t['shape']: count *= d\n"
    "    assert t['dtype'] == 'F32' and e - b == 4 * count, name\n"
    "    vals = struct.unpack('<%df' % count, data[b:e])\n"
    "    print('struct', name, count, repr(sum(vals)))\n"
    "print('meta', meta['epoch'], meta['format'])\n"
    "try:\n"
    "    from safetensors.numpy import load_file\n"
    "    for name, arr in load_file(path).items():\n"
    "        print('safetensors', name, arr.size, repr(float(arr.astype('float64').sum())))\n"
    "except ImportError:\n"
    "    pass\n";

static void test_python_reader(void) {
    if (system("command -v python3 >/dev/null 2>&1") != 0) {
        printf("  python3 not found: cross-check skipped\n");
        return;
    }
    const char *script = write_bytes("reader.py", PY_READER, strlen(PY_READER));
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", script, tmp_path("model.safetensors"));
    FILE *p = popen(cmd, "r");
    REQUIRE(p, "popen python3");
    char line[512];
    int struct_seen = 0, library_seen = 0, meta_ok = 0;
    while (fgets(line, sizeof line, p)) {
        char reader[32], name[128];
        size_t count;
        double sum;
        if (strncmp(line, "meta 3 pt", 9) == 0) meta_ok = 1;
        if (sscanf(line, "%31s %127s %zu %lf", reader, name, &count, &sum) != 4) continue;
        for (int i = 0; i < NT; i++) {
            if (strcmp(tensors[i].name, name) != 0) continue;
            double expected = 0;
            for (size_t k = 0; k < count && tensors[i].data; k++) expected += tensors[i].data[k];
            CHECK(count == tensor_count(&tensors[i]), "%s: python sees %zu elements", name, count);
            CHECK_NEAR(sum, expected, 1e-12, 0, name);
            if (strcmp(reader, "struct") == 0) struct_seen++;
            else library_seen++;
        }
    }
    int rc = pclose(p);
    CHECK(rc == 0, "python reader exited with %d", rc);
    CHECK(struct_seen == NT, "python read %d of %d tensors", struct_seen, NT);
    CHECK(meta_ok, "python read the metadata");
    printf("  python3 read the file (%d tensors; safetensors package: %s)\n", struct_seen,
           library_seen ? "agrees" : "not installed");
}

int main(void) {
    make_tmp_dir();
    make_tensors();
    test_round_trip();
    test_layout();
    test_header_only();
    test_damaged_files();
    test_refused_tensors();
    test_atomic_write();
    test_python_reader();
    json_decref(metadata);
    remove_tree(tmp_dir);
    return test_done("test_safetensors");
}
