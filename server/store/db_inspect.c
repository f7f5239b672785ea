/* Looks at a state directory's database without changing it: see db_inspect.h. */
#include "db_inspect.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "state_layout.h"
#include "disk_space.h"
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

/* quick_check's answer in one short line: its lines joined by "; ", cut at ~200 characters. */
static void one_line(char *text, size_t len) {
    buf_t b = {0};
    for (const char *r = text; *r && b.len < 200; r++) {
        if (*r == '\n' || *r == '\r') {
            if (b.len && r[1] && r[1] != '\n') buf_printf(&b, "; ");
            continue;
        }
        buf_append(&b, r, 1);
    }
    snprintf(text, len, "%s%s", b.data ? b.data : "", b.len >= 200 ? "..." : "");
    buf_free(&b);
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

/* How many run directories (named by a number) `runs_dir` holds; the lowest and
 * highest ids in *lo, *hi. */
static int count_run_dirs(const char *runs_dir, long long *lo, long long *hi) {
    int64_t *ids;
    size_t n = layout_run_dir_ids(runs_dir, &ids);
    *lo = n ? ids[0] : 0;
    *hi = n ? ids[n - 1] : 0;
    free(ids);
    return (int)n;
}

/* A database that is none or empty beside run directories: their history is not in it. */
static void look_for_lost_runs(const char *path, const char *runs_dir, const char *what, db_report *out) {
    long long lo, hi;
    int n = runs_dir ? count_run_dirs(runs_dir, &lo, &hi) : 0;
    if (!n) return;
    char ids[96];
    if (n == 1) snprintf(ids, sizeof ids, "run directory (%lld)", lo);
    else snprintf(ids, sizeof ids, "run directories (ids %lld to %lld)", lo, hi);
    report(out, DB_LOST,
           "%s %s, but %s holds %d %s: their history is not in it, and ddpd serve would start an empty one beside "
           "them. Restore ddpd.db from a backup, rebuild the history from them (ddpd serve --rebuild-from-runs), "
           "or move %s aside to start a new history",
           path, what, runs_dir, n, ids, runs_dir);
}

/* What to do with a broken database: named beside the run directories, when there are any. */
static char *restore_text(const char *runs_dir) {
    long long lo, hi;
    if (runs_dir && count_run_dirs(runs_dir, &lo, &hi))
        return xasprintf("restore it from a backup, rebuild the history from the run directories (ddpd "
                         "serve --rebuild-from-runs moves it aside first), or move it and %s aside to start "
                         "a new history", runs_dir);
    return xstrdup("restore it from a backup, or move it aside (ddpd serve then starts a new one)");
}

/* Reads the runs table's newest and oldest rows: a descent from its root to each
 * end, the pages a start reads first. "" when they read, else SQLite's message. With
 * the WAL (which SQLite replays on the first read, checking each frame's checksum),
 * this is the check every start can afford: it costs the same at 10 runs and at 50,000. */
static void read_ends(sqlite3 *db, long long *newest, char *why, size_t whylen) {
    static const char *const sql[] = {"SELECT id, status, config FROM runs ORDER BY id DESC LIMIT 1",
                                      "SELECT id, status, config FROM runs ORDER BY id LIMIT 1"};
    why[0] = '\0';
    *newest = 0;
    for (size_t i = 0; i < sizeof sql / sizeof *sql && !why[0]; i++) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(db, sql[i], -1, &st, NULL);
        if (rc == SQLITE_OK) rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            if (i == 0) *newest = sqlite3_column_int64(st, 0);
            (void)sqlite3_column_text(st, 2); /* the row's overflow pages too */
        } else if (rc != SQLITE_DONE) {
            snprintf(why, whylen, "%s", sqlite3_errmsg(db));
        }
        sqlite3_finalize(st);
    }
}

/* The verdict on an open database; `restore` says what to do with a broken one
 * (made only when one is: it names the run directories, which are then counted). */
