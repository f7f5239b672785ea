/* Looks at a state directory's database without changing it: see db_inspect.h. */
#include "db_inspect.h"

#include <errno.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "migrations.h"

/* One row's first column as text into out; false when the statement cannot be
 * prepared or stepped (then out holds SQLite's message). */
static bool first_text(sqlite3 *db, const char *sql, char *out, size_t outlen) {
    sqlite3_stmt *st = NULL;
    bool ok = sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK;
    int rc = ok ? sqlite3_step(st) : SQLITE_ERROR;
    if (rc == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        snprintf(out, outlen, "%s", t ? (const char *)t : "");
    } else if (rc == SQLITE_DONE) {
        out[0] = '\0';
    } else {
        snprintf(out, outlen, "%s", sqlite3_errmsg(db));
        ok = false;
    }
    sqlite3_finalize(st);
    return ok;
}

/* The names of the database's own tables, ", "-separated into *names; their count,
 * or -1 when sqlite_master cannot be read. */
static int table_names(sqlite3 *db, buf_t *names, bool *has_runs) {
    sqlite3_stmt *st = NULL;
    *has_runs = false;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' "
                               "ESCAPE '\\' ORDER BY name", -1, &st, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return -1;
    }
    int n = 0, rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *name = (const char *)sqlite3_column_text(st, 0);
        if (!name) continue;
        if (strcmp(name, "runs") == 0) *has_runs = true;
        if (n < 8) buf_printf(names, "%s%s", n ? ", " : "", name);
        else if (n == 8) buf_printf(names, ", ...");
        n++;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? n : -1;
}

static void report(db_report *out, db_state s, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void report(db_report *out, db_state s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->line, sizeof out->line, fmt, ap);
    va_end(ap);
    out->state = s;
}

/* The verdict on an open database. */
static void classify(sqlite3 *db, const char *path, long long size, db_report *out) {
    const int known = ddpd_migrations_count;
    char text[512];
    if (!first_text(db, "PRAGMA user_version", text, sizeof text)) {
        report(out, DB_UNREADABLE,
               "%s is not an SQLite database ddpd can read (%s): restore it from a backup, or move it aside "
               "(ddpd serve then starts a new one)",
               path, text);
        return;
    }
    out->version = (int)strtol(text, NULL, 10);
    if (!first_text(db, "PRAGMA quick_check", text, sizeof text) || strcmp(text, "ok") != 0) {
        report(out, DB_DAMAGED,
               "%s is damaged: quick_check says \"%s\"; restore it from a backup, or move it aside (ddpd serve "
               "then starts a new one; sqlite3's .recover may save what is left)",
               path, text);
        return;
    }
    buf_t tables = {0};
    bool has_runs = false;
    int n_tables = table_names(db, &tables, &has_runs);
    if (n_tables < 0) {
        report(out, DB_DAMAGED, "%s is damaged: its list of tables cannot be read (%s); restore it from a backup",
               path, sqlite3_errmsg(db));
    } else if (out->version == 0 && n_tables == 0) {
        if (size == 0)
            report(out, DB_EMPTY, "%s is empty (0 bytes): ddpd serve creates the schema (version %d) in it", path, known);
        else
            report(out, DB_EMPTY, "%s has no tables yet: ddpd serve creates the schema (version %d) in it", path, known);
    } else if (!has_runs || out->version == 0) {
        /* ddpd's schema always has a runs table and sets user_version with it. */
        report(out, DB_FOREIGN,
               "%s is an SQLite database but not ddpd's (schema version %d; tables %s%s): is --state-dir the right "
               "directory? Move the file aside, or use another --state-dir",
               path, out->version, tables.data ? tables.data : "none", has_runs ? "" : "; no runs table");
    } else {
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            out->runs = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        long long runs = out->runs < 0 ? 0 : out->runs;
        if (out->version > known)
            report(out, DB_NEWER,
                   "%s is at schema version %d, newer than this ddpd's %d: it belongs to a newer ddpd; run that one, "
                   "or use another --state-dir",
                   path, out->version, known);
        else if (out->version < known)
            report(out, DB_OLDER, "%s: schema version %d, migrated to %d when ddpd serve starts; %lld runs; quick_check ok",
                   path, out->version, known, runs);
        else
            report(out, DB_CURRENT, "%s: schema version %d of %d, %lld runs, quick_check ok", path, out->version, known,
                   runs);
    }
    buf_free(&tables);
}

void db_inspect(const char *path, db_report *out) {
    const int known = ddpd_migrations_count;
    out->version = -1;
    out->runs = -1;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) report(out, DB_NONE, "%s: none yet; ddpd serve creates it (schema version %d)", path, known);
        else report(out, DB_UNREADABLE, "%s cannot be read: %s", path, strerror(errno));
        return;
    }
    if (!S_ISREG(sb.st_mode)) {
        report(out, DB_UNREADABLE, "%s is not a file: move it aside (ddpd serve then starts a new database)", path);
        return;
    }
    sqlite3 *db = NULL;
    /* Read-write without create: nothing here writes, but a WAL database's readers
     * need its -shm file, which a read-only connection may be unable to make. */
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
        report(out, DB_UNREADABLE, "%s cannot be opened: %s", path, db ? sqlite3_errmsg(db) : "out of memory");
        sqlite3_close(db);
        return;
    }
    sqlite3_busy_timeout(db, 5000);
    classify(db, path, sb.st_size, out);
    sqlite3_close(db);
}

bool db_refuses(db_state s) { return s == DB_UNREADABLE || s == DB_DAMAGED || s == DB_FOREIGN || s == DB_NEWER; }
