/* A rank's output: see rank_output.h. Each batch of whole lines goes to stdout in
 * one write, so lines of different ranks (and the launcher's own log lines, when
 * stdout is the run's log) never mix within a line. */
#include "rank_output.h"
#include "utf8_text.h"
#include "run_dir.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return; /* a closed or full stdout: the rank's own log still has it */
        p += w;
        n -= (size_t)w;
    }
}

/* The run's log (this launcher's stdout): every rank's copies share its cap. */
static void to_stdout(const char *p, size_t n) {
    static log_cap cap;
    static bool ready;
    if (!ready) log_cap_init(&cap), ready = true;
    log_cap_write(&cap, STDOUT_FILENO, p, n);
}

static int open_log(const char *run_dir, int rank, int flags) {
    char path[4096];
    snprintf(path, sizeof path, "%s/" RUN_DIR_RANK_LOG, run_dir, rank);
    return open(path, flags | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
}

long long rank_output_begin_attempt(const char *run_dir, int rank, const char *marker) {
    int fd = open_log(run_dir, rank, O_RDWR);
    if (fd < 0) return -1;
    struct stat st;
    char last = '\n';
    if (fstat(fd, &st) != 0 || (st.st_size > 0 && pread(fd, &last, 1, st.st_size - 1) != 1)) {
        int err = errno;
        close(fd);
        errno = err;
        return -1;
    }
    long long offset = (long long)st.st_size;
    if (last != '\n') {
        write_all(fd, "\n", 1);
        offset++;
    }
    if (marker) {
        write_all(fd, marker, strlen(marker));
        write_all(fd, "\n", 1);
    }
    close(fd);
    return offset;
}

int rank_output_open(rank_output *o, int rank, int pipe_fd, const char *run_dir) {
    memset(o, 0, sizeof *o);
    o->rank = rank;
    o->fd = pipe_fd;
    o->log_fd = open_log(run_dir, rank, O_WRONLY);
    log_cap_init(&o->log_cap);
    return o->log_fd < 0 ? -1 : 0;
}

static void remember_if_not_blank(rank_output *o, const char *line, size_t n) {
    while (n > 0 && (line[n - 1] == '\r' || line[n - 1] == ' ' || line[n - 1] == '\t')) n--;
    size_t lead = 0;
    while (lead < n && (line[lead] == ' ' || line[lead] == '\t')) lead++;
    if (lead == n) return;
    size_t keep = n - lead < sizeof o->last_line ? n - lead : sizeof o->last_line - 1;
    memcpy(o->last_line, line + lead, keep);
    o->last_line[keep] = '\0';
    utf8_repair(o->last_line); /* it may end a reason, in JSON */
}

/* Appends "[rank N] line\n" to out (which has room: see emit_lines). */
static size_t prefixed(const rank_output *o, char *out, const char *line, size_t n) {
    int len = snprintf(out, 32, "[rank %d] ", o->rank);
    memcpy(out + len, line, n);
    out[(size_t)len + n] = '\n';
    return (size_t)len + n + 1;
}

/* Sends the whole lines of partial + data to stdout; what follows the last newline
 * stays in partial. */
static void emit_lines(rank_output *o, const char *data, size_t n) {
    char out[(RANK_OUTPUT_LINE_MAX + 32) * 4];
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        int newline = data[i] == '\n';
        if (!newline) o->partial[o->partial_len++] = data[i];
        if (!newline && o->partial_len < sizeof o->partial) continue;
        if (used + o->partial_len + 32 > sizeof out) {
            to_stdout(out, used);
            used = 0;
        }
        used += prefixed(o, out + used, o->partial, o->partial_len);
        remember_if_not_blank(o, o->partial, o->partial_len);
        o->partial_len = 0;
    }
    to_stdout(out, used);
}

int rank_output_read(rank_output *o) {
    if (o->fd < 0) return 0;
    char buf[16384];
    ssize_t got = read(o->fd, buf, sizeof buf);
    if (got < 0 && (errno == EINTR || errno == EAGAIN)) return 1;
    if (got <= 0) {
        rank_output_close(o);
        return 0;
    }
    if (o->log_fd >= 0) log_cap_write(&o->log_cap, o->log_fd, buf, (size_t)got);
    emit_lines(o, buf, (size_t)got);
    return 1;
}

void rank_output_close(rank_output *o) {
    if (o->partial_len) {
        char out[RANK_OUTPUT_LINE_MAX + 32];
        to_stdout(out, prefixed(o, out, o->partial, o->partial_len));
        remember_if_not_blank(o, o->partial, o->partial_len);
        o->partial_len = 0;
    }
    if (o->fd >= 0) close(o->fd);
    if (o->log_fd >= 0) close(o->log_fd);
    o->fd = o->log_fd = -1;
}
