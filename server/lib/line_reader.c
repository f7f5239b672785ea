/* Whole lines from a run's file in bounded memory: see line_reader.h. */
#include "line_reader.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"

#define CHUNK (64 * 1024)

void line_reader_init(line_reader *r, int fd, int64_t offset, size_t max_line) {
    memset(r, 0, sizeof *r);
    r->fd = fd;
    r->consumed = r->read_to = offset;
    r->max_line = max_line;
}

void line_reader_free(line_reader *r) {
    free(r->buf);
    r->buf = NULL;
    r->len = r->pos = r->cap = 0;
}

/* Drops what was handed out or skipped from the front of the buffer. */
static void compact(line_reader *r) {
    if (!r->pos) return;
    memmove(r->buf, r->buf + r->pos, r->len - r->pos);
    r->len -= r->pos;
    r->pos = 0;
}

/* Skips the bytes buf[pos..len) of an overlong line. */
static void skip_buffered(line_reader *r) {
    size_t n = r->len - r->pos;
    r->skipped_bytes += (int64_t)n;
    r->consumed += (int64_t)n;
    r->pos = r->len;
}

int line_reader_next(line_reader *r, const char **line, size_t *len, int64_t *budget) {
    for (;;) {
        char *start = r->buf ? r->buf + r->pos : NULL, *nl = r->len > r->pos ? memchr(start, '\n', r->len - r->pos) : NULL;
        if (nl) {
            size_t n = (size_t)(nl - start) + 1;
            r->pos += n;
            r->consumed += (int64_t)n;
            if (r->skipping) { /* the end of an overlong line */
                r->skipping = false;
                r->skipped_bytes += (int64_t)n;
                r->skipped_lines++;
                continue;
            }
            *line = start;
            *len = n;
            return 1;
        }
        if (r->skipping || r->len - r->pos > r->max_line) {
            r->skipping = true;
            skip_buffered(r);
        }
        compact(r);
        if (budget && *budget <= 0) return 0;
        if (r->skipping) { /* nothing of this line is kept: jump over a hole rather than read it */
            off_t data = lseek(r->fd, (off_t)r->read_to, SEEK_DATA);
            if (data < 0 && errno == ENXIO) data = lseek(r->fd, 0, SEEK_END); /* a hole to the end */
            if (data > (off_t)r->read_to) {
                r->skipped_bytes += (int64_t)data - r->read_to;
                r->consumed += (int64_t)data - r->read_to;
                r->read_to = (int64_t)data;
            }
        }
        if (r->cap < r->len + CHUNK) r->buf = xrealloc(r->buf, r->cap = r->len + CHUNK);
        ssize_t got = pread(r->fd, r->buf + r->len, CHUNK, (off_t)r->read_to);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -1;
        if (got == 0) return 0;
        r->len += (size_t)got;
        r->read_to += got;
        if (budget) *budget -= got;
    }
}

size_t line_reader_rest(const line_reader *r) { return r->len - r->pos; }

void line_reader_drop_rest(line_reader *r) {
    if (r->len > r->pos) {
        r->skipped_bytes += (int64_t)(r->len - r->pos);
        r->consumed += (int64_t)(r->len - r->pos);
        r->pos = r->len;
    }
    if (r->skipping) r->skipped_lines++;
    r->skipping = false;
    compact(r);
}
