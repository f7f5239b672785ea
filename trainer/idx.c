/* IDX loader: reads an images file and a labels file (the MNIST family's format),
 * gzipped or plain, into one malloc'd array each. zlib's gzread reads both kinds
 * (it recognises the gzip magic 1f 8b itself, whatever the file is called).
 *
 * Every file is read to its end even when `limit` keeps only a few examples, so that
 * a truncated, padded or corrupt file is reported when it is loaded, in a sentence
 * that names the file and says what is wrong, rather than trusted. */
#include "idx.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_UBYTE 0x08
#define IDX_IMAGES_MAGIC 0x00000803u
#define IDX_LABELS_MAGIC 0x00000801u
#define IDX_MAX_DIMS 3
#define GZ_BUFFER_BYTES (256u * 1024u)
#define MAX_READ_CALL (1u << 30) /* gzread takes an unsigned and returns an int */
/* deflate never compresses better than about 1032:1, so a gzip file of N bytes holds
 * at most this many times N once decompressed: a header claiming more is a lie, and
 * is refused before anything is allocated for it. */
#define GZIP_MAX_RATIO 1100u
/* What one file may claim at all, whatever its size: a header beyond this is refused
 * before anything is read or allocated (Fashion-MNIST is 60000 of 28x28). */
#define IDX_MAX_COUNT 100000000u /* examples */
#define IDX_MAX_PIXELS 1000000u  /* rows * cols of one image */
/* A gzipped file's data is read into a buffer that grows as the data arrives (from
 * this size, doubling), so a header that lies within the ratio above costs no more
 * memory than the data that is really there. */
#define GZ_FIRST_CHUNK (16u << 20)

/* What one of the two files must hold. */
typedef struct {
    const char *noun;   /* "images" or "labels" */
    uint32_t magic;     /* the only magic accepted */
    int ndims;
} idx_kind;

static const idx_kind IMAGES = {"images", IDX_IMAGES_MAGIC, 3};
static const idx_kind LABELS = {"labels", IDX_LABELS_MAGIC, 1};

/* An open file being read, with where errors go. */
typedef struct {
    gzFile gz;
    const char *path;
    const idx_kind *kind;
    char *err;
    size_t errlen;
} idx_reader;

/* One file's header. */
typedef struct {
    uint32_t magic;
    uint32_t dims[IDX_MAX_DIMS];
    uint64_t header_bytes; /* 4 + 4 * ndims */
    uint64_t data_bytes;   /* product of dims: one byte per value */
} idx_header;

