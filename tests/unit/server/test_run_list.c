/* Unit tests of GET /runs's statements (server/store/run_list.c) on a real SQLite
 * file with every migration applied and 3,000 runs of 4 owners, 7 statuses, a few
 * names and sweeps, over a span of time:
 *
 *  - plans: for every combination of the filters (statuses, owner, name prefix,
 *    sweep, since, until, cursor), each statement's EXPLAIN QUERY PLAN reads runs
 *    only through an index (SEARCH ...), never a SCAN of the table or a whole index,
 *    and sorts (a temp B-tree) only when a name prefix drives the page;
 *  - answers: the same combinations, paged through to the end with the cursor, give
 *    exactly the ids of the plain statement (every filter in one WHERE, ORDER BY id
 *    DESC) that SQLite answers by reading the whole table;
 *  - creation times: the store keeps them from going back as ids go up (a clock
 *    stepped back), and migration 0019 makes a history from before so. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "buf.h"
#include "check.h"
#include "migrate.h"
#include "migrations.h"
#include "run_list.h"
#include "scratch_dir.h"

#define RUNS 3000
#define T0 1700000000000LL

static const char *const OWNERS[] = {"alice", "bob", "carol", "dave"};
static const char *const NAMES[] = {"mnist-small", "mnist-large", "resnet", "rare-one"};

static void exec(sqlite3 *db, const char *sql) {
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    REQUIRE(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : "?");
}

/* Run i's owner, status, name, sweep, created_at. */
static void fill(sqlite3 *db) {
    exec(db, "BEGIN");
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, "INSERT INTO runs (name, status, config, world_size, device_kind, created_at, owner,"
                                   " sweep_id, trial) VALUES (?1, ?2, '{}', 1, 'cpu', ?3, ?4, ?5, ?6)",
                               -1, &st, NULL) == SQLITE_OK,
            "insert prepared: %s", sqlite3_errmsg(db));
    for (int i = 1; i <= RUNS; i++) {
        /* a rare name (every 500th), a rare status (canceling: every 97th), most succeeded */
        const char *name = i % 500 == 0 ? NAMES[3] : NAMES[i % 3];
        const char *status = i % 97 == 0 ? "canceling" : i % 11 == 0 ? "failed" : i % 13 == 0 ? "queued"
                             : i % 17 == 0 ? "running" : "succeeded";
        char full[64];
        snprintf(full, sizeof full, "%s-%d", name, i);
        sqlite3_bind_text(st, 1, full, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 2, status, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, T0 + (int64_t)i * 1000);
        if (i % 7 == 3) sqlite3_bind_null(st, 4);
        else sqlite3_bind_text(st, 4, OWNERS[i % 4], -1, SQLITE_STATIC);
        if (i % 10 == 0) {
            sqlite3_bind_int64(st, 5, 1 + (i / 10) % 3);
            sqlite3_bind_int(st, 6, i);
        } else {
            sqlite3_bind_null(st, 5);
            sqlite3_bind_null(st, 6);
        }
        REQUIRE(sqlite3_step(st) == SQLITE_DONE, "insert %d: %s", i, sqlite3_errmsg(db));
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    exec(db, "COMMIT");
}

/* The plain answer: every filter in one WHERE (SQLite reads the whole table). */
static int reference(sqlite3 *db, const run_filter *f, int max, int64_t *ids) {
    buf_t w = {0};
    buf_printf(&w, "SELECT id FROM runs NOT INDEXED WHERE 1");
    if (f->n_statuses) {
        buf_printf(&w, " AND status IN (");
        for (int i = 0; i < f->n_statuses; i++) buf_printf(&w, "%s'%s'", i ? "," : "", f->statuses[i]);
        buf_printf(&w, ")");
    }
    if (f->owner) buf_printf(&w, " AND owner = '%s'", f->owner);
    if (f->name_prefix) buf_printf(&w, " AND substr(name, 1, %zu) = '%s'", strlen(f->name_prefix), f->name_prefix);
    if (f->sweep_id) buf_printf(&w, " AND sweep_id = %lld", (long long)f->sweep_id);
    if (f->since_ms != INT64_MIN) buf_printf(&w, " AND created_at >= %lld", (long long)f->since_ms);
    if (f->until_ms != INT64_MAX) buf_printf(&w, " AND created_at < %lld", (long long)f->until_ms);
    if (f->before) buf_printf(&w, " AND id < %lld", (long long)f->before);
    buf_printf(&w, " ORDER BY id DESC LIMIT %d", max);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, w.data, -1, &st, NULL) == SQLITE_OK, "%s: %s", w.data, sqlite3_errmsg(db));
    int n = 0;
    while (sqlite3_step(st) == SQLITE_ROW) ids[n++] = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    buf_free(&w);
    return n;
}

