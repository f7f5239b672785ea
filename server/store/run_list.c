/* Which runs a page of GET /runs holds, each filter through an index: see run_list.h. */
#include "run_list.h"

#include <sqlite3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

void run_filter_init(run_filter *f) {
    memset(f, 0, sizeof *f);
    f->since_ms = INT64_MIN;
    f->until_ms = INT64_MAX;
}

/* What the statements of one filter are bound to. */
typedef struct {
    int64_t lo, hi;   /* ids: lo <= id < hi */
    bool empty;       /* no run can pass (a window after the newest run) */
    char *name_hi;    /* the first text past every name with the prefix */
    bool name_drives; /* few runs have the prefix: its range drives the page */
} bounds;

static void log_sql(sqlite3 *db, const char *sql) {
    log_error("GET /runs: \"%s\": %s", sql, sqlite3_errmsg(db));
}

static void bind_named_text(sqlite3_stmt *st, const char *name, const char *v) {
    int i = sqlite3_bind_parameter_index(st, name);
    if (i) sqlite3_bind_text(st, i, v, -1, SQLITE_TRANSIENT);
}
static void bind_named_int(sqlite3_stmt *st, const char *name, int64_t v) {
    int i = sqlite3_bind_parameter_index(st, name);
    if (i) sqlite3_bind_int64(st, i, v);
}

/* Binds every parameter a statement of this filter may hold (those it lacks are
 * skipped); `status`: this arm's, else NULL. */
static void bind_all(sqlite3_stmt *st, const run_filter *f, const bounds *b, const char *status, int max) {
    bind_named_int(st, ":lo", b->lo);
    bind_named_int(st, ":hi", b->hi);
    bind_named_int(st, ":n", max);
    bind_named_int(st, ":few", RUN_LIST_NAME_FEW);
    bind_named_int(st, ":sweep", f->sweep_id);
    if (f->owner) bind_named_text(st, ":owner", f->owner);
    if (f->name_prefix) bind_named_text(st, ":np", f->name_prefix);
    if (b->name_hi) bind_named_text(st, ":nq", b->name_hi);
    if (status) bind_named_text(st, ":status", status);
    for (int i = 0; i < f->n_statuses; i++) {
        char p[8];
        snprintf(p, sizeof p, ":s%d", i);
        bind_named_text(st, p, f->statuses[i]);
    }
}

/* Runs `sql` (one integer column) into ids (at most max); the count, or -1. With
 * `plans`, its EXPLAIN QUERY PLAN is appended there instead, and 0 returned. */
static int run_ids(sqlite3 *db, const char *sql, const run_filter *f, const bounds *b, const char *status, int max,
                   int64_t *ids, buf_t *plans) {
    char *text = plans ? xasprintf("EXPLAIN QUERY PLAN %s", sql) : xstrdup(sql);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, text, -1, &st, NULL) != SQLITE_OK) {
        log_sql(db, text);
        free(text);
        return -1;
    }
    free(text);
    bind_all(st, f, b, status, max);
    int n = 0, rc;
    if (plans) buf_printf(plans, "sql: %s\n", sql);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (plans) buf_printf(plans, "plan: %s\n", (const char *)sqlite3_column_text(st, 3));
        else if (n < max) ids[n++] = sqlite3_column_int64(st, 0);
    }
    if (rc != SQLITE_DONE) log_sql(db, sql);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}

/* The first id created at or after t (one seek into runs_by_created); 0: none. */
static const char *const FIRST_AT_SQL =
    "SELECT id FROM runs INDEXED BY runs_by_created WHERE created_at >= :t ORDER BY created_at, id LIMIT 1";

static int first_at(sqlite3 *db, int64_t t, int64_t *id, buf_t *plans) {
    sqlite3_stmt *st = NULL;
    char *text = plans ? xasprintf("EXPLAIN QUERY PLAN %s", FIRST_AT_SQL) : xstrdup(FIRST_AT_SQL);
    int rc = sqlite3_prepare_v2(db, text, -1, &st, NULL);
    free(text);
    if (rc != SQLITE_OK) {
        log_sql(db, FIRST_AT_SQL);
        return -1;
    }
    bind_named_int(st, ":t", t);
    *id = 0;
    if (plans) buf_printf(plans, "sql: %s\n", FIRST_AT_SQL);
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        if (plans) buf_printf(plans, "plan: %s\n", (const char *)sqlite3_column_text(st, 3));
        else *id = sqlite3_column_int64(st, 0);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_DONE) log_sql(db, FIRST_AT_SQL);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* The ids a window and the cursor leave, and whether the name prefix drives. */
static int make_bounds(sqlite3 *db, const run_filter *f, bounds *b, buf_t *plans) {
    memset(b, 0, sizeof *b);
    b->lo = 1;
    b->hi = f->before > 0 ? f->before : INT64_MAX;
    int64_t id;
    if (f->since_ms != INT64_MIN) {
        if (first_at(db, f->since_ms, &id, plans) != 0) return -1;
        if (id) b->lo = id;
        else if (!plans) b->empty = true; /* nothing created since */
    }
    if (f->until_ms != INT64_MAX) {
        if (first_at(db, f->until_ms, &id, plans) != 0) return -1;
        if (id && id < b->hi) b->hi = id;
    }
    if (b->lo >= b->hi && !plans) b->empty = true;
    if (f->name_prefix && *f->name_prefix) {
        /* every name with the prefix sorts below prefix + 0xFF (no UTF-8 byte is) */
        b->name_hi = xasprintf("%s\xff", f->name_prefix);
        const char *sql = "SELECT count(*) FROM (SELECT 1 FROM runs INDEXED BY runs_by_name"
                          " WHERE name >= :np AND name < :nq AND id >= :lo AND id < :hi LIMIT :few)";
        int64_t count = 0;
        if (run_ids(db, sql, f, b, NULL, 1, &count, plans) < 0) return -1;
        b->name_drives = plans || count < RUN_LIST_NAME_FEW;
    }
    return 0;
}

