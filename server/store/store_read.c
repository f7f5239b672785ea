/* Reading the run store: per-thread connections and the queries behind the GET
 * routes. See store_read.h. */
#include "store_read.h"

#include <math.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "step_rows.h"
#include "event_kinds.h"
#include "kind_fields.h"
#include "path_redact.h"
#include "state_layout.h"
#include "views.h"

const char *const metric_names[METRIC_COUNT] = {"loss", "lr", "samples_per_s"};

#define RUN_COLUMNS                                                                          \
    "id, name, status, reason, config, world_size, device_kind, devices, pid, exit_code,"    \
    " exit_signal, created_at, started_at, finished_at, epochs, total_steps, steps_per_epoch," \
    " epoch, step, global_step, loss, lr, samples_per_s, first_step_at, first_global_step,"   \
    " last_step_at, owner, priority, preemptible, preempted_by, preempted_at, preemptions, preempting,"   \
    " slurm_job_id, sweep_id, trial"
enum {
    C_ID, C_NAME, C_STATUS, C_REASON, C_CONFIG, C_WORLD_SIZE, C_DEVICE_KIND, C_DEVICES, C_PID,
    C_EXIT_CODE, C_EXIT_SIGNAL, C_CREATED_AT, C_STARTED_AT, C_FINISHED_AT, C_EPOCHS,
    C_TOTAL_STEPS, C_STEPS_PER_EPOCH, C_EPOCH, C_STEP, C_GLOBAL_STEP, C_LOSS, C_LR,
    C_SAMPLES_PER_S, C_FIRST_STEP_AT, C_FIRST_GLOBAL_STEP, C_LAST_STEP_AT, C_OWNER, C_PRIORITY,
    C_PREEMPTIBLE, C_PREEMPTED_BY, C_PREEMPTED_AT, C_PREEMPTIONS, C_PREEMPTING, C_SLURM_JOB_ID,
    C_SWEEP_ID, C_TRIAL,
    C_CHECKPOINTS, C_RESUMES, C_ATTEMPTS, C_RESTART_COUNT, C_ATTEMPTS_OMITTED, C_EARLIER_ATTEMPTS_S, /* Q_RUN only */
    C_SIZES, C_RANKS_NOW /* Q_RUN only */
};

enum {
    Q_BRIEF, Q_UNFINISHED, Q_PROCESS, Q_CONFIG, Q_RANKS_SEEN, Q_RUN, Q_PAGE, Q_RANGE,
    Q_SERIES_LOSS, Q_SERIES_LR, Q_SERIES_SPS, Q_NAMED_RANGE, Q_NAMED_SERIES, Q_NAMED_KEYS, Q_EPOCHS, Q_RANKS, Q_BY_STATUS,
    Q_USAGE, Q_ATTEMPT_SPAN, Q_SPS_ANY, Q_POINTS, Q_DISK, Q_LENGTHS, Q_TIMELINE, Q_AUDIT, Q_USAGE_USER, Q_USAGE_RUN,
    Q_USAGE_DAY, Q_USAGE_CHARGED, Q_RESIZING, Q_COUNT
};

#define BRIEF_COLUMNS                                                                                         \
    "id, status, world_size, device_kind, pid, kind, (SELECT count(*) FROM run_resumes WHERE run_id = runs.id)," \
    " owner, priority, preemptible, coalesce(queued_at, created_at), started_at, preemptions, preempting,"       \
    " preempted_by, (SELECT max(attempt) FROM run_attempts WHERE run_id = runs.id),"                             \
    " (SELECT attempt FROM run_resumes WHERE run_id = runs.id ORDER BY n DESC LIMIT 1), memory_bytes,"   \
    " sweep_id"

