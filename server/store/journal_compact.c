/* Compacting a finished run's journal once the database holds it: see journal_compact.h. */
#include "journal_compact.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base.h"
#include "buf.h"
#include "event_kinds.h"
#include "ids.h"
#include "journal_writers.h"
#include "line_reader.h"
#include "run_dir.h"
#include "run_files.h"
#include "run_status.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

#define MAX_LINE (16 << 20) /* as the replay's: a longer line is no event */
#define BATCH 64            /* rows taken per look at the table */
#define IDLE_S 2            /* between looks when nothing woke the thread */
#define SLOT 15             /* this thread's statement of store_read_extra */

static bool stopping;
static pthread_t thread;
static bool running;

/* ---- one journal ---- */

/* For the crash tests (DDPD_TEST_CRASH_AT): the server is killed at that point. */
static void crash_point(const char *name) {
    const char *at = getenv("DDPD_TEST_CRASH_AT");
    if (at && strcmp(at, name) == 0) {
        log_warn("DDPD_TEST_CRASH_AT=%s: killed here", name);
        raise(SIGKILL);
    }
}

/* Does the store hold this event of `rank`, journaled at t? (journal_replay.c's rule) */
static bool stored(const rank_seen *seen, int n_seen, int64_t rank, int64_t t) {
    for (int i = 0; i < n_seen; i++)
        if (seen[i].rank == rank) return t != NO_INT && t < seen[i].last_seen;
    return false;
}

/* An event the database holds in full: a step or a heartbeat of this run that the
 * store has by the replay's rule. */
static bool droppable(const json_t *ev, int64_t run_id, const rank_seen *seen, int n_seen) {
    if (!json_is_object(ev)) return false;
    const char *type = json_string_value(json_object_get(ev, "type"));
    const json_t *run = json_object_get(ev, "run");
    int64_t id, rank = event_int(ev, "rank"), t = event_int(ev, "t");
    bool ours = json_is_integer(run) ? json_integer_value(run) == run_id
                                     : json_is_string(run) && parse_run_id(json_string_value(run), &id) && id == run_id;
    const op_kind_desc *d = type ? op_kind_for_event(type) : NULL;
    if (!ours || !d || rank == NO_INT || !stored(seen, n_seen, rank, t)) return false;
    if (d->kind == OP_STEP || d->kind == OP_HEARTBEAT) return true;
    if (d->kind != OP_METRIC) return false;
    store_op op = {.kind = d->kind, .run_id = run_id, .rank = (int)rank, .t = t};
    bool bulk = d->parse(ev, &op) == 0 && (op.kind == OP_STEP || op.kind == OP_HEARTBEAT);
    store_op_free(&op);
    return bulk;
}

/* A line may be one event or an array of them: dropped when every one is droppable.
 * The ranks of a dropped line into ranks (at most RANKS_MAX, *n_ranks). */
#define RANKS_MAX 8
static bool line_droppable(const char *line, size_t len, int64_t run_id, const rank_seen *seen, int n_seen,
                           int64_t ranks[RANKS_MAX], int *n_ranks) {
    *n_ranks = 0;
    while (len && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) len--;
    if (!len) return true; /* an empty line: nothing */
    json_t *doc = json_loadb(line, len, 0, NULL);
    if (!doc) return false; /* not an event: kept as it is */
    bool drop = true;
    size_t n = json_is_array(doc) ? json_array_size(doc) : 1;
    for (size_t i = 0; drop && i < n; i++) {
        const json_t *ev = json_is_array(doc) ? json_array_get(doc, i) : doc;
        drop = droppable(ev, run_id, seen, n_seen);
        int64_t r = event_int(ev, "rank");
        bool known = false;
        for (int k = 0; k < *n_ranks; k++) known = known || ranks[k] == r;
        if (drop && !known) {
            if (*n_ranks == RANKS_MAX) drop = false; /* a line of many ranks: kept */
            else ranks[(*n_ranks)++] = r;
        }
    }
    json_decref(doc);
    return drop && n > 0;
}

/* The last dropped line of each rank, kept after all (where its journal ends, its last
 * loss: what a rebuild shows of its progress), at its place among the kept lines. */
typedef struct {
    int64_t rank;
    int64_t line_no; /* which line: one line may be the last of several ranks */
    size_t at;       /* its place: the kept bytes before it */
    char *text;
    size_t len;
} last_line;

#define LAST_MAX 4096 /* ranks whose last line is kept: a journal of more keeps only theirs */
static void note_last(last_line **v, int *n, int64_t rank, int64_t line_no, size_t at, const char *text, size_t len) {
    int i = 0;
    while (i < *n && (*v)[i].rank != rank) i++;
    if (i == *n && *n == LAST_MAX) return;
    if (i == *n) {
        *v = xrealloc(*v, (size_t)(*n + 1) * sizeof **v);
        (*v)[(*n)++] = (last_line){.rank = rank};
    } else {
        free((*v)[i].text);
    }
    (*v)[i].line_no = line_no;
    (*v)[i].at = at;
    (*v)[i].text = xmalloc(len);
    memcpy((*v)[i].text, text, len);
    (*v)[i].len = len;
}

