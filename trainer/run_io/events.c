/* Event sinks: see events.h.
 *
 * The journal is append-only and shared by every process of a run (O_APPEND, one
 * write per batch, so batches never interleave). A write can still stop short (a
 * full disk, a crash), leaving a line with no newline; the next batch of this sink
 * then starts with a newline, so the torn piece stays a line of its own, which a
 * reader skips (a cut JSON object never parses). A sink opening a journal whose
 * last byte is not a newline does the same. */
#include "events.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <poll.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define EVENT_BUFFER_BYTES (64 * 1024)
#define EVENT_FLUSH_MS 200
#define RECONNECT_EVERY_MS 1000
/* The socket is non-blocking, so a server that stops reading (stopped, swapped out)
 * never stalls training: what it has not taken waits here, and past this much the
 * connection is dropped (the events are in the journal, where the server catches up). */
#define PENDING_MAX_BYTES (4 * 1024 * 1024)
#define CLOSE_DRAIN_MS 2000

struct event_sink {
    int journal_fd;
    int journal_torn; /* the journal does not end in a newline: start the next write with one */
    int target_fd;    /* -1: none (yet, or any more) */
    int target_is_socket;
    char *socket_path;     /* set when the target is a socket: reconnect to it */
    long long last_connect_ms;
    char *hello_line;      /* the hello as sent on the socket (with the secret), for reconnects */
    char *secret;
    char *pending;         /* socket bytes the server has not taken yet */
    size_t pending_len, pending_cap;
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
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return -1;
    if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    return fd;
}

static int write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void drop_target(event_sink *s, const char *why) {
    fprintf(stderr, "%s: lost the event %s (%s): events go to the journal%s\n", program_invocation_short_name,
            s->target_is_socket ? "socket" : "target", why, s->socket_path ? " until the server is back" : " only");
    if (s->target_fd != STDOUT_FILENO) close(s->target_fd);
    s->target_fd = -1;
    s->pending_len = 0;
}

