/* The HTTP side's accept thread: connection caps, the header deadline, and running
 * out of file descriptors without spinning. See conn_guard.h. */
#include "conn_guard.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <unistd.h>

#include "addr_counts.h"
#include "base.h"
#include "thread_start.h"

#define ACCEPTS_PER_ROUND 256 /* then the deadlines are looked at again */
#define NO_FDS_PAUSE_MS 250   /* out of file descriptors: no accept for this long */
#define LOG_EVERY_MS 10000    /* a recurring refusal: one line per this, with the count */

struct conn_track {
    int fd;
    addr_key key;
    int64_t deadline_ms; /* for the headers, while waiting is set */
    bool waiting;        /* in the deadline list */
    bool answered_once;  /* a request was answered: a late next one is closed without a 408 */
    conn_track *prev, *next;
};

static struct {
    conn_guard_limits l;
    conn_admit_fn admit;
    addr_counts *counts;
    int listen_fd, wake_fd, spare_fd;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    int64_t paused_until; /* the thread's own */
    /* connections waiting for their headers, oldest deadline first (every deadline is
     * now + the same timeout, so appending keeps the order) */
    pthread_mutex_t mu;
    conn_track *head, *tail;
    atomic_ullong refused_per_address, refused_total, refused_no_fds, header_timeouts;
    log_limit log_per_address, log_total, log_no_fds, log_accept, log_timeouts;
} G = {.listen_fd = -1, .wake_fd = -1, .spare_fd = -1, .mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- the deadline list (under G.mu) ---- */

static void unlink_waiting(conn_track *t) {
    if (!t->waiting) return;
    if (t->prev) t->prev->next = t->next;
    else G.head = t->next;
    if (t->next) t->next->prev = t->prev;
    else G.tail = t->prev;
    t->prev = t->next = NULL;
    t->waiting = false;
}

static void arm(conn_track *t) {
    unlink_waiting(t);
    t->deadline_ms = mono_ms() + (int64_t)G.l.header_timeout_s * 1000;
    t->prev = G.tail;
    if (G.tail) G.tail->next = t;
    else G.head = t;
    G.tail = t;
    t->waiting = true;
}

conn_track *conn_guard_opened(int fd, const struct sockaddr *sa) {
    conn_track *t = xcalloc(1, sizeof *t);
    t->fd = fd;
    t->key = addr_key_of(sa);
    pthread_mutex_lock(&G.mu);
    arm(t);
    pthread_mutex_unlock(&G.mu);
    return t;
}

void conn_guard_headers_in(conn_track *t) {
    if (!t) return;
    pthread_mutex_lock(&G.mu);
    unlink_waiting(t);
    pthread_mutex_unlock(&G.mu);
}

void conn_guard_answered(conn_track *t) {
    if (!t) return;
    pthread_mutex_lock(&G.mu);
    t->answered_once = true;
    arm(t);
    pthread_mutex_unlock(&G.mu);
}

void conn_guard_closed(conn_track *t) {
    if (!t) return;
    pthread_mutex_lock(&G.mu);
    unlink_waiting(t);
    pthread_mutex_unlock(&G.mu);
    if (G.counts) addr_counts_put(G.counts, &t->key);
    free(t);
}

/* ---- answers written by this thread, before a close ---- */

/* A whole HTTP answer with a problem body, written without blocking (a socket's
 * buffer holds it). */
static void write_problem(int fd, int status, const char *title, const char *detail) {
    char body[768], head[256];
    int bl = snprintf(body, sizeof body, "{\"type\":\"about:blank\",\"title\":\"%s\",\"status\":%d,\"detail\":\"%s\"}\n",
                      title, status, detail);
    if (bl < 0 || (size_t)bl >= sizeof body) return;
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\n"
                      "Cache-Control: no-store\r\nConnection: close\r\n%s\r\n",
                      status, title, bl, status == 503 ? "Retry-After: 5\r\n" : "");
    if (hl < 0 || (size_t)hl >= sizeof head) return;
    struct iovec iov[2] = {{head, (size_t)hl}, {body, (size_t)bl}};
    struct msghdr m = {.msg_iov = iov, .msg_iovlen = 2};
    ssize_t w = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w;
}

