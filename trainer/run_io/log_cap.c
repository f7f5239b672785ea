/* The cap on each log of a run: see log_cap.h. */
#include "log_cap.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "byte_size.h"
#include "run_dir.h"

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a full disk or a closed file: nothing better to do */
        p += w;
        n -= (size_t)w;
    }
}

void log_cap_init(log_cap *c) {
    c->cap = 0;
    c->capped = false;
    const char *v = getenv(RUN_DIR_LOG_CAP_ENV);
    if (!v || !*v) return;
    uint64_t bytes;
    if (byte_size_parse(v, &bytes) != 0) {
        static bool said;
        if (!said) fprintf(stderr, "%s=%s is not a size (e.g. 1G): the run's logs are not capped\n", RUN_DIR_LOG_CAP_ENV, v);
        said = true;
        return;
    }
    c->cap = bytes;
}

void log_cap_write(log_cap *c, int fd, const void *p, size_t n) {
    if (!c->cap) {
        write_all(fd, p, n);
        return;
    }
    if (c->capped) return;
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { /* a pipe or a terminal: no file to cap */
        write_all(fd, p, n);
        return;
    }
    uint64_t end = c->cap > RUN_DIR_LOG_CAP_ROOM ? c->cap - RUN_DIR_LOG_CAP_ROOM : 0, size = (uint64_t)st.st_size;
    if (size + n <= end) {
        write_all(fd, p, n);
        return;
    }
    c->capped = true;
    if (size > end) return; /* another writer of this log has said so already */
    /* what fits is written, to the byte, so that the notice takes the file past `end`:
     * every later write, this process's or another's, then finds no room */
    size_t fits = (size_t)(end - size);
    char last = '\n', cap[32], line[RUN_DIR_LOG_CAP_ROOM];
    if (fits) {
        write_all(fd, p, fits);
        last = ((const char *)p)[fits - 1];
    } else if (size > 0 && pread(fd, &last, 1, (off_t)size - 1) != 1) {
        last = '\n';
    }
    int len = snprintf(line, sizeof line, "%sddpd: this log reached its cap of %s (ddpd serve --max-log-bytes-per-run, "
                       "%s): what is written to it from here on is dropped\n", last == '\n' ? "" : "\n",
                       byte_size_format(c->cap, cap, sizeof cap), RUN_DIR_LOG_CAP_ENV);
    if (len > 0) write_all(fd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
}
