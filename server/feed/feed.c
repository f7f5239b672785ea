/* The live feed: durable events recorded by the store's writer and kept in a ring,
 * coalesced progress, subscribers parked and woken. See feed.h. */
#include "feed.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "path_redact.h"
#include "write_fault.h"
#include "thread_start.h"

#define PROGRESS_TICK_MS 100 /* the ticker's period: progress reaches a subscriber at most ~10 times a second */
#define PROGRESS_GAP_MS 90   /* ... and never twice within this (a durable event's wake-up brings none) */
#define REPLAY_PAGE 256      /* rows per read when replaying from the table */
#define EVENT_JSON (JSON_COMPACT | JSON_REAL_PRECISION(10))

typedef struct {
    int64_t id, run_id;
    char *frame; /* "id: N\nevent: T\ndata: {...}\n\n" */
    size_t len;
} ring_entry;

typedef struct {
    int64_t run_id;
    int rank; /* -1: the run's step progress; else the rank's heartbeat */
    uint64_t version;
    char *frame;
    size_t len;
} progress_entry;

/* Recorded in the current transaction, published at commit. Writer thread only. */
typedef struct {
    int64_t id, run_id;
    char *frame;
    size_t len;
    bool ends_run; /* finished or deleted: its progress goes */
} pending_event;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t tick;
    /* durable events: ring[(head + i) % FEED_RING], i < count, ids ascending; ids at or
     * below `base` are only in the table */
    ring_entry *ring;
    size_t head, count;
    int64_t base, newest;
    /* progress */
    progress_entry *progress;
    size_t n_progress, cap_progress;
    uint64_t pversion;
    /* subscribers */
    feed_sub *subs;
    size_t n_subs;
    bool closing, stopping;
    pthread_t ticker;
    bool ticker_started;
    int64_t heartbeat_ms;

    /* writer thread only */
    sqlite3 *db;
    sqlite3_stmt *insert, *seq;
    pending_event *pending;
    size_t n_pending, cap_pending;
    store_op *pending_progress; /* the newest progress op per (kind, run, rank) */
    size_t n_pprog, cap_pprog;
    run_facts *facts;           /* what it knows of each live run (event_kinds.h) */
    size_t n_facts, cap_facts;
    char *db_path;              /* for replays, on connections of their own */
} F = {.mu = PTHREAD_MUTEX_INITIALIZER, .tick = PTHREAD_COND_INITIALIZER, .heartbeat_ms = 15000};

/* ---- formatting ---- */

/* A frame's text, with the server's paths named by their roots (path_redact.h). */
static char *make_frame(int64_t id, const char *type, const char *data, size_t *len) {
    char *f = id > 0 ? xasprintf("id: %lld\nevent: %s\ndata: %s\n\n", (long long)id, type, data)
                     : xasprintf("event: %s\ndata: %s\n\n", type, data);
    *len = strlen(f);
    path_redact_apply(&f, len);
    return f;
}

/* ---- writer side: recording and publishing ---- */

static run_facts *facts_for(int64_t run_id) {
    for (size_t i = 0; i < F.n_facts; i++)
        if (F.facts[i].run_id == run_id) return &F.facts[i];
    if (F.n_facts == F.cap_facts) {
        F.cap_facts = F.cap_facts ? 2 * F.cap_facts : 16;
        F.facts = xrealloc(F.facts, F.cap_facts * sizeof *F.facts);
    }
    run_facts *f = &F.facts[F.n_facts++];
    *f = (run_facts){run_id, NO_INT, NO_INT, NO_INT, NO_INT, NO_INT};
    return f;
}

static void facts_forget(int64_t run_id) {
    for (size_t i = 0; i < F.n_facts; i++) {
        if (F.facts[i].run_id == run_id) {
            F.facts[i] = F.facts[--F.n_facts];
            return;
        }
    }
}

/* Inserts the event row and queues it for publishing; `data` (its "run" says whose)
 * is taken. */
