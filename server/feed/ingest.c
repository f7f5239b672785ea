/* The event socket: connections, lines, hello + secret, events -> store ops.
 * See ingest.h. */
#include "ingest.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "event_kinds.h"
#include "ids.h"
#include "ingest_catch_up.h"
#include "point_cap.h"
#include "store_read.h"
#include "store.h"
#include "base.h"
#include "thread_start.h"

#define READ_CHUNK 65536
/* Per connection and wake-up: a rank that never pauses does not starve the others
 * (epoll is level-triggered: the rest is read on the next round). */
#define READ_BUDGET (1u << 20)
/* A sync sweep reads until EAGAIN: a dead process's bytes are all there, and few
 * (a socket buffer's worth); the cap keeps another run's live sender from making
 * the sweep endless. */
#define SWEEP_BUDGET (64u << 20)
#define MAX_LINE (16u << 20) /* a longer line is skipped, not buffered */
#define MALFORMED_LOGGED_PER_CONN 10
#define ACCEPT_PAUSE_MS 250 /* accept failed for want of descriptors: not again before this */
/* A connection that has not sent its hello: a trainer sends it as soon as it has
 * connected, so one that stays silent is not one; dropped after the deadline, and
 * at most this many at once (the oldest goes for a new one), so that idle
 * connections can neither hold descriptors nor keep a real rank out. */
#define HELLO_DEADLINE_MS 10000
#define MAX_PENDING_CONNS 256
#define PENDING_LOG_INTERVAL_MS 10000

typedef struct conn {
    int fd;
    char *buf;
    size_t len, cap;
    bool skipping; /* inside a line longer than MAX_LINE */
    bool authed;
    bool journal_fed; /* its run's events come from its journal: only hellos count */
    catch_up_process *proc; /* its process, as its hello names it (ingest_catch_up.h) */
    int64_t run_id;
    int rank;
    long peer_uid, peer_pid; /* SO_PEERCRED: who connected (-1, 0: unknown) */
    char launch[72];         /* the secret of its hello: which start of its run it belongs to */
    unsigned malformed;
    int64_t accepted_ms;
    struct conn *prev, *next;
} conn;

typedef struct {
    store_op *v;
    size_t n, cap;
} op_vec;

static struct {
    ingest_hooks hooks;
    int listen_fd, epoll_fd, wake_fd;
    pthread_t thread;
    bool started;
    atomic_bool stopping;
    conn *conns;
    /* sync: tickets taken by callers, served by the thread */
    pthread_mutex_t mu;
    pthread_cond_t synced;
    uint64_t sync_asked, sync_served;
    /* runs that ended, whose connections the thread closes (ingest_run_ended) */
    int64_t *ended;
    size_t n_ended, cap_ended;
    atomic_ulong n_conns, n_lines, n_events, n_malformed, n_dropped;
    /* out of file descriptors: the listening socket out of the epoll set until then */
    bool accept_paused;
    int64_t accept_resume_ms;
    log_limit accept_log;
    size_t n_pending;       /* connections without a hello yet */
    log_limit pending_log;
    uint64_t pending_dropped; /* since the last line about them */
    int64_t max_points;       /* per run (point_cap.h); 0: no cap */
} I = {.listen_fd = -1, .epoll_fd = -1, .wake_fd = -1,
       .mu = PTHREAD_MUTEX_INITIALIZER, .synced = PTHREAD_COND_INITIALIZER};

static int listen_marker; /* epoll data for the listening socket */
static int wake_marker;

/* `run` is a string in the contract; an integer is taken too. */
static int64_t get_run_id(const json_t *o) {
    json_t *v = json_object_get(o, "run");
    int64_t id;
    if (json_is_integer(v)) return json_integer_value(v) > 0 ? json_integer_value(v) : NO_INT;
    return json_is_string(v) && parse_run_id(json_string_value(v), &id) ? id : NO_INT;
}