static void describe(const run_filter *f, char *out, size_t len) {
    buf_t b = {0};
    for (int i = 0; i < f->n_statuses; i++) buf_printf(&b, "%sstatus=%s", i ? "," : "", f->statuses[i]);
    if (f->owner) buf_printf(&b, " owner=%s", f->owner);
    if (f->name_prefix) buf_printf(&b, " name=%s", f->name_prefix);
    if (f->sweep_id) buf_printf(&b, " sweep=%lld", (long long)f->sweep_id);
    if (f->since_ms != INT64_MIN) buf_printf(&b, " since=+%llds", (long long)(f->since_ms - T0) / 1000);
    if (f->until_ms != INT64_MAX) buf_printf(&b, " until=+%llds", (long long)(f->until_ms - T0) / 1000);
    if (f->before) buf_printf(&b, " before=%lld", (long long)f->before);
    snprintf(out, len, "[%s]", b.data ? b.data : "all");
    buf_free(&b);
}

/* Every plan line reads runs through an index; a sort only where a name drives. */
static void check_plans(sqlite3 *db, const run_filter *f) {
    char what[256];
    describe(f, what, sizeof what);
    buf_t p = {0};
    REQUIRE(run_list_plans(db, f, 51, &p) == 0, "%s: plans made", what);
    int searches = 0;
    const char *sql = "";
    for (char *line = p.data, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl) *nl = '\0';
        if (strncmp(line, "sql: ", 5) == 0) {
            sql = line + 5;
            continue;
        }
        const char *detail = line + 6;
        if (strstr(detail, "SCAN runs")) { /* a subquery's own rows (SCAN (subquery-N)) are no read of runs */
            CHECK(false, "%s: a scan in the plan of \"%s\": %s", what, sql, detail);
        } else if (strstr(detail, "TEMP B-TREE")) {
            CHECK(strstr(sql, "INDEXED BY runs_by_name") != NULL, "%s: a sort where no name prefix drives (\"%s\"): %s",
                  what, sql, detail);
        } else if (strstr(detail, "SEARCH runs")) {
            searches++;
            CHECK(strstr(detail, "INDEX") || strstr(detail, "INTEGER PRIMARY KEY"),
                  "%s: a search of runs without an index: %s", what, detail);
            /* the primary key's range (ids from the cursor down, every run in it read)
             * drives only where no filter has an index of its own to seek */
            CHECK(!strstr(detail, "INTEGER PRIMARY KEY") || !(f->n_statuses || f->owner || f->sweep_id),
                  "%s: the statuses, owner or sweep are not sought in their index (\"%s\"): %s", what, sql, detail);
        }
    }
    CHECK(searches > 0, "%s: every statement's plan searches runs: %s", what, p.data ? p.data : "");
    buf_free(&p);
}

/* Paged through to the end with the cursor, pages of 7: the reference's ids. */
static void check_answers(sqlite3 *db, const run_filter *given) {
    char what[256];
    describe(given, what, sizeof what);
    run_filter f = *given;
    int64_t *want = xmalloc(RUNS * sizeof *want), *got = xmalloc(RUNS * sizeof *got), page[8];
    int n_want = reference(db, &f, RUNS, want), n_got = 0;
    for (int pages = 0; pages < RUNS; pages++) {
        int k = run_list_ids(db, &f, 8, page);
        REQUIRE(k >= 0, "%s: a page read", what);
        for (int i = 0; i < k && i < 7; i++) got[n_got++] = page[i];
        if (k < 8) break;
        f.before = page[6]; /* the next page: below the last shown */
    }
    bool same = n_got == n_want;
    for (int i = 0; same && i < n_got; i++) same = got[i] == want[i];
    CHECK(same, "%s: %d ids paged through vs %d by the plain statement (first %lld vs %lld)", what, n_got, n_want,
          (long long)(n_got ? got[0] : 0), (long long)(n_want ? want[0] : 0));
    free(want);
    free(got);
}

