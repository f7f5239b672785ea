/* safetensors reader and writer, for checkpoints that PyTorch can load.
 *
 * Layout: an 8-byte little-endian header length N, N bytes of JSON
 *   {"<name>": {"dtype": "F32", "shape": [...], "data_offsets": [begin, end]}, ...,
 *    "__metadata__": {"key": "value", ...}}
 * padded with spaces so that the data starts 8-byte aligned, then the tensors' raw
 * little-endian bytes back to back, in the order given, offsets counted from the data
 * start. Files we write therefore keep every F32 tensor 4-byte aligned in memory when
 * read whole into a malloc'd buffer; a foreign file need not, and st_get_f32 says so
 * rather than hand out a misaligned float pointer.
 *
 * Writes are atomic: "<path>.tmp.<pid>", fsync, rename over path, fsync the directory.
 * A failed write removes its temporary file and leaves any existing file untouched. */
#include "safetensors.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "safetensors.c writes and reads tensors in host byte order, which must be little-endian"
#endif

#define ST_ALIGN 8
#define ST_MAX_DIMS 4
#define METADATA_KEY "__metadata__"

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Element count of a shape; 0 dims is a scalar (1 element). Returns -1 on overflow. */
static int shape_elements(const size_t *shape, int ndim, uint64_t *count) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] != 0 && n > UINT64_MAX / shape[i]) return -1;
        n *= shape[i];
    }
    *count = n;
    return 0;
}

/* ---------------------------------------------------------------- writing */

/* Element count of a tensor that check_write_inputs has accepted (so no overflow). */
static uint64_t tensor_elements(const st_tensor *t) {
    uint64_t count = 0;
    shape_elements(t->shape, t->ndim, &count);
    return count;
}

/* Checks what the caller passed before anything touches the disk. */
static int check_write_inputs(const char *path, const st_tensor *tensors, size_t n,
                              const json_t *metadata, char *err, size_t errlen) {
    for (size_t i = 0; i < n; i++) {
        const st_tensor *t = &tensors[i];
        uint64_t count;
        if (!t->name || !*t->name)
            return fail(err, errlen, "%s: tensor %zu has no name", path, i);
        if (strcmp(t->name, METADATA_KEY) == 0)
            return fail(err, errlen, "%s: a tensor may not be called \"%s\"", path, METADATA_KEY);
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS)
            return fail(err, errlen, "%s: tensor \"%s\" has %d dimensions (0 to %d allowed)", path,
                        t->name, t->ndim, ST_MAX_DIMS);
        if (shape_elements(t->shape, t->ndim, &count) != 0 || count > SIZE_MAX / 4 / 2)
            return fail(err, errlen, "%s: tensor \"%s\" is too large", path, t->name);
        if (count > 0 && !t->data)
            return fail(err, errlen, "%s: tensor \"%s\" has %llu elements but no data", path,
                        t->name, (unsigned long long)count);
        for (size_t j = 0; j < i; j++)
            if (strcmp(tensors[j].name, t->name) == 0)
                return fail(err, errlen, "%s: two tensors are called \"%s\"", path, t->name);
    }
    if (metadata && !json_is_object(metadata))
        return fail(err, errlen, "%s: metadata must be a JSON object", path);
    const char *key;
    json_t *value;
    json_object_foreach((json_t *)metadata, key, value) {
        if (!json_is_string(value))
            return fail(err, errlen, "%s: metadata \"%s\" is not a string (safetensors metadata "
                        "maps strings to strings)", path, key);
    }
    return 0;
}

/* The JSON header, unpadded; NULL only when out of memory. Data offsets run back to
 * back in the order given. */
static char *build_header_json(const st_tensor *tensors, size_t n, const json_t *metadata) {
    json_t *root = json_object();
    uint64_t offset = 0;
    for (size_t i = 0; root && i < n; i++) {
        const st_tensor *t = &tensors[i];
        uint64_t count = tensor_elements(t);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++) json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        uint64_t end = offset + count * sizeof(float);
        json_t *entry = json_pack("{s:s, s:o, s:[I,I]}", "dtype", "F32", "shape", shape,
                                  "data_offsets", (json_int_t)offset, (json_int_t)end);
        if (!entry || json_object_set_new(root, t->name, entry) != 0) {
            json_decref(root);
            return NULL;
        }
        offset = end;
    }
    if (root && metadata && json_object_size(metadata) > 0)
        json_object_set(root, METADATA_KEY, (json_t *)metadata);
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
    json_decref(root);
    return text;
}