static void push(op_vec *ops, const store_op *op) {
    if (ops->n == ops->cap) {
        ops->cap = ops->cap ? ops->cap * 2 : 256;
        ops->v = xrealloc(ops->v, ops->cap * sizeof *ops->v);
    }
    ops->v[ops->n++] = *op;
}

static void note_malformed(conn *c, const char *what, const char *line, size_t len) {
    atomic_fetch_add(&I.n_malformed, 1);
    if (c->malformed++ >= MALFORMED_LOGGED_PER_CONN) return;
    log_warn("event socket: run %lld rank %d: %s; line skipped: %.*s%s", (long long)c->run_id, c->rank,
             what, (int)(len > 160 ? 160 : len), line, len > 160 ? "..." : "");
    if (c->malformed == MALFORMED_LOGGED_PER_CONN)
        log_warn("event socket: run %lld rank %d: further malformed lines on this connection are counted, not logged",
                 (long long)c->run_id, c->rank);
}

/* ---- events ---- */

typedef enum { EV_OK, EV_SKIP, EV_DROP } ev_result;

/* An attempt's start or end, or a rank's process state: the launcher's word, taken only
 * from it (the hook says); one not taken is dropped, not queued. */
static bool launchers_word_taken(conn *c, store_op *op) {
    if (!I.hooks.attempt || I.hooks.attempt(op, c->peer_pid, c->launch)) return true;
    store_op_free(op);
    return false;
}

static ev_result handle_hello(conn *c, const json_t *ev, op_vec *ops, int64_t t) {
    int64_t run_id = get_run_id(ev);
    int64_t rank = event_int(ev, "rank");
    const char *secret = json_string_value(json_object_get(ev, "secret"));
    if (run_id == NO_INT || rank == NO_INT || rank < -1 || rank > 1 << 20) {
        log_warn("event socket: a hello without a valid run and rank; connection dropped");
        return EV_DROP;
    }
    if (!I.hooks.hello || !I.hooks.hello(run_id, secret, (int)rank, c->peer_uid)) {
        log_warn("event socket: hello for run %lld rank %d from uid %ld %s; connection dropped", (long long)run_id,
                 (int)rank, c->peer_uid,
                 secret ? "with the wrong secret, from another account than the run's, or the run is not active"
                        : "without a secret");
        return EV_DROP;
    }
    bool again = false;
    if (!c->authed) {
        I.n_pending--;
        c->proc = catch_up_hello(run_id, (int)rank, ev, &again);
    }
    c->authed = true;
    snprintf(c->launch, sizeof c->launch, "%s", secret ? secret : ""); /* the hook took it: a run's secret, one per start */
    c->run_id = run_id;
    c->rank = (int)rank;
    c->journal_fed = I.hooks.journal_fed && I.hooks.journal_fed(run_id);
    if (c->journal_fed || again) return EV_OK; /* a reconnection's hello is the one already stored */
    store_op op = {.kind = OP_HELLO, .run_id = run_id, .rank = (int)rank, .t = t};
    OP_KINDS[OP_HELLO].parse(ev, &op);
    if (I.hooks.planned && op.kind == OP_HELLO && op.u.hello.total_steps != NO_INT && op.u.hello.total_steps > 0)
        I.hooks.planned(run_id, op.u.hello.total_steps);
    if ((op.kind == OP_ATTEMPT_STARTED || op.kind == OP_ATTEMPT_ENDED) && !launchers_word_taken(c, &op)) return EV_OK;
    push(ops, &op);
    return EV_OK;
}

void ingest_set_max_points(int64_t max_points_per_run) { I.max_points = max_points_per_run; }

/* Whether the op's points fit the run's cap (point_cap.h); the first that does not
 * fails the run (the hook), saying why. */