static const char *QSQL[Q_COUNT] = {
    [Q_BRIEF] = "SELECT " BRIEF_COLUMNS " FROM runs WHERE id = ?1",
    [Q_UNFINISHED] =
        "SELECT " BRIEF_COLUMNS " FROM runs"
        " WHERE status IN ('queued', 'starting', 'running', 'canceling') ORDER BY id",
    [Q_PROCESS] = "SELECT pid_start_time, secret, devices, slurm_job_id FROM runs WHERE id = ?1",
    [Q_CONFIG] = "SELECT config FROM runs WHERE id = ?1",
    /* an elastic run's resize under way: its newest "resizing" comes after its newest start and relaunch */
    [Q_RESIZING] = "SELECT kind, json_extract(detail, '$.to'), json_extract(detail, '$.by') FROM run_timeline"
                   " WHERE run_id = ?1 AND kind IN ('resizing', 'resized', 'admitted') ORDER BY id DESC LIMIT 1",
    [Q_RANKS_SEEN] = "SELECT rank, last_seen FROM ranks WHERE run_id = ?1 AND last_seen IS NOT NULL ORDER BY rank",
    /* [Q_RUN], [Q_EPOCHS]: built from the kinds' fields (build_queries) */
    /* a page's rows, each by its id (which ids: run_list.c) */
    [Q_PAGE] = "SELECT " RUN_COLUMNS " FROM runs WHERE id = ?1",
    /* two subqueries: each is one seek (one min() and one max() together read the range) */
    [Q_RANGE] = "SELECT (SELECT " STEP_GS " FROM step_rows WHERE " STEP_AFTER("?1", "?2") " ORDER BY k LIMIT 1),"
                " (SELECT " STEP_GS " FROM step_rows WHERE " STEP_AFTER("?1", "?2") " ORDER BY k DESC LIMIT 1)",
    [Q_SERIES_LOSS] = "SELECT " STEP_GS ", loss, " STEP_T("?1") " FROM step_rows WHERE " STEP_AFTER("?1", "?2")
                      " ORDER BY k",
    [Q_SERIES_LR] = "SELECT " STEP_GS ", lr, " STEP_T("?1") " FROM step_rows WHERE " STEP_AFTER("?1", "?2")
                    " ORDER BY k",
    /* a step without a throughput (a command run's, unless its script reports one) is no point */
    [Q_SERIES_SPS] = "SELECT " STEP_GS ", samples_per_s, " STEP_T("?1") " FROM step_rows WHERE "
                     STEP_AFTER("?1", "?2") " AND samples_per_s IS NOT NULL ORDER BY k",
    [Q_SPS_ANY] = "SELECT 1 FROM step_rows WHERE " STEP_OF_RUN("?1") " AND samples_per_s IS NOT NULL LIMIT 1",
    [Q_NAMED_RANGE] = "SELECT min(global_step), max(global_step) FROM series"
                      " WHERE run_id = ?1 AND key = ?3 AND global_step > ?2",
    [Q_NAMED_SERIES] = "SELECT global_step, value, t FROM series WHERE run_id = ?1 AND key = ?3"
                       " AND global_step > ?2 ORDER BY global_step",
    /* the next name after ?2: one seek on the primary key each (a DISTINCT would
     * read every point of the run) */
    [Q_NAMED_KEYS] = "SELECT key FROM series_keys k WHERE run_id = ?1 AND key > ?2 AND EXISTS (SELECT 1"
                     " FROM series_points p WHERE p.run_id = ?1 AND p.key_id = k.id) ORDER BY key LIMIT 1",
    [Q_RANKS] = "SELECT rank, device, pid, host, state, detail, global_step, step_ms, connected_at,"
                " last_seen, gpu_mem_used_bytes, gpu_mem_total_bytes FROM ranks WHERE run_id = ?1 ORDER BY rank",
    [Q_BY_STATUS] = "SELECT status, count(*) FROM runs GROUP BY status",
    [Q_USAGE] = "SELECT owner, device_seconds, as_of FROM usage",
    [Q_TIMELINE] = "SELECT t, kind, detail, NULL, NULL FROM run_timeline WHERE run_id = ?1"
                   " UNION ALL SELECT t, 'checkpoint', NULL, epoch, global_step FROM checkpoints WHERE run_id = ?1"
                   " ORDER BY 1",
    [Q_LENGTHS] = "SELECT finished_at - started_at FROM runs WHERE status = 'succeeded' AND owner IS ?1 AND name = ?2"
                  " AND started_at IS NOT NULL AND finished_at >= started_at ORDER BY id DESC LIMIT 15",
    [Q_POINTS] = "SELECT (SELECT count(*) FROM step_rows WHERE " STEP_OF_RUN("?1") ") + (SELECT count(*) FROM series_points WHERE run_id = ?1)"
                 " + (SELECT count(*) FROM epochs WHERE run_id = ?1)",
    /* ?4: whom a user's read is limited to (what it did, and what is about it or its runs); NULL: an admin */
    [Q_AUDIT] = "SELECT id, t, actor, action, target, run_id, subject, detail FROM audit"
                " WHERE (?1 IS NULL OR actor = ?1) AND (?2 IS NULL OR target = ?2) AND (?3 IS NULL OR t >= ?3)"
                " AND (?4 IS NULL OR actor = ?4 OR subject = ?4) AND id > ?5 ORDER BY id LIMIT ?6",
    /* GET /usage: device ms by phase, each group's (the day, the run's lost steps) */
    [Q_USAGE_USER] = "SELECT coalesce(owner, ''), phase, sum(device_ms), NULL, NULL FROM usage_days"
                     " WHERE day >= ?1 AND day <= ?2 GROUP BY 1, 2 ORDER BY 1, 2",
    [Q_USAGE_RUN] = "SELECT coalesce(d.owner, ''), d.phase, sum(d.device_ms), d.run_id, (SELECT lost_steps FROM run_usage u"
                    " WHERE u.run_id = d.run_id) FROM usage_days d WHERE d.day >= ?1 AND d.day <= ?2"
                    " GROUP BY d.run_id, d.phase ORDER BY d.run_id, d.phase",
    [Q_USAGE_DAY] = "SELECT coalesce(owner, ''), phase, sum(device_ms), day, NULL FROM usage_days"
                    " WHERE day >= ?1 AND day <= ?2 GROUP BY day, 1, 2 ORDER BY day, 1, 2",
    [Q_USAGE_CHARGED] = "SELECT run_id, coalesce(owner, ''), phase, by_run, coalesce(by_owner, ''), sum(device_ms)"
                        " FROM usage_charged WHERE day >= ?1 AND day <= ?2 GROUP BY run_id, phase, by_run"
                        " ORDER BY run_id, by_run, phase",
    [Q_DISK] = "SELECT id, owner, disk_bytes, status IN ('succeeded', 'failed', 'canceled', 'stopped', 'timeout') FROM runs"
               " ORDER BY id",
    /* ?3: the rank's member, '$."N"': the attempt's offset, the next attempt's that has one, the newest attempt */
    [Q_ATTEMPT_SPAN] = "SELECT (SELECT count(*) FROM run_attempts WHERE run_id = ?1 AND attempt = ?2),"
                       " (SELECT json_extract(log_offsets, ?3) FROM run_attempts WHERE run_id = ?1 AND attempt = ?2),"
                       " (SELECT json_extract(log_offsets, ?3) FROM run_attempts WHERE run_id = ?1 AND attempt > ?2"
                       "  AND json_extract(log_offsets, ?3) IS NOT NULL ORDER BY attempt LIMIT 1),"
                       " (SELECT max(attempt) FROM run_attempts WHERE run_id = ?1)",
};

/* A run's resumes, as JSON text built by SQLite. */
#define RESUMES_JSON                                                                                            \
    "(SELECT json_group_array(json_object('at', strftime('%Y-%m-%dT%H:%M:%fZ', at / 1000.0, 'unixepoch'),"      \
    " 'from_checkpoint', from_checkpoint, 'from_epoch', from_epoch, 'from_global_step', from_global_step,"     \
    " 'prior_status', prior_status, 'prior_reason', prior_reason, 'attempt', attempt))"                     \
    " FROM (SELECT * FROM run_resumes WHERE run_id = ?1 ORDER BY n))"

/* A run's attempts as JSON text built by SQLite: the newest ATTEMPTS_SHOWN, oldest first
 * (with resumes a run's attempts have no bound), then its restart count (its newest
 * attempt's number) and how many older ones were left out. */
#define ATTEMPTS_SHOWN "100"
#define ISO_TIME(ms) "strftime('%Y-%m-%dT%H:%M:%fZ', " ms " / 1000.0, 'unixepoch')"
/* A restart's first step: the lowest step reported since it started, kept with the
 * attempt as its steps are written (attempt_steps.h). The first attempt's is not
 * asked for: it starts where the run does. */
