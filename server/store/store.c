/* The store's writer: one thread, one connection, a queue of ops applied in batched
 * transactions. See store.h for why. */
#include "store.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "usage_ledger.h"
#include "attempt_steps.h"
#include "base.h"
#include "disk_space.h"
#include "metrics_sink.h"
#include "migrations.h"
#include "rollups.h"
#include "run_versions.h"
#include "write_fault.h"
#include "thread_start.h"

/* Past this many ops not yet written (queued, or kept by the writer after a fault),
 * store_submit waits: about 40 MB. */
#define QUEUE_MAX 262144
/* A batch that met a storage fault is tried again after RETRY_FIRST_S, doubling to
 * RETRY_MAX_S; a retry takes the first RETRY_PROBE_OPS ops (in order) so that an
 * outage costs little, and once they commit the rest follows at once. */
#define RETRY_FIRST_S 0.05
#define RETRY_MAX_S 2.0
#define RETRY_PROBE_OPS 1000
/* While it cannot write: the log says so again this often. */
#define FAULT_LOG_EVERY_S 30.0
/* Stopping while it cannot write: how long the writer still tries before it gives up
 * (and says what is lost). */
#define STOP_GIVE_UP_S 5.0

struct store_wait {
    bool done;
    int64_t result;
};

/* The writer's own statements; each op kind's are op_kind_sql's (event_kinds.h). */
enum { ST_PROGRESS, ST_SEEN, ST_LIVE, ST_BEGIN, ST_COMMIT, ST_ROLLBACK, ST_COUNT };

static const char *const SQL[ST_COUNT] = {
    [ST_PROGRESS] =
        "UPDATE runs SET epoch = ?2, step = ?3, global_step = ?4, loss = ?5, lr = ?6,"
        " samples_per_s = ?7, last_step_at = ?8, first_step_at = coalesce(first_step_at, ?9),"
        " first_global_step = coalesce(first_global_step, ?10) WHERE id = ?1",
    [ST_SEEN] = "UPDATE ranks SET last_seen = max(coalesce(last_seen, 0), ?3) WHERE run_id = ?1 AND rank = ?2",
    [ST_LIVE] = "SELECT 1 FROM runs WHERE id = ?1 AND status NOT IN ('succeeded', 'failed', 'canceled', 'stopped', 'timeout')",
    [ST_BEGIN] = "BEGIN",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
};

static struct {
    char *path;
    sqlite3 *db;
    sqlite3_stmt *st[ST_COUNT];
    sqlite3_stmt *op_st[OP_KIND_COUNT][OP_MAX_SQL];
    store_observer observer;
    store_cache_hooks cache;
    pthread_t thread;
    bool started;

    pthread_mutex_t mu;
    pthread_cond_t wake, space, committed;
    store_op *ops; /* the queue */
    size_t n, cap;
    bool stopping;
    size_t kept;        /* ops the writer holds and has not committed: its batch */
    size_t held;        /* store_submit callers waiting for room */
    store_health health;
    int fault_code;         /* the last fault's SQLite code: what store_unwritable advises */
    double fault_logged_at; /* mono_s */
} S = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .wake = PTHREAD_COND_INITIALIZER,
       .space = PTHREAD_COND_INITIALIZER,
       .committed = PTHREAD_COND_INITIALIZER,
       .health = {.writable = true}};


/* ---- binding helpers: NO_INT and NaN become NULL ---- */

static void bind_int(sqlite3_stmt *st, int i, int64_t v) {
    if (v == NO_INT) sqlite3_bind_null(st, i);
    else sqlite3_bind_int64(st, i, v);
}