static bool within_cap(const store_op *op) {
    int64_t points = store_op_points(op), stored = 0;
    bool first;
    if (point_cap_take(op->run_id, points, I.max_points, &first, &stored)) return true;
    if (first) {
        char *reason = xasprintf("its metrics passed the cap of %lld points a run may store (ddpd serve "
                                 "--max-points-per-run): it had stored %lld (steps, epochs and series values) and was "
                                 "stopped as a runaway flood; what it reported past the cap was not stored. Report less "
                                 "often (every N steps), or ask the operator for a larger cap",
                                 (long long)I.max_points, (long long)stored);
        log_warn("run %lld: %s", (long long)op->run_id, reason);
        if (I.hooks.points_capped) I.hooks.points_capped(op->run_id, reason);
        free(reason);
    }
    return false;
}

/* An event of an authenticated connection: its kind's parse (event_kinds.c); `end`
 * goes to the hook; `log` and types this server does not know are taken and ignored. */
static ev_result handle_event(conn *c, const json_t *ev, op_vec *ops, const char **why) {
    if (!json_is_object(ev)) {
        *why = "an event must be a JSON object";
        return EV_SKIP;
    }
    const char *type = json_string_value(json_object_get(ev, "type"));
    if (!type) {
        *why = "an event without a \"type\"";
        return EV_SKIP;
    }
    int64_t t = event_int(ev, "t");
    if (t == NO_INT) t = now_ms();
    if (!c->authed) {
        if (strcmp(type, "hello") != 0) {
            log_warn("event socket: the first event of a connection must be a hello, not \"%s\"; connection dropped", type);
            return EV_DROP;
        }
        return handle_hello(c, ev, ops, t);
    }
    int64_t run_id = get_run_id(ev);
    if (run_id != NO_INT && run_id != c->run_id) {
        *why = "an event for another run than the connection's hello";
        return EV_SKIP;
    }
    if (strcmp(type, "hello") == 0) return handle_hello(c, ev, ops, t); /* a second hello: re-checked */
    if (c->journal_fed) return EV_OK; /* read from the journal, in order, instead */
    if (!catch_up_take(c->proc, ev)) return EV_OK; /* stored by the catch-up after a reconnection */
    if (strcmp(type, "end") == 0) {
        const char *status = json_string_value(json_object_get(ev, "status"));
        const char *reason = json_string_value(json_object_get(ev, "reason"));
        if (I.hooks.end) I.hooks.end(c->run_id, status ? status : "", reason, c->peer_pid, c->launch);
        return EV_OK;
    }
    if (strcmp(type, "preempt") == 0) { /* a preemption's notice: told the scheduler, nothing stored */
        const char *state = json_string_value(json_object_get(ev, "state"));
        if (!state || (strcmp(state, "listening") != 0 && strcmp(state, "heard") != 0)) {
            *why = "a preempt event's \"state\" must be \"listening\" or \"heard\"";
            return EV_SKIP;
        }
        if (I.hooks.preempt) I.hooks.preempt(c->run_id, c->rank, state);
        return EV_OK;
    }
    const op_kind_desc *d = op_kind_for_event(type);
    if (!d) return EV_OK;
    int64_t rank = event_int(ev, "rank");
    store_op op = {.kind = d->kind, .run_id = c->run_id, .rank = rank == NO_INT ? c->rank : (int)rank, .t = t};
    *why = d->parse(ev, &op);
    if (*why) {
        store_op_free(&op);
        return EV_SKIP;
    }
    if (op.kind == OP_SYNC) return EV_OK; /* well formed, and nothing the store keeps (another rank's epoch) */
    bool launchers_word = op.kind == OP_ATTEMPT_STARTED || op.kind == OP_ATTEMPT_ENDED || op.kind == OP_RANK_STATE;
    if (launchers_word && !launchers_word_taken(c, &op)) return EV_OK;
    if (!within_cap(&op)) { /* past the run's cap: taken, and not stored */
        store_op_free(&op);
        return EV_OK;
    }
    if (op.kind == OP_CHECKPOINT && I.hooks.checkpoint) I.hooks.checkpoint(op.run_id, op.u.checkpoint.path);
    if (op.kind == OP_STATUS && I.hooks.checkpointing && op.rank == 0 && op.u.status.state &&
        strcmp(op.u.status.state, "checkpointing") == 0)
        I.hooks.checkpointing(op.run_id);
    push(ops, &op);
    return EV_OK;
}