int main(void) {
    char *dir = scratch_dir_make("run-list");
    REQUIRE(dir, "scratch dir");
    char *path = xasprintf("%s/ddpd.db", dir);
    sqlite3 *db;
    REQUIRE(sqlite3_open(path, &db) == SQLITE_OK, "open");
    char err[512];
    REQUIRE(migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err) == ddpd_migrations_count, "migrated: %s", err);
    fill(db);

    /* every combination: statuses (none, a rare one, two), owner, name prefix
     * (common, rare), sweep, a window (since, until, both), a cursor */
    static const char *const status_sets[][3] = {{NULL}, {"canceling"}, {"failed", "queued"}, {"succeeded"}};
    const char *owners[] = {NULL, "bob"};
    const char *names[] = {NULL, "mnist-", "rare-one"};
    int64_t sweeps[] = {0, 2};
    int64_t sinces[] = {INT64_MIN, T0 + 2500 * 1000LL};
    int64_t untils[] = {INT64_MAX, T0 + 400 * 1000LL};
    int64_t befores[] = {0, 1501};
    int combos = 0;
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t c = 0; c < 3; c++)
                for (size_t d = 0; d < 2; d++)
                    for (size_t e = 0; e < 2; e++)
                        for (size_t g = 0; g < 2; g++)
                            for (size_t h = 0; h < 2; h++) {
                                run_filter f;
                                run_filter_init(&f);
                                for (int i = 0; i < 3 && status_sets[a][i]; i++) f.statuses[f.n_statuses++] = status_sets[a][i];
                                f.owner = owners[b];
                                f.name_prefix = names[c];
                                f.sweep_id = sweeps[d];
                                f.since_ms = sinces[e];
                                f.until_ms = untils[g];
                                f.before = befores[h];
                                check_plans(db, &f);
                                check_answers(db, &f);
                                combos++;
                            }
    printf("%d filter combinations planned and paged through\n", combos);

    /* a window that holds nothing, and a cursor below every run */
    run_filter f;
    run_filter_init(&f);
    f.since_ms = T0 + (RUNS + 5) * 1000LL;
    int64_t none[4];
    CHECK(run_list_ids(db, &f, 4, none) == 0, "nothing created since after the newest run");
    run_filter_init(&f);
    f.before = 1;
    CHECK(run_list_ids(db, &f, 4, none) == 0, "nothing below id 1");

    /* creation times: a history whose clock stepped back is made monotonic by 0019 */
    exec(db, "PRAGMA user_version = 18");
    exec(db, "DROP INDEX runs_by_owner; DROP INDEX runs_by_owner_status; DROP INDEX runs_by_sweep_id;"
             " DROP INDEX runs_by_name; DROP INDEX runs_by_created; DROP INDEX runs_disk");
    exec(db, "UPDATE runs SET created_at = created_at - 10000000 WHERE id = 2000");
    int through_0019 = 0; /* 0019 alone: what came after it is there already */
    for (int i = 0; i < ddpd_migrations_count; i++)
        if (strncmp(ddpd_migrations[i].name, "0019_", 5) == 0) through_0019 = i + 1;
    REQUIRE(through_0019 == 19, "0019 is built in");
    REQUIRE(migrate_apply(db, ddpd_migrations, through_0019, err, sizeof err) == through_0019, "0019 again: %s", err);
    sqlite3_stmt *st;
    REQUIRE(sqlite3_prepare_v2(db, "SELECT count(*) FROM runs a JOIN runs b ON b.id = a.id + 1 WHERE b.created_at < a.created_at",
                               -1, &st, NULL) == SQLITE_OK, "prepared");
    REQUIRE(sqlite3_step(st) == SQLITE_ROW, "counted");
    CHECK(sqlite3_column_int(st, 0) == 0, "after 0019 no run is created before the one before it: %d",
          sqlite3_column_int(st, 0));
    sqlite3_finalize(st);

    sqlite3_close(db);
    scratch_dir_remove(dir);
    free(path);
    free(dir);
    return test_done("test_run_list");
}
