/* The usage ledger: see usage_ledger.h. */
#include "usage_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "base.h"
#include "kind_fields.h"

const char *const usage_phase_names[USAGE_PHASES] = {"startup", "productive", "checkpoint", "lost",
                                                      "idle",    "unknown",    "queue"};

enum { AT_STARTUP, AT_STEPS, AT_CHECKPOINT }; /* what the time since at_t is */

typedef struct {
    int64_t gs, productive; /* a checkpoint's global step, and the run's productive ms when it was written */
} mark;

typedef struct {
    char day[11];
    int phase;
    int64_t ms; /* device ms (queue: wall ms) */
} day_delta;

/* Device time of a run charged to the run that preempted it (usage_charged). */
typedef struct {
    char day[11];
    int phase;        /* what it was for the victim: lost, startup */
    int64_t by_run;
    char *by_owner;
    int64_t ms;       /* device ms */
} charge;

typedef struct {
    int64_t id;
    char *owner;
    bool command;
    int devices;
    int64_t ms[USAGE_PHASES]; /* wall ms each */
    int64_t lost_steps;
    int64_t hold_t, at_t, queued_t; /* 0: none */
    int phase;
    int64_t last_gs;
    int steps_in_hold;
    mark *marks;
    int n_marks;
    day_delta *days;
    int n_days;
    int64_t charged_to; /* the run that preempted it pays its next rollback and start-up (0: none) */
    charge *charges;
    int n_charges;
    bool dirty, done; /* done: neither held nor queued, dropped from memory once written */
} ledger_run;

enum { Q_LOAD, Q_RUN, Q_SAVE, Q_DAY, Q_CHARGED, Q_N };
static const char *const SQL[Q_N] = {
    [Q_LOAD] = "SELECT owner, command, devices, startup_ms, productive_ms, checkpoint_ms, lost_ms, idle_ms, unknown_ms,"
               " queue_ms, lost_steps, hold_t, at_t, phase, last_gs, queued_t, steps_in_hold, marks, charged_to FROM run_usage"
               " WHERE run_id = ?1",
    [Q_RUN] = "SELECT owner, kind = 'command', world_size, coalesce(queued_at, created_at), status, started_at FROM runs"
              " WHERE id = ?1",
    [Q_SAVE] = "INSERT OR REPLACE INTO run_usage (run_id, owner, command, devices, startup_ms, productive_ms,"
               " checkpoint_ms, lost_ms, idle_ms, unknown_ms, queue_ms, lost_steps, hold_t, at_t, phase, last_gs,"
               " queued_t, steps_in_hold, marks, charged_to) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12,"
               " ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20)",
    [Q_DAY] = "INSERT INTO usage_days (day, run_id, owner, phase, device_ms) VALUES (?1, ?2, ?3, ?4, ?5)"
              " ON CONFLICT (day, run_id, phase) DO UPDATE SET device_ms = device_ms + excluded.device_ms",
    [Q_CHARGED] = "INSERT INTO usage_charged (day, run_id, owner, phase, by_run, by_owner, device_ms)"
                  " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7) ON CONFLICT (day, run_id, phase, by_run)"
                  " DO UPDATE SET device_ms = device_ms + excluded.device_ms",
};

static struct {
    sqlite3 *db;
    sqlite3_stmt *st[Q_N];
    ledger_run **runs;
    int n, cap;
} L;

int usage_ledger_attach(sqlite3 *db, char *err, size_t errlen) {
    L.db = db;
    for (int i = 0; i < Q_N; i++) {
        if (sqlite3_prepare_v3(db, SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &L.st[i], NULL) != SQLITE_OK) {
            snprintf(err, errlen, "preparing \"%s\": %s", SQL[i], sqlite3_errmsg(db));
            return -1;
        }
    }
    return 0;
}

static void charges_clear(ledger_run *r) {
    for (int i = 0; i < r->n_charges; i++) free(r->charges[i].by_owner);
    free(r->charges);
    r->charges = NULL;
    r->n_charges = 0;
}