static int fail(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static uint32_t read_be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* " once decompressed" for a gzipped file: its size on disk says nothing. */
static const char *size_note(const idx_reader *r) {
    return gzdirect(r->gz) ? "" : " once decompressed";
}

/* zlib prefixes its messages with the name it knows the file by ("<fd:N>" for a
 * descriptor); drop it, we print our own. */
static const char *zlib_message(const idx_reader *r, int *errnum) {
    const char *msg = gzerror(r->gz, errnum);
    (void)r;
    const char *sep = msg[0] == '<' ? strstr(msg, ">: ") : NULL;
    return sep ? sep + 3 : msg;
}

/* After a short or failed read: if zlib saw an error (corrupt or cut-off gzip data,
 * an I/O error), reports it and returns -1; returns 0 if the data simply ended. */
static int check_stream(const idx_reader *r) {
    int errnum = Z_OK;
    const char *msg = zlib_message(r, &errnum);
    if (errnum == Z_OK) return 0;
    if (errnum == Z_ERRNO) return fail(r->err, r->errlen, "%s: cannot read: %s", r->path, msg);
    if (errnum == Z_BUF_ERROR)
        return fail(r->err, r->errlen,
                    "%s: corrupt gzip data: %s (the compressed file is cut short; fetch it again)",
                    r->path, msg);
    return fail(r->err, r->errlen, "%s: corrupt gzip data: %s", r->path, msg);
}

/* Reads up to len bytes in big calls; returns how many arrived, or -1 on a zlib error. */
static int64_t read_bytes(const idx_reader *r, void *buf, uint64_t len) {
    unsigned char *p = buf;
    uint64_t got = 0;
    while (got < len) {
        uint64_t want = len - got < MAX_READ_CALL ? len - got : MAX_READ_CALL;
        int n = gzread(r->gz, p + got, (unsigned)want);
        if (n <= 0) break;
        got += (uint64_t)n;
    }
    if (got < len && check_stream(r) != 0) return -1;
    return (int64_t)got;
}

/* Reads and throws away everything left; returns the byte count, or -1 on a zlib error. */
static int64_t count_remaining_bytes(const idx_reader *r) {
    unsigned char scratch[64 * 1024];
    uint64_t total = 0;
    int n;
    while ((n = gzread(r->gz, scratch, sizeof scratch)) > 0) total += (uint64_t)n;
    if (check_stream(r) != 0) return -1;
    return (int64_t)total;
}

static const char *idx_type_name(int code) {
    switch (code) {
    case 0x08: return "unsigned byte";
    case 0x09: return "signed byte";
    case 0x0B: return "16-bit integer";
    case 0x0C: return "32-bit integer";
    case 0x0D: return "32-bit float";
    case 0x0E: return "64-bit float";
    default: return NULL;
    }
}

/* Explains why `magic` is not the one this kind of file needs. */
static int magic_error(const idx_reader *r, uint32_t magic) {
    const idx_kind *k = r->kind;
    const idx_kind *other = k == &IMAGES ? &LABELS : &IMAGES;
    int type_code = (int)(magic >> 8 & 0xff), ndims = (int)(magic & 0xff);
    const char *type_name = idx_type_name(type_code);
    if (magic == other->magic)
        return fail(r->err, r->errlen,
                    "%s: is an IDX %s file (magic 0x%08x), not an IDX %s file (expected 0x%08x): "
                    "are the images and labels paths swapped?",
                    r->path, other->noun, magic, k->noun, k->magic);
    if (magic >> 16 != 0 || type_name == NULL)
        return fail(r->err, r->errlen, "%s: is not an IDX %s file: magic 0x%08x (expected 0x%08x)",
                    r->path, k->noun, magic, k->magic);
    if (type_code != IDX_UBYTE)
        return fail(r->err, r->errlen,
                    "%s: holds %s values (magic 0x%08x) but an IDX %s file must hold unsigned "
                    "bytes (expected 0x%08x)",
                    r->path, type_name, magic, k->noun, k->magic);
    return fail(r->err, r->errlen,
                "%s: has %d dimension%s (magic 0x%08x) but an IDX %s file has %d (expected 0x%08x)",
                r->path, ndims, ndims == 1 ? "" : "s", magic, k->noun, k->ndims, k->magic);
}

/* "10000 images of 28x28" or "10000 labels". */
static void describe_dims(const idx_reader *r, const idx_header *h, char *out, size_t outlen) {
    const char *plural = h->dims[0] == 1 ? "" : "s";
    if (r->kind->ndims == 3)
        snprintf(out, outlen, "%u image%s of %ux%u", h->dims[0], plural, h->dims[1], h->dims[2]);
    else
        snprintf(out, outlen, "%u label%s", h->dims[0], plural);
}

/* Reads and checks magic and dimensions; sizes the data, guarding overflow. */
static int read_header(const idx_reader *r, idx_header *h) {
    const idx_kind *k = r->kind;
    unsigned char raw[4 + 4 * IDX_MAX_DIMS];
    char what[96];
    memset(h, 0, sizeof *h);
    h->header_bytes = 4 + 4 * (uint64_t)k->ndims;

    int64_t got = read_bytes(r, raw, 4);
    if (got < 0) return -1;
    if (got == 0)
        return fail(r->err, r->errlen, "%s: is empty%s (expected an IDX %s file)", r->path,
                    size_note(r), k->noun);
    if (got < 4)
        return fail(r->err, r->errlen,
                    "%s: truncated header: the file holds %lld bytes%s but an IDX %s header "
                    "needs %llu",
                    r->path, (long long)got, size_note(r), k->noun,
                    (unsigned long long)h->header_bytes);
    h->magic = read_be32(raw);
    if (h->magic != k->magic) return magic_error(r, h->magic);

    int64_t dims_got = read_bytes(r, raw + 4, 4 * (uint64_t)k->ndims);
    if (dims_got < 0) return -1;
    if ((uint64_t)dims_got < 4 * (uint64_t)k->ndims)
        return fail(r->err, r->errlen,
                    "%s: truncated header: the file holds %lld bytes%s but an IDX %s header "
                    "needs %llu",
                    r->path, (long long)(4 + dims_got), size_note(r), k->noun,
                    (unsigned long long)h->header_bytes);

    h->data_bytes = 1;
    int overflow = 0;
    for (int i = 0; i < k->ndims; i++) {
        h->dims[i] = read_be32(raw + 4 + 4 * i);
        if (h->dims[i] != 0 && h->data_bytes > UINT64_MAX / h->dims[i]) overflow = 1;
        h->data_bytes *= h->dims[i];
    }
    describe_dims(r, h, what, sizeof what);
    for (int i = 0; i < k->ndims; i++)
        if (h->dims[i] == 0)
            return fail(r->err, r->errlen,
                        "%s: header says %s: every dimension must be at least 1", r->path, what);
    /* rows and cols are ints in idx_dataset; the whole file must be countable in size_t. */
    int too_big = overflow || h->data_bytes > SIZE_MAX - h->header_bytes ||
                  (k->ndims == 3 && (h->dims[1] > INT32_MAX || h->dims[2] > INT32_MAX));
    if (too_big)
        return fail(r->err, r->errlen, "%s: header says %s: too large to load", r->path, what);
    char pixels_note[64];
    snprintf(pixels_note, sizeof pixels_note, ", of at most %u pixels each", IDX_MAX_PIXELS);
    if (h->dims[0] > IDX_MAX_COUNT || (k->ndims == 3 && (uint64_t)h->dims[1] * h->dims[2] > IDX_MAX_PIXELS))
        return fail(r->err, r->errlen, "%s: header says %s: too large to load (at most %u %s%s)", r->path, what,
                    IDX_MAX_COUNT, k->noun, k->ndims == 3 ? pixels_note : "");
    return 0;
}

/* Before allocating what the header asks for: can a file of this size hold it? */
static int check_size_claim(const idx_reader *r, const idx_header *h, uint64_t file_bytes, const char *what) {
    uint64_t expected = h->header_bytes + h->data_bytes;
    if (gzdirect(r->gz)) {
        if (file_bytes < expected)
            return fail(r->err, r->errlen, "%s: truncated: header says %s (%llu bytes) but the file holds %llu bytes",
                        r->path, what, (unsigned long long)expected, (unsigned long long)file_bytes);
        if (file_bytes > expected)
            return fail(r->err, r->errlen,
                        "%s: %llu bytes of trailing garbage after the data: header says %s (%llu bytes) but "
                        "the file holds %llu bytes",
                        r->path, (unsigned long long)(file_bytes - expected), what, (unsigned long long)expected,
                        (unsigned long long)file_bytes);
        return 0;
    }
    uint64_t most = file_bytes > UINT64_MAX / GZIP_MAX_RATIO ? UINT64_MAX : file_bytes * GZIP_MAX_RATIO;
    if (expected > most)
        return fail(r->err, r->errlen,
                    "%s: truncated or corrupt: header says %s (%llu bytes) but a gzip file of %llu bytes cannot "
                    "hold more than %llu once decompressed",
                    r->path, what, (unsigned long long)expected, (unsigned long long)file_bytes,
                    (unsigned long long)most);
    return 0;
}

/* Reads up to len bytes into a fresh *out; returns how many arrived, or -1 (reported).
 * A plain file's size was checked against its header, so it gets len at once; a
 * gzipped one gets a buffer that grows only while data keeps arriving. */
static int64_t read_growing(const idx_reader *r, uint8_t **out, uint64_t len, const char *what) {
    uint64_t cap = gzdirect(r->gz) || len < GZ_FIRST_CHUNK ? len : GZ_FIRST_CHUNK;
    uint64_t got = 0;
    uint8_t *buf = NULL;
    for (;;) {
        uint8_t *grown = realloc(buf, cap ? cap : 1);
        if (!grown) {
            free(buf);
            return fail(r->err, r->errlen, "%s: cannot allocate %llu bytes for %s", r->path,
                        (unsigned long long)cap, what);
        }
        buf = grown;
        int64_t n = read_bytes(r, buf + got, cap - got);
        if (n < 0) {
            free(buf);
            return -1;
        }
        got += (uint64_t)n;
        if (got < cap || cap == len) break; /* the data ended, or all of it is here */
        cap = cap > len / 2 ? len : cap * 2;
    }
    *out = buf;
    return (int64_t)got;
}

/* Reads one file: checks the header against `kind`, keeps the first `limit` records
 * (0 = all) in a fresh array *data (*kept_count of them), and checks that the file holds
 * exactly what its header says. */
static int read_idx_file(const data_roots *roots, const char *path, const idx_kind *kind, size_t limit,
                         idx_header *h, uint8_t **data, size_t *kept_count, char *err, size_t errlen) {
    *data = NULL;
    *kept_count = 0;
    const char *name = data_display_name(roots, path);
    int fd = data_open(roots, path, err, errlen);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return fail(err, errlen, "%s: cannot read: %s", name, strerror(errno));
    }
    errno = 0;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        close(fd);
        return fail(err, errlen, "%s: cannot open: %s", name, errno ? strerror(errno) : "out of memory");
    }
    gzbuffer(gz, GZ_BUFFER_BYTES);
    idx_reader r = {gz, name, kind, err, errlen};

    int rc = -1;
    uint8_t *kept = NULL;
    char what[96];
    if (read_header(&r, h) != 0) goto done;
    describe_dims(&r, h, what, sizeof what);
    if (check_size_claim(&r, h, (uint64_t)st.st_size, what) != 0) goto done;

    uint64_t count = h->dims[0];
    uint64_t record_bytes = h->data_bytes / count;
    uint64_t keep = (limit == 0 || limit > count) ? count : limit;
    uint64_t kept_bytes = keep * record_bytes;
    int64_t got = read_growing(&r, &kept, kept_bytes, what);
    if (got < 0) goto done;
    int64_t rest = count_remaining_bytes(&r);
    if (rest < 0) goto done;

    uint64_t expected = h->header_bytes + h->data_bytes;
    uint64_t held = h->header_bytes + (uint64_t)got + (uint64_t)rest;
    if (held < expected) {
        fail(err, errlen, "%s: truncated: header says %s (%llu bytes) but the file holds %llu bytes%s",
             name, what, (unsigned long long)expected, (unsigned long long)held, size_note(&r));
        goto done;
    }
    if (held > expected) {
        fail(err, errlen,
             "%s: %llu bytes of trailing garbage after the data: header says %s (%llu bytes) but "
             "the file holds %llu bytes%s",
             name, (unsigned long long)(held - expected), what, (unsigned long long)expected,
             (unsigned long long)held, size_note(&r));
        goto done;
    }
    *kept_count = (size_t)keep;
    *data = kept;
    kept = NULL;
    rc = 0;
