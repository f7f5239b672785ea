/* Event sinks: see events.h. */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EVENT_BUFFER_BYTES (64 * 1024)
#define EVENT_FLUSH_MS 200

struct event_sink {
    int journal_fd;
    int target_fd;   /* -1: none */
    int target_is_socket;
    char run_id[128];
    int rank;
    long long seq;
    long long last_flush_ms;
    int steps_sent; /* the first step goes out at once: it tells a watcher training started */
    char *buf;
    size_t len;
};

long long unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int connect_unix(const char *path) {
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        errno = ENAMETOOLONG;
        return -1;
    }
    strcpy(addr.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int open_target(event_sink *s, const char *target, char *warning, size_t warnlen) {
    if (!target) return 0;
    if (strcmp(target, "-") == 0) {
        s->target_fd = STDOUT_FILENO;
        return 0;
    }
    struct stat st;
    if (stat(target, &st) == 0 && S_ISSOCK(st.st_mode)) {
        s->target_fd = connect_unix(target);
        s->target_is_socket = 1;
        if (s->target_fd < 0 && warning)
            snprintf(warning, warnlen, "cannot connect to the event socket %s (%s): events go to the journal only",
                     target, strerror(errno));
        return 0;
    }
    s->target_fd = open(target, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->target_fd < 0 && warning)
        snprintf(warning, warnlen, "cannot open the events file %s (%s): events go to the journal only", target,
                 strerror(errno));
    return 0;
}

event_sink *event_sink_open(const char *target, const char *journal_path, const char *run_id, int rank,
                            char *err, size_t errlen, char *warning, size_t warnlen) {
    if (warning && warnlen) warning[0] = '\0';
    event_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = malloc(EVENT_BUFFER_BYTES))) {
        snprintf(err, errlen, "out of memory");
        free(s);
        return NULL;
    }
    s->target_fd = -1;
    s->rank = rank;
    snprintf(s->run_id, sizeof s->run_id, "%s", run_id);
    s->journal_fd = open(journal_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (s->journal_fd < 0) {
        snprintf(err, errlen, "cannot open the event journal %s: %s", journal_path, strerror(errno));
        free(s->buf);
        free(s);
        return NULL;
    }
    open_target(s, target, warning, warnlen);
    s->last_flush_ms = unix_ms();
    return s;
}

static int write_all(int fd, const char *p, size_t n, int is_socket) {
    while (n > 0) {
        ssize_t w = is_socket ? send(fd, p, n, MSG_NOSIGNAL) : write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

void event_flush(event_sink *s) {
    if (!s || s->len == 0) return;
    /* One write per batch: with O_APPEND, lines from several processes never interleave. */
    if (write_all(s->journal_fd, s->buf, s->len, 0) < 0)
        fprintf(stderr, "ddp-trainer: cannot append to the event journal: %s\n", strerror(errno));
    if (s->target_fd >= 0 && write_all(s->target_fd, s->buf, s->len, s->target_is_socket) < 0) {
        fprintf(stderr, "ddp-trainer: lost the event %s (%s): events go to the journal only\n",
                s->target_is_socket ? "socket" : "target", strerror(errno));
        if (s->target_fd != STDOUT_FILENO) close(s->target_fd);
        s->target_fd = -1;
    }
    s->len = 0;
    s->last_flush_ms = unix_ms();
}

static int urgent(event_sink *s, const char *type) {
    if (strcmp(type, "step") == 0) return s->steps_sent++ == 0;
    return strcmp(type, "heartbeat") != 0 && strcmp(type, "log") != 0;
}

void event_emit(event_sink *s, const char *type, json_t *fields) {
    json_t *ev = json_object();
    json_object_set_new(ev, "run", json_string(s->run_id));
    json_object_set_new(ev, "rank", json_integer(s->rank));
    json_object_set_new(ev, "seq", json_integer(s->seq++));
    long long now = unix_ms();
    json_object_set_new(ev, "t", json_integer(now));
    json_object_set_new(ev, "type", json_string(type));
    if (fields) {
        json_object_update(ev, fields);
        json_decref(fields);
    }
    char *line = json_dumps(ev, JSON_COMPACT | JSON_REAL_PRECISION(17));
    json_decref(ev);
    if (!line) return;
    size_t n = strlen(line);
    if (s->len + n + 1 > EVENT_BUFFER_BYTES) event_flush(s);
    if (n + 1 > EVENT_BUFFER_BYTES) { /* a giant event: write it on its own */
        line[n] = '\n';
        write_all(s->journal_fd, line, n + 1, 0);
        if (s->target_fd >= 0) write_all(s->target_fd, line, n + 1, s->target_is_socket);
    } else {
        memcpy(s->buf + s->len, line, n);
        s->buf[s->len + n] = '\n';
        s->len += n + 1;
    }
    free(line);
    if (urgent(s, type) || now - s->last_flush_ms >= EVENT_FLUSH_MS) event_flush(s);
}

void event_sink_close(event_sink *s) {
    if (!s) return;
    event_flush(s);
    close(s->journal_fd);
    if (s->target_fd >= 0 && s->target_fd != STDOUT_FILENO) close(s->target_fd);
    free(s->buf);
    free(s);
}
