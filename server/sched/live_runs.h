/* The floor of the scheduler's state machine (sched_state.h names its files in order):
 * the table of live runs and what every file above does to a run's record without
 * moving its status. `sched` is the scheduler's state: every unfinished run, the lock
 * they are read and written under, this host's devices, the executors, each owner's
 * usage. Here: find a run, add one, drop one, give back what a start held (its
 * devices, parts, MASTER_PORT, rendezvous) and forget what belonged to it, charge its
 * owner for the span it held its devices (fair share), and whether a pid is one of its
 * launchers. A run's status is set only by run_life.c (its one setter, against the
 * table of legal moves); a run is made here at the status it starts from. This file
 * calls none of the files above it. Everything here is read and written under
 * sched.mu. Not for other modules: they use scheduler.h. */
#ifndef DDPD_SERVER_SCHED_LIVE_RUNS_H
#define DDPD_SERVER_SCHED_LIVE_RUNS_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "device_pool.h"
#include "executor.h"
#include "journal_replay.h"
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

#define RUN_FAILED_AT_MAX 16

typedef struct live_run {
    int64_t id;
    int world_size;     /* the devices (ranks) it asks for or holds now: its width, or fewer while shrunk */
    /* elastic (a built-in CPU run of this host with distributed.min_world_size below its
     * world_size): it may be shrunk to min_ranks for a more urgent run, and grows back */
    int width;          /* distributed.world_size: its batch shards, whatever its ranks */
    int min_ranks;      /* the fewest ranks it may train on (width: not elastic) */
    int resize_to;      /* being stopped to start again at this many ranks (0: not) */
    int64_t resize_by;  /* ... for this run (a shrink; 0: a grow) */
    int64_t resized_ms; /* unix ms it last started at a new size (0: never): it grows at most once per interval */
    pool_kind pool;
    bool command;       /* a command run: ddp-run starts it */
    int64_t sweep_id;   /* a sweep's trial: its sweep; 0: none */
    bool resume;        /* resumed (POST /runs/{id}/resume): its trainer continues from its newest checkpoint */
    int nodes_wanted;   /* distributed.nodes; 0: as few as it fits */
    int port;           /* its MASTER_PORT while started (command runs), else 0 */
    run_status status;  /* queued, starting, running, canceling: moved only by run_life.c's setter */
    char secret[65];
    char *cancel_reason;  /* set once canceled */
    bool cancel_stops;    /* the cancel ends it stopped, not canceled (scheduler_stop: a sweep's searcher) */
    bool cancel_notice;   /* ... after the notice first, to checkpoint (scheduler_pause: a trial paused) */
    char *fail_reason;    /* set once the server stopped it (a hang, a lost node): it fails with this */
    bool fail_final;      /* ... and no restart may mend it (a cap or quota it passed: scheduler_fail) */
    const char *fail_class; /* ... the class of that end ("hang", "infra": failure_class.h); NULL: none */
    double hang_timeout_s; /* command runs: no progress from a rank this long fails it; 0: off */
    /* attempts (run_restart.c): its launchers start at attempt restart_count; the
     * restarts distributed.max_restarts allows count from restarts_from; the attempt its
     * ranks are in is `attempt` (its launchers' `attempt` events) */
    int max_restarts, restart_count, restarts_from, attempt;
    restart_policy restart; /* distributed.restart_policy: what the server's own restarts do (run_restart.c) */
    restart_budget budget;  /* their crash-loop watch and best step (its `used` is counted from the attempts) */
    int64_t not_before_ms;  /* queued for a restart: it waits out its backoff until then (unix ms; 0: none) */
    bool elsewhere;         /* restarted by retry_elsewhere: placed on no suspect node (queue_policy.h), nor
                             * where its own attempts failed (failed_at) */
    /* where its attempts failed (run_restart.c): "NODE" (the node as a whole) or "NODE/DEVICE" (the blamed
     * rank's device, "node-b/cpu:1"); malloc'd, kept for the run's life, oldest first */
    char *failed_at[RUN_FAILED_AT_MAX];
    int n_failed_at;
    bool ended_elsewhere;   /* its launcher's last attempt failed with a class its policy retries elsewhere: the
                             * launcher did not restart it, the server does */
    bool reopen_attempt;  /* started again after a resize: its launcher's start of the same attempt reopens it */
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
    bool preempt_slice;   /* preempt_by is a run it yields to at its time slice's end (serve --time-slice) */
    bool requeued_slice;  /* ... and requeued_by is (not kept across a server's restart: then `preempted`) */
    /* the work a preemption would throw away (queue_policy_lost_ms) */
    int64_t checkpoint_ms;       /* unix ms of its newest durable checkpoint (rank 0's checkpoint event); 0: none */
    int64_t checkpointing_ms;    /* unix ms rank 0 said it was checkpointing (0: not now) */
    int64_t checkpoint_write_ms; /* how long its newest checkpoint took from that to the event; 0: not known */
    int64_t max_duration_ms;     /* max_duration_s (0: none): it ends `timeout` after this long in one start */
    char *timeout_reason;        /* set once its time is up: it is stopping, and ends `timeout` with this */
    int64_t min_runtime_ms;      /* min_runtime_s (else the server's default): not preempted before it has run this long */
    /* the notice before a stop (stop_with_notice_locked): when it went out (unix ms; 0:
     * none this attempt), and whether the checkpoint it asked for came (the run is then
     * stopped at once); answers_notices: a rank said it listens for them (a command run's
     * `preempt` event), so a preemption throws away about nothing */
    int64_t notice_ms;
    bool notice_answered;
    bool answers_notices;
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
    /* the start estimate (scheduler.c): when it is expected to end once started */
    int64_t expected_len_ms; /* run_needs.expected_ms; -1: not known */
    int64_t total_steps;     /* its hello's (scheduler_planned); 0: not said */
    int64_t eta_first_step, eta_first_ms, eta_last_step, eta_last_ms; /* this start's first and newest step (unix ms) */
    json_t *pending;         /* queued: why it waits and when it may start, as GET /runs/{id} shows it; else NULL */
    uint32_t pending_hash;   /* of its text */
    int64_t shown_start_ms;  /* queued: the estimated start its `pending` shows (-1: none); see scheduler.c */
    /* queued: the queue policy's last decision on it, which reads copy (scheduler.c) */
    int queue_order;         /* its place in the start order over every pool (0 first) */
    int queue_position;      /* its place in its pool's queue (1 first); 0: not decided */
    int queue_verb;          /* a policy_verb: start, preempt or wait */
    char *waiting_for;       /* the sentence of what it waits for; NULL: none */
    json_t *preempting;      /* the ids of the runs it preempts (an array); NULL: none */
    const char *pending_reason; /* its reason's name as last noted in its timeline (NULL: none yet) */
    /* queued: its GET /queue entry, less its position, as JSON text (scheduler.c);
     * NULL: to be written (its decision or pending changed, or its stint in the queue) */
    char *queue_entry;
    size_t queue_entry_len;
    uint64_t queue_entry_hash; /* fnv1a64 of it: GET /queue's tag is made of these */
    int64_t queue_entry_queued_ms, queue_entry_requeued_by; /* the stint it was written for */
    struct live_run *next, *prev; /* the table, in queue order (live_runs.c) */
} live_run;