/* One line: an event or an array of events. False: drop the connection. */
static bool handle_line(conn *c, const char *line, size_t len, op_vec *ops) {
    while (len && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t')) len--;
    if (!len) return true;
    atomic_fetch_add(&I.n_lines, 1);
    json_error_t jerr;
    json_t *doc = json_loadb(line, len, 0, &jerr);
    if (!doc) {
        char why[200];
        snprintf(why, sizeof why, "not JSON (%s)", jerr.text);
        note_malformed(c, why, line, len);
        return true;
    }
    bool keep = true;
    size_t n = json_is_array(doc) ? json_array_size(doc) : 1;
    for (size_t i = 0; i < n && keep; i++) {
        const json_t *ev = json_is_array(doc) ? json_array_get(doc, i) : doc;
        const char *why = NULL;
        ev_result r = handle_event(c, ev, ops, &why);
        if (r == EV_OK) atomic_fetch_add(&I.n_events, 1);
        else if (r == EV_SKIP) note_malformed(c, why, line, len);
        else keep = false;
    }
    json_decref(doc);
    return keep;
}

/* ---- connections ---- */

static void close_conn(conn *c) {
    epoll_ctl(I.epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    if (c->prev) c->prev->next = c->next;
    else I.conns = c->next;
    if (c->next) c->next->prev = c->prev;
    atomic_fetch_sub(&I.n_conns, 1);
    if (!c->authed) I.n_pending--;
    free(c->buf);
    free(c);
}

/* Splits the buffer into lines and handles the complete ones. False: drop. */
static bool consume_lines(conn *c, op_vec *ops, bool at_eof) {
    size_t start = 0;
    for (;;) {
        char *nl = memchr(c->buf + start, '\n', c->len - start);
        if (!nl) break;
        size_t end = (size_t)(nl - c->buf);
        if (c->skipping) c->skipping = false; /* the end of an over-long line */
        else if (end - start >= MAX_LINE) /* whole in the buffer, but over the limit all the same */
            note_malformed(c, "a line longer than 16 MiB", c->buf + start, 80);
        else if (!handle_line(c, c->buf + start, end - start, ops)) return false;
        start = end + 1;
    }
    if (at_eof && start < c->len && !c->skipping) {
        if (!handle_line(c, c->buf + start, c->len - start, ops)) return false;
        start = c->len;
    }
    memmove(c->buf, c->buf + start, c->len - start);
    c->len -= start;
    if (c->len >= MAX_LINE) {
        note_malformed(c, "a line longer than 16 MiB", c->buf, 80);
        c->skipping = true;
        c->len = 0;
    }
    return true;
}

/* Reads what the socket has now, up to `budget` bytes. Returns false when the
 * connection is done (end of stream, error, or dropped) and has been closed. */
/* Tells the scheduler each rank's newest progress in a read's ops: once a rank and
 * read, not once an event (a read holds thousands of steps). */
static void report_progress(const op_vec *ops) {
    if (!I.hooks.progress) return;
    uint64_t told = 0; /* ranks 0..63 already told */
    for (size_t i = ops->n; i-- > 0;) {
        const store_op *op = &ops->v[i];
        if ((op->kind != OP_STEP && op->kind != OP_HEARTBEAT) || op->rank < 0) continue;
        if (op->rank < 64 && (told >> op->rank & 1)) continue;
        if (op->rank < 64) told |= 1ull << op->rank;
        I.hooks.progress(op->run_id, op->rank, op->kind == OP_STEP ? op->u.step.global_step : op->u.heartbeat.global_step);
    }
}

static bool read_conn(conn *c, size_t budget) {
    op_vec ops = {0};
    bool open = true;
    size_t got = 0;
    while (got < budget) {
        if (c->cap - c->len < READ_CHUNK) {
            c->cap = c->cap ? c->cap * 2 : 2 * READ_CHUNK;
            while (c->cap - c->len < READ_CHUNK) c->cap *= 2;
            c->buf = xrealloc(c->buf, c->cap);
        }
        ssize_t n = read(c->fd, c->buf + c->len, c->cap - c->len);
        if (n > 0) {
            got += (size_t)n;
            c->len += (size_t)n;
            if (!consume_lines(c, &ops, false)) {
                atomic_fetch_add(&I.n_dropped, 1);
                open = false;
                break;
            }
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        consume_lines(c, &ops, true); /* end of stream: a last line without newline counts */
        open = false;
        break;
    }
    report_progress(&ops);
    store_submit(ops.v, ops.n);
    free(ops.v);
    /* Keep the buffer small between bursts. */
    if (open && c->len == 0 && c->cap > 4 * READ_CHUNK) {
        free(c->buf);
        c->buf = NULL;
        c->cap = 0;
    }
    if (!open) close_conn(c);
    return open;
}

/* accept failed for want of file descriptors (or memory): the listening socket stays
 * readable, and epoll is level-triggered, so accepting again at once would spin.
 * The socket is left out of the epoll set for a moment (the trainers wait in the
 * backlog meanwhile), and the failure is logged once per interval, not per try. */
static void pause_accepting(int err) {
    if (!I.accept_paused) epoll_ctl(I.epoll_fd, EPOLL_CTL_DEL, I.listen_fd, NULL);
    I.accept_paused = true;
    I.accept_resume_ms = mono_ms() + ACCEPT_PAUSE_MS;
    uint64_t skipped = 0;
    if (log_limit_now(&I.accept_log, 10000, &skipped))
        log_error("event socket: accept: %s (%lu trainer connections open; %llu more failures since the last such "
                  "line): new trainer connections wait until descriptors are free; raise the server's limit "
                  "(ulimit -n, LimitNOFILE=)", strerror(err), atomic_load(&I.n_conns), (unsigned long long)skipped);
}

static void resume_accepting(void) {
    if (!I.accept_paused || mono_ms() < I.accept_resume_ms) return;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_marker};
    epoll_ctl(I.epoll_fd, EPOLL_CTL_ADD, I.listen_fd, &ev);
    I.accept_paused = false;
}

/* Drops a connection that sent no hello (too late, or one too many), with a line
 * at most every PENDING_LOG_INTERVAL_MS counting them. */
static void drop_pending(conn *c, const char *why) {
    close_conn(c);
    atomic_fetch_add(&I.n_dropped, 1);
    I.pending_dropped++;
    uint64_t skipped = 0;
    if (log_limit_now(&I.pending_log, PENDING_LOG_INTERVAL_MS, &skipped)) {
        log_warn("event socket: dropped %llu connection%s that sent no hello (%s; %zu still waiting)",
                 (unsigned long long)I.pending_dropped, I.pending_dropped == 1 ? "" : "s", why, I.n_pending);
        I.pending_dropped = 0;
    }
}

/* The oldest connection still waiting for its hello (the list is newest first). */
static conn *oldest_pending(void) {
    conn *found = NULL;
    for (conn *c = I.conns; c; c = c->next)
        if (!c->authed) found = c;
    return found;
}

static void expire_pending(void) {
    int64_t now = mono_ms();
    conn *next;
    for (conn *c = I.conns; c && I.n_pending; c = next) {
        next = c->next;
        if (!c->authed && now - c->accepted_ms >= HELLO_DEADLINE_MS) drop_pending(c, "no hello within 10 s");
    }
}

static void accept_all(void) {
    if (I.accept_paused) return;
    for (;;) {
        int fd = accept4(I.listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            int e = errno;
            if (e == EINTR || e == ECONNABORTED) continue;
            if (e == EAGAIN || e == EWOULDBLOCK) return;
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                pause_accepting(e);
                return;
            }
            uint64_t skipped = 0;
            if (log_limit_now(&I.accept_log, 10000, &skipped))
                log_warn("event socket: accept: %s (%llu more since the last such line)", strerror(e),
                         (unsigned long long)skipped);
            return;
        }
        conn *c = calloc(1, sizeof *c);
        if (!c) {
            close(fd);
            continue;
        }
        if (I.n_pending >= MAX_PENDING_CONNS) {
            conn *old = oldest_pending();
            if (old) drop_pending(old, "more than 256 waiting for theirs");
        }
        c->fd = fd;
        struct ucred cred;
        socklen_t cred_len = sizeof cred;
        bool known = getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) == 0;
        c->peer_uid = known ? (long)cred.uid : -1;
        c->peer_pid = known ? (long)cred.pid : 0;
        c->accepted_ms = mono_ms();
        I.n_pending++;
        c->run_id = NO_INT;
        c->rank = -2;
        c->next = I.conns;
        if (I.conns) I.conns->prev = c;
        I.conns = c;
        atomic_fetch_add(&I.n_conns, 1);
        struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        epoll_ctl(I.epoll_fd, EPOLL_CTL_ADD, fd, &ev);
    }
}

