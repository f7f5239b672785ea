/* The live feed behind GET /events and GET /runs/{id}/events (server-sent events:
 * sse.c is the HTTP side). Two kinds of events:
 *
 * - durable: a run's status changes (`run`), a rank's state (`rank`), an epoch's
 *   results (`epoch`), a checkpoint (`checkpoint`), a run deleted (`deleted`). The
 *   store's writer records each in the events table inside the transaction that
 *   applies it, so its id comes from one server-wide sequence that survives restarts;
 *   after the commit the feed keeps it in an in-memory ring (the newest FEED_RING) and
 *   wakes the subscribers it concerns. A subscriber asking for events after an id the
 *   ring no longer holds is served from the table first. Never dropped or coalesced:
 *   a reconnect with Last-Event-ID gets exactly what it missed.
 * - progress: rank 0's newest step (`step`) and each rank's newest heartbeat
 *   (`heartbeat`). Steps come thousands a second, so only the newest per run (per
 *   rank) is kept, without an id; a ticker wakes subscribers for it at most ~10 times
 *   a second, and a subscriber gets the current one when it (re)connects.
 *
 * Subscribers read with feed_read, which parks them (calling their `park` under the
 * feed's lock) when there is nothing to send; the feed calls their `wake` (under its
 * lock, once per park) when there is. The ticker also wakes them for heartbeat
 * comments: a stream whose client vanished is written to, fails, and is closed. */
#ifndef DDPD_SERVER_FEED_FEED_H
#define DDPD_SERVER_FEED_FEED_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"
#include "event_kinds.h"

#define FEED_RING 16384 /* durable events kept in memory */

typedef struct feed_sub feed_sub;
struct feed_sub {
    /* set by the subscriber before feed_subscribe */
    int64_t run_id;                /* 0: every run */
    void (*park)(feed_sub *s);     /* called under the feed's lock when feed_read finds nothing */
    void (*wake)(feed_sub *s);     /* called under the feed's lock, once per park */
    /* the feed's */
    int64_t cursor;                /* the newest durable id this subscriber has been given */
    uint64_t pcursor;              /* the progress version it has been given */
    int64_t heartbeat_at;          /* monotonic ms: the next comment, if nothing else is sent */
    int64_t progress_at;           /* monotonic ms: progress not before (at most ~10 a second) */
    bool parked;
    sqlite3 *db;                   /* replaying from the events table (open while it does) */
    sqlite3_stmt *replay;
    feed_sub *prev, *next;
};

/* At start-up, before the store opens (reads DDPD_SSE_HEARTBEAT_S, default 15). */
void feed_init(void);
/* The store's writer, on its connection after the migrations: prepares the feed's
 * statements and reads where the sequence stands. 0, or -1 with err. */
int feed_attach(sqlite3 *db, char *err, size_t errlen);
void feed_detach(void);
/* The writer, for each op it applied (inside the transaction), with apply's result. */
void feed_record(const store_op *op, int64_t result);
/* The writer, after COMMIT (committed) or ROLLBACK (not): publishes or forgets. */
void feed_commit(bool committed);

/* The ticker thread (progress and heartbeat wake-ups). */
int feed_start(void);
/* Shutting down: every stream ends (parked ones are woken to see it); new ones are refused. */
void feed_close_all(void);
void feed_stop(void);
bool feed_closing(void);

/* Registers `s`. last_event_id < 0: live from now. Returns the newest durable id. */
int64_t feed_subscribe(feed_sub *s, int64_t last_event_id);
void feed_unsubscribe(feed_sub *s);

typedef enum { FEED_DATA, FEED_PARKED, FEED_CLOSED } feed_result;
/* Appends what `s` has not been given yet, as SSE text, up to about `budget` bytes;
 * when there is nothing, parks it and returns FEED_PARKED. */
feed_result feed_read(feed_sub *s, buf_t *out, size_t budget);

/* For /metrics: open streams. */
size_t feed_subscribers(void);

#endif