static void bind_real(sqlite3_stmt *st, int i, double v) {
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

/* Runs a bound statement to completion; returns the rows it changed, or -1. */
static int64_t run_stmt(int which) {
    sqlite3_stmt *st = S.st[which];
    if (which != ST_ROLLBACK && write_fault_noted()) { /* the batch is retried whole (write_fault.h) */
        sqlite3_clear_bindings(st);
        return -1;
    }
    int rc = sqlite3_step(st);
    int64_t changes = rc == SQLITE_DONE ? sqlite3_changes(S.db) : -1;
    if (rc != SQLITE_DONE && which != ST_ROLLBACK) {
        if (!write_fault_is(rc)) log_error("database write failed (%s): %s", SQL[which], sqlite3_errmsg(S.db));
        /* a BEGIN or COMMIT that fails is a fault whatever its code: the batch is kept */
        bool txn = which == ST_BEGIN || which == ST_COMMIT;
        write_fault_note(S.db, txn && !write_fault_is(rc) ? SQLITE_IOERR : rc);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return changes;
}

/* ---- per-batch summaries: progress (runs) and last-seen (ranks) ---- */

typedef struct {
    int64_t run_id;
    const store_op *first, *last; /* step ops */
} progress_entry;

typedef struct {
    int64_t run_id, t;
    int rank;
} seen_entry;

typedef struct {
    int64_t run_id;
    bool live;
} live_entry;

typedef struct {
    progress_entry *progress;
    size_t n_progress, cap_progress;
    seen_entry *seen;
    size_t n_seen, cap_seen;
    live_entry *live; /* what this attempt has asked of runs' liveness (run_is_live) */
    size_t n_live, cap_live;
} batch_summary;

static void note_step(batch_summary *b, const store_op *op) {
    for (size_t i = 0; i < b->n_progress; i++) {
        if (b->progress[i].run_id == op->run_id) {
            if (op->u.step.global_step >= b->progress[i].last->u.step.global_step) b->progress[i].last = op;
            return;
        }
    }
    if (b->n_progress == b->cap_progress) {
        b->cap_progress = b->cap_progress ? 2 * b->cap_progress : 8;
        b->progress = xrealloc(b->progress, b->cap_progress * sizeof *b->progress);
    }
    b->progress[b->n_progress++] = (progress_entry){op->run_id, op, op};
}

static void note_seen(batch_summary *b, const store_op *op) {
    if (op->rank < 0) return;
    for (size_t i = 0; i < b->n_seen; i++) {
        if (b->seen[i].run_id == op->run_id && b->seen[i].rank == op->rank) {
            if (op->t > b->seen[i].t) b->seen[i].t = op->t;
            return;
        }
    }
    if (b->n_seen == b->cap_seen) {
        b->cap_seen = b->cap_seen ? 2 * b->cap_seen : 8;
        b->seen = xrealloc(b->seen, b->cap_seen * sizeof *b->seen);
    }
    b->seen[b->n_seen++] = (seen_entry){op->run_id, op->t, op->rank};
}

static void write_summary(batch_summary *b) {
    for (size_t i = 0; i < b->n_progress; i++) {
        const store_op *first = b->progress[i].first, *last = b->progress[i].last;
        sqlite3_stmt *st = S.st[ST_PROGRESS];
        sqlite3_bind_int64(st, 1, last->run_id);
        bind_int(st, 2, last->u.step.epoch);
        bind_int(st, 3, last->u.step.step);
        bind_int(st, 4, last->u.step.global_step);
        bind_real(st, 5, last->u.step.loss);
        bind_real(st, 6, last->u.step.lr);
        bind_real(st, 7, last->u.step.samples_per_s);
        sqlite3_bind_int64(st, 8, last->t);
        sqlite3_bind_int64(st, 9, first->t);
        bind_int(st, 10, first->u.step.global_step);
        run_stmt(ST_PROGRESS);
    }
    for (size_t i = 0; i < b->n_seen; i++) {
        sqlite3_stmt *st = S.st[ST_SEEN];
        sqlite3_bind_int64(st, 1, b->seen[i].run_id);
        sqlite3_bind_int(st, 2, b->seen[i].rank);
        sqlite3_bind_int64(st, 3, b->seen[i].t);
        run_stmt(ST_SEEN);
    }
    b->n_progress = b->n_seen = 0;
}

/* ---- a trainer's event goes to a live run only ---- */

/* Every op from the event socket (its kind has an `event`) changes a run that exists
 * and is not finished: none recreates the rows of a deleted run or adds to a finished
 * one (what a connection that outlived its run still sends; ingest.h). Asked of the
 * database once per run and attempt, not once per row: a batch holds thousands of a
 * run's steps. The server's own ops (which create, finish, resume or delete runs)
 * make their run asked again. */
static bool run_is_live(batch_summary *b, int64_t id) {
    for (size_t i = 0; i < b->n_live; i++)
        if (b->live[i].run_id == id) return b->live[i].live;
    sqlite3_stmt *st = S.st[ST_LIVE];
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    bool live = rc == SQLITE_ROW;
    /* a read that fails is a fault like a write's: the batch is kept, not its events dropped */
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) write_fault_note(S.db, write_fault_is(rc) ? rc : SQLITE_IOERR);
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    if (b->n_live == b->cap_live) {
        b->cap_live = b->cap_live ? 2 * b->cap_live : 8;
        b->live = xrealloc(b->live, b->cap_live * sizeof *b->live);
    }
    b->live[b->n_live++] = (live_entry){id, live};
    return live;
}

static void forget_live(batch_summary *b, int64_t id) {
    for (size_t i = 0; i < b->n_live; i++)
        if (b->live[i].run_id == id) b->live[i] = b->live[--b->n_live];
}

/* ---- applying one op: its kind's entry in OP_KINDS ---- */

static int64_t apply(const store_op *op, batch_summary *b) {
    const op_kind_desc *d = &OP_KINDS[op->kind];
    if (d->event && !run_is_live(b, op->run_id)) return 0; /* refused: nothing of it is written */
    int64_t result = d->apply(S.db, S.op_st[op->kind], op);
    if (!d->event) forget_live(b, op->run_id);
    if (result <= 0) return result; /* it changed nothing, or its write failed (a fault: the batch is retried) */
    if (d->summary & SUMMARY_PROGRESS) note_step(b, op);
    if (d->summary & SUMMARY_SEEN) note_seen(b, op);
    return result;
}

/* ---- versions: after a commit, every run the batch touched ---- */

/* The run an op changed: its own, or the one it created; 0 for none (a sync). */
static int64_t touched_run(const store_op *op, int64_t result) {
    if (op->kind == OP_RUN_INSERT) return result > 0 ? result : 0;
    return op->run_id;
}

/* Bumped whatever the outcome: a failed BEGIN leaves the ops applied one by one. */
static void bump_versions(const store_op *batch, const int64_t *results, size_t n, int64_t *ids) {
    for (size_t i = 0; i < n; i++) ids[i] = touched_run(&batch[i], results[i]);
    run_versions_bump(ids, n);
    if (!S.cache.run_deleted) return;
    for (size_t i = 0; i < n; i++)
        if (batch[i].kind == OP_RUN_DELETE && results[i] == 1) S.cache.run_deleted(batch[i].run_id);
}

/* ---- faults: what the writer cannot write, kept and retried ---- */

/* Under the lock: the first failed attempt of an outage, or one more. */
static void note_fault_locked(size_t kept, double now) {
    store_health *h = &S.health;
    const char *why = write_fault_message();
    if (h->writable) {
        h->writable = false;
        h->since_ms = now_ms();
        h->attempts = 0;
        snprintf(h->reason, sizeof h->reason, "%s", *why ? why : "the transaction failed");
        log_error("the database %s cannot be written: %s; %zu writes are kept, in order, and tried again until it "
                  "can be (GET /healthz says 503 meanwhile)",
                  S.path, h->reason, kept + S.n);
        S.fault_logged_at = now;
    } else if (*why) {
        snprintf(h->reason, sizeof h->reason, "%s", why);
    }
    h->attempts++;
    h->failed_total++;
    S.fault_code = write_fault_code();
    if (now - S.fault_logged_at >= FAULT_LOG_EVERY_S) {
        log_warn("the database %s still cannot be written after %lld s: %s; %zu writes waiting%s", S.path,
                 (long long)((now_ms() - h->since_ms) / 1000), h->reason, kept + S.n,
                 S.held ? "; new events wait (the queue is full)" : "");
        S.fault_logged_at = now;
    }
}

/* Under the lock: a commit went through. */
static void note_written_locked(size_t written) {
    store_health *h = &S.health;
    if (h->writable) return;
    log_info("the database %s can be written again after %.1f s: the %zu writes that waited are being written", S.path,
             (double)(now_ms() - h->since_ms) / 1000.0, written + S.kept + S.n);
    h->writable = true;
    h->reason[0] = '\0';
    h->attempts = 0;
    h->since_ms = 0;
}

/* What a caller waited for and can ask again (a new run, a deletion, a sync): told
 * "failed" at once while the database cannot be written, and not kept. Everything
 * else (the run state changes above all) is kept and written once it can be. */
static bool refusable(const store_op *op) {
    return op->kind == OP_RUN_INSERT || op->kind == OP_RUN_DELETE || op->kind == OP_SYNC;
}

/* Under the lock, after a failed attempt: every waiter in the batch is answered -1;
 * the refusable ops it waited for leave the batch. Returns the batch's new length. */
static size_t answer_waiters_failed_locked(store_op *batch, size_t n, bool *woke) {
    size_t kept = 0;
    for (size_t i = 0; i < n; i++) {
        store_op *op = &batch[i];
        if (op->wait) {
            op->wait->result = -1;
            op->wait->done = true;
            *woke = true;
            bool drop = refusable(op);
            op->wait = NULL;
            if (drop) {
                S.health.refused_total++;
                store_op_free(op);
                continue;
            }
        }
        batch[kept++] = *op;
    }
    return kept;
}

/* Sleeps `seconds` (under the lock) unless a stop is asked meanwhile. */
static void backoff_locked(double seconds) {
    struct timespec until = realtime_in_ms((int64_t)(seconds * 1000));
    bool was_stopping = S.stopping;
    while (S.stopping == was_stopping) {
        if (pthread_cond_timedwait(&S.wake, &S.mu, &until) != 0) break; /* ETIMEDOUT */
    }
}

/* ---- the writer thread ---- */

/* Applies batch[0..n) in one transaction. True when it committed; false after a
 * storage fault (write_fault.h), rolled back: nothing of it is in the database. */
static bool attempt(const store_op *batch, size_t n, int64_t *results, batch_summary *summary) {
    write_fault_clear();
    bool ok = run_stmt(ST_BEGIN) >= 0;
    for (size_t i = 0; ok && i < n; i++) {
        results[i] = apply(&batch[i], summary);
        if (S.observer.record) S.observer.record(&batch[i], results[i]); /* the feed's events, in this transaction */
        usage_ledger_note(&batch[i], results[i]); /* where the run's device time went, in it too */
        /* SQLite may roll the transaction back on a fault: then nothing more may run */
        if (write_fault_noted() || sqlite3_get_autocommit(S.db)) ok = false;
    }
    write_summary(summary);
    if (ok) usage_ledger_write();
    if (ok && run_stmt(ST_COMMIT) < 0) ok = false;
    if (!ok) {
        usage_ledger_forget();
        rollup_forget(); /* the series' highest steps it noted were rolled back too */
        attempt_steps_forget(); /* and the restarts' first steps */
        if (!write_fault_noted()) write_fault_note(S.db, SQLITE_IOERR); /* the transaction ended on its own */
        if (!sqlite3_get_autocommit(S.db)) run_stmt(ST_ROLLBACK);
    }
    summary->n_progress = summary->n_seen = summary->n_live = 0;
    return ok;
}

/* Under the lock: the queue joins the writer's batch (after what it kept). */
static void take_queue_locked(store_op **batch, size_t *n, size_t *cap) {
    if (*n == 0) { /* take the whole queue; hand the queue our empty array (no copying) */
        store_op *ops = S.ops;
        size_t qn = S.n, qcap = S.cap;
        S.ops = *batch;
        S.cap = *cap;
        *batch = ops;
        *n = qn;
        *cap = qcap;
    } else if (S.n) {
        if (*n + S.n > *cap) {
            while (*cap < *n + S.n) *cap = *cap ? 2 * *cap : 1024;
            *batch = xrealloc(*batch, *cap * sizeof **batch);
        }
        memcpy(*batch + *n, S.ops, S.n * sizeof *S.ops);
        *n += S.n;
    }
    S.n = 0;
    S.kept = *n;
}

static void *writer_main(void *arg) {
    (void)arg;
    store_op *batch = NULL;
    size_t n = 0, batch_cap = 0; /* n > 0 between attempts: a batch kept after a fault */
    batch_summary summary = {0};
    double backoff = 0, give_up_at = 0;
    pthread_mutex_lock(&S.mu);
    for (;;) {
        while (S.n == 0 && n == 0 && !S.stopping) pthread_cond_wait(&S.wake, &S.mu);
        if (S.n == 0 && n == 0) break; /* stopping, and everything is written */
        take_queue_locked(&batch, &n, &batch_cap);
        pthread_cond_broadcast(&S.space);
        pthread_mutex_unlock(&S.mu);

        /* after a fault, a few ops first: once they commit, the rest */
        size_t m = backoff > 0 && n > RETRY_PROBE_OPS ? RETRY_PROBE_OPS : n;
        int64_t *results = xmalloc(2 * m * sizeof *results); /* and the runs touched, for the versions */
        double t0 = mono_s();
        bool ok = attempt(batch, m, results, &summary);
        metrics_observe_store_batch(mono_s() - t0, m, ok);
        if (ok) {
            /* after the commit, before anyone hears of it (the feed's clients, the waiters):
             * a GET prompted by an event never finds the old version (run_versions.h) */
            bump_versions(batch, results, m, results + m);
            if (S.observer.commit) S.observer.commit(true); /* a client reading the database sees what it is told */
        } else if (S.observer.commit) {
            S.observer.commit(false);
        }

        pthread_mutex_lock(&S.mu);
        bool woke = false;
        if (ok) {
            for (size_t i = 0; i < m; i++) {
                if (batch[i].wait) {
                    batch[i].wait->result = results[i];
                    batch[i].wait->done = true;
                    woke = true;
                }
                store_op_free(&batch[i]);
            }
            memmove(batch, batch + m, (n - m) * sizeof *batch);
            n -= m;
            S.kept = n;
            note_written_locked(m);
            backoff = 0;
            give_up_at = 0;
        } else {
            double now = mono_s();
            n = answer_waiters_failed_locked(batch, n, &woke);
            S.kept = n;
            note_fault_locked(n, now);
            if (S.stopping && give_up_at == 0) give_up_at = now + STOP_GIVE_UP_S;
            if (S.stopping && now >= give_up_at) {
                log_error("stopping: the database %s still cannot be written (%s): %zu writes are lost", S.path,
                          S.health.reason, n + S.n);
                for (size_t i = 0; i < n; i++) store_op_free(&batch[i]);
                n = 0;
                S.kept = 0;
                for (size_t i = 0; i < S.n; i++) {
                    if (S.ops[i].wait) {
                        S.ops[i].wait->result = -1;
                        S.ops[i].wait->done = true;
                        woke = true;
                    }
                    store_op_free(&S.ops[i]);
                }
                S.n = 0;
            } else {
                backoff = backoff > 0 ? (2 * backoff > RETRY_MAX_S ? RETRY_MAX_S : 2 * backoff) : RETRY_FIRST_S;
                if (woke) pthread_cond_broadcast(&S.committed); /* before the sleep: nobody waits on it */
                woke = false;
                backoff_locked(backoff);
            }
        }
        if (woke) pthread_cond_broadcast(&S.committed);
        free(results);
    }
    pthread_mutex_unlock(&S.mu);
    free(batch);
    free(summary.progress);
    free(summary.seen);
    free(summary.live);
    return NULL;
}

static void enqueue_locked(const store_op *ops, size_t n) {
    if (S.n + n > S.cap) {
        size_t cap = S.cap ? S.cap : 1024;
        while (cap < S.n + n) cap *= 2;
        S.ops = xrealloc(S.ops, cap * sizeof *S.ops);
        S.cap = cap;
    }
    memcpy(S.ops + S.n, ops, n * sizeof *ops);
    S.n += n;
    pthread_cond_signal(&S.wake);
}

void store_submit(const store_op *ops, size_t n) {
    if (!n) return;
    pthread_mutex_lock(&S.mu);
    S.held++;
    while (S.n + S.kept >= QUEUE_MAX && !S.stopping) pthread_cond_wait(&S.space, &S.mu);
    S.held--;
    enqueue_locked(ops, n);
    pthread_mutex_unlock(&S.mu);
}

void store_submit_now(const store_op *op) {
    pthread_mutex_lock(&S.mu);
    enqueue_locked(op, 1);
    pthread_mutex_unlock(&S.mu);
}

int64_t store_submit_wait(const store_op *op) {
    store_wait w = {false, 0};
    store_op copy = *op;
    copy.wait = &w;
    pthread_mutex_lock(&S.mu);
    if (!S.health.writable && refusable(op)) { /* told at once: nothing is kept of it */
        S.health.refused_total++;
        pthread_mutex_unlock(&S.mu);
        store_op_free(&copy);
        return -1;
    }
    enqueue_locked(&copy, 1);
    while (!w.done) pthread_cond_wait(&S.committed, &S.mu);
    pthread_mutex_unlock(&S.mu);
    return w.result;
}

void store_sync(void) {
    store_op op = {.kind = OP_SYNC};
    store_submit_wait(&op);
}

void store_health_take(store_health *out) {
    pthread_mutex_lock(&S.mu);
    *out = S.health;
    out->pending = S.kept + S.n;
    out->events_held = S.held > 0 && S.n + S.kept >= QUEUE_MAX;
    pthread_mutex_unlock(&S.mu);
}

/* What a person can do about a fault of this kind. */
static const char *advice(int code) {
    switch (code & 0xff) {
    case SQLITE_FULL: return "free space on its disk";
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return "another process holds its lock: stop it";
    case SQLITE_READONLY:
    case SQLITE_CANTOPEN: return "make its directory writable for ddpd";
    case SQLITE_NOMEM: return "free memory";
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return "stop ddpd and run ddpd check";
    default: return "check its disk";
    }
}

bool store_unwritable(char *why, size_t len) {
    store_health h;
    store_health_take(&h);
    if (h.writable) return false;
    pthread_mutex_lock(&S.mu);
    int code = S.fault_code;
    pthread_mutex_unlock(&S.mu);
    snprintf(why, len,
             "the database cannot be written: %s (%s); %llu writes waiting, retried for %lld s%s: %s, and they are "
             "written in order",
             h.reason, S.path ? S.path : "?", (unsigned long long)h.pending, (long long)((now_ms() - h.since_ms) / 1000),
             h.events_held ? "; new events wait (the queue is full)" : "", advice(code));
    return true;
}

/* ---- opening and closing ---- */

static int exec_pragma(const char *sql, char *err, size_t errlen) {
    char *msg = NULL;
    if (sqlite3_exec(S.db, sql, NULL, NULL, &msg) != SQLITE_OK) {
        snprintf(err, errlen, "%s: %s", sql, msg ? msg : sqlite3_errmsg(S.db));
        sqlite3_free(msg);
        return -1;
    }
    return 0;
}

static int open_and_start(const char *path, const store_observer *observer, const store_cache_hooks *cache, char *err,
                          size_t errlen);

int store_open(const char *path, const store_observer *observer, const store_cache_hooks *cache, char *err,
               size_t errlen) {
    int rc = open_and_start(path, observer, cache, err, errlen);
    char why[1024];
    /* SQLite says "disk I/O error" or "database or disk is full": say where, and what to do */
    if (rc != 0 && disk_space_explain(path, why, sizeof why))
        snprintf(err, errlen, "%s: the database %s cannot be written; free some space there, or use another --state-dir",
                 why, path);
    return rc;
}

static int open_and_start(const char *path, const store_observer *observer, const store_cache_hooks *cache, char *err,
                          size_t errlen) {
    if (observer) S.observer = *observer;
    S.stopping = false; /* a store closed before may be opened again */
    S.health = (store_health){.writable = true};
    S.kept = S.held = 0;
    if (cache) S.cache = *cache;
    run_versions_reset();
    /* No allocation statistics: they take a process-wide mutex on every malloc,
     * which the HTTP threads' connections would contend for. */
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
    free(S.path); /* a store closed before may be opened again */
    S.path = xstrdup(path);
    if (sqlite3_open_v2(path, &S.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "cannot open the database %s: %s", path, S.db ? sqlite3_errmsg(S.db) : "out of memory");
        return -1;
    }
    sqlite3_busy_timeout(S.db, 5000);
    /* WAL: readers never wait on this writer. synchronous=NORMAL: a power cut may lose
     * the last transactions, never the database. */
    if (exec_pragma("PRAGMA journal_mode = WAL", err, errlen) ||
        exec_pragma("PRAGMA synchronous = NORMAL", err, errlen) ||
        exec_pragma("PRAGMA cache_size = -65536", err, errlen) ||
        exec_pragma("PRAGMA temp_store = MEMORY", err, errlen))
        return -1;
    char merr[512];
    if (migrate_apply(S.db, ddpd_migrations, ddpd_migrations_count, merr, sizeof merr) < 0) {
        snprintf(err, errlen, "%s: %s", path, merr);
        return -1;
    }
    for (int i = 0; i < ST_COUNT; i++) {
        if (sqlite3_prepare_v3(S.db, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &S.st[i], NULL) != SQLITE_OK) {
            snprintf(err, errlen, "preparing \"%s\": %s", SQL[i], sqlite3_errmsg(S.db));
            return -1;
        }
    }
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        const char *sql;
        for (int i = 0; (sql = op_kind_sql(k, i)); i++) {
            if (sqlite3_prepare_v3(S.db, sql, -1, SQLITE_PREPARE_PERSISTENT, &S.op_st[k][i], NULL) != SQLITE_OK) {
                snprintf(err, errlen, "preparing \"%s\": %s", sql, sqlite3_errmsg(S.db));
                return -1;
            }
        }
    }
    if (rollup_backfill(S.db, err, errlen) != 0 || rollup_attach(S.db, err, errlen) != 0) return -1;
    if (usage_ledger_attach(S.db, err, errlen) != 0) return -1;
    if (S.observer.attach && S.observer.attach(S.db, err, errlen) != 0) return -1;
    return thread_start(&S.thread, writer_main, &S.started, "the database writer thread", err, errlen);
}

void store_close(void) {
    if (S.started) {
        pthread_mutex_lock(&S.mu);
        S.stopping = true;
        pthread_cond_broadcast(&S.wake);
        pthread_cond_broadcast(&S.space);
        pthread_mutex_unlock(&S.mu);
        pthread_join(S.thread, NULL);
        S.started = false;
    }
    if (S.observer.detach) S.observer.detach();
    usage_ledger_detach();
    rollup_detach();
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        for (int i = 0; i < OP_MAX_SQL; i++) {
            sqlite3_finalize(S.op_st[k][i]);
            S.op_st[k][i] = NULL;
        }
    }
    for (int i = 0; i < ST_COUNT; i++) {
        sqlite3_finalize(S.st[i]);
        S.st[i] = NULL;
    }
    if (S.db) {
        sqlite3_close(S.db);
        S.db = NULL;
    }
    free(S.ops);
    S.ops = NULL;
    S.n = S.cap = 0;
    free(S.path);
    S.path = NULL;
}
