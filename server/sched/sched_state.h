/* The scheduler's state, shared by its files: scheduler.c (the lock, the queue, the
 * entry points, the tick), run_life.c (live runs, their starts, their parts and how a
 * run ends) and run_watch.c (the hang and node watches, runs taken back after a
 * restart). Everything here is read and written under K.mu. Not for other modules:
 * they use scheduler.h. */
#ifndef DDPD_CORE_SCHED_STATE_H
#define DDPD_CORE_SCHED_STATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "executor.h"
#include "journal_replay.h"
#include "op_types.h"
#include "run_status.h"
#include "scheduler_types.h"

/* The rank an attempt's failure is blamed on, as its launcher's `attempt` event (or
 * the hang watch) named it: NO_INT when none; last_line malloc'd or NULL. */
typedef struct {
    int64_t rank, exit_code, signal;
    char *last_line;
} rank_failure;

/* One part of a run: its launcher, started by an executor where the run was placed.
 * A run of this host alone has one (node 0); a run across k nodes has k, part i on
 * node rank i. */
typedef struct {
    int node;              /* 0: this host; else the agent node's id */
    int node_rank;
    const executor *exec;  /* the executor of the place it runs */
    part_handle handle;    /* what names it there, once started */
    bool pending;          /* its start is not done yet (the executor's `started` follows) */
    bool stop;             /* told to stop */
    int64_t stop_t;        /* when (unix ms): a part that ended before it failed on its own */
    bool ended;
    int64_t exit_code, exit_signal;
    char *reason;          /* its launcher's end, or what became of its node */
    int64_t end_t;         /* when its launcher ended (unix ms), to tell cause from consequence */
    rank_failure failure;  /* the rank of this part its launcher's attempt blamed (its `attempt` ended event) */
} run_part;

typedef struct live_run {
    int64_t id;
    int world_size;
    pool_kind pool;
    bool command;       /* a command run: ddp-run starts it */
    bool resume;        /* resumed (POST /runs/{id}/resume): its trainer continues from its newest checkpoint */
    int nodes_wanted;   /* distributed.nodes; 0: as few as it fits */
    int port;           /* its MASTER_PORT while started (command runs), else 0 */
    run_status status;  /* queued, starting, running, canceling */
    char secret[65];
    char *cancel_reason;  /* set once canceled */
    bool cancel_stops;    /* the cancel ends it stopped, not canceled (scheduler_stop: a sweep's searcher) */
    char *fail_reason;    /* set once the server stopped it (a hang, a lost node): it fails with this */
    bool fail_final;      /* ... and no restart may mend it (a cap or quota it passed: scheduler_fail) */
    double hang_timeout_s; /* command runs: no progress from a rank this long fails it; 0: off */
    /* attempts (run_restart.c): its launchers start at attempt restart_count; the
     * restarts distributed.max_restarts allows count from restarts_from; the attempt its
     * ranks are in is `attempt` (its launchers' `attempt` events) */
    int max_restarts, restart_count, restarts_from, attempt;
    bool attempt_open;    /* its launchers said `attempt` started and not yet ended: closed by the server if they die */
    int stop_grace_s;     /* distributed.stop_grace_s: the grace its ranks asked for (0: the server's) */
    int64_t memory_asked; /* resources.memory_gb in bytes (0: the server's default): run_limits.h */
    int64_t journal_points; /* an adopted run: the points the store holds of it, with those its journal
                             * brought, against its cap (run_watch.c); -1: not counted yet */
    rank_failure server_blame; /* the rank the server's own reason names (a hang: the one furthest behind) */
    int64_t *last_progress_ms; /* command runs, per rank: mono ms of its last report; 0: none yet */
    int64_t *last_step;        /* and its global step then */
    bool *rank_gone;           /* and whether its process has ended (its launcher's rank_state): not watched */
    bool said_hello;      /* a hello came before its start was stored */
    char *end_status, *end_reason; /* from the launcher's `end` event */
    char *devices_json;   /* ["cpu:0","cpu:1"]: for the store, once its trainer started */
    /* sharing: whose, how urgent, and its preemption */
    char *owner;          /* NULL: nobody in particular */
    int priority;
    bool preemptible;
    int64_t queued_ms;    /* unix ms it entered the queue */
    int64_t started_ms;   /* unix ms its devices were given (its usage counts from then) */
    int64_t preempt_by;   /* being preempted for this run (0: not) */
    int64_t requeued_by;  /* queued again after a preemption for this run, and not started since (0: not; -1: by a run unknown) */
    /* adopted: started by a previous server, taken back at start-up. Not this server's
     * child: its exit is seen in /proc (the local executor), its events are read from
     * its journal (ingest ignores what its processes send), and its end is the
     * journal's `end`. */
    bool adopted;
    journal_replay *journal;
    /* its parts, once started: one (a run of this host alone), or one per node */
    bool across;          /* a run across nodes: each part is told --nodes, and the run ends once all have */
    int n_parts;
    run_part *parts;
    bool start_stored;    /* every part's start is done and the run's start is stored */
    bool parts_stopping;
    struct live_run *next;
} live_run;