static void run_free(ledger_run *r) {
    free(r->owner);
    free(r->marks);
    free(r->days);
    charges_clear(r);
    free(r);
}

void usage_ledger_forget(void) {
    for (int i = 0; i < L.n; i++) run_free(L.runs[i]);
    L.n = 0;
}

void usage_ledger_detach(void) {
    usage_ledger_forget();
    free(L.runs);
    L.runs = NULL;
    L.cap = 0;
    for (int i = 0; i < Q_N; i++) sqlite3_finalize(L.st[i]);
    memset(L.st, 0, sizeof L.st);
    L.db = NULL;
}

static int64_t col_or0(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? 0 : sqlite3_column_int64(st, i);
}

static void add_mark(ledger_run *r, int64_t gs, int64_t productive) {
    while (r->n_marks && r->marks[r->n_marks - 1].gs >= gs) r->n_marks--;
    r->marks = xrealloc(r->marks, (size_t)(r->n_marks + 1) * sizeof *r->marks);
    r->marks[r->n_marks++] = (mark){gs, productive};
}

/* The run's ledger: in memory, else as the database has it, else new from its row
 * in runs (a run queued before this ledger was). NULL when there is no such run. */
static ledger_run *find(int64_t id) {
    for (int i = 0; i < L.n; i++)
        if (L.runs[i]->id == id) return L.runs[i];
    if (!L.db) return NULL;
    ledger_run *r = xcalloc(1, sizeof *r);
    r->id = id;
    sqlite3_stmt *st = L.st[Q_LOAD];
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, id);
    if (sqlite3_step(st) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(st, 0);
        r->owner = owner ? xstrdup(owner) : NULL;
        r->command = sqlite3_column_int(st, 1) != 0;
        r->devices = sqlite3_column_int(st, 2);
        for (int p = 0; p < USAGE_PHASES; p++) r->ms[p] = sqlite3_column_int64(st, 3 + p);
        r->lost_steps = sqlite3_column_int64(st, 10);
        r->hold_t = col_or0(st, 11);
        r->at_t = col_or0(st, 12);
        r->phase = sqlite3_column_int(st, 13);
        r->last_gs = sqlite3_column_int64(st, 14);
        r->queued_t = col_or0(st, 15);
        r->steps_in_hold = sqlite3_column_int(st, 16);
        json_t *marks = sqlite3_column_type(st, 17) == SQLITE_NULL
                            ? NULL : json_loads((const char *)sqlite3_column_text(st, 17), 0, NULL);
        size_t i;
        json_t *m;
        json_array_foreach(marks, i, m)
            add_mark(r, json_integer_value(json_array_get(m, 0)), json_integer_value(json_array_get(m, 1)));
        json_decref(marks);
        r->charged_to = col_or0(st, 18);
        sqlite3_reset(st);
        r->done = !r->hold_t && !r->queued_t; /* neither held nor queued: not kept in memory past this transaction */
    } else {
        sqlite3_reset(st);
        st = L.st[Q_RUN];
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, id);
        if (sqlite3_step(st) != SQLITE_ROW) {
            sqlite3_reset(st);
            free(r);
            return NULL;
        }
        const char *owner = (const char *)sqlite3_column_text(st, 0);
        r->owner = owner ? xstrdup(owner) : NULL;
        r->command = sqlite3_column_int(st, 1) != 0;
        r->devices = sqlite3_column_int(st, 2);
        const char *status = (const char *)sqlite3_column_text(st, 4);
        if (status && strcmp(status, "queued") == 0) r->queued_t = col_or0(st, 3);
        else if (status && (strcmp(status, "starting") == 0 || strcmp(status, "running") == 0 ||
                            strcmp(status, "canceling") == 0))
            r->hold_t = r->at_t = col_or0(st, 5); /* started before this ledger was: held since its start */
        sqlite3_reset(st);
        add_mark(r, 0, 0); /* its start: where a run that made no checkpoint goes back to */
        r->dirty = true;
    }
    if (r->devices < 1) r->devices = 1;
    if (L.n == L.cap) L.runs = xrealloc(L.runs, (size_t)(L.cap = L.cap ? L.cap * 2 : 16) * sizeof *L.runs);
    L.runs[L.n++] = r;
    return r;
}

