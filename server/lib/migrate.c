/* Applies migrations/ to the database at start-up: see migrate.h. */
#include "migrate.h"

#include <stdio.h>

#include "base.h"

static int user_version(sqlite3 *db) {
    sqlite3_stmt *st;
    int v = -1;
    if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &st, NULL) != SQLITE_OK) return -1;
    if (sqlite3_step(st) == SQLITE_ROW) v = sqlite3_column_int(st, 0);
    sqlite3_finalize(st);
    return v;
}

int migrate_apply(sqlite3 *db, const migration *m, int n, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (m[i].version != i + 1) {
            snprintf(err, errlen, "migration %s is numbered %d but should be %d: migrations are numbered 1, 2, 3, ... without gaps",
                     m[i].name, m[i].version, i + 1);
            return -1;
        }
    }
    int current = user_version(db);
    if (current < 0) {
        snprintf(err, errlen, "cannot read the database's schema version: %s", sqlite3_errmsg(db));
        return -1;
    }
    if (current > n) {
        snprintf(err, errlen, "the database is at schema version %d but this ddpd knows only %d: it was written by a newer ddpd; run that one, or start with a new --state-dir",
                 current, n);
        return -1;
    }
    for (int i = current; i < n; i++) {
        char *msg = NULL;
        char setv[64];
        snprintf(setv, sizeof setv, "PRAGMA user_version = %d", m[i].version);
        if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, m[i].sql, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, setv, NULL, NULL, &msg) != SQLITE_OK ||
            sqlite3_exec(db, "COMMIT", NULL, NULL, &msg) != SQLITE_OK) {
            snprintf(err, errlen, "migration %s failed: %s; the database stays at schema version %d",
                     m[i].name, msg ? msg : sqlite3_errmsg(db), i);
            sqlite3_free(msg);
            sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
            return -1;
        }
        log_info("database migrated to schema version %d (%s)", m[i].version, m[i].name);
    }
    return n;
}