#define FIRST_STEP "CASE WHEN attempt > 0 AND started_at IS NOT NULL THEN first_global_step END"
/* A failed attempt's class (migration 0017), null when it has none. */
#define FAILURE_JSON                                                                                             \
    "json(CASE WHEN failure_class IS NOT NULL THEN json_object('class', failure_class, 'rank', failing_rank,"     \
    " 'node', failure_node, 'exit_code', exit_code, 'signal', signal, 'evidence', failure_evidence) END)"
#define ATTEMPTS_JSON                                                                                            \
    "(SELECT json_group_array(json_object('attempt', attempt, 'started_at', " ISO_TIME("started_at") ","         \
    " 'ended_at', " ISO_TIME("ended_at") ", 'status', status, 'reason', reason, 'failing_rank', failing_rank,"   \
    " 'exit_code', exit_code, 'signal', signal, 'last_line', last_line, 'master_port', master_port,"            \
    " 'checkpoint', checkpoint, 'log_offsets', json(coalesce(log_offsets, '{}')), 'first_step', " FIRST_STEP ","  \
    " 'failure', " FAILURE_JSON "))"                                                                          \
    " FROM (SELECT * FROM (SELECT * FROM run_attempts WHERE run_id = ?1 ORDER BY attempt DESC LIMIT " ATTEMPTS_SHOWN ")" \
    " ORDER BY attempt)),"                                                                                     \
    " (SELECT coalesce(max(attempt), 0) FROM run_attempts WHERE run_id = ?1),"                                 \
    " (SELECT max(count(*) - " ATTEMPTS_SHOWN ", 0) FROM run_attempts WHERE run_id = ?1),"                       \
    EARLIER_ATTEMPTS_S
/* How long the attempts that ended before the run's newest start ran, in seconds: with
 * the span from that start (started_at to finished_at, or now), every attempt's time.
 * The attempts of one start (a launcher's own restarts) are within that span. */
#define EARLIER_ATTEMPTS_S                                                                                      \
    " (SELECT coalesce(sum(a.ended_at - a.started_at), 0) / 1000.0 FROM run_attempts a WHERE a.run_id = ?1"     \
    " AND a.started_at IS NOT NULL AND a.ended_at >= a.started_at AND a.ended_at <= runs.started_at)"

/* An elastic run's changes of size, oldest first, from its timeline's "resized"
 * entries (the scheduler notes each: sched/run_life.c), and the ranks it trains on now
 * (its devices while it holds them; NULL otherwise). */
#define SIZES_JSON                                                                                               \
    " (SELECT json_group_array(json_object('at', " ISO_TIME("t") ", 'from', json_extract(detail, '$.from'),"     \
    " 'to', json_extract(detail, '$.to'), 'why', json_extract(detail, '$.why'), 'for_run',"                      \
    " json_extract(detail, '$.by'), 'from_global_step', json_extract(detail, '$.from_global_step')))"            \
    " FROM (SELECT * FROM run_timeline WHERE run_id = ?1 AND kind = 'resized' ORDER BY id)),"                   \
    " CASE WHEN status IN ('starting', 'running', 'canceling') AND devices IS NOT NULL"                          \
    " THEN json_array_length(devices) END"

static pthread_once_t queries_once = PTHREAD_ONCE_INIT;

/* The queries of rows an event kind stores, from its fields (kind_fields.h); kept
 * for the life of the process. */
static void build_queries(void) {
    char *checkpoints = fields_json_array_sql(&OP_KINDS[OP_CHECKPOINT]);
    /* one statement, so one read transaction, per GET /runs/{id}: the checkpoints
     * and resumes come as JSON text built by SQLite */
    QSQL[Q_RUN] = xasprintf("SELECT %s, %s, %s, %s, %s FROM runs WHERE id = ?1", RUN_COLUMNS, checkpoints, RESUMES_JSON,
                            ATTEMPTS_JSON, SIZES_JSON);
    free(checkpoints);
    QSQL[Q_EPOCHS] = fields_select_sql(&OP_KINDS[OP_EPOCH]);
}

typedef struct {
    sqlite3 *db;
    sqlite3_stmt *q[Q_COUNT];
    sqlite3_stmt *extra[STORE_READ_EXTRA]; /* store_read_extra's */
} reader;

static pthread_key_t reader_key;
static pthread_once_t reader_once = PTHREAD_ONCE_INIT;

static void reader_free(void *p) {
    reader *r = p;
    if (!r) return;
    for (int i = 0; i < Q_COUNT; i++) sqlite3_finalize(r->q[i]);
    for (int i = 0; i < STORE_READ_EXTRA; i++) sqlite3_finalize(r->extra[i]);
    sqlite3_close(r->db);
    free(r);
}

static void make_key(void) { pthread_key_create(&reader_key, reader_free); }

void store_read_release(void) {
    pthread_once(&reader_once, make_key);
    reader_free(pthread_getspecific(reader_key));
    pthread_setspecific(reader_key, NULL);
}

/* This thread's reader, its connection opened on first use; NULL on error. */
static reader *this_reader(void) {
    pthread_once(&reader_once, make_key);
    pthread_once(&queries_once, build_queries);
    reader *r = pthread_getspecific(reader_key);
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) return NULL;
        if (sqlite3_open_v2(layout_db_path(), &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
            log_error("cannot open the database for reading: %s", r->db ? sqlite3_errmsg(r->db) : "out of memory");
            reader_free(r);
            return NULL;
        }
        /* A reader only waits when WAL recovery runs (start-up after a crash). */
        sqlite3_busy_timeout(r->db, 5000);
        sqlite3_exec(r->db, "PRAGMA query_only = 1", NULL, NULL, NULL);
        pthread_setspecific(reader_key, r);
    }
    return r;
}

const char *store_read_steps_sql(int i) {
    for (int q = 0; q < Q_COUNT; q++)
        if (QSQL[q] && strstr(QSQL[q], "step_rows") && i-- == 0) return QSQL[q];
    return NULL;
}

sqlite3_stmt *store_read_extra(int slot, const char *sql) {
    reader *r = this_reader();
    if (!r || slot < 0 || slot >= STORE_READ_EXTRA) return NULL;
    if (!r->extra[slot] &&
        sqlite3_prepare_v3(r->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &r->extra[slot], NULL) != SQLITE_OK) {
        log_error("preparing \"%s\": %s", sql, sqlite3_errmsg(r->db));
        return NULL;
    }
    sqlite3_reset(r->extra[slot]);
    sqlite3_clear_bindings(r->extra[slot]);
    return r->extra[slot];
}