/* Answers a connection that is not let in and closes it. What the client had sent is
 * read first (as much as is there), so that the close is a FIN the client reads the
 * answer before, not a reset that may discard it. */
static void turn_away(int fd, const char *detail) {
    write_problem(fd, 503, "Service Unavailable", detail);
    shutdown(fd, SHUT_WR);
    char sink[4096];
    while (recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0) {
    }
    close(fd);
}

/* ---- the thread ---- */

static void refuse(int fd, const addr_key *k, addr_take why, unsigned held) {
    char client[INET6_ADDRSTRLEN], detail[400];
    addr_key_text(k, client);
    uint64_t skipped = 0;
    if (why == ADDR_OVER_ADDRESS) {
        atomic_fetch_add(&G.refused_per_address, 1);
        snprintf(detail, sizeof detail,
                 "too many connections from your address (%u open): close some, or ask the operator to raise "
                 "--max-connections-per-address", held);
        if (log_limit_now(&G.log_per_address, LOG_EVERY_MS, &skipped))
            log_warn("http: refused a connection from %s, which has %u open (--max-connections-per-address %u; %llu "
                     "more refused for that since the last such line)", client, held, G.l.per_address,
                     (unsigned long long)skipped);
    } else {
        atomic_fetch_add(&G.refused_total, 1);
        snprintf(detail, sizeof detail,
                 "the server has %u connections open, its limit: try again later, or ask the operator to raise "
                 "--max-connections", G.l.max_connections);
        if (log_limit_now(&G.log_total, LOG_EVERY_MS, &skipped))
            log_warn("http: refused a connection from %s: %u are open (--max-connections %u, %u more reserved for "
                     "this host's loopback; %llu more refused for that since the last such line)", client,
                     addr_counts_total(G.counts), G.l.max_connections, G.l.reserved, (unsigned long long)skipped);
    }
    turn_away(fd, detail);
}

/* accept failed with EMFILE or ENFILE: the listening socket stays readable, so
 * accepting again at once would spin. Pause; meanwhile turn the clients waiting in
 * the backlog away (with the spare descriptor) rather than leave them hanging. */
static void out_of_fds(int err) {
    G.paused_until = mono_ms() + NO_FDS_PAUSE_MS;
    unsigned turned = 0;
    for (int i = 0; i < ACCEPTS_PER_ROUND; i++) {
        if (G.spare_fd < 0) break;
        close(G.spare_fd);
        G.spare_fd = -1;
        int fd = accept4(G.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            turned++;
            atomic_fetch_add(&G.refused_no_fds, 1);
            turn_away(fd, "the server is out of file descriptors: try again later; the operator can raise its "
                          "ulimit -n or lower --max-connections");
        }
        G.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (fd < 0) break;
    }
    if (G.spare_fd < 0) G.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uint64_t skipped = 0;
    if (log_limit_now(&G.log_no_fds, LOG_EVERY_MS, &skipped)) {
        struct rlimit rl = {0};
        getrlimit(RLIMIT_NOFILE, &rl);
        log_error("http: out of file descriptors (accept: %s; ulimit -n %llu, %u HTTP connections open): new "
                  "connections are turned away with a 503 until some close (%u now; %llu times since the last such "
                  "line); raise the limit (ulimit -n, LimitNOFILE=) or lower --max-connections",
                  strerror(err), (unsigned long long)rl.rlim_cur, addr_counts_total(G.counts), turned,
                  (unsigned long long)skipped);
    }
}

static void accept_some(void) {
    for (int i = 0; i < ACCEPTS_PER_ROUND; i++) {
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int fd = accept4(G.listen_fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED || e == EPROTO) continue;
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            if (e == EMFILE || e == ENFILE) {
                out_of_fds(e);
                return;
            }
            uint64_t skipped = 0; /* ENOBUFS, ENOMEM, ...: pause the same way */
            G.paused_until = mono_ms() + NO_FDS_PAUSE_MS;
            if (log_limit_now(&G.log_accept, LOG_EVERY_MS, &skipped))
                log_error("http: accept: %s (%llu times since the last such line)", strerror(e),
                          (unsigned long long)skipped);
            return;
        }
        addr_key k = addr_key_of((struct sockaddr *)&ss);
        unsigned held = 0;
        addr_take r = addr_counts_take(G.counts, &k, &held);
        if (r != ADDR_TAKEN) {
            refuse(fd, &k, r, held);
            continue;
        }
        if (!G.admit(fd, (struct sockaddr *)&ss, len)) addr_counts_put(G.counts, &k);
    }
}

