/* A warm start's ranks: see warm_ranks.h. One JSON object a line each way; a rank's
 * request carries the write end of its output pipe (SCM_RIGHTS). */
#include "warm_ranks.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "monotonic.h"

#define SPAWN_ANSWER_S 30.0 /* a fork of a loaded interpreter, on a busy machine */

void warm_link_open(warm_link *w, char *why, size_t whylen) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    why[0] = '\0';
    const char *v = getenv("DDPD_WARM_FD");
    if (!v || !v[0]) return;
    char *end;
    long fd = strtol(v, &end, 10);
    int type = 0;
    socklen_t len = sizeof type;
    if (*end || fd < 3 || fd > 65535 || getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM) {
        snprintf(why, whylen, "DDPD_WARM_FD=%s is not a connection to a trial zygote: the ranks start cold", v);
    } else {
        w->fd = (int)fd;
        fcntl(w->fd, F_SETFD, FD_CLOEXEC); /* never a rank's */
    }
    unsetenv("DDPD_WARM_FD");
}

void warm_link_close(warm_link *w) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
}

bool warm_command_fits(char *const *argv, const char *program) {
    if (!argv[0] || !argv[1] || argv[1][0] == '-') return false;
    const char *base = strrchr(program, '/');
    base = base ? base + 1 : program;
    return strncmp(base, "python3", 7) == 0;
}

/* Reads once (waiting up to timeout_ms): 1 something came, 0 nothing, -1 the end. */
static int fill(warm_link *w, int timeout_ms) {
    struct pollfd p = {.fd = w->fd, .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0) return errno == EINTR ? 0 : -1;
    if (n == 0) return 0;
    if (w->len == sizeof w->buf) return -1; /* a line this long is not the zygote's */
    ssize_t got = recv(w->fd, w->buf + w->len, sizeof w->buf - w->len, MSG_DONTWAIT);
    if (got < 0) return errno == EAGAIN || errno == EINTR ? 0 : -1;
    if (got == 0) return -1;
    w->len += (size_t)got;
    return 1;
}

/* The next whole line as JSON (NULL: none yet, or one that is not an object). */
static json_t *next_line(warm_link *w, bool *had_line) {
    char *nl = memchr(w->buf, '\n', w->len);
    *had_line = nl != NULL;
    if (!nl) return NULL;
    *nl = '\0';
    json_t *j = json_loads(w->buf, 0, NULL);
    size_t used = (size_t)(nl - w->buf) + 1;
    memmove(w->buf, nl + 1, w->len - used);
    w->len -= used;
    if (j && !json_is_object(j)) {
        json_decref(j);
        j = NULL;
    }
    return j;
}

static bool is_exit(json_t *j, pid_t *pid, int *status) {
    json_t *e = json_object_get(j, "exit"), *s = json_object_get(j, "status");
    if (!json_is_integer(e) || !json_is_integer(s)) return false;
    *pid = (pid_t)json_integer_value(e);
    *status = (int)json_integer_value(s);
    return true;
}

static void keep_exit(warm_link *w, pid_t pid, int status) {
    if (w->n_pending == WARM_PENDING_MAX) return; /* more ranks than a node has: not ours */
    w->pending_pid[w->n_pending] = pid;
    w->pending_status[w->n_pending++] = status;
}

static json_t *request(const rank_command *c) {
    json_t *argv = json_array(), *env = json_object();
    for (int i = 1; c->argv[i]; i++) json_array_append_new(argv, json_string(c->argv[i]));
    for (int i = 0; c->env[i]; i++) {
        const char *eq = strchr(c->env[i], '=');
        if (!eq) continue;
        char *key = strndup(c->env[i], (size_t)(eq - c->env[i]));
        if (key) json_object_set_new(env, key, json_string(eq + 1));
        free(key);
    }
    return json_pack("{s:s, s:o, s:o, s:s}", "op", "rank", "argv", argv, "env", env, "cwd",
                     c->working_dir ? c->working_dir : ".");
}

static int send_with_fd(int sock, const char *text, size_t n, int fd) {
    struct iovec iov = {.iov_base = (void *)text, .iov_len = n};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } u;
    memset(&u, 0, sizeof u);
    struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof fd);
    ssize_t sent;
    do sent = sendmsg(sock, &m, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent < 0) return -1;
    /* the rest, without the descriptor */
    for (size_t off = (size_t)sent; off < n;) {
        ssize_t k = send(sock, text + off, n - off, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        off += (size_t)k;
    }
    return 0;
}

pid_t warm_spawn(warm_link *w, const rank_command *c, int *out_fd, char *why, size_t whylen) {
    if (w->fd < 0 || w->broken) {
        snprintf(why, whylen, "the trial zygote is gone");
        return -1;
    }
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0) {
        snprintf(why, whylen, "cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    json_t *req = request(c);
    char *text = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    size_t n = text ? strlen(text) : 0;
    char *line = text ? realloc(text, n + 2) : NULL;
    if (!line) {
        free(text);
        close(out[0]);
        close(out[1]);
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    line[n] = '\n';
    line[n + 1] = '\0';
    int sent = send_with_fd(w->fd, line, n + 1, out[1]);
    free(line);
    close(out[1]); /* the rank has its own copy */
    if (sent != 0) {
        close(out[0]);
        w->broken = true;
        snprintf(why, whylen, "cannot reach the trial zygote: %s", strerror(errno));
        return -1;
    }
    double until = mono_s() + SPAWN_ANSWER_S;
    for (;;) {
        bool had;
        json_t *j;
        while ((j = next_line(w, &had)) || had) {
            pid_t pid;
            int status;
            if (j && is_exit(j, &pid, &status)) {
                keep_exit(w, pid, status);
            } else if (j && json_is_integer(json_object_get(j, "pid"))) {
                pid = (pid_t)json_integer_value(json_object_get(j, "pid"));
                json_decref(j);
                *out_fd = out[0];
                return pid;
            } else if (j && json_is_string(json_object_get(j, "error"))) {
                snprintf(why, whylen, "the trial zygote refused the rank: %s",
                         json_string_value(json_object_get(j, "error")));
                json_decref(j);
                close(out[0]);
                return -1;
            }
            json_decref(j);
        }
        double left = until - mono_s();
        int got = left > 0 ? fill(w, (int)(left * 1000) + 1) : -1;
        if (got < 0) {
            w->broken = true;
            close(out[0]);
            snprintf(why, whylen, "the trial zygote %s", left > 0 ? "is gone" : "did not answer in time");
            return -1;
        }
    }
}

int warm_read(warm_link *w, void (*ended)(void *ctx, pid_t pid, int status), void *ctx) {
    for (int i = 0; i < w->n_pending; i++) ended(ctx, w->pending_pid[i], w->pending_status[i]);
    w->n_pending = 0;
    if (w->fd < 0) return 0;
    while (!w->broken) {
        int got = fill(w, 0);
        if (got < 0) w->broken = true;
        bool had;
        json_t *j;
        while ((j = next_line(w, &had)) || had) {
            pid_t pid;
            int status;
            if (j && is_exit(j, &pid, &status)) ended(ctx, pid, status);
            json_decref(j);
        }
        if (got == 0) break;
    }
    return w->broken ? -1 : 0;
}