/* Why the queue policy decided (sched_state.decisions, /metrics): something changed
 * (a submission, an end, a cancel), a read found a change not decided yet, or the
 * tick (the changes it coalesced, and once a second for the rules that move with time). */
typedef enum { QUEUE_DECIDED_FOR_CHANGE, QUEUE_DECIDED_FOR_READ, QUEUE_DECIDED_BY_TICK, QUEUE_DECIDED_CAUSES } queue_cause;

/* An owner's decayed usage (fair_share.h) as of a time: the spans of its runs that ended. */
typedef struct {
    char *owner; /* NULL: nobody in particular */
    double value;
    int64_t as_of;
} owner_usage;

typedef struct {
    scheduler_config c;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a run finished, or gave back what it held */
    live_run *runs;         /* unfinished runs, in submission order (a resumed one at the back) */
    live_run *runs_tail;    /* its last */
    device_pool devices;    /* this host's */
    const executor *local;  /* this host's supervisor: executor_local.c */
    const executor *agents; /* the agent nodes: executor_agents.c */
    const executor *batch;  /* a batch system that every run goes to (scheduler_init chooses it);
                             * NULL: runs go to this host and the agents */
    bool shutting_down;
    int next_port;          /* where the next lease looks first */
    owner_usage *usage;     /* fair share: each owner's decayed usage of the runs that ended */
    int n_usage;
    /* the queue decided once per change (scheduler.c) */
    bool queue_stale;       /* something changed that the queue policy has not decided on yet */
    json_t *queue_owners;   /* its owners, as of the last decision */
    bool pending_stale;     /* decided, but what the queued runs show is not made anew yet */
    uint64_t decisions[QUEUE_DECIDED_CAUSES]; /* how often the queue was decided, by cause */
    /* what the tick walks (live_runs_watched): the started runs' ids and the queued
     * runs' in a restart's backoff, made again after a run is added, dropped or moves
     * status, so that a tick costs what is started, not the queue */
    int64_t *watched;
    int n_started, n_watched, watched_cap;
    bool watched_stale;
} sched_state;

