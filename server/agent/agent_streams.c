/* The agent's event socket and its streams: see agent_streams.h. */
#include "agent_streams.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "ids.h"

#define MAX_CONNS 1024
#define MAX_PENDING_LINES 100000 /* per stream; beyond, it is not read until some are taken (its writer waits) */

typedef struct {
    char id[40];
    int fd;          /* -1 once the connection ended */
    buf_t partial;   /* the line being read */
    json_t *lines;   /* unacknowledged, from seq first_seq */
    int64_t first_seq;
    bool closed_sent;
    json_t *hello;   /* its first line, sent again to a coordinator that lost the stream (it restarted) */
    bool send_hello;
    long peer_uid;   /* who connected (SO_PEERCRED; -1: unknown) */
    bool refused;    /* its hello spoke for a run its account may not speak for: dropped, never forwarded */
} stream;

static struct {
    int listen_fd;
    stream s[MAX_CONNS];
    int n;
    char boot[17];
    uint64_t counter;
    bool (*peer_ok)(int64_t run, long uid);
} S = {.listen_fd = -1};

void agent_streams_check_peers(bool (*peer_ok)(int64_t run, long uid)) { S.peer_ok = peer_ok; }

/* The run a hello speaks for ({"run": ID} or "ID"); -1: none. */
static int64_t run_of_hello(const char *line, size_t len) {
    json_t *ev = json_loadb(line, len, 0, NULL), *v = json_object_get(ev, "run");
    int64_t id = -1;
    if (json_is_integer(v)) id = json_integer_value(v);
    else if (json_is_string(v) && !parse_run_id(json_string_value(v), &id)) id = -1;
    json_decref(ev);
    return id;
}