static void record(const char *type, json_t *data, int64_t t, bool ends_run) {
    int64_t run_id = json_integer_value(json_object_get(data, "run"));
    char *text = json_dumps(data, EVENT_JSON);
    json_decref(data);
    if (!text || !F.insert || write_fault_noted()) { /* a faulted batch is retried whole (write_fault.h) */
        free(text);
        return;
    }
    sqlite3_bind_int64(F.insert, 1, run_id);
    sqlite3_bind_text(F.insert, 2, type, -1, SQLITE_STATIC);
    sqlite3_bind_text(F.insert, 3, text, -1, SQLITE_STATIC);
    sqlite3_bind_int64(F.insert, 4, t);
    int rc = sqlite3_step(F.insert);
    int64_t id = sqlite3_last_insert_rowid(F.db);
    sqlite3_reset(F.insert);
    sqlite3_clear_bindings(F.insert);
    if (rc != SQLITE_DONE) {
        write_fault_note(F.db, rc);
        if (!write_fault_noted())
            log_error("events feed: cannot record a %s event of run %lld: %s", type, (long long)run_id,
                      sqlite3_errmsg(F.db));
        free(text);
        return;
    }
    if (F.n_pending == F.cap_pending) {
        F.cap_pending = F.cap_pending ? 2 * F.cap_pending : 64;
        F.pending = xrealloc(F.pending, F.cap_pending * sizeof *F.pending);
    }
    pending_event *p = &F.pending[F.n_pending++];
    p->id = id;
    p->run_id = run_id;
    p->frame = make_frame(id, type, text, &p->len);
    p->ends_run = ends_run;
    free(text);
}

static void note_progress(const store_op *op) {
    for (size_t i = 0; i < F.n_pprog; i++) {
        store_op *q = &F.pending_progress[i];
        if (q->kind == op->kind && q->run_id == op->run_id && q->rank == op->rank) {
            *q = *op;
            return;
        }
    }
    if (F.n_pprog == F.cap_pprog) {
        F.cap_pprog = F.cap_pprog ? 2 * F.cap_pprog : 16;
        F.pending_progress = xrealloc(F.pending_progress, F.cap_pprog * sizeof *F.pending_progress);
    }
    F.pending_progress[F.n_pprog] = *op;
    F.pending_progress[F.n_pprog].wait = NULL;
    F.n_pprog++;
}

/* One applied op: its kind's durable event, its progress, what it tells of the run. */
void feed_record(const store_op *op, int64_t result) {
    const op_kind_desc *d = &OP_KINDS[op->kind];
    if (d->learn && op->run_id > 0 && result > 0) d->learn(op, facts_for(op->run_id));
    json_t *data = d->sse_data ? d->sse_data(op, result) : NULL;
    bool ends = d->ends_run && d->ends_run(op, result);
    if (data) record(d->sse_event, data, op->t, ends);
    if (d->progress_data && result > 0 && d->progress_rank(op) >= -1) note_progress(op);
}

/* Under the lock. Takes `frame`. */
static void progress_set(int64_t run_id, int rank, char *frame, size_t len) {
    progress_entry *e = NULL;
    for (size_t i = 0; i < F.n_progress && !e; i++)
        if (F.progress[i].run_id == run_id && F.progress[i].rank == rank) e = &F.progress[i];
    if (!e) {
        if (F.n_progress == F.cap_progress) {
            F.cap_progress = F.cap_progress ? 2 * F.cap_progress : 32;
            F.progress = xrealloc(F.progress, F.cap_progress * sizeof *F.progress);
        }
        e = &F.progress[F.n_progress++];
        e->run_id = run_id;
        e->rank = rank;
        e->frame = NULL;
    }
    free(e->frame);
    e->frame = frame;
    e->len = len;
    e->version = ++F.pversion;
}

/* Under the lock. */
static void progress_forget(int64_t run_id) {
    for (size_t i = 0; i < F.n_progress;) {
        if (F.progress[i].run_id == run_id) {
            free(F.progress[i].frame);
            F.progress[i] = F.progress[--F.n_progress];
        } else {
            i++;
        }
    }
}

