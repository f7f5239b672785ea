/* What a state directory's database is, looked at before anything opens it for real:
 * the one verdict `ddpd check` prints and `ddpd serve` goes by (serve refuses to start
 * on what check FAILs). It only reads: nothing is created, migrated or repaired.
 *
 *   none     not there: serve creates it
 *   empty    an SQLite file with no tables at schema version 0 (a 0-byte file is
 *            one): serve creates the schema in it
 *   current  ddpd's schema, this ddpd's version
 *   older    ddpd's schema, an older version: serve migrates it
 *   unreadable  not an SQLite database, or it cannot be opened
 *   damaged  the runs table's newest or oldest row cannot be read (every look), or
 *            PRAGMA quick_check fails (a full look: ddpd check, --rebuild-from-runs)
 *   foreign  an SQLite database, but not ddpd's (tables of its own, no `runs`)
 *   newer    ddpd's schema, newer than this ddpd's migrations
 *   lost     none or empty, but the runs directory holds run directories: their
 *            history is gone, and serve would start an empty one beside them
 *   nospace  it cannot be opened or read and its file system has no space left
 *            (SQLite says "disk I/O error"): not the file's fault
 *
 * Each verdict comes with one sentence naming the file, and for a refusal, what to do. */
#ifndef DDPD_SERVER_STORE_DB_INSPECT_H
#define DDPD_SERVER_STORE_DB_INSPECT_H

#include <stdbool.h>

typedef enum { DB_NONE, DB_EMPTY, DB_CURRENT, DB_OLDER, DB_UNREADABLE, DB_DAMAGED, DB_FOREIGN, DB_NEWER,
               DB_LOST, DB_NO_SPACE } db_state;

typedef struct {
    db_state state;
    int version;      /* PRAGMA user_version; -1 when it could not be read */
    long long runs;   /* rows in `runs`; -1 when there is no such table, or not counted (0 is counted) */
    char line[1536];  /* "PATH: schema version 4 of 4, 12 runs, quick_check ok", or what is wrong and what to do */
} db_report;

/* Looks at the database at `path`, and at `runs_dir` (the state directory's runs/)
 * when it is none, empty or broken. `full`: reads every page (quick_check) and counts
 * the runs, as ddpd check does, in time that grows with the history; else reads only
 * its header, its schema and the runs table's two ends (a start's look, the same cost
 * at any size; runs is then 0 or -1, and the WAL is checked by SQLite as it replays it). */
void db_inspect(const char *path, const char *runs_dir, bool full, db_report *out);

/* Whether serve must refuse to start on it. */
bool db_refuses(db_state s);

#endif