int agent_streams_open(const char *path, char *err, size_t errlen) {
    unlink(path);
    S.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path) {
        snprintf(err, errlen, "the event socket path %s is too long for a Unix socket", path);
        return -1;
    }
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    if (S.listen_fd < 0 || bind(S.listen_fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(S.listen_fd, 256) != 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", path, strerror(errno));
        return -1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(S.boot, sizeof S.boot, "%08lx%08lx", (unsigned long)ts.tv_sec, (unsigned long)ts.tv_nsec);
    return 0;
}

void agent_streams_close(void) {
    if (S.listen_fd >= 0) close(S.listen_fd);
    for (int i = 0; i < S.n; i++) {
        if (S.s[i].fd >= 0) close(S.s[i].fd);
        buf_free(&S.s[i].partial);
        json_decref(S.s[i].lines);
        json_decref(S.s[i].hello);
    }
    S.n = 0;
}

int agent_streams_pollfds(struct pollfd *fds, int max) {
    int k = 0;
    if (k < max && S.n < MAX_CONNS) fds[k++] = (struct pollfd){.fd = S.listen_fd, .events = POLLIN};
    for (int i = 0; i < S.n && k < max; i++)
        if (S.s[i].fd >= 0 && json_array_size(S.s[i].lines) < MAX_PENDING_LINES) fds[k++] = (struct pollfd){.fd = S.s[i].fd, .events = POLLIN};
    return k;
}

static void take_line(stream *s, const char *line, size_t len) {
    if (!len) return;
    json_t *l = json_stringn(line, len); /* NULL for a line that is not UTF-8: not an event */
    if (!l) return;
    if (!s->hello && S.peer_ok && !S.peer_ok(run_of_hello(line, len), s->peer_uid)) {
        log_warn("event socket: a connection of uid %ld speaks for run %lld, whose part here runs as another "
                 "account: dropped", s->peer_uid, (long long)run_of_hello(line, len));
        s->refused = true;
        json_decref(l);
        return;
    }
    if (!s->hello) s->hello = json_incref(l);
    json_array_append_new(s->lines, l); /* past the cap by at most one read: nothing is dropped */
}

static void read_stream(stream *s) {
    char chunk[65536];
    while (json_array_size(s->lines) < MAX_PENDING_LINES) {
        ssize_t n = read(s->fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) { /* the end: a last line without its newline is torn, not taken */
            close(s->fd);
            s->fd = -1;
            return;
        }
        buf_append(&s->partial, chunk, (size_t)n);
        size_t start = 0;
        for (size_t i = 0; i < s->partial.len && !s->refused; i++) {
            if (s->partial.data[i] != '\n') continue;
            take_line(s, s->partial.data + start, i - start);
            start = i + 1;
        }
        if (s->refused) { /* gone at once: nothing of it reaches the coordinator */
            close(s->fd);
            buf_free(&s->partial);
            json_decref(s->lines);
            json_decref(s->hello);
            *s = S.s[--S.n];
            return;
        }
        memmove(s->partial.data, s->partial.data + start, s->partial.len - start);
        s->partial.len -= start;
    }
}

void agent_streams_serve(const struct pollfd *fds, int n) {
    for (int k = 0; k < n; k++) {
        if (!fds[k].revents) continue;
        if (fds[k].fd == S.listen_fd) {
            int fd;
            while (S.n < MAX_CONNS && (fd = accept4(S.listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
                stream *s = &S.s[S.n++];
                struct ucred cred;
                socklen_t cred_len = sizeof cred;
                bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0;
                *s = (stream){.fd = fd, .lines = json_array(), .peer_uid = known ? (long)cred.uid : -1};
                snprintf(s->id, sizeof s->id, "%s-%llu", S.boot, (unsigned long long)S.counter++);
            }
            continue;
        }
        for (int i = 0; i < S.n; i++)
            if (S.s[i].fd == fds[k].fd) read_stream(&S.s[i]);
    }
}

json_t *agent_streams_batch(size_t budget) {
    json_t *out = json_array();
    size_t used = 0;
    for (int i = 0; i < S.n && used < budget; i++) {
        stream *s = &S.s[i];
        bool ended = s->fd < 0;
        if (!json_array_size(s->lines) && !(ended && !s->closed_sent)) continue;
        json_t *lines = json_array();
        size_t k = 0;
        for (; k < json_array_size(s->lines) && used < budget; k++) {
            json_t *l = json_array_get(s->lines, k);
            used += json_string_length(l) + 8;
            json_array_append(lines, l);
        }
        bool all = k == json_array_size(s->lines);
        json_t *entry = json_pack("{s:s, s:I, s:o, s:b}", "id", s->id, "seq", (json_int_t)s->first_seq, "lines", lines,
                                  "closed", ended && all);
        if (s->send_hello && s->hello && s->first_seq > 0) json_object_set(entry, "hello", s->hello);
        json_array_append_new(out, entry);
    }
    return out;
}

void agent_streams_acked(const json_t *next) {
    for (int i = 0; i < S.n;) {
        stream *s = &S.s[i];
        json_t *v = json_object_get(next, s->id);
        if (json_is_integer(v)) {
            int64_t upto = json_integer_value(v);
            /* the coordinator wants what it had already: it lost the stream (it restarted) */
            s->send_hello = upto < s->first_seq;
            size_t have = json_array_size(s->lines);
            size_t taken = upto <= s->first_seq ? 0 : (size_t)(upto - s->first_seq) < have ? (size_t)(upto - s->first_seq) : have;
            if (taken) { /* the rest, moved once (removing from the front one by one is quadratic) */
                json_t *rest = json_array();
                for (size_t k = taken; k < have; k++) json_array_append(rest, json_array_get(s->lines, k));
                json_decref(s->lines);
                s->lines = rest;
                s->first_seq += (int64_t)taken;
            }
            if (s->fd < 0 && !json_array_size(s->lines)) s->closed_sent = true;
        }
        if (s->closed_sent) { /* delivered and closed: gone */
            buf_free(&s->partial);
            json_decref(s->lines);
            json_decref(s->hello);
            S.s[i] = S.s[--S.n];
            continue;
        }
        i++;
    }
}

void agent_streams_resend_hellos(void) {
    for (int i = 0; i < S.n; i++) S.s[i].send_hello = true;
}

bool agent_streams_pending(void) {
    for (int i = 0; i < S.n; i++)
        if (json_array_size(S.s[i].lines) || (S.s[i].fd < 0 && !S.s[i].closed_sent)) return true;
    return false;
}
