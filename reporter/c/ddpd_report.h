/* ddpd_report.h: report a C training program's progress to ddpd from a command run
 * (the protocol: reporter/README.md). One header, POSIX only, no allocation after
 * the first call:
 *
 *     #include "ddpd_report.h"
 *     ddpd_metric m[] = {{"loss", loss}, {"lr", lr}};
 *     ddpd_report_step(global_step, m, 2);
 *     ddpd_report_epoch(epoch, (ddpd_metric[]){{"test_acc", acc}}, 1);
 *     ddpd_report_status("evaluating", "epoch 3");
 *     if (ddpd_report_should_pause()) { save(...); ddpd_report_checkpoint(step, path); }
 *     ddpd_report_close(); // at the end (exit() does it too)
 *
 * A call never blocks and never fails the program: lines are buffered and written
 * every 200 ms (or 64 KiB) to the run's journal and, without waiting, to the
 * server's socket; what the socket does not take at once waits (up to 1 MiB), past
 * which the connection is dropped and retried a second later, hello first (the
 * server then catches up from the journal). Outside ddpd (no DDPD_EVENTS_SOCKET)
 * every call is a no-op. At exit (or ddpd_report_close) what is buffered is written
 * and the socket gets up to 2 s to take what still waits. Call it from one thread, and include this header in one
 * source file of the program (its state is per file). */
#ifndef DDPD_REPORTER_C_DDPD_REPORT_H
#define DDPD_REPORTER_C_DDPD_REPORT_H

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *name;
    double value; /* NaN and infinities are reported as null */
} ddpd_metric;

#define DDPD_REPORT_BUFFER (64 * 1024)
#define DDPD_REPORT_PENDING (1024 * 1024)

static struct {
    int state; /* 0 unread, 1 on, -1 off (not under ddpd) */
    int sock, journal;
    char path[108];
    char run[64], secret[256];
    long rank, world;
    long long seq, last_flush_ms, last_connect_ms;
    unsigned long dropped;
    char hello[1024];
    size_t hello_len;
    char buf[DDPD_REPORT_BUFFER];
    size_t len;
    char pending[DDPD_REPORT_PENDING];
    size_t pending_len;
} ddpd_report_;

static inline long long ddpd_report_ms_(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Appends s as a JSON string (quoted, escaped) to out; returns the new length. */
static inline size_t ddpd_report_json_string_(char *out, size_t len, size_t cap, const char *s) {
    if (len < cap) out[len++] = '"';
    for (; *s && len + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[len++] = '\\';
            out[len++] = (char)c;
        } else if (c < 0x20) {
            len += (size_t)snprintf(out + len, cap - len, "\\u%04x", c);
        } else {
            out[len++] = (char)c;
        }
    }
    if (len < cap) out[len++] = '"';
    return len;
}

static inline void ddpd_report_drop_socket_(void) {
    if (ddpd_report_.sock >= 0) close(ddpd_report_.sock);
    ddpd_report_.sock = -1;
    ddpd_report_.pending_len = 0;
}

/* Sends what the socket takes now, keeping the rest; -1 when the connection broke.
 * While earlier bytes still wait in pending, new ones queue behind them (sent ahead,
 * they would cut a waiting line in two). */
