/* IDX headers and label classes for the submission checks: see idx_header.h. */
#include "idx_header.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Reads the magic and `dims` sizes; the file stays open at the data. */
static gzFile open_header(const char *path, uint32_t magic, uint32_t *dim, int dims, char *err, size_t errlen) {
    gzFile f = gzopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot open it: %s", strerror(errno));
        return NULL;
    }
    unsigned char h[16];
    int want = 4 + 4 * dims;
    if (gzread(f, h, (unsigned)want) != want || be32(h) != magic) {
        snprintf(err, errlen, "not an IDX %s file (magic 0x%08x expected)", dims == 3 ? "images" : "labels", magic);
        gzclose(f);
        return NULL;
    }
    for (int i = 0; i < dims; i++) dim[i] = be32(h + 4 + 4 * i);
    return f;
}

int idx_header_images(const char *path, size_t *count, int *rows, int *cols, char *err, size_t errlen) {
    uint32_t d[3];
    gzFile f = open_header(path, 0x00000803, d, 3, err, errlen);
    if (!f) return -1;
    gzclose(f);
    if (d[1] == 0 || d[2] == 0 || d[1] > 1000000 || d[2] > 1000000 || (uint64_t)d[1] * d[2] > 1000000) {
        snprintf(err, errlen, "images of %ux%u pixels: at most 10^6 pixels each", d[1], d[2]);
        return -1;
    }
    *count = d[0], *rows = (int)d[1], *cols = (int)d[2];
    return 0;
}

int idx_header_labels(const char *path, size_t limit, size_t *count, int *num_classes, char *err, size_t errlen) {
    uint32_t d[1];
    gzFile f = open_header(path, 0x00000801, d, 1, err, errlen);
    if (!f) return -1;
    size_t n = limit && limit < d[0] ? limit : d[0], seen = 0;
    int max = -1;
    unsigned char buf[65536];
    while (seen < n) {
        unsigned want = (unsigned)(n - seen < sizeof buf ? n - seen : sizeof buf);
        int got = gzread(f, buf, want);
        if (got <= 0) break;
        for (int i = 0; i < got; i++)
            if (buf[i] > max) max = buf[i];
        seen += (size_t)got;
    }
    gzclose(f);
    *count = d[0];
    *num_classes = max + 1;
    return 0;
}
