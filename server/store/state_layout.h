/* Where ddpd keeps things in its state directory, in one place:
 *
 *   DIR/ddpd.db            the store (SQLite, WAL beside it)
 *   DIR/ddpd.lock          one server per state directory (flock)
 *   DIR/events.sock        the event socket the trainers report to
 *   DIR/runs/ID/           a run's directory: config.json (what the trainer reads),
 *                          trainer.log, events.jsonl (the journal), checkpoints/
 *
 * The runs' directories may be elsewhere (ddpd serve --runs-dir RUNS, e.g. on a
 * filesystem apart from the database's): RUNS/ID/ then, and RUNS/ddpd.lock, the lock
 * that keeps a second server out of it.
 *
 * state_layout_init once, at start-up (and state_layout_set_runs_dir); then any thread
 * may ask. */
#ifndef DDPD_SERVER_STORE_STATE_LAYOUT_H
#define DDPD_SERVER_STORE_STATE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { RUN_FILE_CONFIG, RUN_FILE_LOG, RUN_FILE_JOURNAL, RUN_FILE_CHECKPOINTS } run_file;

/* `state_dir` is an absolute path (realpath'd). */
void state_layout_init(const char *state_dir);
/* The runs' directories in `runs_dir` (absolute, realpath'd) instead of DIR/runs. */
void state_layout_set_runs_dir(const char *runs_dir);
void state_layout_free(void);

const char *layout_state_dir(void);
const char *layout_db_path(void);
const char *layout_lock_path(void);
const char *layout_socket_path(void);
const char *layout_runs_dir(void);
/* Whether the runs' directories lie outside the state directory (--runs-dir). */
bool layout_runs_apart(void);

/* malloc'd: DIR/runs/ID, and a file (or folder) in it. */
char *layout_run_dir(int64_t id);
char *layout_run_path(int64_t id, run_file which);
/* A command run's rank's own log: <run dir>/ranks/rank-N.log (malloc'd). */
char *layout_rank_log_path(int64_t id, int rank);
/* The file's name in a run directory ("config.json", ...). */
const char *layout_run_file_name(run_file which);
/* The ids of the run directories under runs_dir (directories named by a number),
 * ascending, in *ids (malloc'd; NULL when none); their count. */
size_t layout_run_dir_ids(const char *runs_dir, int64_t **ids);

/* Makes the state directory (and the runs' directories, where they lie apart) this
 * user's only: group and other bits are taken off (symlinks are not followed), but
 * for the pass-through bit of a directory (0711: layout_open_for_accounts), and
 * nothing beneath a directory of another account (a run's, handed to it) is touched.
 * Every start does the shallow pass (`walk` false): the state directory's own mode
 * and its own entries (the database, its WAL, the lock, the socket, runs/'s mode), and
 * the runs' directory's own mode: what every file beneath is reached through, at the
 * same cost whatever the history. `walk`: everything beneath as well, each run
 * directory's files: done once, at the start that migrates the database past
 * LAYOUT_WALKED_SCHEMA (a ddpd before it walked at every start; files made since are
 * made 0600/0700 by the umask 077 ddpd serves with), and counted by ddpd check
 * (layout_loose_entries). Logs a warning naming the state directory's old mode when
 * it was looser, and how many entries beneath it were tightened. Returns -1 (and
 * err) when the state directory itself cannot be tightened; an entry beneath it that
 * cannot be (another user's) is logged and skipped. */
#define LAYOUT_WALKED_SCHEMA 19
int layout_tighten(bool walk, char *err, size_t errlen);
/* How many entries beneath `dir` (this user's, not beneath another account's
 * directory) group or others may read or write, as layout_tighten would tighten
 * them; the first as "PATH (mode NNNN)" in first. Changes nothing. */
long layout_loose_entries(const char *dir, char *first, size_t firstlen);

/* Where runs run as other accounts (run_as.h): the state directory and the runs'
 * directory become 0711 (others may pass through to what they are given by name, never list), the
 * event socket 0666 (ingest checks each peer's uid, SO_PEERCRED, beside the secret). */
void layout_open_for_accounts(void);

#endif