static inline int ddpd_report_send_(const char *p, size_t n) {
    while (n > 0 && ddpd_report_.pending_len == 0) {
        ssize_t w = send(ddpd_report_.sock, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        if (w < 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    if (n == 0) return 0;
    if (ddpd_report_.pending_len + n > sizeof ddpd_report_.pending) return -1; /* it stopped reading */
    memcpy(ddpd_report_.pending + ddpd_report_.pending_len, p, n);
    ddpd_report_.pending_len += n;
    return 0;
}

static inline void ddpd_report_connect_(long long now) {
    ddpd_report_.last_connect_ms = now;
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    memcpy(a.sun_path, ddpd_report_.path, sizeof ddpd_report_.path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return;
    }
    ddpd_report_.sock = fd;
    if (ddpd_report_send_(ddpd_report_.hello, ddpd_report_.hello_len) != 0) ddpd_report_drop_socket_();
}

/* One event line (without the trailing newline) into out: the common fields, then body. */
static inline size_t ddpd_report_line_(char *out, size_t cap, const char *type, const char *body, long long seq) {
    int n = snprintf(out, cap, "{\"run\":");
    size_t len = ddpd_report_json_string_(out, n > 0 ? (size_t)n : 0, cap, ddpd_report_.run);
    n = snprintf(out + len, cap - len, ",\"rank\":%ld,\"seq\":%lld,\"t\":%lld,\"type\":\"%s\"%s%s}\n",
                 ddpd_report_.rank, seq, ddpd_report_ms_(), type, body[0] ? "," : "", body);
    return n > 0 && len + (size_t)n < cap ? len + (size_t)n : 0;
}

static inline void ddpd_report_at_exit_(void);

static inline int ddpd_report_on_(void) {
    if (ddpd_report_.state) return ddpd_report_.state > 0;
    const char *sock = getenv("DDPD_EVENTS_SOCKET");
    ddpd_report_.state = -1;
    ddpd_report_.sock = ddpd_report_.journal = -1;
    if (!sock || !*sock || strlen(sock) >= sizeof ddpd_report_.path) return 0;
    snprintf(ddpd_report_.path, sizeof ddpd_report_.path, "%s", sock);
    snprintf(ddpd_report_.run, sizeof ddpd_report_.run, "%s", getenv("DDPD_RUN_ID") ? getenv("DDPD_RUN_ID") : "");
    snprintf(ddpd_report_.secret, sizeof ddpd_report_.secret, "%s",
             getenv("DDPD_RUN_SECRET") ? getenv("DDPD_RUN_SECRET") : "");
    ddpd_report_.rank = getenv("RANK") ? strtol(getenv("RANK"), NULL, 10) : 0;
    ddpd_report_.world = getenv("WORLD_SIZE") ? strtol(getenv("WORLD_SIZE"), NULL, 10) : 1;
    const char *journal = getenv("DDPD_EVENTS_JOURNAL");
    if (journal && *journal) ddpd_report_.journal = open(journal, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    char host[128] = "", body[512], secret[300], host_json[300];
    gethostname(host, sizeof host - 1);
    size_t hl = ddpd_report_json_string_(host_json, 0, sizeof host_json - 1, host);
    host_json[hl] = '\0';
    size_t sl = ddpd_report_json_string_(secret, 0, sizeof secret - 1, ddpd_report_.secret);
    secret[sl] = '\0';
    /* The journal's hello has no secret; the socket's has it. */
    snprintf(body, sizeof body, "\"pid\":%d,\"host\":%s,\"device\":\"cpu\",\"world_size\":%ld,\"reporter\":\"c\",\"secret\":null",
             (int)getpid(), host_json, ddpd_report_.world);
    char line[1024];
    size_t n = ddpd_report_line_(line, sizeof line, "hello", body, 0);
    if (ddpd_report_.journal >= 0 && n && write(ddpd_report_.journal, line, n) < 0) ddpd_report_.dropped++;
    snprintf(body, sizeof body, "\"pid\":%d,\"host\":%s,\"device\":\"cpu\",\"world_size\":%ld,\"reporter\":\"c\",\"secret\":%s",
             (int)getpid(), host_json, ddpd_report_.world, secret);
    ddpd_report_.hello_len = ddpd_report_line_(ddpd_report_.hello, sizeof ddpd_report_.hello, "hello", body, 0);
    ddpd_report_.seq = 1;
    ddpd_report_.state = 1;
    atexit(ddpd_report_at_exit_);
    ddpd_report_.last_flush_ms = ddpd_report_ms_();
    ddpd_report_connect_(ddpd_report_.last_flush_ms);
    return 1;
}

/* Writes the buffered lines to the journal and the socket now. */
static inline void ddpd_report_flush(void) {
    if (ddpd_report_.state <= 0) return;
    long long now = ddpd_report_ms_();
    ddpd_report_.last_flush_ms = now;
    if (ddpd_report_.sock < 0 && now - ddpd_report_.last_connect_ms >= 1000) ddpd_report_connect_(now);
    if (ddpd_report_.sock >= 0 && ddpd_report_.pending_len) {
        static char again[DDPD_REPORT_PENDING]; /* send_ keeps what is still left in pending */
        size_t n = ddpd_report_.pending_len;
        memcpy(again, ddpd_report_.pending, n);
        ddpd_report_.pending_len = 0;
        if (ddpd_report_send_(again, n) != 0) ddpd_report_drop_socket_();
    }
    if (ddpd_report_.len == 0) return;
    if (ddpd_report_.journal >= 0) {
        ssize_t w = write(ddpd_report_.journal, ddpd_report_.buf, ddpd_report_.len);
        if (w != (ssize_t)ddpd_report_.len) ddpd_report_.dropped++;
    }
    if (ddpd_report_.sock >= 0 && ddpd_report_send_(ddpd_report_.buf, ddpd_report_.len) != 0) ddpd_report_drop_socket_();
    ddpd_report_.len = 0;
}

/* Writes what is buffered, then gives the socket up to 2 s to take what waits (the
 * journal has it all anyway). Later calls still work. */
static inline void ddpd_report_close(void) {
    if (ddpd_report_.state <= 0) return;
    ddpd_report_flush();
    long long deadline = ddpd_report_ms_() + 2000;
    while (ddpd_report_.sock >= 0 && ddpd_report_.pending_len && ddpd_report_ms_() < deadline) {
        struct pollfd p = {.fd = ddpd_report_.sock, .events = POLLOUT};
        if (poll(&p, 1, 100) < 0 && errno != EINTR) break;
        ddpd_report_flush();
    }
}

static inline void ddpd_report_at_exit_(void) { ddpd_report_close(); }

static inline void ddpd_report_add_(const char *type, const char *body) {
    char line[4096];
    size_t n = ddpd_report_line_(line, sizeof line, type, body, ddpd_report_.seq);
    if (!n) {
        ddpd_report_.dropped++;
        return;
    }
    ddpd_report_.seq++;
    if (ddpd_report_.len + n > sizeof ddpd_report_.buf) ddpd_report_flush();
    memcpy(ddpd_report_.buf + ddpd_report_.len, line, n);
    ddpd_report_.len += n;
    if (ddpd_report_ms_() - ddpd_report_.last_flush_ms >= 200) ddpd_report_flush();
}

static inline void ddpd_report_metric_(const char *where, long long at, const ddpd_metric *m, int n,
                                       int rank_zero_only) {
    char body[3800];
    int k = snprintf(body, sizeof body, "%s\"%s\":%lld,\"values\":{", rank_zero_only ? "" : "\"rank_zero_only\":false,",
                     where, at);
    size_t len = k > 0 ? (size_t)k : 0;
    for (int i = 0; i < n && len + 64 < sizeof body; i++) {
        if (i) body[len++] = ',';
        len = ddpd_report_json_string_(body, len, sizeof body - 40, m[i].name ? m[i].name : "");
        if (isfinite(m[i].value)) len += (size_t)snprintf(body + len, sizeof body - len, ":%.17g", m[i].value);
        else len += (size_t)snprintf(body + len, sizeof body - len, ":null");
    }
    if (len + 2 > sizeof body) {
        ddpd_report_.dropped++;
        return;
    }
    body[len++] = '}';
    body[len] = '\0';
    ddpd_report_add_("metric", body);
}

/* Metrics at a training step (global_step counts steps done, from 1): loss and lr
 * fill the run's series and progress, other names are series of their own. */
static inline void ddpd_report_step(long long global_step, const ddpd_metric *m, int n) {
    if (ddpd_report_on_()) ddpd_report_metric_("global_step", global_step, m, n, 1);
}

/* An epoch's figures (epochs from 0): lr, train_loss, test_loss, test_acc, seconds,
 * samples_per_s fill the epoch table; other names are per-epoch series. The table
 * is rank 0's: another rank's figures are kept only through ddpd_report_epoch_of_rank. */
static inline void ddpd_report_epoch(int epoch, const ddpd_metric *m, int n) {
    if (ddpd_report_on_()) ddpd_report_metric_("epoch", epoch, m, n, 1);
}

/* The same from whichever rank calls it, kept for the run (rank_zero_only false):
 * for a program that evaluates on a rank other than 0. */
static inline void ddpd_report_epoch_of_rank(int epoch, const ddpd_metric *m, int n) {
    if (ddpd_report_on_()) ddpd_report_metric_("epoch", epoch, m, n, 0);
}

/* This rank's state (init, loading, training, evaluating, checkpointing, done,
 * failed) and a sentence. */
static inline void ddpd_report_status(const char *state, const char *detail) {
    if (!ddpd_report_on_()) return;
    char body[1200];
    size_t len = (size_t)snprintf(body, sizeof body, "\"state\":");
    len = ddpd_report_json_string_(body, len, 200, state ? state : "");
    len += (size_t)snprintf(body + len, sizeof body - len, ",\"detail\":");
    len = ddpd_report_json_string_(body, len, sizeof body - 1, detail ? detail : "");
    body[len] = '\0';
    ddpd_report_add_("status", body);
    ddpd_report_flush(); /* a person waits for a status */
}

/* A checkpoint of the state after global_step steps is durable at path (NULL:
 * "step-N"): the run's usage counts the steps after it as lost when a restart goes
 * back to it, and after a preemption's notice ddpd stops the run once it has it. */
static inline void ddpd_report_checkpoint(long long global_step, const char *path) {
    if (!ddpd_report_on_()) return;
    char body[2400], name[40];
    snprintf(name, sizeof name, "step-%lld", global_step);
    size_t len = (size_t)snprintf(body, sizeof body, "\"global_step\":%lld,\"path\":", global_step);
    len = ddpd_report_json_string_(body, len, sizeof body - 1, path ? path : name);
    body[len] = '\0';
    ddpd_report_add_("checkpoint", body);
    ddpd_report_flush(); /* ddpd may be waiting for it to stop the run */
}

static volatile sig_atomic_t ddpd_report_heard_;
static int ddpd_report_listening_, ddpd_report_said_heard_;
static inline void ddpd_report_on_usr1_(int sig) {
    (void)sig;
    ddpd_report_heard_ = 1;
}

/* 1 once ddpd has sent this rank a preemption's notice (SIGUSR1; or a max_duration_s
 * timeout's): save a checkpoint at the end of the current step, call
 * ddpd_report_checkpoint, and ddpd stops the run at once instead of at the grace's
 * end. The first call sets the SIGUSR1 handler (under ddpd only): call it every step.
 * Outside ddpd, always 0. */
static inline int ddpd_report_preempt_requested(void) {
    if (!ddpd_report_on_()) return 0;
    if (!ddpd_report_listening_) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = ddpd_report_on_usr1_;
        sigemptyset(&sa.sa_mask);
        sa.sa_flags = SA_RESTART;
        if (sigaction(SIGUSR1, &sa, NULL) != 0) return 0;
        ddpd_report_listening_ = 1;
        ddpd_report_add_("preempt", "\"state\":\"listening\"");
        ddpd_report_flush();
    }
    if (ddpd_report_heard_ && !ddpd_report_said_heard_) {
        ddpd_report_said_heard_ = 1;
        ddpd_report_add_("preempt", "\"state\":\"heard\"");
        ddpd_report_flush();
    }
    return ddpd_report_heard_ != 0;
}

/* 1 once ddpd has asked this rank to pause: a sweep's trial paused (by ASHA below its
 * rung, or with its sweep), or preempted, or timed out: the same notice as
 * ddpd_report_preempt_requested() (it is that call): save a snapshot of the state after
 * the current step, call ddpd_report_checkpoint, and wait to be stopped; a paused
 * trial is started again when it is promoted or its sweep resumed, and goes on from
 * that snapshot. Call it every step; outside ddpd, always 0. */
static inline int ddpd_report_should_pause(void) { return ddpd_report_preempt_requested(); }

/* 1 when this process runs under ddpd (its reports are sent). */
static inline int ddpd_report_enabled(void) { return ddpd_report_on_(); }

/* Lines that could not be journaled (a full disk) or did not fit a line. */
static inline unsigned long ddpd_report_dropped(void) { return ddpd_report_.dropped; }

#endif
