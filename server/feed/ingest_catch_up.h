/* Ingest's catch-up after a dropped connection, while the server stayed up.
 *
 * A trainer process whose connection dropped (the server's end closed, a broken
 * socket) journals on and reconnects with its original hello. What it journaled
 * meanwhile never came over the socket: at the reconnecting hello, its events in the
 * journal after the newest seq ingest received from it are queued to the store (read
 * by journal_replay, in order, before anything the new connection sends). Its events
 * that then come over a socket with a seq up to the newest replayed (what it sent
 * right after reconnecting, what the old connection still held) are skipped: every
 * event is stored once. A client that keeps no journal is caught up with nothing and
 * loses nothing: only a replay makes anything be skipped.
 *
 * A process is named by its hello: run, rank, pid and the hello's t and seq. Used by
 * the ingest thread only. */
#ifndef DDPD_SERVER_FEED_INGEST_CATCH_UP_H
#define DDPD_SERVER_FEED_INGEST_CATCH_UP_H

#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "op_types.h"

typedef struct catch_up_process catch_up_process;

/* What the catch-up tells the rest of ingest: a replayed `end`, a replayed step or
 * heartbeat (for the hang watch), a replayed attempt's start or end. Any may be NULL. */
typedef struct {
    /* peer_pid 0 and launch NULL: the journal's word (ingest.h) */
    void (*end)(int64_t run_id, const char *status, const char *reason, long peer_pid, const char *launch);
    void (*progress)(int64_t run_id, int rank, int64_t global_step);
    bool (*attempt)(store_op *op, long peer_pid, const char *launch);
    bool (*keep)(const store_op *op); /* within the run's cap on its points, as a socket's event would be */
} catch_up_hooks;

void catch_up_init(const catch_up_hooks *hooks);

/* The accepted hello that opens a connection of run `run_id`: its process, known from
 * an earlier connection (*again: the journal's events it missed are queued to the
 * store now) or new. */
catch_up_process *catch_up_hello(int64_t run_id, int rank, const json_t *hello, bool *again);

/* An event of process p from a socket, with its seq: false when a replay stored it
 * already (skip it); else it is noted as received. */
bool catch_up_take(catch_up_process *p, const json_t *ev);

/* The run is over: its processes are forgotten (their connections are closed first). */
void catch_up_run_ended(int64_t run_id);
void catch_up_free_all(void);

#endif