static void day_of(int64_t t, char day[11]) {
    time_t secs = (time_t)(t / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    strftime(day, 11, "%Y-%m-%d", &tm);
}

/* `ms` of phase p, accounted at time t (its UTC day). */
static void account(ledger_run *r, int p, int64_t ms, int64_t t) {
    if (ms == 0) return;
    r->ms[p] += ms;
    r->dirty = true;
    char day[11];
    day_of(t, day);
    int64_t dms = p == USAGE_QUEUE ? ms : ms * r->devices;
    for (int i = 0; i < r->n_days; i++) {
        if (r->days[i].phase == p && strcmp(r->days[i].day, day) == 0) {
            r->days[i].ms += dms;
            return;
        }
    }
    r->days = xrealloc(r->days, (size_t)(r->n_days + 1) * sizeof *r->days);
    day_delta *d = &r->days[r->n_days++];
    snprintf(d->day, sizeof d->day, "%s", day);
    d->phase = p;
    d->ms = dms;
}

static ledger_run *find(int64_t id);

/* `ms` of the run's phase p (wall ms of its devices), at time t, charged to the run
 * that preempted it: to that run's owner as phase lost (usage_days), and recorded as
 * who caused it (usage_charged); the run's own phases do not hold it. */
static void charge_to_preemptor(ledger_run *r, int p, int64_t ms, int64_t t) {
    if (ms <= 0) return;
    ledger_run *by = find(r->charged_to);
    r->charges = xrealloc(r->charges, (size_t)(r->n_charges + 1) * sizeof *r->charges);
    charge *c = &r->charges[r->n_charges++];
    day_of(t, c->day);
    c->phase = p;
    c->by_run = r->charged_to;
    c->by_owner = by && by->owner ? xstrdup(by->owner) : NULL;
    c->ms = ms * r->devices;
    r->dirty = true;
}

/* The time from at_t to t, steps going on: productive up to the idle threshold, idle beyond. */
static void account_steps(ledger_run *r, int64_t t) {
    int64_t gap = t - r->at_t;
    if (gap <= 0) return;
    int64_t idle = gap > USAGE_IDLE_AFTER_MS ? gap - USAGE_IDLE_AFTER_MS : 0;
    account(r, USAGE_IDLE, idle, t);
    account(r, USAGE_PRODUCTIVE, gap - idle, t);
}

/* The time from at_t to t, as the phase it was in. */
static void account_until(ledger_run *r, int64_t t) {
    if (!r->hold_t || t <= r->at_t) return;
    if (r->phase == AT_STEPS) account_steps(r, t);
    else if (r->phase == AT_CHECKPOINT) account(r, USAGE_CHECKPOINT, t - r->at_t, t);
    else account(r, r->command && !r->steps_in_hold ? USAGE_UNKNOWN : USAGE_STARTUP, t - r->at_t, t);
    r->at_t = t;
}

/* The run goes on from global step `from` (the steps after it are done again): the
 * productive time since its newest checkpoint at or before it is lost. */
static void roll_back(ledger_run *r, int64_t from, int64_t t) {
    if (from >= r->last_gs) return;
    int m = r->n_marks - 1;
    while (m > 0 && r->marks[m].gs > from) m--;
    int64_t since = m >= 0 ? r->marks[m].productive : 0;
    int64_t moved = r->ms[USAGE_PRODUCTIVE] - since;
    if (moved > 0) {
        account(r, USAGE_PRODUCTIVE, -moved, t);
        if (r->charged_to) charge_to_preemptor(r, USAGE_LOST, moved, t); /* a preemption threw it away */
        else account(r, USAGE_LOST, moved, t);
    }
    r->lost_steps += r->last_gs - from;
    r->last_gs = from;
    r->n_marks = m + 1;
}

static void hold_ends(ledger_run *r, int64_t t) {
    if (!r->hold_t) return;
    account_until(r, t);
    r->hold_t = r->at_t = 0;
}

static void queued(ledger_run *r, int64_t t) {
    hold_ends(r, t);
    r->queued_t = t;
    r->done = false;
    r->dirty = true;
}

void usage_ledger_note(const store_op *op, int64_t result) {
    if (!L.db || (op->run_id <= 0 && op->kind != OP_RUN_INSERT)) return;
    ledger_run *r;
    switch (op->kind) {
    case OP_RUN_INSERT:
        if (result > 0 && (r = find(result))) r->queued_t = op->t; /* find made it from its row */
        return;
    case OP_RUN_RESUME:
    case OP_RUN_REQUEUE:
    case OP_RUN_RESTART:
        if (result == 1 && (r = find(op->run_id))) {
            queued(r, op->t);
            /* preempted: what it throws away, and its next start-up, are its preemptor's */
            if (op->kind == OP_RUN_REQUEUE && op->u.requeue.by > 0) r->charged_to = op->u.requeue.by;
        }
        return;
    case OP_RUN_STARTING:
        if (result != 1 || !(r = find(op->run_id))) return;
        if (r->queued_t) account(r, USAGE_QUEUE, op->t - r->queued_t, op->t);
        r->queued_t = 0;
        r->done = false;
        r->hold_t = r->at_t = op->t;
        r->phase = AT_STARTUP;
        r->steps_in_hold = 0;
        r->dirty = true;
        return;
    case OP_RUN_FINISH:
        if (result == 1 && (r = find(op->run_id))) {
            hold_ends(r, op->t);
            r->queued_t = 0;
            r->done = true;
            r->dirty = true;
        }
        return;
    case OP_STEP: {
        if (op->rank != 0 || !(r = find(op->run_id)) || !r->hold_t || op->t < r->at_t) return;
        int64_t gs = op->u.step.global_step;
        if (gs == NO_INT) return;
        bool again = gs <= r->last_gs; /* done again: it went back to the point before this step */
        if (again && r->phase == AT_STEPS) r->phase = AT_STARTUP; /* its ranks restarted meanwhile */
        if (r->phase == AT_STARTUP) { /* a first step: what came before it was start-up (not unknown) */
            if (r->charged_to && !r->steps_in_hold) charge_to_preemptor(r, USAGE_STARTUP, op->t - r->at_t, op->t);
            else account(r, USAGE_STARTUP, op->t - r->at_t, op->t);
            r->at_t = op->t;
        }
        account_until(r, op->t);
        if (again) roll_back(r, gs - 1, op->t);
        r->charged_to = 0; /* its preemptor has paid: what comes next is its own */
        r->phase = AT_STEPS;
        r->last_gs = gs;
        r->steps_in_hold++;
        r->dirty = true;
        return;
    }
    case OP_STATUS:
        if (op->rank != 0 || !op->u.status.state || strcmp(op->u.status.state, "checkpointing") != 0) return;
        if (!(r = find(op->run_id)) || !r->hold_t || op->t < r->at_t || r->phase != AT_STEPS) return;
        account_until(r, op->t);
        r->phase = AT_CHECKPOINT;
        return;
    case OP_CHECKPOINT:
        if (op->rank > 0 || !(r = find(op->run_id)) || !r->hold_t || op->t < r->at_t) return;
        if (op->u.checkpoint.global_step == NO_INT) return;
        if (r->phase == AT_STEPS) r->phase = AT_CHECKPOINT; /* no status before it: since the step before */
        account_until(r, op->t);
        if (r->phase == AT_CHECKPOINT) r->phase = AT_STEPS;
        add_mark(r, op->u.checkpoint.global_step, r->ms[USAGE_PRODUCTIVE]);
        r->dirty = true;
        return;
    default:
        return;
    }
}

static void save(ledger_run *r) {
    sqlite3_stmt *st = L.st[Q_SAVE];
    sqlite3_reset(st);
    sqlite3_bind_int64(st, 1, r->id);
    bind_text_or_null(st, 2, r->owner);
    sqlite3_bind_int(st, 3, r->command);
    sqlite3_bind_int(st, 4, r->devices);
    for (int p = 0; p < USAGE_PHASES; p++) sqlite3_bind_int64(st, 5 + p, r->ms[p]);
    sqlite3_bind_int64(st, 12, r->lost_steps);
    if (r->hold_t) sqlite3_bind_int64(st, 13, r->hold_t);
    else sqlite3_bind_null(st, 13);
    if (r->hold_t) sqlite3_bind_int64(st, 14, r->at_t);
    else sqlite3_bind_null(st, 14);
    sqlite3_bind_int(st, 15, r->phase);
    sqlite3_bind_int64(st, 16, r->last_gs);
    if (r->queued_t) sqlite3_bind_int64(st, 17, r->queued_t);
    else sqlite3_bind_null(st, 17);
    sqlite3_bind_int(st, 18, r->steps_in_hold);
    json_t *marks = json_array();
    for (int i = 0; i < r->n_marks; i++)
        json_array_append_new(marks, json_pack("[I,I]", (json_int_t)r->marks[i].gs, (json_int_t)r->marks[i].productive));
    char *text = json_dumps(marks, JSON_COMPACT);
    json_decref(marks);
    bind_text_or_null(st, 19, text);
    if (r->charged_to) sqlite3_bind_int64(st, 20, r->charged_to);
    else sqlite3_bind_null(st, 20);
    if (sqlite3_step(st) != SQLITE_DONE) log_error("usage of run %lld not written: %s", (long long)r->id, sqlite3_errmsg(L.db));
    sqlite3_reset(st);
    free(text);
    st = L.st[Q_DAY];
    for (int i = 0; i < r->n_days; i++) {
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, r->days[i].day, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, r->id);
        bind_text_or_null(st, 3, r->owner);
        sqlite3_bind_text(st, 4, usage_phase_names[r->days[i].phase], -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, r->days[i].ms);
        if (sqlite3_step(st) != SQLITE_DONE)
            log_error("usage of run %lld by day not written: %s", (long long)r->id, sqlite3_errmsg(L.db));
    }
    sqlite3_reset(st);
    r->n_days = 0;
    for (int i = 0; i < r->n_charges; i++) {
        const charge *c = &r->charges[i];
        st = L.st[Q_DAY]; /* the preemptor's lost time */
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, c->day, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, c->by_run);
        bind_text_or_null(st, 3, c->by_owner);
        sqlite3_bind_text(st, 4, usage_phase_names[USAGE_LOST], -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, c->ms);
        if (sqlite3_step(st) != SQLITE_DONE)
            log_error("usage charged to run %lld not written: %s", (long long)c->by_run, sqlite3_errmsg(L.db));
        sqlite3_reset(st);
        st = L.st[Q_CHARGED];
        sqlite3_reset(st);
        sqlite3_bind_text(st, 1, c->day, -1, SQLITE_TRANSIENT);
        sqlite3_bind_int64(st, 2, r->id);
        bind_text_or_null(st, 3, r->owner);
        sqlite3_bind_text(st, 4, usage_phase_names[c->phase], -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 5, c->by_run);
        bind_text_or_null(st, 6, c->by_owner);
        sqlite3_bind_int64(st, 7, c->ms);
        if (sqlite3_step(st) != SQLITE_DONE)
            log_error("usage of run %lld charged to run %lld not written: %s", (long long)r->id, (long long)c->by_run,
                      sqlite3_errmsg(L.db));
        sqlite3_reset(st);
    }
    charges_clear(r);
    r->dirty = false;
}

void usage_ledger_write(void) {
    int kept = 0;
    for (int i = 0; i < L.n; i++) {
        ledger_run *r = L.runs[i];
        if (r->dirty) save(r);
        if (r->done) run_free(r); /* finished: read back from the database should anything come */
        else L.runs[kept++] = r;
    }
    L.n = kept;
}