/* Shuts down the connections past their header deadline. Returns ms until the next. */
static int64_t expire_headers(int64_t now) {
    pthread_mutex_lock(&G.mu);
    while (G.head && G.head->deadline_ms <= now) {
        conn_track *t = G.head;
        unlink_waiting(t);
        atomic_fetch_add(&G.header_timeouts, 1);
        if (!t->answered_once) {
            char detail[200];
            snprintf(detail, sizeof detail, "the request's headers did not arrive within %u s (--header-timeout): "
                     "send the whole request at once", G.l.header_timeout_s);
            write_problem(t->fd, 408, "Request Timeout", detail);
            uint64_t skipped = 0;
            char client[INET6_ADDRSTRLEN];
            addr_key_text(&t->key, client);
            if (log_limit_now(&G.log_timeouts, LOG_EVERY_MS, &skipped))
                log_warn("http: closed a connection from %s whose request headers took over %u s (--header-timeout) "
                         "(%llu more since the last such line)", client, G.l.header_timeout_s,
                         (unsigned long long)skipped);
        }
        /* libmicrohttpd sees the end of the stream and closes it (the socket stays
         * open until conn_guard_closed, which takes G.mu: no other file has this
         * number meanwhile). */
        shutdown(t->fd, SHUT_RDWR);
    }
    int64_t next = G.head ? G.head->deadline_ms - now : 1000;
    pthread_mutex_unlock(&G.mu);
    return next;
}

static void *guard_main(void *arg) {
    (void)arg;
    while (!atomic_load(&G.stopping)) {
        int64_t now = mono_ms();
        int64_t wait = expire_headers(now);
        bool listening = now >= G.paused_until;
        if (!listening && G.paused_until - now < wait) wait = G.paused_until - now;
        if (wait > 1000) wait = 1000;
        if (wait < 1) wait = 1;
        struct pollfd p[2] = {{.fd = G.wake_fd, .events = POLLIN}, {.fd = G.listen_fd, .events = POLLIN}};
        int n = poll(p, listening ? 2 : 1, (int)wait);
        if (n > 0 && listening && (p[1].revents & POLLIN)) accept_some();
    }
    return NULL;
}

int conn_guard_start(int listen_fd, const conn_guard_limits *limits, conn_admit_fn admit, char *err, size_t errlen) {
    G.l = *limits;
    G.admit = admit;
    G.listen_fd = listen_fd;
    G.counts = addr_counts_new(limits->per_address, limits->max_connections, limits->reserved);
    int fl = fcntl(listen_fd, F_GETFL);
    if (fl < 0 || fcntl(listen_fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        (G.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) < 0 ||
        (G.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) < 0) {
        snprintf(err, errlen, "cannot start accepting HTTP connections: %s", strerror(errno));
        return -1;
    }
    return thread_start(&G.thread, guard_main, &G.started, "the HTTP accept thread", err, errlen);
}

void conn_guard_stop(void) {
    if (!G.started) return;
    atomic_store(&G.stopping, true);
    (void)eventfd_write(G.wake_fd, 1);
    pthread_join(G.thread, NULL);
    G.started = false;
    close(G.wake_fd);
    if (G.spare_fd >= 0) close(G.spare_fd);
    G.wake_fd = G.spare_fd = -1;
}

void conn_guard_take_counters(conn_guard_counters *out) {
    memset(out, 0, sizeof *out);
    if (G.counts) {
        out->open = addr_counts_total(G.counts);
        out->addresses = addr_counts_addresses(G.counts);
    }
    out->refused_per_address = atomic_load(&G.refused_per_address);
    out->refused_total = atomic_load(&G.refused_total);
    out->refused_no_fds = atomic_load(&G.refused_no_fds);
    out->header_timeouts = atomic_load(&G.header_timeouts);
}