/* The scheduler's state: its one instance. */
extern sched_state sched;

/* ---- the table ---- */

/* The ids of the started runs (the first *n_started), then of the queued runs in a
 * restart's backoff (not_before_ms set), *n in all; made again only after a change
 * (live_runs_changed). The caller finds each (it may have ended meanwhile). */
const int64_t *live_runs_watched(int *n_started, int *n);
/* A run was added, dropped, or moved status: live_runs_watched is made again. */
void live_runs_changed(void);

/* The live run of that id, or NULL: by an index (a hash of the ids), not a walk. */
live_run *find_run(int64_t id);
/* A run of needs `n`, queued, not yet in the table. */
live_run *live_run_new(const run_needs *n);
/* A run of needs `n` put in the table in id (submission) order, at status `at`:
 * queued, or, for a run a previous server left (run_recovery.c), the status the store
 * has for it. */
live_run *live_run_add(const run_needs *n, run_status at);
/* A run made by live_run_new (queued) put in the table in id order: a submission
 * that came while the lock was held (scheduler.c's inbox). */
void live_run_link(live_run *r);
/* A run made by live_run_new put at the back of the table (queued now: a resume). */
void live_run_append(live_run *r);
/* The run leaves the table and is freed (its final state is queued to the store). */
void live_run_drop(live_run *r);

/* ---- what a start held ---- */

/* What a run holds once started (its parts, devices, port, rendezvous), given back: when
 * it finishes, and when it goes back to the queue. */
void release_started_locked(live_run *r);
/* A started run going back to the queue, for a preemption or the server's own restart
 * (run_life.c, which moves its status to queued): its owner charged for this start now,
 * what it held given back, and what belonged to the start forgotten. One function for
 * both: two copies had drifted, so a restarted attempt was never charged to fair
 * share, and a run canceled while it waited for its next attempt was charged from its
 * old start. */
void back_to_queue_locked(live_run *r);
/* A command run's hang watch counted anew (its ranks report to the server, not to
 * ddp-run): one entry per rank, none reported yet. */
void watch_hangs_of(live_run *r);
/* Frees what a rank_failure holds and forgets it. */
void rank_failure_clear(rank_failure *f);
/* Whether pid is the launcher of one of the run's parts on this host (true when no
 * launcher of it is known here: any word counts, as before there were accounts). */
bool from_launcher_locked(const live_run *r, long pid);
/* Whether a connection that said hello with `launch` (its secret) belongs to the run's
 * start now: each start makes a new secret (a resize's and a restart's too), so an
 * earlier start's launcher, whatever its pid, is not of this one; NULL (the journal's
 * word, the server's own) belongs. */
bool of_this_launch_locked(const live_run *r, const char *launch);

/* ---- its timeline (GET /runs/{id}/timeline) ---- */

/* An entry of the run's timeline, written through the store's one writer: `kind` a
 * constant ("submitted", "pending", "admitted", ...), `detail` an object taken over
 * (NULL: none), at now. */
void timeline_note_locked(const live_run *r, const char *kind, json_t *detail);

/* ---- fair share: each owner's decayed usage ---- */

/* Whether two owners are one (NULL: nobody in particular, one owner too). */
bool same_owner(const char *a, const char *b);

/* The run's span on its devices ends now: its owner's usage takes it in (and the store). */
void usage_fold_locked(const live_run *r);
/* `device_seconds` (as of now) of `from`'s usage are `to`'s: what a preemption by a
 * run of `to` threw away of a run of `from` (at most what `from` has). */
void usage_charge_locked(const char *from, const char *to, double device_seconds);
/* What the owner's runs that ended weigh at `now` (unix ms). */
double usage_ended_locked(const char *owner, int64_t now);
/* An owner's usage as the store kept it (start-up). */
void usage_load_locked(const char *owner, double value, int64_t as_of);

/* This host's name among the nodes (serve --node-name; "local" without it). */
const char *local_node_name(void);

#endif