/* Under the lock. */
static void ring_push(int64_t id, int64_t run_id, char *frame, size_t len) {
    size_t at;
    if (F.count == FEED_RING) {
        ring_entry *old = &F.ring[F.head];
        F.base = old->id;
        free(old->frame);
        at = F.head;
        F.head = (F.head + 1) % FEED_RING;
    } else {
        at = (F.head + F.count) % FEED_RING;
        F.count++;
    }
    F.ring[at] = (ring_entry){id, run_id, frame, len};
    if (id > F.newest) F.newest = id;
}

static bool sub_wants(const feed_sub *s, int64_t run_id) { return s->run_id == 0 || s->run_id == run_id; }

void feed_commit(bool committed) {
    if (!committed) {
        for (size_t i = 0; i < F.n_pending; i++) free(F.pending[i].frame);
        F.n_pending = F.n_pprog = 0;
        return;
    }
    if (!F.n_pending && !F.n_pprog) return;
    /* Format outside the lock. */
    char **pframes = F.n_pprog ? xmalloc(F.n_pprog * sizeof *pframes) : NULL;
    size_t *plens = F.n_pprog ? xmalloc(F.n_pprog * sizeof *plens) : NULL;
    for (size_t i = 0; i < F.n_pprog; i++) {
        const store_op *op = &F.pending_progress[i];
        const op_kind_desc *d = &OP_KINDS[op->kind];
        json_t *data = d->progress_data(op, facts_for(op->run_id));
        char *text = data ? json_dumps(data, EVENT_JSON) : NULL;
        json_decref(data);
        pframes[i] = make_frame(0, d->progress_event, text ? text : "{}", &plens[i]);
        free(text);
    }
    pthread_mutex_lock(&F.mu);
    for (size_t i = 0; i < F.n_pprog; i++) {
        const store_op *op = &F.pending_progress[i];
        progress_set(op->run_id, OP_KINDS[op->kind].progress_rank(op), pframes[i], plens[i]);
    }
    for (size_t i = 0; i < F.n_pending; i++) {
        pending_event *p = &F.pending[i];
        ring_push(p->id, p->run_id, p->frame, p->len);
        if (p->ends_run) progress_forget(p->run_id);
    }
    for (feed_sub *s = F.subs; s; s = s->next) {
        if (!s->parked) continue;
        for (size_t i = 0; i < F.n_pending; i++) {
            if (F.pending[i].id > s->cursor && sub_wants(s, F.pending[i].run_id)) {
                s->parked = false;
                s->wake(s);
                break;
            }
        }
    }
    pthread_mutex_unlock(&F.mu);
    for (size_t i = 0; i < F.n_pending; i++)
        if (F.pending[i].ends_run) facts_forget(F.pending[i].run_id);
    F.n_pending = F.n_pprog = 0;
    free(pframes);
    free(plens);
}

void feed_init(void) {
    const char *hb = getenv("DDPD_SSE_HEARTBEAT_S");
    if (hb && *hb) {
        double s = atof(hb);
        if (s >= 0.1 && s <= 3600) F.heartbeat_ms = (int64_t)(s * 1000);
    }
    if (!F.ring) F.ring = xcalloc(FEED_RING, sizeof *F.ring);
}