/* This thread's statement `which`, reset and ready to bind; NULL on error. */
static sqlite3_stmt *stmt(int which) {
    reader *r = this_reader();
    if (!r) return NULL;
    if (!r->q[which] &&
        sqlite3_prepare_v3(r->db, QSQL[which], -1, SQLITE_PREPARE_PERSISTENT, &r->q[which], NULL) != SQLITE_OK) {
        log_error("preparing \"%s\": %s", QSQL[which], sqlite3_errmsg(r->db));
        return NULL;
    }
    sqlite3_reset(r->q[which]);
    sqlite3_clear_bindings(r->q[which]);
    return r->q[which];
}

static void done(sqlite3_stmt *st) {
    sqlite3_reset(st); /* ends the read transaction: the WAL can be checkpointed past it */
}

static int64_t col_int(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NO_INT : sqlite3_column_int64(st, i);
}
static double col_real(sqlite3_stmt *st, int i) {
    return sqlite3_column_type(st, i) == SQLITE_NULL ? NAN : sqlite3_column_double(st, i);
}
static json_t *col_json_int(sqlite3_stmt *st, int i) { return json_int_or_null(col_int(st, i)); }
static json_t *col_json_real(sqlite3_stmt *st, int i) { return json_real_or_null(col_real(st, i)); }
static json_t *col_json_text(sqlite3_stmt *st, int i) {
    const char *s = (const char *)sqlite3_column_text(st, i);
    return s ? json_string(s) : json_null();
}
static json_t *col_json_time(sqlite3_stmt *st, int i) { return json_time(col_int(st, i)); }

static void fill_brief(sqlite3_stmt *st, run_brief *b) {
    memset(b, 0, sizeof *b);
    b->id = sqlite3_column_int64(st, 0);
    const char *s = (const char *)sqlite3_column_text(st, 1);
    if (!run_status_parse(s, &b->status)) b->status = RUN_FAILED; /* the schema's CHECK allows no other */
    b->world_size = sqlite3_column_int(st, 2);
    s = (const char *)sqlite3_column_text(st, 3);
    snprintf(b->device_kind, sizeof b->device_kind, "%s", s ? s : "");
    b->pid = col_int(st, 4);
    s = (const char *)sqlite3_column_text(st, 5);
    b->command = s && strcmp(s, "command") == 0;
    b->resumes = sqlite3_column_int(st, 6);
    s = (const char *)sqlite3_column_text(st, 7);
    b->has_owner = s != NULL;
    snprintf(b->owner, sizeof b->owner, "%s", s ? s : "");
    b->priority = sqlite3_column_int(st, 8);
    b->preemptible = sqlite3_column_int(st, 9) != 0;
    b->queued_at = col_int(st, 10);
    b->started_at = col_int(st, 11);
    b->preemptions = sqlite3_column_int(st, 12);
    b->preempting = sqlite3_column_int(st, 13) != 0;
    b->preempted_by = col_int(st, 14);
    b->last_attempt = sqlite3_column_type(st, 15) == SQLITE_NULL ? -1 : sqlite3_column_int(st, 15);
    b->restarts_from = sqlite3_column_int(st, 16); /* NULL: 0 */
    b->memory_bytes = sqlite3_column_int64(st, 17); /* NULL: 0 */
    b->sweep_id = sqlite3_column_int64(st, 18);     /* NULL: 0 */
}

int64_t store_op_points(const store_op *op) {
    if (op->kind == OP_EPOCH) return 1 + (op->u.epoch.series ? (int64_t)json_object_size(op->u.epoch.series) : 0);
    if (op->kind != OP_STEP) return 0;
    return 1 + (op->u.step.series ? (int64_t)json_object_size(op->u.step.series) : 0);
}

int64_t store_count_points(int64_t id) {
    sqlite3_stmt *st = stmt(Q_POINTS);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int64_t n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int64(st, 0) : -1;
    done(st);
    return n;
}

int store_list_disk(run_disk **out) {
    sqlite3_stmt *st = stmt(Q_DISK);
    if (!st) return -1;
    size_t n = 0, cap = 64;
    run_disk *v = xmalloc(cap * sizeof *v);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
        run_disk *d = &v[n++];
        d->id = sqlite3_column_int64(st, 0);
        const char *owner = (const char *)sqlite3_column_text(st, 1);
        snprintf(d->owner, sizeof d->owner, "%s", owner ? owner : "");
        d->bytes = sqlite3_column_type(st, 2) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 2);
        d->finished = sqlite3_column_int(st, 3) != 0;
    }
    done(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return -1;
    }
    *out = v;
    return (int)n;
}

int store_get_brief(int64_t id, run_brief *out) {
    sqlite3_stmt *st = stmt(Q_BRIEF);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (found == 1) fill_brief(st, out);
    done(st);
    return found;
}

int store_list_unfinished(run_brief **out) {
    sqlite3_stmt *st = stmt(Q_UNFINISHED);
    if (!st) return -1;
    size_t n = 0, cap = 16;
    run_brief *v = xmalloc(cap * sizeof *v);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
        fill_brief(st, &v[n++]);
    }
    done(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return -1;
    }
    *out = v;
    return (int)n;
}

int store_list_usage(char ***owners, double **values, int64_t **as_of) {
    sqlite3_stmt *st = stmt(Q_USAGE);
    if (!st) return -1;
    int n = 0, cap = 8, rc;
    char **o = xmalloc((size_t)cap * sizeof *o);
    double *v = xmalloc((size_t)cap * sizeof *v);
    int64_t *t = xmalloc((size_t)cap * sizeof *t);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            cap *= 2;
            o = xrealloc(o, (size_t)cap * sizeof *o);
            v = xrealloc(v, (size_t)cap * sizeof *v);
            t = xrealloc(t, (size_t)cap * sizeof *t);
        }
        const char *name = (const char *)sqlite3_column_text(st, 0);
        o[n] = xstrdup(name ? name : "");
        v[n] = sqlite3_column_double(st, 1);
        t[n++] = sqlite3_column_int64(st, 2);
    }
    done(st);
    if (rc != SQLITE_DONE) {
        for (int i = 0; i < n; i++) free(o[i]);
        free(o);
        free(v);
        free(t);
        return -1;
    }
    *owners = o;
    *values = v;
    *as_of = t;
    return n;
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int64_t store_median_length(const char *owner, const char *name) {
    sqlite3_stmt *st = name ? stmt(Q_LENGTHS) : NULL;
    if (!st) return 0;
    if (owner) sqlite3_bind_text(st, 1, owner, -1, SQLITE_TRANSIENT);
    else sqlite3_bind_null(st, 1);
    sqlite3_bind_text(st, 2, name, -1, SQLITE_TRANSIENT);
    int64_t v[15];
    int n = 0;
    while (n < 15 && sqlite3_step(st) == SQLITE_ROW) v[n++] = sqlite3_column_int64(st, 0);
    done(st);
    if (!n) return 0;
    qsort(v, (size_t)n, sizeof *v, by_value);
    int64_t median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    return median > 0 ? median : 1;
}