static void put_le64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Header length field, padded header, then the data. */
static int write_contents(FILE *f, const char *header_json, const st_tensor *tensors, size_t n) {
    size_t json_len = strlen(header_json);
    size_t padded_len = (8 + json_len + ST_ALIGN - 1) / ST_ALIGN * ST_ALIGN - 8;
    unsigned char len_field[8];
    put_le64(len_field, padded_len);
    if (fwrite(len_field, 1, 8, f) != 8) return -1;
    if (fwrite(header_json, 1, json_len, f) != json_len) return -1;
    for (size_t i = json_len; i < padded_len; i++)
        if (fputc(' ', f) == EOF) return -1;
    for (size_t i = 0; i < n; i++) {
        uint64_t count = tensor_elements(&tensors[i]);
        if (count && fwrite(tensors[i].data, sizeof(float), count, f) != count) return -1;
    }
    return 0;
}

/* fsyncs the directory holding path, so that the rename itself survives a crash. */
static int sync_parent_dir(const char *path) {
    char *copy = strdup(path);
    if (!copy) return -1;
    int fd = open(dirname(copy), O_RDONLY | O_DIRECTORY);
    free(copy);
    if (fd < 0) return -1;
    int rc = fsync(fd);
    /* some file systems cannot fsync a directory; the rename is done either way */
    if (rc != 0 && errno == EINVAL) rc = 0;
    int saved = errno;
    close(fd);
    errno = saved;
    return rc;
}

int safetensors_write(const char *path, const st_tensor *tensors, size_t n,
                      const json_t *metadata, char *err, size_t errlen) {
    if (check_write_inputs(path, tensors, n, metadata, err, errlen) != 0) return -1;
    char *header_json = build_header_json(tensors, n, metadata);
    if (!header_json) return fail(err, errlen, "%s: out of memory building the header", path);

    char tmp[4096];
    int len = snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (len < 0 || (size_t)len >= sizeof tmp) {
        free(header_json);
        return fail(err, errlen, "%s: path too long", path);
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        int e = errno;
        free(header_json);
        return fail(err, errlen, "%s: cannot create temporary file %s: %s", path, tmp, strerror(e));
    }

    const char *step = "write";
    int ok = write_contents(f, header_json, tensors, n) == 0 && (step = "flush", fflush(f) == 0) &&
             (step = "fsync", fsync(fileno(f)) == 0);
    int e = errno;
    free(header_json);
    if (fclose(f) != 0 && ok) {
        ok = 0;
        step = "close";
        e = errno;
    }
    if (!ok) {
        unlink(tmp);
        return fail(err, errlen, "%s: cannot %s temporary file %s: %s", path, step, tmp, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        e = errno;
        unlink(tmp);
        return fail(err, errlen, "%s: cannot rename %s over it: %s", path, tmp, strerror(e));
    }
    if (sync_parent_dir(path) != 0)
        return fail(err, errlen, "%s: written, but cannot fsync its directory: %s", path,
                    strerror(errno));
    return 0;
}

/* ---------------------------------------------------------------- reading */

/* Bytes per element of each safetensors dtype; 0 if unknown. */
static size_t dtype_size(const char *dtype) {
    static const struct { const char *name; size_t size; } table[] = {
        {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"F8_E4M3", 1}, {"F8_E5M2", 1},
        {"I64", 8}, {"I32", 4}, {"I16", 2}, {"I8", 1},  {"U64", 8},     {"U32", 4},
        {"U16", 2}, {"U8", 1},  {"BOOL", 1},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(table[i].name, dtype) == 0) return table[i].size;
    return 0;
}

/* Opens path for reading, a regular file: its descriptor and size, or -1 (and err).
 * O_NONBLOCK: a FIFO in a checkpoint's place is refused, not waited on. */
static int open_regular(const char *path, size_t *size, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) return fail(err, errlen, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, errlen, "%s: cannot read: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, errlen, "%s: is not a regular file", path);
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *size = (size_t)st.st_size;
    return fd;
}

/* n bytes at offset off into buf: 0, or -1 (and err). */
static int read_at(int fd, const char *path, char *buf, size_t n, off_t off, char *err, size_t errlen) {
    size_t got = 0;
    while (got < n) {
        ssize_t r = pread(fd, buf + got, n - got, off + (off_t)got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0)
            return fail(err, errlen, "%s: cannot read: %s", path,
                        r < 0 ? strerror(errno) : "the file shrank while being read");
        got += (size_t)r;
    }
    return 0;
}

/* The file's bytes, followed by a NUL-terminated copy of the path so that later errors
 * (st_get_f32) can name the file; f->size counts the file's bytes only. */
static int read_whole_file(const char *path, st_file *f, char *err, size_t errlen) {
    size_t size = 0;
    int fd = open_regular(path, &size, err, errlen);
    if (fd < 0) return -1;
    size_t path_len = strlen(path);
    char *buf = malloc(size + path_len + 1);
    if (!buf) {
        close(fd);
        return fail(err, errlen, "%s: cannot allocate %zu bytes to read it", path, size);
    }
    int rc = read_at(fd, path, buf, size, 0, err, errlen);
    close(fd);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    memcpy(buf + size, path, path_len + 1);
    f->buf = buf;
    f->size = size;
    return 0;
}

static const char *file_path(const st_file *f) { return f->buf + f->size; }

static int read_u64_array(json_t *array, uint64_t *out, size_t max, size_t *n) {
    if (!json_is_array(array) || json_array_size(array) > max) return -1;
    for (size_t i = 0; i < json_array_size(array); i++) {
        json_t *v = json_array_get(array, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) return -1;
        out[i] = (uint64_t)json_integer_value(v);
    }
    *n = json_array_size(array);
    return 0;
}

/* Checks one tensor entry: dtype known, shape a list of counts, data_offsets inside the
 * data area and exactly shape * dtype size long. */
static int check_tensor_entry(const char *path, const char *name, json_t *entry,
                              uint64_t data_size, char *err, size_t errlen) {
    if (!json_is_object(entry))
        return fail(err, errlen, "%s: tensor \"%s\": header entry is not a JSON object", path, name);
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype))
        return fail(err, errlen, "%s: tensor \"%s\": missing \"dtype\" string", path, name);
    size_t elem_size = dtype_size(json_string_value(dtype));
    if (elem_size == 0)
        return fail(err, errlen, "%s: tensor \"%s\": unknown dtype \"%s\"", path, name,
                    json_string_value(dtype));

    uint64_t dims[64], range[2], elements = 1;
    size_t ndim, nrange;
    if (!shape || read_u64_array(shape, dims, 64, &ndim) != 0)
        return fail(err, errlen, "%s: tensor \"%s\": \"shape\" must be a list of non-negative "
                    "integers", path, name);
    for (size_t i = 0; i < ndim; i++) {
        if (dims[i] != 0 && elements > UINT64_MAX / dims[i] / elem_size)
            return fail(err, errlen, "%s: tensor \"%s\": shape too large", path, name);
        elements *= dims[i];
    }
    if (!offsets || read_u64_array(offsets, range, 2, &nrange) != 0 || nrange != 2)
        return fail(err, errlen, "%s: tensor \"%s\": \"data_offsets\" must be [begin, end], "
                    "two non-negative integers", path, name);
    if (range[0] > range[1] || range[1] > data_size)
        return fail(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] lie outside the "
                    "data area (%llu bytes)", path, name, (unsigned long long)range[0],
                    (unsigned long long)range[1], (unsigned long long)data_size);
    if (range[1] - range[0] != elements * elem_size)
        return fail(err, errlen, "%s: tensor \"%s\": data_offsets [%llu, %llu] span %llu bytes "
                    "but a %s tensor of %llu elements needs %llu", path, name,
                    (unsigned long long)range[0], (unsigned long long)range[1],
                    (unsigned long long)(range[1] - range[0]), json_string_value(dtype),
                    (unsigned long long)elements, (unsigned long long)(elements * elem_size));
    return 0;
}