done:
    free(kept);
    gzclose_r(gz);
    return rc;
}

static int max_label_plus_one(const uint8_t *labels, size_t count) {
    int max = -1;
    for (size_t i = 0; i < count; i++)
        if (labels[i] > max) max = labels[i];
    return max + 1;
}

int idx_load(const data_roots *roots, const char *images_path, const char *labels_path, size_t limit,
             idx_dataset *out, char *err, size_t errlen) {
    idx_header images_header, labels_header;
    uint8_t *images = NULL, *labels = NULL;
    size_t images_kept = 0, labels_kept = 0;
    memset(out, 0, sizeof *out);

    if (read_idx_file(roots, images_path, &IMAGES, limit, &images_header, &images, &images_kept, err,
                      errlen) != 0)
        return -1;
    if (read_idx_file(roots, labels_path, &LABELS, limit, &labels_header, &labels, &labels_kept, err,
                      errlen) != 0) {
        free(images);
        return -1;
    }
    if (images_header.dims[0] != labels_header.dims[0]) {
        fail(err, errlen,
             "images file %s has %u examples but labels file %s has %u: the two files must "
             "describe the same examples",
             data_display_name(roots, images_path), images_header.dims[0], data_display_name(roots, labels_path),
             labels_header.dims[0]);
        free(images);
        free(labels);
        return -1;
    }
    out->images = images;
    out->labels = labels;
    out->count = images_kept;
    out->rows = (int)images_header.dims[1];
    out->cols = (int)images_header.dims[2];
    out->num_classes = max_label_plus_one(labels, labels_kept);
    return 0;
}

void idx_free(idx_dataset *d) {
    if (!d) return;
    if (d->mapping) {
        munmap(d->mapping, d->mapping_bytes);
        close(d->cache_fd);
    } else {
        free(d->images);
        free(d->labels);
    }
    memset(d, 0, sizeof *d);
}
