/* Rebuilding the history from the run directories (ddpd serve --rebuild-from-runs,
 * ddpd check --rebuild-from-runs), for a database that is missing, empty or damaged
 * beside them.
 *
 * A damaged database is never deleted: it is renamed aside first (with its -wal and
 * -shm files), and the answer says where. Then, into the new database, each run
 * directory (named by its id) becomes its run again, under the same id: its
 * config.json (the config as its trainer read it: the data paths resolved), its
 * journal (events.jsonl) replayed through the same table as ingest's
 * (journal_replay.c), and the status, reason and exit code of the journal's `end`.
 * A run whose journal has no `end` is failed, saying it was rebuilt without one; a
 * process still running for it is killed first (without the database, its secret
 * is lost: it could never be taken back). What a database kept beyond the run
 * directories is not rebuilt: the devices and pid of each run, its resumes, the
 * live feed's event ids. */
#ifndef DDPD_SERVER_STORE_HISTORY_REBUILD_H
#define DDPD_SERVER_STORE_HISTORY_REBUILD_H

#include <stddef.h>
#include <stdint.h>

#include "db_inspect.h"

/* Whether --rebuild-from-runs applies to a database in state `s`: 1 it does (the
 * database is missing, empty or damaged beside run directories); 0 there is nothing
 * to rebuild (none or empty, and no run directories); -1 it must not (a sound
 * database with its history, one not ddpd's, a newer ddpd's, or no space), with one
 * line into why. */
int history_rebuild_applies(const db_report *verdict, const char *db_path, char *why, size_t len);

/* Renames the database at db_path (and its -wal, -shm) to DB.damaged-YYYYMMDDTHHMMSSZ;
 * where it went into moved_to ("" when there was no file). 0, or -1 with err. */
int history_move_db_aside(const char *db_path, char *moved_to, size_t len, char *err, size_t errlen);

typedef struct {
    int runs;                          /* rebuilt */
    int succeeded, failed, canceled;   /* their statuses */
    int without_end;                   /* of the failed: their journal had no `end` */
    int skipped;                       /* run directories that could not be read (logged) */
    int64_t events;                    /* journal events stored */
} rebuild_counts;

/* With the store open on a database that holds no runs: every run directory under
 * runs_dir, in id order. 0, or -1 with err when the store cannot be written (what
 * was rebuilt so far stays). */
int history_rebuild(const char *runs_dir, rebuild_counts *out, char *err, size_t errlen);

#endif