/* Closes the connections of the runs that ended since the last call. */
static void close_ended_runs(void) {
    pthread_mutex_lock(&I.mu);
    int64_t *ended = I.ended;
    size_t n = I.n_ended;
    I.ended = NULL;
    I.n_ended = I.cap_ended = 0;
    pthread_mutex_unlock(&I.mu);
    for (size_t i = 0; i < n; i++) {
        int closed = 0;
        conn *next;
        for (conn *c = I.conns; c; c = next) {
            next = c->next;
            if (!c->authed || c->run_id != ended[i]) continue;
            close_conn(c);
            closed++;
        }
        if (closed)
            log_info("event socket: run %lld has ended: closed its %d remaining connection%s", (long long)ended[i],
                     closed, closed == 1 ? "" : "s");
        catch_up_run_ended(ended[i]);
        point_cap_forget(ended[i]);
    }
    free(ended);
}

void ingest_run_ended(int64_t run_id) {
    if (!I.started) return;
    pthread_mutex_lock(&I.mu);
    if (I.n_ended == I.cap_ended) {
        I.cap_ended = I.cap_ended ? 2 * I.cap_ended : 16;
        I.ended = xrealloc(I.ended, I.cap_ended * sizeof *I.ended);
    }
    I.ended[I.n_ended++] = run_id;
    pthread_mutex_unlock(&I.mu);
    (void)eventfd_write(I.wake_fd, 1);
}