int store_get_run_process(int64_t id, run_process *out) {
    sqlite3_stmt *st = stmt(Q_PROCESS);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (found == 1) {
        out->pid_start_time = col_int(st, 0);
        const char *secret = (const char *)sqlite3_column_text(st, 1);
        const char *devices = (const char *)sqlite3_column_text(st, 2);
        const char *job = (const char *)sqlite3_column_text(st, 3);
        snprintf(out->secret, sizeof out->secret, "%s", secret ? secret : "");
        snprintf(out->job, sizeof out->job, "%s", job ? job : "");
        out->devices = devices ? json_loads(devices, 0, NULL) : NULL;
    }
    done(st);
    return found;
}

int store_get_config(int64_t id, json_t **out) {
    *out = NULL;
    sqlite3_stmt *st = stmt(Q_CONFIG);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int found = rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
    if (found == 1) {
        const char *text = (const char *)sqlite3_column_text(st, 0);
        *out = text ? json_loads(text, 0, NULL) : NULL;
    }
    done(st);
    return found;
}

int store_get_resizing(int64_t id, int *to, int64_t *by) {
    *to = 0;
    *by = 0;
    sqlite3_stmt *st = stmt(Q_RESIZING);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    int found = rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? 0 : -1;
    if (rc == SQLITE_ROW && sqlite3_column_text(st, 0) && strcmp((const char *)sqlite3_column_text(st, 0), "resizing") == 0 &&
        sqlite3_column_int(st, 1) > 0) {
        *to = sqlite3_column_int(st, 1);
        *by = sqlite3_column_type(st, 2) == SQLITE_INTEGER ? sqlite3_column_int64(st, 2) : 0;
        found = 1;
    }
    done(st);
    return found;
}

int store_ranks_last_seen(int64_t id, rank_seen **out) {
    sqlite3_stmt *st = stmt(Q_RANKS_SEEN);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    size_t n = 0, cap = 8;
    rank_seen *v = xmalloc(cap * sizeof *v);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) v = xrealloc(v, (cap *= 2) * sizeof *v);
        v[n++] = (rank_seen){.rank = sqlite3_column_int(st, 0), .last_seen = sqlite3_column_int64(st, 1)};
    }
    done(st);
    if (rc != SQLITE_DONE) {
        free(v);
        return -1;
    }
    *out = v;
    return (int)n;
}

/* progress: the shared view (lib/views.c) of the run's progress columns. */
static json_t *progress_json(sqlite3_stmt *st, run_status status) {
    progress_facts p = {
        .epoch = col_int(st, C_EPOCH), .epochs = col_int(st, C_EPOCHS), .step = col_int(st, C_STEP),
        .global_step = col_int(st, C_GLOBAL_STEP), .total_steps = col_int(st, C_TOTAL_STEPS),
        .first_global_step = col_int(st, C_FIRST_GLOBAL_STEP), .first_step_at = col_int(st, C_FIRST_STEP_AT),
        .last_step_at = col_int(st, C_LAST_STEP_AT), .loss = col_real(st, C_LOSS), .lr = col_real(st, C_LR),
        .samples_per_s = col_real(st, C_SAMPLES_PER_S), .succeeded = status == RUN_SUCCEEDED,
        .live = status == RUN_RUNNING || status == RUN_STARTING,
    };
    return view_progress(&p);
}

static json_t *run_row_json(sqlite3_stmt *st) {
    const char *status = (const char *)sqlite3_column_text(st, C_STATUS);
    if (!status) status = "";
    run_status rs = RUN_FAILED;
    run_status_parse(status, &rs);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_integer(sqlite3_column_int64(st, C_ID)));
    json_object_set_new(o, "name", col_json_text(st, C_NAME));
    json_object_set_new(o, "status", json_string(status));
    json_object_set_new(o, "reason", col_json_text(st, C_REASON));
    json_object_set_new(o, "world_size", col_json_int(st, C_WORLD_SIZE));
    json_object_set_new(o, "device_kind", col_json_text(st, C_DEVICE_KIND));
    const char *devices = (const char *)sqlite3_column_text(st, C_DEVICES);
    json_t *dv = devices ? json_loads(devices, 0, NULL) : NULL;
    json_object_set_new(o, "devices", dv ? dv : json_array());
    json_object_set_new(o, "pid", col_json_int(st, C_PID));
    if (sqlite3_column_type(st, C_SLURM_JOB_ID) != SQLITE_NULL) /* a run on Slurm only */
        json_object_set_new(o, "slurm_job_id", col_json_text(st, C_SLURM_JOB_ID));
    json_object_set_new(o, "exit_code", col_json_int(st, C_EXIT_CODE));
    json_object_set_new(o, "exit_signal", col_json_int(st, C_EXIT_SIGNAL));
    json_object_set_new(o, "created_at", col_json_time(st, C_CREATED_AT));
    json_object_set_new(o, "started_at", col_json_time(st, C_STARTED_AT));
    json_object_set_new(o, "finished_at", col_json_time(st, C_FINISHED_AT));
    json_object_set_new(o, "progress", progress_json(st, rs));
    json_object_set_new(o, "owner", col_json_text(st, C_OWNER));
    json_object_set_new(o, "priority", col_json_int(st, C_PRIORITY));
    json_object_set_new(o, "preemptible", json_boolean(sqlite3_column_int(st, C_PREEMPTIBLE)));
    json_object_set_new(o, "preempted_by", col_json_int(st, C_PREEMPTED_BY));
    json_object_set_new(o, "preempted_at", col_json_time(st, C_PREEMPTED_AT));
    json_object_set_new(o, "preemptions", col_json_int(st, C_PREEMPTIONS));
    json_object_set_new(o, "preempting", json_boolean(sqlite3_column_int(st, C_PREEMPTING)));
    if (sqlite3_column_type(st, C_SWEEP_ID) != SQLITE_NULL) { /* a sweep's trial only */
        json_object_set_new(o, "sweep_id", col_json_int(st, C_SWEEP_ID));
        json_object_set_new(o, "trial", col_json_int(st, C_TRIAL));
    }
    return o;
}