static int by_line(const void *a, const void *b) {
    const last_line *x = a, *y = b;
    return x->line_no < y->line_no ? -1 : x->line_no > y->line_no;
}

/* The kept bytes with each rank's last dropped line put back in its place (v sorted
 * by line, as the caller counted them). */
static void put_back(buf_t *kept, const last_line *v, int n) {
    if (!n) return;
    buf_t out = {0};
    size_t from = 0;
    for (int i = 0; i < n; i++) {
        if (i > 0 && v[i].line_no == v[i - 1].line_no) continue; /* the last of two ranks */
        buf_append(&out, kept->data + from, v[i].at - from);
        buf_append(&out, v[i].text, v[i].len);
        from = v[i].at;
    }
    buf_append(&out, kept->data ? kept->data + from : "", kept->len - from);
    buf_free(kept);
    *kept = out;
}

/* The run's status in the database is final: 1, 0 it is not (or no such run: *gone), -1 error. */
static int is_final(int64_t id, bool *gone) {
    run_brief b;
    int f = store_get_brief(id, &b);
    *gone = f == 0;
    return f < 0 ? -1 : f == 1 && run_status_is_final(b.status);
}

static compact_outcome refused(int64_t id, const char *why) {
    log_warn("run %lld: its journal is left as it is: %s", (long long)id, why);
    return COMPACT_REFUSED;
}

compact_outcome journal_compact_run(int64_t id, compact_counts *out) {
    compact_counts c = {0};
    if (out) *out = c;
    bool gone;
    int f = is_final(id, &gone);
    if (f < 0) return COMPACT_ERROR;
    if (gone) return COMPACT_DONE;
    if (!f) return COMPACT_LATER;
    rank_seen *seen = NULL;
    int n_seen = store_ranks_last_seen(id, &seen);
    if (n_seen < 0) return COMPACT_ERROR;

    char *dir = layout_run_dir(id), why[768];
    run_dir d;
    compact_outcome res = COMPACT_ERROR;
    int fd = -1;
    struct stat st;
    line_reader lr = {0};
    buf_t kept = {0};
    last_line *last = NULL;
    int n_last = 0;
    if (run_dir_open(&d, dir, why, sizeof why) != 0) {
        res = errno == ENOENT ? COMPACT_DONE : run_file_planted(errno) ? refused(id, why) : COMPACT_ERROR;
        if (res == COMPACT_ERROR) log_warn("run %lld: its journal is not compacted now: %s", (long long)id, why);
        free(dir);
        free(seen);
        return res;
    }
    fd = run_file_open(&d, RUN_DIR_JOURNAL, RUN_FILE_ANY_SIZE, &st, why, sizeof why);
    if (fd < 0) {
        res = errno == ENOENT ? COMPACT_DONE : run_file_planted(errno) ? refused(id, why) : COMPACT_ERROR;
        if (res == COMPACT_ERROR) log_warn("run %lld: its journal is not compacted now: %s", (long long)id, why);
        goto done;
    }
    c.bytes_before = c.bytes_after = st.st_size;
    line_reader_init(&lr, fd, 0, MAX_LINE);
    const char *line;
    size_t n;
    int rc;
    int64_t line_no = 0, ranks[RANKS_MAX];
    int n_ranks;
    while ((rc = line_reader_next(&lr, &line, &n, NULL)) == 1) {
        line_no++;
        if (line_droppable(line, n, id, seen, n_seen, ranks, &n_ranks)) {
            for (int k = 0; k < n_ranks; k++) note_last(&last, &n_last, ranks[k], line_no, kept.len, line, n);
            c.lines_dropped++;
            continue;
        }
        if (kept.len + n > JOURNAL_COMPACT_MAX_KEPT) {
            snprintf(why, sizeof why, "what it would keep is over %d MiB", JOURNAL_COMPACT_MAX_KEPT >> 20);
            res = refused(id, why);
            goto done;
        }
        buf_append(&kept, line, n);
    }
    if (rc < 0) {
        log_warn("run %lld: its journal is not compacted now: reading it: %s", (long long)id, strerror(errno));
        goto done;
    }
    c.lines_dropped += lr.skipped_lines; /* over MAX_LINE: no event (the replay skips them too) */
    if (n_last > 1) qsort(last, (size_t)n_last, sizeof *last, by_line); /* (none: last is NULL) */
    for (int i = 0; i < n_last; i++) /* put back below: not dropped after all */
        if (i == 0 || last[i].line_no != last[i - 1].line_no) c.lines_dropped--;
    /* a last line without its newline: kept as it is, torn */
    int64_t rest = lr.read_to > lr.consumed ? lr.read_to - lr.consumed : 0;
    if (rest > 0 && kept.len + (size_t)rest <= JOURNAL_COMPACT_MAX_KEPT) {
        buf_reserve(&kept, (size_t)rest);
        ssize_t r = pread(fd, kept.data + kept.len, (size_t)rest, lr.consumed);
        if (r != rest) {
            log_warn("run %lld: its journal is not compacted now: reading its last line failed", (long long)id);
            goto done;
        }
        kept.len += (size_t)rest;
    }
    if (c.lines_dropped <= 0) { /* compact already */
        res = COMPACT_DONE;
        c.lines_dropped = 0;
        goto done;
    }
    put_back(&kept, last, n_last);

    /* the rewrite: never while the run may have a writer (journal_compact.h) */
    journal_writers_lock();
    struct stat now;
    f = is_final(id, &gone);
    if (f < 0) res = COMPACT_ERROR;
    else if (gone) res = COMPACT_DONE;
    else if (!f || journal_writers_has(id)) res = COMPACT_LATER;
    else if (fstat(fd, &now) != 0 || now.st_size != lr.read_to || now.st_size != st.st_size) res = COMPACT_LATER;
    else {
        crash_point("journal-before-swap");
        if (run_file_write(&d, RUN_DIR_JOURNAL, kept.data ? kept.data : "", kept.len, 0600, why, sizeof why) == 0) {
            res = COMPACT_DONE;
            c.bytes_after = (int64_t)kept.len;
        } else {
            log_warn("run %lld: its journal is not compacted now: %s", (long long)id, why);
        }
    }
    journal_writers_unlock();
    if (res == COMPACT_DONE) crash_point("journal-after-swap");

done:
    if (out) *out = c;
    for (int i = 0; i < n_last; i++) free(last[i].text);
    free(last);
    line_reader_free(&lr);
    buf_free(&kept);
    if (fd >= 0) close(fd);
    run_dir_close(&d);
    free(dir);
    free(seen);
    return res;
}