/* Everything that is readable now, on every connection (and new connections). */
static void sweep(void) {
    accept_all();
    conn *next;
    for (conn *c = I.conns; c; c = next) {
        next = c->next;
        read_conn(c, SWEEP_BUDGET);
    }
}

static void *ingest_main(void *arg) {
    (void)arg;
    struct epoll_event evs[64];
    while (!atomic_load(&I.stopping)) {
        resume_accepting();
        int timeout = 1000;
        if (I.accept_paused) {
            int64_t left = I.accept_resume_ms - mono_ms();
            timeout = left < 1 ? 1 : left < 1000 ? (int)left : 1000;
        }
        int n = epoll_wait(I.epoll_fd, evs, 64, timeout);
        if (n < 0 && errno != EINTR) {
            log_error("event socket: epoll_wait: %s", strerror(errno));
            break;
        }
        bool sync_wanted = false;
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &listen_marker) {
                accept_all();
            } else if (p == &wake_marker) {
                uint64_t v;
                ssize_t r = read(I.wake_fd, &v, sizeof v);
                (void)r;
                sync_wanted = true;
            } else {
                read_conn(p, READ_BUDGET); /* may close and free it: p is not used after */
            }
        }
        if (sync_wanted) close_ended_runs();
        if (I.n_pending) expire_pending();
        if (sync_wanted) {
            pthread_mutex_lock(&I.mu);
            uint64_t asked = I.sync_asked;
            pthread_mutex_unlock(&I.mu);
            sweep();
            pthread_mutex_lock(&I.mu);
            I.sync_served = asked;
            pthread_cond_broadcast(&I.synced);
            pthread_mutex_unlock(&I.mu);
        }
    }
    return NULL;
}

