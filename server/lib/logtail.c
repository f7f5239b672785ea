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

int logtail_read(const char *path, size_t n, char **out, size_t *len) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        close(fd);
        return -1;
    }
    off_t end = sb.st_size, start = end;
    size_t newlines = 0;
    char chunk[65536];
    /* Walk back chunk by chunk until n line breaks are behind us (a newline that ends
     * the file does not start a line). */
    while (start > 0 && n > 0) {
        off_t from = start > (off_t)sizeof chunk ? start - (off_t)sizeof chunk : 0;
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
    size_t size = (size_t)(end - start);
    if (size) {
        char *data = xmalloc(size + 1);
        ssize_t got = pread(fd, data, size, start);
        if (got < 0) got = 0;
        data[got] = '\0';
        *out = data;
        *len = (size_t)got;
    }
    close(fd);
    return 0;
}

char *logtail_last_line(const char *path, size_t maxlen) {
    char *text;
    size_t len;
    if (logtail_read(path, 8, &text, &len) != 0 || !text) return NULL;
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