/* ---- the thread ---- */

static const char *const TODO_SQL = "SELECT run_id FROM journal_compact WHERE run_id > ?1 ORDER BY run_id LIMIT ?2";

/* The next rows after `after`: their count into ids (at most BATCH), or -1. */
static int take_rows(int64_t after, int64_t ids[BATCH]) {
    sqlite3_stmt *st = store_read_extra(SLOT, TODO_SQL);
    if (!st) return -1;
    sqlite3_bind_int64(st, 1, after);
    sqlite3_bind_int(st, 2, BATCH);
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW && n < BATCH) ids[n++] = sqlite3_column_int64(st, 0);
    sqlite3_reset(st);
    return rc == SQLITE_ROW || rc == SQLITE_DONE ? n : -1;
}

/* One pass over the table: each row compacted, and deleted once done. Whether a
 * row is left to try again. */
static bool pass(void) {
    int64_t after = 0, ids[BATCH];
    bool left = false;
    for (;;) {
        int n = take_rows(after, ids);
        if (n <= 0) {
            store_read_release(); /* no connection kept between passes */
            return left || n < 0;
        }
        for (int i = 0; i < n; i++) {
            journal_writers_lock();
            bool stop = stopping;
            journal_writers_unlock();
            if (stop) {
                store_read_release();
                return false;
            }
            compact_counts c;
            compact_outcome o = journal_compact_run(ids[i], &c);
            if (o == COMPACT_DONE && c.bytes_before != c.bytes_after)
                log_info("run %lld: its journal compacted, %lld bytes to %lld (%lld lines the database holds)",
                         (long long)ids[i], (long long)c.bytes_before, (long long)c.bytes_after,
                         (long long)c.lines_dropped);
            if (o == COMPACT_DONE || o == COMPACT_REFUSED) {
                store_op op = {.kind = OP_JOURNAL_COMPACTED, .run_id = ids[i], .t = now_ms()};
                store_submit_now(&op);
            } else {
                left = true;
            }
            after = ids[i];
        }
    }
}

static void *compact_main(void *arg) {
    (void)arg;
    for (;;) {
        bool left = pass();
        journal_writers_lock();
        bool woken = !stopping && journal_writers_wait(left ? IDLE_S * 5 : IDLE_S);
        bool stop = stopping;
        journal_writers_unlock();
        if (stop) break;
        /* woken by a final status in the writer's transaction: its row once committed */
        if (woken) store_sync();
    }
    store_read_release();
    return NULL;
}

int journal_compact_start(void) {
    if (running) return 0;
    stopping = false;
    if (pthread_create(&thread, NULL, compact_main, NULL) != 0) return -1;
    running = true;
    return 0;
}

void journal_compact_stop(void) {
    if (!running) return;
    journal_writers_lock();
    stopping = true;
    journal_writers_unlock();
    journal_writers_wake();
    pthread_join(thread, NULL);
    running = false;
}