int feed_attach(sqlite3 *db, char *err, size_t errlen) {
    if (!F.ring) feed_init();
    F.db = db;
    free(F.db_path);
    F.db_path = xstrdup(sqlite3_db_filename(db, "main"));
    static const char *const sql[2] = {
        "INSERT INTO events (run_id, type, data, t) VALUES (?1, ?2, ?3, ?4)",
        /* the newest id ever given, rows deleted or not */
        "SELECT max(coalesce((SELECT max(id) FROM events), 0),"
        " coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))",
    };
    sqlite3_stmt **st[2] = {&F.insert, &F.seq};
    for (int i = 0; i < 2; i++) {
        if (sqlite3_prepare_v3(db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, st[i], NULL) != SQLITE_OK) {
            snprintf(err, errlen, "events feed: preparing \"%s\": %s", sql[i], sqlite3_errmsg(db));
            return -1;
        }
    }
    int64_t newest = 0;
    if (sqlite3_step(F.seq) == SQLITE_ROW) newest = sqlite3_column_int64(F.seq, 0);
    sqlite3_reset(F.seq);
    pthread_mutex_lock(&F.mu);
    F.base = F.newest = newest;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

void feed_detach(void) {
    sqlite3_finalize(F.insert);
    sqlite3_finalize(F.seq);
    F.insert = F.seq = NULL;
    F.db = NULL;
}

/* ---- subscribers ---- */

int64_t feed_subscribe(feed_sub *s, int64_t last_event_id) {
    pthread_mutex_lock(&F.mu);
    int64_t newest = F.newest;
    s->cursor = last_event_id < 0 || last_event_id > newest ? newest : last_event_id;
    s->pcursor = 0; /* the current progress, at once */
    s->heartbeat_at = mono_ms() + F.heartbeat_ms;
    s->progress_at = 0;
    s->parked = false;
    s->db = NULL;
    s->replay = NULL;
    s->prev = NULL;
    s->next = F.subs;
    if (F.subs) F.subs->prev = s;
    F.subs = s;
    F.n_subs++;
    pthread_cond_signal(&F.tick); /* the ticker sleeps longer while nobody listens */
    pthread_mutex_unlock(&F.mu);
    return newest;
}

static void replay_close(feed_sub *s) {
    sqlite3_finalize(s->replay);
    sqlite3_close(s->db);
    s->replay = NULL;
    s->db = NULL;
}

void feed_unsubscribe(feed_sub *s) {
    pthread_mutex_lock(&F.mu);
    if (s->prev) s->prev->next = s->next;
    else F.subs = s->next;
    if (s->next) s->next->prev = s->prev;
    F.n_subs--;
    pthread_mutex_unlock(&F.mu);
    replay_close(s);
}

/* Events after s->cursor, up to `upto`, from the table (the ring no longer has them).
 * Returns how many rows it read, or -1 when the table cannot be read. */
static int replay_from_table(feed_sub *s, int64_t upto, buf_t *out, size_t budget) {
    if (!s->db) {
        if (!F.db_path || sqlite3_open_v2(F.db_path, &s->db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
            log_error("events feed: cannot open the database to replay events: %s",
                      s->db ? sqlite3_errmsg(s->db) : "out of memory");
            replay_close(s);
            return -1;
        }
        sqlite3_busy_timeout(s->db, 5000);
        const char *sql = s->run_id
                              ? "SELECT id, type, data FROM events WHERE run_id = ?4 AND id > ?1 AND id <= ?2"
                                " ORDER BY id LIMIT ?3"
                              : "SELECT id, type, data FROM events WHERE id > ?1 AND id <= ?2 ORDER BY id LIMIT ?3";
        if (sqlite3_prepare_v2(s->db, sql, -1, &s->replay, NULL) != SQLITE_OK) {
            log_error("events feed: preparing the replay: %s", sqlite3_errmsg(s->db));
            replay_close(s);
            return -1;
        }
    }
    sqlite3_stmt *st = s->replay;
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, s->cursor);
    sqlite3_bind_int64(st, 2, upto);
    sqlite3_bind_int(st, 3, REPLAY_PAGE);
    if (s->run_id) sqlite3_bind_int64(st, 4, s->run_id);
    int rows = 0, rc;
    while (out->len < budget && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        int64_t id = sqlite3_column_int64(st, 0);
        size_t len;
        char *frame = make_frame(id, (const char *)sqlite3_column_text(st, 1), (const char *)sqlite3_column_text(st, 2),
                                 &len);
        buf_append(out, frame, len);
        free(frame);
        s->cursor = id;
        rows++;
    }
    sqlite3_reset(st);
    return rows;
}

/* Under the lock: index (0..count) of the first ring entry with id > cursor. */
static size_t ring_first_after(int64_t cursor) {
    size_t lo = 0, hi = F.count;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (F.ring[(F.head + mid) % FEED_RING].id <= cursor) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

feed_result feed_read(feed_sub *s, buf_t *out, size_t budget) {
    size_t start = out->len;
    pthread_mutex_lock(&F.mu);
    while (!F.closing && s->cursor < F.base) {
        /* Behind the ring: read the table, without the lock. */
        int64_t upto = F.base;
        pthread_mutex_unlock(&F.mu);
        int rows = replay_from_table(s, upto, out, budget);
        /* Caught up with what the table alone had: its connection goes now, not when
         * the stream ends (a thousand streams that replayed would hold a thousand). */
        if (rows > 0 && s->cursor >= upto) replay_close(s);
        if (rows > 0) return FEED_DATA;
        if (rows < 0) return FEED_CLOSED; /* the client reconnects and tries again */
        replay_close(s);
        pthread_mutex_lock(&F.mu);
        if (s->cursor < upto) s->cursor = upto; /* nothing there (a deleted run's events) */
    }
    if (F.closing) {
        pthread_mutex_unlock(&F.mu);
        return FEED_CLOSED;
    }
    for (size_t i = ring_first_after(s->cursor); i < F.count && out->len - start < budget; i++) {
        const ring_entry *e = &F.ring[(F.head + i) % FEED_RING];
        if (sub_wants(s, e->run_id)) buf_append(out, e->frame, e->len);
        s->cursor = e->id;
    }
    int64_t now = mono_ms();
    if (s->pcursor < F.pversion && now >= s->progress_at) {
        size_t before = out->len;
        for (size_t i = 0; i < F.n_progress; i++) {
            const progress_entry *e = &F.progress[i];
            if (e->version > s->pcursor && sub_wants(s, e->run_id)) buf_append(out, e->frame, e->len);
        }
        s->pcursor = F.pversion;
        if (out->len > before) s->progress_at = now + PROGRESS_GAP_MS;
    }
    if (out->len == start && now >= s->heartbeat_at) buf_append(out, ":\n\n", 3); /* a comment: keeps proxies and clients sure */
    if (out->len > start) {
        s->heartbeat_at = now + F.heartbeat_ms;
        pthread_mutex_unlock(&F.mu);
        return FEED_DATA;
    }
    s->parked = true;
    s->park(s);
    pthread_mutex_unlock(&F.mu);
    return FEED_PARKED;
}

/* ---- the ticker: progress at most every PROGRESS_TICK_MS, heartbeats when due ---- */

static bool progress_for(const feed_sub *s) {
    if (s->pcursor >= F.pversion) return false;
    if (s->run_id == 0) return true;
    for (size_t i = 0; i < F.n_progress; i++)
        if (F.progress[i].run_id == s->run_id && F.progress[i].version > s->pcursor) return true;
    return false;
}

static void *ticker_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&F.mu);
    while (!F.stopping) {
        struct timespec ts = realtime_in_ms(F.n_subs ? PROGRESS_TICK_MS : 1000);
        pthread_cond_timedwait(&F.tick, &F.mu, &ts);
        if (F.stopping) break;
        int64_t now = mono_ms();
        for (feed_sub *s = F.subs; s; s = s->next) {
            if (s->parked && (now >= s->heartbeat_at || (now >= s->progress_at && progress_for(s)))) {
                s->parked = false;
                s->wake(s);
            }
        }
    }
    pthread_mutex_unlock(&F.mu);
    return NULL;
}

int feed_start(void) {
    if (pthread_create(&F.ticker, NULL, ticker_main, NULL) != 0) return -1;
    F.ticker_started = true;
    return 0;
}

void feed_close_all(void) {
    pthread_mutex_lock(&F.mu);
    F.closing = true;
    for (feed_sub *s = F.subs; s; s = s->next) {
        if (s->parked) {
            s->parked = false;
            s->wake(s);
        }
    }
    pthread_mutex_unlock(&F.mu);
}

bool feed_closing(void) {
    pthread_mutex_lock(&F.mu);
    bool c = F.closing;
    pthread_mutex_unlock(&F.mu);
    return c;
}

void feed_stop(void) {
    thread_stop(F.ticker, &F.mu, &F.tick, &F.stopping, &F.ticker_started);
}

size_t feed_subscribers(void) {
    pthread_mutex_lock(&F.mu);
    size_t n = F.n_subs;
    pthread_mutex_unlock(&F.mu);
    return n;
}