json_t *store_run_json(int64_t id, char **raw_members) {
    sqlite3_stmt *st = stmt(Q_RUN);
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, id);
    json_t *o = NULL;
    if (sqlite3_step(st) == SQLITE_ROW) {
        o = run_row_json(st);
        const char *cfg = (const char *)sqlite3_column_text(st, C_CONFIG);
        const char *ckpts = (const char *)sqlite3_column_text(st, C_CHECKPOINTS);
        const char *resumes = (const char *)sqlite3_column_text(st, C_RESUMES);
        const char *attempts = (const char *)sqlite3_column_text(st, C_ATTEMPTS);
        /* the config as submitted; the checkpoints', resumes' and attempts' paths (the server's) named by their roots */
        char *named_ckpts = xstrdup(ckpts ? ckpts : "[]"), *named_resumes = xstrdup(resumes ? resumes : "[]");
        char *named_attempts = xstrdup(attempts ? attempts : "[]");
        size_t n_ckpts = strlen(named_ckpts), n_resumes = strlen(named_resumes), n_attempts = strlen(named_attempts);
        path_redact_apply(&named_ckpts, &n_ckpts);
        path_redact_apply(&named_resumes, &n_resumes);
        path_redact_apply(&named_attempts, &n_attempts);
        const char *sizes = (const char *)sqlite3_column_text(st, C_SIZES);
        char ranks_now[24] = "null";
        if (sqlite3_column_type(st, C_RANKS_NOW) != SQLITE_NULL)
            snprintf(ranks_now, sizeof ranks_now, "%lld", (long long)sqlite3_column_int64(st, C_RANKS_NOW));
        *raw_members = xasprintf("\"config\":%s,\"checkpoints\":%.*s,\"resumes\":%.*s,\"restart_count\":%lld,"
                                 "\"attempts\":%.*s,\"attempts_omitted\":%lld,\"earlier_attempts_s\":%.3f,"
                                 "\"ranks_now\":%s,\"sizes\":%s",
                                 cfg ? cfg : "null", (int)n_ckpts, named_ckpts, (int)n_resumes, named_resumes,
                                 (long long)sqlite3_column_int64(st, C_RESTART_COUNT), (int)n_attempts, named_attempts,
                                 (long long)sqlite3_column_int64(st, C_ATTEMPTS_OMITTED),
                                 sqlite3_column_double(st, C_EARLIER_ATTEMPTS_S), ranks_now, sizes ? sizes : "[]");
        free(named_ckpts);
        free(named_resumes);
        free(named_attempts);
    }
    done(st);
    return o;
}

json_t *store_runs_page(const run_filter *f, int limit, int64_t *next_before) {
    sqlite3_stmt *st = stmt(Q_PAGE);
    if (!st) return NULL;
    sqlite3 *db = sqlite3_db_handle(st);
    /* one read transaction: the ids and their rows of the same moment */
    if (sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) return NULL;
    int64_t *ids = xmalloc((size_t)(limit + 1) * sizeof *ids);
    int n = run_list_ids(db, f, limit + 1, ids); /* one more: is there a next page? */
    json_t *runs = n < 0 ? NULL : json_array();
    *next_before = 0;
    for (int i = 0; runs && i < n && i < limit; i++) {
        sqlite3_reset(st);
        sqlite3_bind_int64(st, 1, ids[i]);
        int rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            json_array_append_new(runs, run_row_json(st));
        } else if (rc != SQLITE_DONE) {
            json_decref(runs);
            runs = NULL;
        }
    }
    if (runs && n > limit) *next_before = ids[limit - 1];
    free(ids);
    done(st);
    sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    if (!runs) return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "runs", runs);
    return o;
}

int store_series_range(int64_t id, const char *name, int64_t after, int64_t *first, int64_t *last) {
    sqlite3_stmt *st = stmt(name ? Q_NAMED_RANGE : Q_RANGE);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, after == NO_INT ? INT64_MIN : after);
    if (name) sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    int found = -1;
    if (sqlite3_step(st) == SQLITE_ROW) {
        found = sqlite3_column_type(st, 0) != SQLITE_NULL;
        if (found) {
            *first = sqlite3_column_int64(st, 0);
            *last = sqlite3_column_int64(st, 1);
        }
    }
    done(st);
    return found;
}

int store_series_scan(int64_t id, metric_key key, const char *name, int64_t after, downsampler *d) {
    static const int which[METRIC_COUNT] = {Q_SERIES_LOSS, Q_SERIES_LR, Q_SERIES_SPS};
    sqlite3_stmt *st = stmt(name ? Q_NAMED_SERIES : which[key]);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, after == NO_INT ? INT64_MIN : after);
    if (name) sqlite3_bind_text(st, 3, name, -1, SQLITE_TRANSIENT);
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        ds_add(d, sqlite3_column_int64(st, 0), col_real(st, 1), sqlite3_column_int64(st, 2));
    done(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Whether any step of the run has a throughput. */
static int has_samples_per_s(int64_t id) {
    sqlite3_stmt *st = stmt(Q_SPS_ANY);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, id);
    int rc = sqlite3_step(st);
    done(st);
    return rc == SQLITE_ROW ? 1 : rc == SQLITE_DONE ? 0 : -1;
}