/* An owner's decayed usage (fair_share.h) as of a time: the spans of its runs that ended. */
typedef struct {
    char *owner; /* NULL: nobody in particular */
    double value;
    int64_t as_of;
} owner_usage;

typedef struct {
    scheduler_config c;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a run finished */
    live_run *runs;         /* unfinished runs, in submission order */
    device_pool devices;    /* this host's */
    const executor *local;  /* this host's supervisor: executor_local.c */
    const executor *agents; /* the agent nodes: executor_agents.c */
    const executor *batch;  /* a batch system (serve --executor slurm: executor_slurm.c) that every run goes to;
                             * NULL: runs go to this host and the agents */
    bool shutting_down;
    int next_port;          /* where the next lease looks first */
    owner_usage *usage;     /* fair share: each owner's decayed usage of the runs that ended */
    int n_usage;
} sched_state;

extern sched_state K;

/* scheduler.c: starts every queued run that fits, in order, and preempts what the
 * queue policy says. */
void schedule_locked(void);
/* The run's span on its devices ends now: its owner's usage takes it in (and the store). */
void usage_fold_locked(const live_run *r);

/* ---- run_life.c ---- */
live_run *find_run(int64_t id);
/* A queued run, not yet in the list; and one put in the list in id (submission) order. */
live_run *new_queued(const run_needs *n);
live_run *add_queued(const run_needs *n);
/* Starts a queued run on the nodes `ids` (node rank order; 0 is this host), k of
 * them; across: as a run across nodes (each part its launcher with --nodes k). false
 * when it failed instead (finished, its devices back). */
bool start_run_locked(live_run *r, bool across, const int *ids, int k);
/* Hands a queued run to the batch system (K.batch) at once: one part per node it asks
 * for (distributed.nodes, else 1), each pending until its job runs. false when it
 * failed instead (finished). */
bool start_batch_locked(live_run *r);
/* What a batch run's part `part` is started (or taken back) with, whom it runs as
 * decided there (run_as.h); `keep` holds what its rendezvous, account and
 * account_refused point to. */
typedef struct {
    char rendezvous[64];
    run_account account;
    char refused[1024];
} batch_launch_strings;
part_launch batch_launch_of(const live_run *r, int part, batch_launch_strings *keep);
/* Whether the run's start is pending in a batch system's queue (the store has it
 * queued: its job waits there). */
bool batch_pending(const live_run *r);
/* A batch system's `submitted`: its job's id is stored, the run still queued. */
void job_submitted_locked(live_run *r, const part_handle *h);
/* An executor's `started` for part `part`: once every part's start is done, the
 * run's start is stored. */
void part_started_locked(live_run *r, int part, const part_handle *h);
/* An executor's `ended` for part `part`. true when the run finished (r is freed) or
 * was queued again to restart (its devices are back either way: schedule). */
bool part_ended_locked(live_run *r, int part, const part_end *e);
/* Running: its first hello has come, and its start is stored. */
void mark_running_locked(live_run *r);
/* Canceling: every part is asked to stop. */
void signal_cancel_locked(live_run *r);
/* Preempted for run `by`: asked to checkpoint and stop (a built-in run) or stopped
 * (a command run); it is queued again once it has ended (requeue_locked). */