static int open_target(event_sink *s, const char *target, char *warning, size_t warnlen) {
    if (!target) return 0;
    if (strcmp(target, "-") == 0) {
        s->target_fd = STDOUT_FILENO;
        return 0;
    }
    struct stat st;
    if (stat(target, &st) == 0 && S_ISSOCK(st.st_mode)) {
        s->target_is_socket = 1;
        s->socket_path = strdup(target);
        s->last_connect_ms = unix_ms();
        s->target_fd = connect_unix(target);
        if (s->target_fd < 0 && warning)
            snprintf(warning, warnlen, "cannot connect to the event socket %s (%s): events go to the journal until it answers",
                     target, strerror(errno));
        return 0;
    }
    s->target_fd = open(target, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (s->target_fd < 0 && warning)
        snprintf(warning, warnlen, "cannot open the events file %s (%s): events go to the journal only", target,
                 strerror(errno));
    return 0;
}

/* 1 when the file at fd is non-empty and does not end in a newline. */
static int ends_torn(int fd) {
    struct stat st;
    char last;
    if (fstat(fd, &st) != 0 || st.st_size == 0) return 0;
    return pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n';
}

event_sink *event_sink_open(const char *target, const char *journal_path, const char *run_id, int rank,
                            const char *secret, char *err, size_t errlen, char *warning, size_t warnlen) {
    if (warning && warnlen) warning[0] = '\0';
    event_sink *s = calloc(1, sizeof *s);
    if (!s || !(s->buf = malloc(EVENT_BUFFER_BYTES)) || (secret && !(s->secret = strdup(secret)))) {
        snprintf(err, errlen, "out of memory");
        if (s) free(s->buf);
        free(s);
        return NULL;
    }
    s->target_fd = -1;
    s->rank = rank;
    snprintf(s->run_id, sizeof s->run_id, "%s", run_id);
    s->journal_fd = open(journal_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (s->journal_fd < 0) {
        snprintf(err, errlen, "cannot open the event journal %s: %s", journal_path, strerror(errno));
        free(s->secret);
        free(s->buf);
        free(s);
        return NULL;
    }
    s->journal_torn = ends_torn(s->journal_fd);
    open_target(s, target, warning, warnlen);
    s->last_flush_ms = unix_ms();
    return s;
}

static void journal_write(event_sink *s, const char *p, size_t n) {
    if (s->journal_torn) {
        char nl = '\n';
        if (write(s->journal_fd, &nl, 1) != 1) return; /* still failing: try again with the next batch */
        s->journal_torn = 0;
    }
    while (n > 0) {
        ssize_t w = write(s->journal_fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            fprintf(stderr, "%s: cannot append to the event journal: %s\n", program_invocation_short_name,
                    w < 0 ? strerror(errno) : "nothing written");
            s->journal_torn = 1;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

/* Sends what the socket takes now; 0, or -1 (errno) when the connection is broken. */
static int send_some(event_sink *s, const char **p, size_t *n) {
    while (*n > 0) {
        ssize_t w = send(s->target_fd, *p, *n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (w < 0) return -1;
        *p += w;
        *n -= (size_t)w;
    }
    return 0;
}

static int drain_pending(event_sink *s) {
    const char *p = s->pending;
    size_t n = s->pending_len;
    if (send_some(s, &p, &n) < 0) return -1;
    memmove(s->pending, p, n);
    s->pending_len = n;
    return 0;
}

static void target_write(event_sink *s, const char *p, size_t n) {
    if (s->target_fd < 0) return;
    if (!s->target_is_socket) {
        if (write_all(s->target_fd, p, n) < 0) drop_target(s, strerror(errno));
        return;
    }
    if ((s->pending_len && drain_pending(s) < 0) || (!s->pending_len && send_some(s, &p, &n) < 0)) {
        drop_target(s, strerror(errno));
        return;
    }
    if (n == 0) return;
    if (s->pending_len + n > PENDING_MAX_BYTES) {
        drop_target(s, "the server stopped reading");
        return;
    }
    if (s->pending_len + n > s->pending_cap) {
        size_t cap = s->pending_cap ? s->pending_cap : EVENT_BUFFER_BYTES;
        while (cap < s->pending_len + n) cap *= 2;
        char *grown = realloc(s->pending, cap);
        if (!grown) {
            drop_target(s, "out of memory");
            return;
        }
        s->pending = grown;
        s->pending_cap = cap;
    }
    memcpy(s->pending + s->pending_len, p, n);
    s->pending_len += n;
}

/* Connects (again) to the server's socket, at most once a second; a new connection
 * starts with the hello, which authenticates it. */
static void try_reconnect(event_sink *s, long long now) {
    if (!s->socket_path || s->target_fd >= 0 || !s->hello_line) return;
    if (now - s->last_connect_ms < RECONNECT_EVERY_MS) return;
    s->last_connect_ms = now;
    int fd = connect_unix(s->socket_path);
    if (fd < 0) return;
    s->target_fd = fd;
    target_write(s, s->hello_line, strlen(s->hello_line));
    if (s->target_fd >= 0) fprintf(stderr, "%s: reconnected to the event socket\n", program_invocation_short_name);
}

void event_flush(event_sink *s) {
    if (!s) return;
    long long now = unix_ms();
    try_reconnect(s, now);
    if (s->target_fd >= 0 && s->pending_len && drain_pending(s) < 0) drop_target(s, strerror(errno));
    if (s->len == 0) return;
    journal_write(s, s->buf, s->len);
    target_write(s, s->buf, s->len);
    s->len = 0;
    s->last_flush_ms = now;
}

static int urgent(event_sink *s, const char *type) {
    if (strcmp(type, "step") == 0) return s->steps_sent++ == 0;
    return strcmp(type, "heartbeat") != 0 && strcmp(type, "log") != 0;
}

static char *dump_line(json_t *ev) {
    char *line = json_dumps(ev, JSON_COMPACT | JSON_REAL_PRECISION(17));
    if (!line) return NULL;
    size_t n = strlen(line);
    char *out = realloc(line, n + 2);
    if (!out) {
        free(line);
        return NULL;
    }
    out[n] = '\n';
    out[n + 1] = '\0';
    return out;
}

/* The hello goes to the journal without the secret and to the socket with it; the
 * socket's copy is kept to open every later connection. */
static void emit_hello(event_sink *s, json_t *ev) {
    event_flush(s);
    json_object_set_new(ev, "secret", json_null());
    char *journal_line = dump_line(ev);
    if (journal_line) journal_write(s, journal_line, strlen(journal_line));
    free(journal_line);
    if (s->secret) json_object_set_new(ev, "secret", json_string(s->secret));
    free(s->hello_line);
    s->hello_line = dump_line(ev);
    if (s->hello_line) target_write(s, s->hello_line, strlen(s->hello_line));
    s->last_flush_ms = unix_ms();
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
    if (strcmp(type, "hello") == 0) {
        emit_hello(s, ev);
        json_decref(ev);
        return;
    }
    char *line = dump_line(ev);
    json_decref(ev);
    if (!line) return;
    size_t n = strlen(line);
    if (s->len + n > EVENT_BUFFER_BYTES) event_flush(s);
    if (n > EVENT_BUFFER_BYTES) { /* a giant event: write it on its own */
        journal_write(s, line, n);
        target_write(s, line, n);
    } else {
        memcpy(s->buf + s->len, line, n);
        s->len += n;
    }
    free(line);
    if (urgent(s, type) || now - s->last_flush_ms >= EVENT_FLUSH_MS) event_flush(s);
}

/* The last events (a rank's "done", the launcher's "end") should reach a live server
 * before the process exits: wait a little for the socket to take what is pending. */
static void drain_before_close(event_sink *s) {
    long long deadline = unix_ms() + CLOSE_DRAIN_MS;
    while (s->target_fd >= 0 && s->target_is_socket && s->pending_len && unix_ms() < deadline) {
        struct pollfd p = {.fd = s->target_fd, .events = POLLOUT};
        if (poll(&p, 1, 100) < 0 && errno != EINTR) break;
        if (drain_pending(s) < 0) break;
    }
}

void event_sink_close(event_sink *s) {
    if (!s) return;
    /* a connection that dropped: one more try now, whenever the last was, so that a
     * live server hears the hello and catches up from the journal what it missed */
    if (s->target_fd < 0) s->last_connect_ms = 0;
    event_flush(s);
    drain_before_close(s);
    close(s->journal_fd);
    if (s->target_fd >= 0 && s->target_fd != STDOUT_FILENO) close(s->target_fd);
    free(s->socket_path);
    free(s->hello_line);
    free(s->secret);
    free(s->pending);
    free(s->buf);
    free(s);
}