static void classify(sqlite3 *db, const char *path, long long size, bool full, const char *runs_dir, db_report *out) {
    const int known = ddpd_migrations_count;
    char text[512];
    char *restore = NULL;
    if (!first_text(db, "PRAGMA user_version", text, sizeof text)) {
        restore = restore_text(runs_dir);
        report(out, DB_UNREADABLE,
               "%s is not an SQLite database ddpd can read (%s): %s", path, text, restore);
        free(restore);
        return;
    }
    out->version = (int)strtol(text, NULL, 10);
    buf_t tables = {0};
    bool has_runs = false;
    int n_tables = table_names(db, &tables, &has_runs);
    long long newest = 0;
    char why[512] = "";
    if (n_tables >= 0 && has_runs) read_ends(db, &newest, why, sizeof why);
    if (n_tables < 0 || why[0]) {
        restore = restore_text(runs_dir);
        if (n_tables < 0)
            report(out, DB_DAMAGED, "%s is damaged: its list of tables cannot be read (%s); %s", path,
                   sqlite3_errmsg(db), restore);
        else
            report(out, DB_DAMAGED, "%s is damaged: its runs table's newest and oldest rows cannot be read (%s); %s "
                   "(sqlite3's .recover may save what is left)", path, why, restore);
        free(restore);
        buf_free(&tables);
        return;
    }
    if (full && (!first_text(db, "PRAGMA quick_check", text, sizeof text) || strcmp(text, "ok") != 0)) {
        one_line(text, sizeof text);
        restore = restore_text(runs_dir);
        report(out, DB_DAMAGED,
               "%s is damaged: quick_check says \"%s\"; %s (sqlite3's .recover may save what is left)", path,
               text, restore);
        free(restore);
        buf_free(&tables);
        return;
    }
    if (out->version == 0 && n_tables == 0) {
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
        /* counted only by a full check: a start reads the newest id (0: none) */
        char count[64], checked[64];
        if (full) {
            sqlite3_stmt *st = NULL;
            if (sqlite3_prepare_v2(db, "SELECT count(*) FROM runs", -1, &st, NULL) == SQLITE_OK &&
                sqlite3_step(st) == SQLITE_ROW)
                out->runs = sqlite3_column_int64(st, 0);
            sqlite3_finalize(st);
            snprintf(count, sizeof count, "%lld runs", out->runs < 0 ? 0 : out->runs);
            snprintf(checked, sizeof checked, "quick_check ok");
        } else {
            out->runs = newest ? -1 : 0;
            if (newest) snprintf(count, sizeof count, "runs up to id %lld", newest);
            else snprintf(count, sizeof count, "no runs");
            snprintf(checked, sizeof checked, "its ends read (ddpd check reads it all)");
        }
        if (out->version > known)
            report(out, DB_NEWER,
                   "%s is at schema version %d, newer than this ddpd's %d: it belongs to a newer ddpd; run that one, "
                   "or use another --state-dir",
                   path, out->version, known);
        else if (out->version < known)
            report(out, DB_OLDER, "%s: schema version %d, migrated to %d when ddpd serve starts; %s; %s", path,
                   out->version, known, count, checked);
        else
            report(out, DB_CURRENT, "%s: schema version %d of %d, %s, %s", path, out->version, known, count, checked);
    }
    buf_free(&tables);
}

/* A database that could not be opened or read on a full file system: the space's
 * fault, said so (SQLite only says "disk I/O error"). */
static void blame_space(const char *path, db_report *out) {
    char why[1024];
    if ((out->state != DB_UNREADABLE && out->state != DB_DAMAGED) || !disk_space_explain(path, why, sizeof why)) return;
    report(out, DB_NO_SPACE, "%s: %s cannot be opened to be read; free some space there, or use another --state-dir", why,
           path);
}

static void inspect(const char *path, const char *runs_dir, bool full, db_report *out);

void db_inspect(const char *path, const char *runs_dir, bool full, db_report *out) {
    inspect(path, runs_dir, full, out);
    blame_space(path, out);
}

static void inspect(const char *path, const char *runs_dir, bool full, db_report *out) {
    const int known = ddpd_migrations_count;
    out->version = -1;
    out->runs = -1;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        if (errno == ENOENT) {
            report(out, DB_NONE, "%s: none yet; ddpd serve creates it (schema version %d)", path, known);
            look_for_lost_runs(path, runs_dir, "is missing", out);
        } else report(out, DB_UNREADABLE, "%s cannot be read: %s", path, strerror(errno));
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
    classify(db, path, sb.st_size, full, runs_dir, out);
    sqlite3_close(db);
    if (out->state == DB_EMPTY)
        look_for_lost_runs(path, runs_dir, sb.st_size == 0 ? "is empty (0 bytes)" : "has no tables", out);
}

bool db_refuses(db_state s) {
    return s == DB_UNREADABLE || s == DB_DAMAGED || s == DB_FOREIGN || s == DB_NEWER || s == DB_LOST || s == DB_NO_SPACE;
}