void preempt_locked(live_run *r, int64_t by);
/* A run adopted after a restart while it was being preempted: asked again. */
void preempt_again_locked(live_run *r);
/* A preempted run that ended: queued again, its devices back, to continue from its
 * newest checkpoint (a built-in run) or with its restart count one higher (a command
 * run). */
void requeue_locked(live_run *r);
/* The grace a run's ranks get between SIGTERM and SIGKILL, in ms: the server's for
 * the cause (--cancel-grace for a cancel or shutdown, --preempt-grace for a
 * preemption), or the longer one its config asks for (distributed.stop_grace_s),
 * at most --max-stop-grace. Its launcher is killed LAUNCHER_GRACE_MARGIN_MS later. */
int run_stop_grace_ms(const live_run *r, bool preemption);
/* Every part still running is asked to stop (a run across nodes: once). */
void stop_parts_locked(live_run *r);
/* The server fails the run for good (a cap or quota it passed): a queued run at once,
 * a started one once its parts are stopped; no restart mends it. False when it is
 * canceled or failed already (scheduler.c: scheduler_fail). */
bool fail_for_good_locked(live_run *r, const char *reason);
/* Queues the run's final state and forgets it: its devices go back. */
void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code, int64_t exit_signal);
/* The end a run's journal gives it once its processes are gone (adopted or not):
 * the journal's `end`, unless the server canceled or stopped it; without an `end`,
 * failed with `gone` (what became of its processes) and where its journal ends. */
void finish_from_journal_locked(live_run *r, const char *gone);

/* What a run holds once started (its parts, devices, port, secret, rendezvous), given
 * back: by finish_locked, and by a restart before the run is started again. */
void release_started_locked(live_run *r);
/* A started run back in the queue, for a preemption (requeue_locked) or the server's
 * own restart (run_restart.c): its owner charged for this start now, what it held given
 * back, and what belonged to the start forgotten. One function for both: two copies
 * had drifted, so a restarted attempt was never charged to fair share, and a run
 * canceled while it waited for its next attempt was charged from its old start. */
void back_to_queue_locked(live_run *r);

/* ---- run_restart.c ---- */
/* A launcher's attempt started or ended (ingest's hook, or an adopted run's journal),
 * before its op is queued: the end of an attempt stopped for a preemption is reworded
 * "preempted by run N", whatever the launcher called the stop (a command run's ranks
 * are stopped by SIGTERM, which its launcher reports as a cancel). */
void attempt_seen_locked(live_run *r, store_op *op);
/* Whether pid is the launcher of one of the run's parts on this host (true when no
 * launcher of it is known here: any word counts, as before there were accounts). */
bool from_launcher_locked(const live_run *r, long pid);
/* A started run whose ranks are all gone would fail with *reason (malloc'd), in a way
 * another attempt may mend (its processes or a node lost, a hang, a failed part of a
 * run across nodes, a restart asked for): the attempt's end is recorded as the server
 * saw it (f: the rank blamed, may be NULL) and, while restarts remain (or the
 * restart was asked for), the run is queued again to start its next attempt: true (r
 * stays, queued; *reason is left). Else false, and *reason says that none remained
 * when distributed.max_restarts gave the run any. */
bool restart_or_fail_locked(live_run *r, char **reason, const rank_failure *f);
/* The attempt its launchers left open (they died, or were killed, before they closed
 * it) ends as the run does: `status`, `reason`. Nothing when none is open. */
void close_open_attempt_locked(live_run *r, const char *status, const char *reason);
/* Frees what a rank_failure holds and forgets it. */
void rank_failure_clear(rank_failure *f);

/* ---- run_watch.c ---- */
/* A command run's hang watch starts (the ranks report to the server, not to ddp-run). */
void watch_hangs_of(live_run *r);
/* A launcher's word on one of its ranks' processes (rank_state): a rank that has
 * ended is not hung, and never blamed for a hang. */
void rank_state_seen_locked(live_run *r, const store_op *op);
/* Each tick: a command run that made no progress for its hang timeout is stopped. */
void watch_hang_locked(live_run *r, int64_t now);
/* Each tick: an adopted run's journal is read on. */
void watch_adopted_locked(live_run *r);

#endif
