/* Ingest: the Unix stream socket the trainers report to. Every trainer process (the
 * launcher and each rank) opens its own connection; its first event must be a
 * `hello` with the run's secret, or the connection is dropped. Lines are JSON: one
 * event, or an array of events. A malformed line is logged and skipped; the rest of
 * the connection's lines still count. Events become store ops, queued to the
 * writer in batches (one submit per read, not per event). A run's points past its cap
 * (point_cap.h) are dropped here, before they cost the store anything.
 *
 * One thread, epoll, non-blocking sockets, a line buffer per connection. */
#ifndef DDPD_SERVER_FEED_INGEST_H
#define DDPD_SERVER_FEED_INGEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "op_types.h"

/* What ingest asks of the part that knows the runs (the scheduler, wired by main.c):
 * hello: does the secret open a connection for this run and rank (and the run counts
 * as running once a rank has said hello)? end: the launcher's last word. */
typedef struct {
    /* peer_uid: the connecting process's uid (SO_PEERCRED; -1 unknown), which must be
     * the run's account's (run_as.h) */
    bool (*hello)(int64_t run_id, const char *secret, int rank, long peer_uid);
    /* peer_pid: the process that sent it (SO_PEERCRED); 0 when replayed from the
     * journal. launch: the secret its connection said hello with, the token of the run's
     * start it belongs to (a run started again, resized or restarted, has a new one);
     * NULL when replayed from the journal. Only the launcher's own word counts, of the
     * run's start now */
    void (*end)(int64_t run_id, const char *status, const char *reason, long peer_pid, const char *launch);
    /* a rank reported a step done (a step, a heartbeat, a reporter's metric) */
    void (*progress)(int64_t run_id, int rank, int64_t global_step);
    /* a rank's hello said how many steps the run takes in all (may be NULL) */
    void (*planned)(int64_t run_id, int64_t total_steps);
    /* the launcher's attempt started or ended, or one of its ranks' processes started or
     * ended (its op, before it is queued to the store, which the hook may reword; may be
     * NULL). peer_pid and launch as end's: only the launcher's own word counts, of the
     * run's start now; false: not taken, and not queued */
    bool (*attempt)(store_op *op, long peer_pid, const char *launch);
    /* the run is fed from its journal (taken back after a restart): a connection of it
     * is opened by its hello, but what it sends after is not queued again (may be NULL) */
    bool (*journal_fed)(int64_t run_id);
    /* a checkpoint of the run (its file `path`) was taken to be stored (may be NULL) */
    void (*checkpoint)(int64_t run_id, const char *path);
    /* rank 0 of the run said it is writing a checkpoint (its status `checkpointing`; may be NULL) */
    void (*checkpointing)(int64_t run_id);
    /* a rank's `preempt` event: its `state`, `listening` or `heard` (may be NULL) */
    void (*preempt)(int64_t run_id, int rank, const char *state);
    /* the run's events would store more points than --max-points-per-run: those past it
     * are dropped, and this says why, once per run (may be NULL) */
    void (*points_capped)(int64_t run_id, const char *reason);
} ingest_hooks;

/* The points a run may store (point_cap.h; 0: no cap). Before ingest_start. */
void ingest_set_max_points(int64_t max_points_per_run);

/* Binds `path` (mode 0600; a stale socket file is replaced) and starts the thread. */
int ingest_start(const char *path, const ingest_hooks *hooks, char *err, size_t errlen);
void ingest_stop(void);

/* Returns once ingest has accepted every pending connection and read everything
 * already written to the socket (and queued it to the store). The reaper calls it
 * after a trainer exits, so the trainer's last words are read before its end is. */
void ingest_sync(void);

/* A run is finished or deleted: every connection that said hello for it is closed
 * (what it had not yet sent is not read), and no later hello opens one (the hello
 * hook says no). Any thread; the ingest thread closes them on its next wake-up.
 * Events of the run that were read before are refused by the store (event_kinds.c:
 * trainer events change only runs that exist and are not finished). */
void ingest_run_ended(int64_t run_id);

/* Counters for /healthz and /metrics. */
typedef struct {
    uint64_t connections, lines, events, malformed, dropped_connections;
} ingest_counters;
void ingest_take_counters(ingest_counters *out);

#endif