static int check_metadata(const char *path, json_t *metadata, char *err, size_t errlen) {
    if (!json_is_object(metadata))
        return fail(err, errlen, "%s: \"%s\" is not a JSON object", path, METADATA_KEY);
    const char *key;
    json_t *value;
    json_object_foreach(metadata, key, value) {
        if (!json_is_string(value))
            return fail(err, errlen, "%s: metadata \"%s\" is not a string", path, key);
    }
    return 0;
}

/* The header's length, from the file's first 8 bytes (first8 may be NULL when the
 * file is shorter), checked against the file's size before anything is allocated
 * for it. 0, or -1 (and err). */
static int header_length(const char *path, const char *first8, size_t file_size, uint64_t *len, char *err,
                         size_t errlen) {
    if (file_size < 8)
        return fail(err, errlen, "%s: too short for a safetensors file: %zu bytes (the header "
                    "length alone takes 8)", path, file_size);
    uint64_t header_len = 0;
    for (int i = 7; i >= 0; i--) header_len = header_len << 8 | (unsigned char)first8[i];
    if (header_len > file_size - 8)
        return fail(err, errlen, "%s: header length %llu runs past the end of the file (%zu "
                    "bytes): the file is truncated, or is not a safetensors file", path,
                    (unsigned long long)header_len, file_size);
    *len = header_len;
    return 0;
}

