/* Reading the last lines of a log file: see logtail.h. */
#include "logtail.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "run_files.h"

/* Opens the file and says where the span ends in it now: the file's size, or `end`
 * when it is short of that. -1 with errno. */
static int open_span(const char *dir, const char *rel, long long end, long long *size, long long *stop) {
    struct stat sb;
    char why[512];
    /* a run's own log: never through a link it put there, never a FIFO (run_files.h) */
    int fd = run_file_open_in(dir, rel, RUN_FILE_ANY_SIZE, &sb, why, sizeof why);
    if (fd < 0) return -1;
    *size = (long long)sb.st_size;
    *stop = end >= 0 && end < *size ? end : *size;
    return fd;
}

int logtail_read_from(const char *dir, const char *rel, long long offset, size_t max, char **out, size_t *len, long long *next,
                      long long *size) {
    return logtail_read_from_span(dir, rel, 0, -1, offset, max, out, len, next, size);
}

int logtail_read_from_span(const char *dir, const char *rel, long long begin, long long end, long long offset, size_t max, char **out,
                           size_t *len, long long *next, long long *size) {
    *out = NULL;
    *len = 0;
    if (offset < begin) offset = begin;
    *next = offset;
    long long stop;
    int fd = open_span(dir, rel, end, size, &stop);
    if (fd < 0) return -1;
    if (offset >= stop) {
        close(fd);
        return 0;
    }
    size_t want = (size_t)(stop - offset) < max ? (size_t)(stop - offset) : max;
    char *data = xmalloc(want + 1);
    ssize_t got = pread(fd, data, want, (off_t)offset);
    close(fd);
    if (got <= 0) {
        free(data);
        return got < 0 ? -1 : 0;
    }
    size_t keep = (size_t)got;
    char *nl = memrchr(data, '\n', keep);
    if (nl) keep = (size_t)(nl - data) + 1;
    else if ((size_t)got < max) keep = 0; /* a line still being written: wait for its end */
    if (!keep) {
        free(data);
        return 0;
    }
    data[keep] = '\0';
    *out = data;
    *len = keep;
    *next = offset + (long long)keep;
    return 0;
}

int logtail_read(const char *dir, const char *rel, size_t n, char **out, size_t *len, long long *end_offset) {
    return logtail_read_span(dir, rel, 0, -1, n, out, len, end_offset);
}

int logtail_read_span(const char *dir, const char *rel, long long begin, long long stop, size_t n, char **out, size_t *len,
                      long long *end_offset) {
    *out = NULL;
    *len = 0;
    *end_offset = begin;
    long long size, last;
    int fd = open_span(dir, rel, stop, &size, &last);
    if (fd < 0) return -1;
    off_t floor = (off_t)(begin < last ? begin : last), end = (off_t)last, start = end;
    *end_offset = (long long)end;
    size_t newlines = 0;
    char chunk[65536];
    /* Walk back chunk by chunk until n line breaks are behind us (a newline that ends
     * the file does not start a line). */
    while (start > floor && n > 0) {
        off_t from = start - floor > (off_t)sizeof chunk ? start - (off_t)sizeof chunk : floor;
        ssize_t got = pread(fd, chunk, (size_t)(start - from), from);
        if (got <= 0) break;
        bool found = false;
        for (ssize_t i = got - 1; i >= 0; i--) {
            if (chunk[i] != '\n' || from + i == end - 1) continue;
            if (++newlines == n) {
                start = from + i + 1;
                found = true;
                break;
            }
        }
        if (found) break;
        start = from;
    }
    if (n == 0) start = end;
    size_t want = (size_t)(end - start);
    if (want) {
        char *data = xmalloc(want + 1);
        ssize_t got = pread(fd, data, want, start);
        if (got < 0) got = 0;
        data[got] = '\0';
        *out = data;
        *len = (size_t)got;
    }
    close(fd);
    return 0;
}

char *logtail_last_line(const char *dir, const char *rel, size_t maxlen) {
    char *text;
    size_t len;
    long long end;
    if (logtail_read(dir, rel, 8, &text, &len, &end) != 0 || !text) return NULL;
    char *result = NULL;
    /* the last non-blank line of the (up to) eight */
    char *e = text + len;
    while (e > text) {
        while (e > text && isspace((unsigned char)e[-1])) e--;
        char *s = e;
        while (s > text && s[-1] != '\n') s--;
        while (s < e && isspace((unsigned char)*s)) s++;
        if (s < e) {
            size_t n = (size_t)(e - s);
            result = xstrndup(s, n > maxlen ? maxlen : n);
            break;
        }
        e = s;
    }
    free(text);
    return result;
}