void ingest_sync(void) {
    if (!I.started) return;
    pthread_mutex_lock(&I.mu);
    uint64_t ticket = ++I.sync_asked;
    pthread_mutex_unlock(&I.mu);
    (void)eventfd_write(I.wake_fd, 1);
    pthread_mutex_lock(&I.mu);
    while (I.sync_served < ticket && !atomic_load(&I.stopping)) pthread_cond_wait(&I.synced, &I.mu);
    pthread_mutex_unlock(&I.mu);
}

int ingest_start(const char *path, const ingest_hooks *hooks, char *err, size_t errlen) {
    I.hooks = *hooks;
    catch_up_init(&(catch_up_hooks){.end = hooks->end, .progress = hooks->progress, .attempt = hooks->attempt,
                                    .keep = within_cap});
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof addr.sun_path) {
        snprintf(err, errlen, "the event socket path %s is longer than %zu bytes, the limit for a Unix socket: use a shorter --state-dir",
                 path, sizeof addr.sun_path - 1);
        return -1;
    }
    strcpy(addr.sun_path, path);
    I.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (I.listen_fd < 0) {
        snprintf(err, errlen, "event socket: %s", strerror(errno));
        return -1;
    }
    unlink(path); /* a stale socket from a server that died (the state dir lock says none runs) */
    mode_t old = umask(0177); /* created 0600: only this user can report events */
    int rc = bind(I.listen_fd, (struct sockaddr *)&addr, sizeof addr);
    umask(old);
    if (rc != 0 || listen(I.listen_fd, 1024) != 0) {
        snprintf(err, errlen, "cannot listen on the event socket %s: %s", path, strerror(errno));
        return -1;
    }
    chmod(path, 0600);
    I.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
    I.wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (I.epoll_fd < 0 || I.wake_fd < 0) {
        snprintf(err, errlen, "event socket: %s", strerror(errno));
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &listen_marker};
    epoll_ctl(I.epoll_fd, EPOLL_CTL_ADD, I.listen_fd, &ev);
    struct epoll_event wev = {.events = EPOLLIN, .data.ptr = &wake_marker};
    epoll_ctl(I.epoll_fd, EPOLL_CTL_ADD, I.wake_fd, &wev);
    return thread_start(&I.thread, ingest_main, &I.started, "the ingest thread", err, errlen);
}

void ingest_stop(void) {
    if (I.started) {
        atomic_store(&I.stopping, true);
        (void)eventfd_write(I.wake_fd, 1);
        pthread_join(I.thread, NULL);
        I.started = false;
        pthread_mutex_lock(&I.mu);
        pthread_cond_broadcast(&I.synced);
        pthread_mutex_unlock(&I.mu);
    }
    while (I.conns) close_conn(I.conns);
    catch_up_free_all();
    point_cap_clear();
    free(I.ended);
    I.ended = NULL;
    I.n_ended = I.cap_ended = 0;
    if (I.listen_fd >= 0) close(I.listen_fd);
    if (I.epoll_fd >= 0) close(I.epoll_fd);
    if (I.wake_fd >= 0) close(I.wake_fd);
    I.listen_fd = I.epoll_fd = I.wake_fd = -1;
}

void ingest_take_counters(ingest_counters *out) {
    out->connections = atomic_load(&I.n_conns);
    out->lines = atomic_load(&I.n_lines);
    out->events = atomic_load(&I.n_events);
    out->malformed = atomic_load(&I.n_malformed);
    out->dropped_connections = atomic_load(&I.n_dropped);
}