/* Parses and checks a header (text, len bytes) of a file of file_size bytes. */
static int parse_header(const char *path, const char *text, uint64_t len, size_t file_size, json_t **header,
                        char *err, size_t errlen) {
    json_error_t jerr;
    *header = json_loadb(text, (size_t)len, JSON_REJECT_DUPLICATES, &jerr);
    if (!*header)
        return fail(err, errlen, "%s: header is not valid JSON: %s (at byte %d of the header)",
                    path, jerr.text, jerr.position);
    if (!json_is_object(*header))
        return fail(err, errlen, "%s: header is not a JSON object", path);
    size_t data_size = file_size - 8 - (size_t)len;
    const char *name;
    json_t *entry;
    json_object_foreach(*header, name, entry) {
        int rc = strcmp(name, METADATA_KEY) == 0
                     ? check_metadata(path, entry, err, errlen)
                     : check_tensor_entry(path, name, entry, data_size, err, errlen);
        if (rc != 0) return -1;
    }
    return 0;
}

int st_open(const char *path, st_file *f, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (read_whole_file(path, f, err, errlen) != 0) return -1;
    uint64_t len = 0;
    if (header_length(path, f->buf, f->size, &len, err, errlen) != 0 ||
        parse_header(path, f->buf + 8, len, f->size, &f->header, err, errlen) != 0) {
        st_close(f);
        return -1;
    }
    f->data_start = 8 + (size_t)len;
    return 0;
}

int st_read_header(const char *path, json_t **header, char *err, size_t errlen) {
    *header = NULL;
    size_t size = 0;
    int fd = open_regular(path, &size, err, errlen);
    if (fd < 0) return -1;
    int rc = st_read_header_fd(fd, path, header, err, errlen);
    close(fd);
    return rc;
}

int st_read_header_fd(int fd, const char *path, json_t **header, char *err, size_t errlen) {
    *header = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) return fail(err, errlen, "%s: cannot read: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) return fail(err, errlen, "%s: is not a regular file", path);
    size_t size = (size_t)st.st_size;
    char first8[8];
    uint64_t len = 0;
    char *text = NULL;
    int rc = -1;
    if (size >= 8 && read_at(fd, path, first8, 8, 0, err, errlen) != 0) goto out;
    if (header_length(path, first8, size, &len, err, errlen) != 0) goto out;
    if (len > ST_HEADER_MAX) {
        fail(err, errlen, "%s: header length %llu is over the %u bytes a safetensors header may take",
             path, (unsigned long long)len, ST_HEADER_MAX);
        goto out;
    }
    text = malloc(len ? (size_t)len : 1);
    if (!text) {
        fail(err, errlen, "%s: cannot allocate %llu bytes for its header", path, (unsigned long long)len);
        goto out;
    }
    if (read_at(fd, path, text, (size_t)len, 8, err, errlen) != 0) goto out;
    rc = parse_header(path, text, len, size, header, err, errlen);
out:
    free(text);
    if (rc != 0) {
        json_decref(*header);
        *header = NULL;
    }
    return rc;
}

const float *st_get_f32(const st_file *f, const char *name, size_t count, char *err,
                        size_t errlen) {
    const char *path = file_path(f);
    json_t *entry = strcmp(name, METADATA_KEY) == 0 ? NULL : json_object_get(f->header, name);
    if (!entry) {
        fail(err, errlen, "%s: no tensor named \"%s\"", path, name);
        return NULL;
    }
    /* st_open checked the entry's shape and offsets against each other and the file */
    const char *dtype = json_string_value(json_object_get(entry, "dtype"));
    json_t *offsets = json_object_get(entry, "data_offsets");
    uint64_t begin = (uint64_t)json_integer_value(json_array_get(offsets, 0));
    uint64_t end = (uint64_t)json_integer_value(json_array_get(offsets, 1));
    if (strcmp(dtype, "F32") != 0) {
        fail(err, errlen, "%s: tensor \"%s\" is %s, not F32", path, name, dtype);
        return NULL;
    }
    uint64_t elements = (end - begin) / sizeof(float);
    if (elements != count) {
        fail(err, errlen, "%s: tensor \"%s\" holds %llu elements but %zu were expected", path,
             name, (unsigned long long)elements, count);
        return NULL;
    }
    const char *p = f->buf + f->data_start + begin;
    if ((uintptr_t)p % _Alignof(float) != 0) {
        fail(err, errlen, "%s: tensor \"%s\" is not 4-byte aligned: it starts at byte %llu of "
             "the file; rewrite the file with aligned tensors", path, name,
             (unsigned long long)(f->data_start + begin));
        return NULL;
    }
    return (const float *)p;
}

const char *st_metadata(const st_file *f, const char *key) {
    json_t *metadata = json_object_get(f->header, METADATA_KEY);
    return json_string_value(json_object_get(metadata, key));
}

void st_close(st_file *f) {
    if (!f) return;
    free(f->buf);
    json_decref(f->header);
    memset(f, 0, sizeof *f);
}
