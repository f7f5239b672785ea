/* Unit tests of server/lib/migrate.c against real SQLite files: the built-in migrations
 * apply to a new database and record user_version; applying again changes nothing;
 * a failing migration is rolled back whole and leaves the version where it was; a
 * gap in the numbering and a database newer than the binary are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "migrations.h"

static int user_version(sqlite3 *db) {
    sqlite3_stmt *st;
    int v = -1;
    sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL);
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int table_exists(sqlite3 *db, const char *name) {
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1", -1, &st, NULL);
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    int n = sqlite3_step(st) == SQLITE_ROW ? sqlite3_column_int(st, 0) : -1;
    sqlite3_finalize(st);
    return n == 1;
}

static sqlite3 *fresh(const char *path) {
    unlink(path);
    sqlite3 *db;
    sqlite3_open(path, &db);
    return db;
}

int main(void) {
    char path[] = "/tmp/ddpd-test-migrate-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp");
    close(fd);
    char err[512];

    /* the real migrations */
    sqlite3 *db = fresh(path);
    REQUIRE(ddpd_migrations_count >= 1, "no migrations are built in");
    int v = migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err);
    CHECK(v == ddpd_migrations_count, "applied to version %d: %s", v, v < 0 ? err : "");
    CHECK(user_version(db) == ddpd_migrations_count, "user_version %d", user_version(db));
    const char *tables[] = {"runs", "step_rows", "epochs", "ranks", "checkpoints"}; /* steps: a view (0021) */
    for (size_t i = 0; i < 5; i++) CHECK(table_exists(db, tables[i]), "table %s missing", tables[i]);
    CHECK(sqlite3_exec(db, "INSERT INTO runs (status, config, world_size, device_kind, created_at)"
                           " VALUES ('queued', '{}', 1, 'cpu', 0)", NULL, NULL, NULL) == SQLITE_OK,
          "insert a run: %s", sqlite3_errmsg(db));
    CHECK(sqlite3_exec(db, "INSERT INTO runs (status, config, world_size, device_kind, created_at)"
                           " VALUES ('sleeping', '{}', 1, 'cpu', 0)", NULL, NULL, NULL) != SQLITE_OK,
          "an unknown status must be refused");
    /* again: nothing to do, data kept */
    v = migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err);
    CHECK(v == ddpd_migrations_count, "second apply: %d %s", v, err);
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL);
    CHECK(sqlite3_step(st) == SQLITE_ROW && sqlite3_column_int(st, 0) == 1, "the run is still there");
    sqlite3_finalize(st);
    sqlite3_close(db);

    /* a failing migration rolls back whole */
    migration good_then_bad[] = {
        {1, "0001_a.sql", "CREATE TABLE a (x INTEGER);"},
        {2, "0002_b.sql", "CREATE TABLE b (x INTEGER); INSERT INTO nowhere VALUES (1);"},
    };
    db = fresh(path);
    v = migrate_apply(db, good_then_bad, 2, err, sizeof err);
    CHECK(v == -1, "a failing migration must fail: %d", v);
    CHECK(strstr(err, "0002_b.sql") != NULL && strstr(err, "version 1") != NULL, "the message names the file and version: %s", err);
    CHECK(user_version(db) == 1, "stays at 1: %d", user_version(db));
    CHECK(table_exists(db, "a") && !table_exists(db, "b"), "0002's table must be rolled back");
    sqlite3_close(db);

    /* numbering gaps are refused before anything is applied */
    migration gap[] = {{1, "0001_a.sql", "CREATE TABLE a (x);"}, {3, "0003_c.sql", "CREATE TABLE c (x);"}};
    db = fresh(path);
    v = migrate_apply(db, gap, 2, err, sizeof err);
    CHECK(v == -1 && strstr(err, "0003_c.sql") && user_version(db) == 0 && !table_exists(db, "a"), "gap: %d %s", v, err);
    sqlite3_close(db);

    /* a newer database is refused */
    db = fresh(path);
    sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL);
    v = migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err);
    CHECK(v == -1 && strstr(err, "newer"), "newer database: %d %s", v, err);
    sqlite3_close(db);

    unlink(path);
    return test_done("test_migrate");
}
