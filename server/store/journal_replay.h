/* Journal replay: reading a run's events.jsonl into the store, for a run that a
 * previous server started (scheduler_recover) and whose socket events it lost.
 *
 * Every process of a run appends its events to the journal as it sends them, so, per
 * rank, the store holds a prefix of what that rank journaled: the replay skips a
 * rank's events older than the newest the store has of it (ranks.last_seen) and
 * queues the rest to the store's writer in journal order, parsed by the same table
 * as ingest's (event_kinds.c). It reads on as the journal grows (an adopted run is
 * fed from its journal until it ends). Only whole lines are read: a last line without
 * its newline may still be being written, and once the run is over it is a torn line,
 * skipped; a line that is not JSON (a torn piece that a later write closed) is
 * skipped and counted, never parsed as an event.
 *
 * The launcher's `end` is not an op: the replay keeps its status, reason and exit
 * code for the scheduler, which finishes the run. Its `attempt` events are (the
 * run's attempts); the replay also says which attempt the journal ends in. */
#ifndef DDPD_SERVER_STORE_JOURNAL_REPLAY_H
#define DDPD_SERVER_STORE_JOURNAL_REPLAY_H

#include <stdbool.h>
#include <stdint.h>

#include "op_types.h"

typedef struct journal_replay journal_replay;

/* What the journal said so far. */
typedef struct {
    bool ended;        /* it has the launcher's `end` */
    char status[16];   /* its status: succeeded, failed, canceled */
    char *reason;      /* its reason (NULL when empty) */
    int64_t exit_code; /* its exit_code, NO_INT when it has none */
    int64_t end_t;     /* its t (unix ms), NO_INT when it has none */
    int64_t last_seq;  /* journal_replay_open_process: the newest seq queued (or its end's), NO_INT when none */
    int64_t last_step; /* the newest global_step any rank journaled, NO_INT when none */
    int64_t last_attempt; /* the newest attempt the launcher journaled (started or ended), NO_INT when none */
    bool attempt_open;    /* ... and it started without an end */
    int64_t replayed;  /* events queued to the store */
    int64_t skipped;   /* lines skipped: torn or not an event */
    int64_t capped;    /* events the keep hook dropped (past the run's cap on its points) */
} journal_outcome;

/* What a replay tells as it reads (each may be NULL). */
typedef struct {
    void *ctx;
    /* a rank reported progress (its step or heartbeat), for the hang watch */
    void (*progress)(void *ctx, int rank, int64_t global_step);
    /* the launcher's attempt started or ended, or one of its ranks' processes did
     * (rank_state): its op, before it is queued (the hook may reword an attempt's end:
     * sched_state.h) */
    void (*attempt)(void *ctx, store_op *op);
    /* whether an op may be stored (a run's cap on its points, ddpd serve
     * --max-points-per-run): false drops it, counted in `capped` */
    bool (*keep)(void *ctx, const store_op *op);
} journal_hooks;

/* Opens the replay of run `run_id`'s journal, events.jsonl of its directory `dir`
 * (a missing file is an empty journal, read again later; one that is not the run's
 * own file is not read: run_files.h); hooks may be NULL. NULL when the store cannot
 * say what it holds. */
journal_replay *journal_replay_open(int64_t run_id, const char *dir, const journal_hooks *hooks);

/* One process of a run, as its hello names it (a reconnection sends its original
 * hello again): its rank, pid, and the hello's t and seq. */
typedef struct {
    int rank;
    int64_t pid, hello_t, hello_seq;
    int64_t after_seq; /* its events up to this seq are stored already (NO_INT: none is) */
} journal_process;

/* The replay of one process's events only (those after its hello in the journal, with
 * a seq after p->after_seq), whatever the store holds: ingest's catch-up after the
 * process reconnected (ingest_catch_up.h). */
journal_replay *journal_replay_open_process(int64_t run_id, const char *dir, const journal_process *p,
                                            const journal_hooks *hooks);

/* Reads the whole lines added since the last call and queues their events. final:
 * the journal's writers are gone, so a last line without a newline is torn (skipped);
 * otherwise it is left for the next call. Reads at most about `budget` bytes (0: all).
 * Memory stays bounded whatever the file holds: a line over 16 MiB is skipped without
 * being buffered, and a sparse file's holes inside one are jumped over
 * (line_reader.h). */
void journal_replay_read(journal_replay *j, bool final, int64_t budget);

const journal_outcome *journal_replay_outcome(const journal_replay *j);
void journal_replay_close(journal_replay *j);

#endif