json_t *store_series_keys(int64_t id, bool command) {
    int sps = command ? has_samples_per_s(id) : 1;
    if (sps < 0) return NULL;
    sqlite3_stmt *st = stmt(Q_NAMED_KEYS);
    if (!st) return NULL;
    json_t *a = json_array();
    for (int i = 0; i < METRIC_COUNT; i++)
        if (i != METRIC_SAMPLES_PER_S || sps) json_array_append_new(a, json_string(metric_names[i]));
    char *after = xstrdup("");
    int rc;
    for (;;) {
        sqlite3_bind_int64(st, 1, id);
        sqlite3_bind_text(st, 2, after, -1, SQLITE_TRANSIENT);
        rc = sqlite3_step(st);
        if (rc != SQLITE_ROW) break;
        const char *key = (const char *)sqlite3_column_text(st, 0);
        free(after);
        after = xstrdup(key ? key : "");
        json_array_append_new(a, json_string(after));
        sqlite3_reset(st);
    }
    done(st);
    free(after);
    if (rc != SQLITE_DONE) {
        json_decref(a);
        return NULL;
    }
    return a;
}

int store_attempt_span(int64_t id, int64_t attempt, int rank, int64_t *begin, int64_t *end, int64_t *newest) {
    sqlite3_stmt *st = stmt(Q_ATTEMPT_SPAN);
    if (!st) return -1;
    char member[32];
    snprintf(member, sizeof member, "$.\"%d\"", rank);
    sqlite3_bind_int64(st, 1, id);
    sqlite3_bind_int64(st, 2, attempt);
    sqlite3_bind_text(st, 3, member, -1, SQLITE_TRANSIENT);
    int found = -1;
    if (sqlite3_step(st) == SQLITE_ROW) {
        *newest = sqlite3_column_type(st, 3) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 3);
        *begin = col_int(st, 1);
        *end = sqlite3_column_type(st, 2) == SQLITE_INTEGER ? sqlite3_column_int64(st, 2) : -1;
        found = sqlite3_column_int(st, 0) == 0 ? 0 : sqlite3_column_type(st, 1) != SQLITE_INTEGER ? 2 : 1;
    }
    done(st);
    return found;
}

json_t *store_timeline_json(int64_t id) {
    sqlite3_stmt *st = stmt(Q_TIMELINE);
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, id);
    json_t *a = json_array();
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        char at[32];
        format_iso8601(sqlite3_column_int64(st, 0), at);
        const char *kind = (const char *)sqlite3_column_text(st, 1), *text = (const char *)sqlite3_column_text(st, 2);
        json_t *detail = text ? json_loads(text, 0, NULL) : NULL;
        if (!detail && sqlite3_column_type(st, 4) != SQLITE_NULL)
            detail = json_pack("{s:o, s:I}", "epoch", col_json_int(st, 3), "global_step",
                               (json_int_t)sqlite3_column_int64(st, 4));
        json_array_append_new(a, json_pack("{s:s, s:s, s:o}", "t", at, "kind", kind ? kind : "", "detail",
                                           detail ? detail : json_null()));
    }
    done(st);
    if (rc != SQLITE_DONE) {
        json_decref(a);
        return NULL;
    }
    return a;
}

json_t *store_epochs_json(int64_t id) {
    sqlite3_stmt *st = stmt(Q_EPOCHS);
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, id);
    json_t *a = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) json_array_append_new(a, fields_row_json(&OP_KINDS[OP_EPOCH], st));
    done(st);
    return a;
}

/* A GPU rank's device as the trainer names it ("cuda:N NAME") with the memory its
 * heartbeats report: {"index", "name", "memory_used_bytes", "memory_total_bytes"};
 * null for a CPU rank. */
static json_t *gpu_json(const char *device, sqlite3_stmt *st, int mem_col) {
    int index, name_at = 0;
    if (!device || sscanf(device, "cuda:%d %n", &index, &name_at) < 1) return json_null();
    json_t *g = json_object();
    json_object_set_new(g, "index", json_integer(index));
    json_object_set_new(g, "name", name_at > 0 && device[name_at] ? json_string(device + name_at) : json_null());
    json_object_set_new(g, "memory_used_bytes", col_json_int(st, mem_col));
    json_object_set_new(g, "memory_total_bytes", col_json_int(st, mem_col + 1));
    return g;
}

json_t *store_ranks_json(int64_t id) {
    sqlite3_stmt *st = stmt(Q_RANKS);
    if (!st) return NULL;
    sqlite3_bind_int64(st, 1, id);
    json_t *a = json_array();
    while (sqlite3_step(st) == SQLITE_ROW) {
        json_t *r = json_object();
        json_object_set_new(r, "rank", col_json_int(st, 0));
        json_object_set_new(r, "device", col_json_text(st, 1));
        json_object_set_new(r, "pid", col_json_int(st, 2));
        json_object_set_new(r, "host", col_json_text(st, 3));
        json_object_set_new(r, "state", col_json_text(st, 4));
        json_object_set_new(r, "detail", col_json_text(st, 5));
        json_object_set_new(r, "global_step", col_json_int(st, 6));
        json_object_set_new(r, "step_ms", col_json_real(st, 7));
        json_object_set_new(r, "connected_at", col_json_time(st, 8));
        json_object_set_new(r, "last_seen", col_json_time(st, 9));
        json_object_set_new(r, "gpu", gpu_json((const char *)sqlite3_column_text(st, 1), st, 10));
        json_array_append_new(a, r);
    }
    done(st);
    return a;
}