/* The statement of the page (of one status, for a status arm), for the driver chosen. */
static char *page_sql(const run_filter *f, const bounds *b, bool arms, bool name_driver) {
    bool name = f->name_prefix && *f->name_prefix;
    const char *index;
    buf_t w = {0};
    if (name_driver) {
        index = "INDEXED BY runs_by_name";
        buf_printf(&w, "name >= :np AND name < :nq");
    } else if (f->sweep_id) {
        index = "INDEXED BY runs_by_sweep_id";
        buf_printf(&w, "sweep_id = :sweep");
    } else if (f->owner) {
        index = arms ? "INDEXED BY runs_by_owner_status" : "INDEXED BY runs_by_owner";
        buf_printf(&w, arms ? "owner = :owner AND status = :status" : "owner = :owner");
    } else if (arms) {
        index = "INDEXED BY runs_by_status";
        buf_printf(&w, "status = :status");
    } else {
        index = "NOT INDEXED"; /* the primary key: ids from the cursor down */
        buf_printf(&w, "1");
    }
    buf_printf(&w, " AND id >= :lo AND id < :hi");
    /* the other filters, checked on the rows the driver reads */
    if (f->sweep_id && (name_driver)) buf_printf(&w, " AND sweep_id = :sweep");
    if (f->owner && (name_driver || f->sweep_id)) buf_printf(&w, " AND owner = :owner");
    if (f->n_statuses && !arms) {
        buf_printf(&w, " AND status IN (");
        for (int i = 0; i < f->n_statuses; i++) buf_printf(&w, "%s:s%d", i ? ", " : "", i);
        buf_printf(&w, ")");
    }
    if (name && !name_driver) buf_printf(&w, " AND name >= :np AND name < :nq");
    (void)b;
    char *sql = xasprintf("SELECT id FROM runs %s WHERE %s ORDER BY id DESC LIMIT :n", index, w.data);
    buf_free(&w);
    return sql;
}

static int list(sqlite3 *db, const run_filter *f, int max, int64_t *ids, buf_t *plans) {
    bounds b;
    int rc = make_bounds(db, f, &b, plans);
    if (rc != 0 || b.empty) {
        free(b.name_hi);
        return rc != 0 ? -1 : 0;
    }
    /* statuses as arms of their own (each a range in id order, merged here) where an
     * index leads with them: alone, or after the owner */
    bool arms = f->n_statuses > 0 && !b.name_drives && !f->sweep_id;
    char *sql = page_sql(f, &b, arms, b.name_drives);
    int n = 0;
    if (!arms) {
        n = run_ids(db, sql, f, &b, NULL, max, ids, plans);
    } else {
        int64_t *got = xmalloc((size_t)(max > 0 ? max : 1) * sizeof *got);
        for (int i = 0; i < f->n_statuses && n >= 0; i++) {
            int k = run_ids(db, sql, f, &b, f->statuses[i], max, got, plans);
            if (k < 0) {
                n = -1;
                break;
            }
            /* merge the arm's ids (newest first) into ids[0..n) (newest first), keeping max */
            int64_t *merged = xmalloc((size_t)(n + k > 0 ? n + k : 1) * sizeof *merged);
            int a = 0, c = 0, m = 0;
            while ((a < n || c < k) && m < max) {
                if (c >= k || (a < n && ids[a] > got[c])) merged[m++] = ids[a++];
                else merged[m++] = got[c++];
            }
            memcpy(ids, merged, (size_t)m * sizeof *ids);
            free(merged);
            n = m;
        }
        free(got);
    }
    free(sql);
    free(b.name_hi);
    return plans ? (n < 0 ? -1 : 0) : n;
}

int run_list_ids(sqlite3 *db, const run_filter *f, int max, int64_t *ids) { return list(db, f, max, ids, NULL); }

int run_list_plans(sqlite3 *db, const run_filter *f, int max, buf_t *out) {
    int64_t *ids = xmalloc((size_t)(max > 0 ? max : 1) * sizeof *ids);
    int rc = list(db, f, max, ids, out);
    free(ids);
    if (rc < 0) return -1;
    /* the other plan a name prefix may take (many runs have it): the next driver's */
    if (f->name_prefix && *f->name_prefix) {
        bounds b;
        if (make_bounds(db, f, &b, NULL) != 0) return -1;
        b.lo = 1;
        b.hi = INT64_MAX;
        bool arms = f->n_statuses > 0 && !f->sweep_id;
        char *sql = page_sql(f, &b, arms, false);
        int64_t one;
        rc = run_ids(db, sql, f, &b, arms ? f->statuses[0] : NULL, 1, &one, out);
        free(sql);
        free(b.name_hi);
        if (rc < 0) return -1;
    }
    return 0;
}