int store_count_by_status(int64_t counts[RUN_STATUS_COUNT]) {
    for (int i = 0; i < RUN_STATUS_COUNT; i++) counts[i] = 0;
    sqlite3_stmt *st = stmt(Q_BY_STATUS);
    if (!st) return -1;
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        run_status s;
        if (run_status_parse((const char *)sqlite3_column_text(st, 0), &s)) counts[s] = sqlite3_column_int64(st, 1);
    }
    done(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

json_t *store_audit_json(const char *actor, const char *target, int64_t since_ms, int64_t after_id,
                         const char *viewer, int limit, int64_t *next_after) {
    sqlite3_stmt *st = stmt(Q_AUDIT);
    if (!st) return NULL;
    if (actor) sqlite3_bind_text(st, 1, actor, -1, SQLITE_TRANSIENT);
    if (target) sqlite3_bind_text(st, 2, target, -1, SQLITE_TRANSIENT);
    if (since_ms != NO_INT) sqlite3_bind_int64(st, 3, since_ms);
    if (viewer) sqlite3_bind_text(st, 4, viewer, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 5, after_id);
    sqlite3_bind_int(st, 6, limit + 1); /* one more: whether there is a next page */
    json_t *a = json_array();
    int rc, n = 0;
    *next_after = 0;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (n++ == limit) {
            *next_after = json_integer_value(json_object_get(json_array_get(a, json_array_size(a) - 1), "id"));
            break;
        }
        const char *detail = (const char *)sqlite3_column_text(st, 7);
        json_t *d = detail ? json_loads(detail, 0, NULL) : NULL;
        json_t *e = json_pack("{s:I,s:o,s:s,s:s,s:s}", "id", (json_int_t)sqlite3_column_int64(st, 0), "t",
                              json_time(sqlite3_column_int64(st, 1)), "actor", (const char *)sqlite3_column_text(st, 2),
                              "action", (const char *)sqlite3_column_text(st, 3), "target",
                              (const char *)sqlite3_column_text(st, 4));
        json_object_set_new(e, "run", sqlite3_column_type(st, 5) == SQLITE_NULL ? json_null()
                                                                                : json_integer(sqlite3_column_int64(st, 5)));
        json_object_set_new(e, "subject", json_string_or_null((const char *)sqlite3_column_text(st, 6)));
        json_object_set_new(e, "detail", d ? d : json_object());
        json_array_append_new(a, e);
    }
    done(st);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
        json_decref(a);
        return NULL;
    }
    return json_pack("{s:o,s:o}", "entries", a, "next_after", *next_after ? json_integer(*next_after) : json_null());
}

/* A group of GET /usage's answer: its phases (device seconds), held, goodput. */
static json_t *usage_group(json_t *phases) {
    double held = 0, productive = 0;
    const char *k;
    json_t *v;
    json_object_foreach(phases, k, v) {
        if (strcmp(k, "queue") == 0) continue;
        held += json_real_value(v);
        if (strcmp(k, "productive") == 0) productive = json_real_value(v);
    }
    json_t *g = json_object();
    json_object_set_new(g, "held_device_s", json_real(held));
    json_object_set_new(g, "goodput", held > 0 ? json_real(productive / held) : json_null());
    return g;
}

static void usage_phases_init(json_t *phases) {
    static const char *const names[] = {"startup", "productive", "checkpoint", "lost", "idle", "unknown", "queue"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!json_object_get(phases, names[i])) json_object_set_new(phases, names[i], json_real(0));
}

json_t *store_usage_json(const char *from_day, const char *to_day, const char *by) {
    int q = strcmp(by, "run") == 0 ? Q_USAGE_RUN : strcmp(by, "day") == 0 ? Q_USAGE_DAY : Q_USAGE_USER;
    sqlite3_stmt *st = stmt(q);
    if (!st) return NULL;
    sqlite3_bind_text(st, 1, from_day ? from_day : "0000-00-00", -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(st, 2, to_day ? to_day : "9999-99-99", -1, SQLITE_TRANSIENT);
    json_t *groups = json_array(), *box = json_object(), *cur = NULL;
    char key[160] = "";
    int rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *owner = (const char *)sqlite3_column_text(st, 0), *phase = (const char *)sqlite3_column_text(st, 1);
        double s = (double)sqlite3_column_int64(st, 2) / 1000.0;
        char k[160];
        if (q == Q_USAGE_RUN) snprintf(k, sizeof k, "%lld", (long long)sqlite3_column_int64(st, 3));
        else if (q == Q_USAGE_DAY) snprintf(k, sizeof k, "%s/%s", (const char *)sqlite3_column_text(st, 3), owner);
        else snprintf(k, sizeof k, "%s", owner);
        if (!cur || strcmp(k, key) != 0) {
            snprintf(key, sizeof key, "%s", k);
            cur = json_pack("{s:o,s:o}", "user", *owner ? json_string(owner) : json_null(), "phases", json_object());
            if (q == Q_USAGE_RUN) {
                json_object_set_new(cur, "run", json_integer(sqlite3_column_int64(st, 3)));
                json_object_set_new(cur, "lost_steps", json_integer(sqlite3_column_int64(st, 4)));
            }
            if (q == Q_USAGE_DAY) json_object_set_new(cur, "day", json_string((const char *)sqlite3_column_text(st, 3)));
            json_array_append_new(groups, cur);
        }
        json_t *phases = json_object_get(cur, "phases");
        json_object_set_new(phases, phase, json_real(json_real_value(json_object_get(phases, phase)) + s));
        json_object_set_new(box, phase, json_real(json_real_value(json_object_get(box, phase)) + s));
    }
    done(st);
    if (rc != SQLITE_DONE) {
        json_decref(groups);
        json_decref(box);
        return NULL;
    }
    size_t i;
    json_t *g;
    json_array_foreach(groups, i, g) {
        json_t *phases = json_object_get(g, "phases");
        usage_phases_init(phases);
        json_object_update_missing_new(g, usage_group(phases));
    }
    usage_phases_init(box);
    json_t *total = usage_group(box);
    json_object_set_new(total, "phases", box);
    /* what preemptions threw away, charged to who caused them (their `lost` above) */
    json_t *charged = json_array();
    st = stmt(Q_USAGE_CHARGED);
    if (st) {
        sqlite3_bind_text(st, 1, from_day ? from_day : "0000-00-00", -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, to_day ? to_day : "9999-99-99", -1, SQLITE_TRANSIENT);
        while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
            const char *owner = (const char *)sqlite3_column_text(st, 1), *by = (const char *)sqlite3_column_text(st, 4);
            json_array_append_new(
                charged, json_pack("{s:I,s:o,s:s,s:I,s:o,s:f}", "run", (json_int_t)sqlite3_column_int64(st, 0), "user",
                                   *owner ? json_string(owner) : json_null(), "phase",
                                   (const char *)sqlite3_column_text(st, 2), "by_run",
                                   (json_int_t)sqlite3_column_int64(st, 3), "by_user", *by ? json_string(by) : json_null(),
                                   "device_s", (double)sqlite3_column_int64(st, 5) / 1000.0));
        }
        done(st);
    }
    if (!st || rc != SQLITE_DONE) {
        json_decref(groups);
        json_decref(total);
        json_decref(charged);
        return NULL;
    }
    return json_pack("{s:s,s:o,s:o,s:o}", "by", q == Q_USAGE_RUN ? "run" : q == Q_USAGE_DAY ? "day" : "user", "groups",
                     groups, "box", total, "charged", charged);
}
