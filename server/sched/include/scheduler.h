/* The scheduler: the front door of scheduling. It owns the devices and the life of
 * every unfinished run in memory, and each entry point below is defined in
 * scheduler.c (or, the recovery at start-up, in run_recovery.c beside it).
 *
 * Devices come in two pools: GPUs (given to a run through CUDA_VISIBLE_DEVICES) and
 * CPU slots (one rank each), on this host and on the agents' nodes. The queue policy
 * (queue_policy.h, a pure function of a snapshot) decides which queued run starts
 * where: by priority, then its owner's decayed usage (fair share), then age; within
 * its owner's quotas; backfilling behind a big run at the head of a pool within the
 * backfill window; preempting lower-priority preemptible runs for a higher one. No
 * device is ever given to two runs.
 *
 * A run's status moves under one lock, in one setter against a table of legal moves
 * (run_life.c), and each move is queued to the store's writer in the same order:
 * queued -> starting -> running -> succeeded | failed | canceled | stopped, with
 * canceling on the way to canceled or stopped; a started run preempted, or restarted
 * (another attempt of a run that failed), goes back to queued, and a resume queues a
 * finished run again. A run that failed is restarted when its config allows another
 * attempt and the failure is one another attempt may mend (run_restart.c).
 *
 * Where a run's parts run is an executor's business (executor.h: this host's
 * supervisor, the agents' nodes, or Slurm, which places runs itself and then no
 * queue of this server's is run); the scheduler asks the executors' table and names
 * one only where it chooses it (scheduler_init). Inside, the files call downward
 * only, in the order sched_state.h lists (front door, watches, life, restarts, the
 * floor of live runs), which tests/layout/test_layer_calls.py checks. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_SCHEDULER_H
#define DDPD_SERVER_SCHED_INCLUDE_SCHEDULER_H

#include <stdbool.h>
#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "op_types.h"
#include "run_account.h"
#include "run_cgroup.h"
#include "scheduler_types.h"

void scheduler_init(const scheduler_config *c);
/* The URL this server answers at for its own ranks (http://127.0.0.1:PORT), once
 * it listens: the base of a local part's rendezvous URL; and the one other machines
 * reach it at (serve --advertise's address): where a Slurm job's parts report. */
void scheduler_set_self_url(const char *url, const char *reachable_url);

/* At start-up: queued runs are queued again, in order. A run a previous server left
 * starting/running/canceling is taken back when its launcher is still alive (the pid
 * and the start time stored at spawn): its journal (events.jsonl) is replayed from
 * where the store is, and from then on it is fed from its journal and supervised
 * through /proc (it is not this server's child); its end is the journal's `end`.
 * When its processes are gone, its journal is replayed to the end: its `end` says
 * how it ended (with its exit code); without one it fails, saying that its
 * processes were gone and at which step its journal ends. */
void scheduler_recover(void);

/* Ingest's hook: the run is fed from its journal (an adopted run), so what its
 * processes send on the socket is not stored again. */
bool scheduler_journal_fed(int64_t id);

/* How many devices of the pool this server has. */
int scheduler_capacity(pool_kind pool);
/* Whether runs go to a batch system that places them itself (serve --executor slurm):
 * then no queue of this server's and no device of this host limits them. *gpus (may
 * be NULL): whether its nodes have GPUs (what a backend "auto" asks for). */
bool scheduler_batch(bool *gpus);
/* Whom and within which limits a one-node run of `owner` with `config` would start on
 * this host (as launch_of decides it: run_as.h, run_limits.h), for what is started
 * ahead of its runs (a warm sweep's zygote, at its submission): *account and
 * *as_account (false: the server's own user) and *limits. False when its runs would
 * not start here as it is (a batch system places them; its account is refused). */
bool scheduler_local_start_as(const char *owner, const json_t *config, run_account *account, bool *as_account,
                              run_cgroup_limits *limits);


/* nodes_wanted and hang_timeout_s, from a config's "distributed". */
void run_needs_distributed(const json_t *config, run_needs *n);

/* Queues a run that is already in the store as queued (its config.json written). */
void scheduler_submit(const run_needs *n);

/* Queues again a run that the store has just turned from failed or canceled to
 * queued (runs_resume; a built-in run with n->resume set, a command run with its next
 * restart count): at the back of its pool's queue. */
void scheduler_resume(const run_needs *n);

typedef enum { CANCEL_DONE, CANCEL_SIGNALED, CANCEL_ALREADY, CANCEL_NOT_LIVE } cancel_result;
/* Cancels a queued run at once; signals a started one (SIGTERM to its group, SIGKILL
 * after the grace period). CANCEL_NOT_LIVE: no such unfinished run. */
cancel_result scheduler_cancel(int64_t id, const char *reason);
/* As scheduler_cancel, but the run ends `stopped` with `reason`, not canceled: a
 * sweep's searcher stopping a trial (server/sweep/). Its newest checkpoint stays, so a
 * resume (runs_resume) continues it. */
cancel_result scheduler_stop(int64_t id, const char *reason);
/* As scheduler_stop, but a started run of this host gets the notice first, as a
 * preemption's (SIGUSR1 through its launcher to the ranks that listen: a command run's
 * script asks ddpd.should_pause()), and is stopped once it says its checkpoint is
 * durable or at the preemption's grace's end: a sweep's trial paused (by ASHA below its
 * rung, or with its sweep), to go on from that checkpoint when resumed. */
cancel_result scheduler_pause(int64_t id, const char *reason);

/* Fails run `id` with `reason`, for good: a limit of the server's that it passed (its
 * stored points, its owner's disk quota), which another attempt would pass again. A
 * queued run fails at once; a started one's parts are stopped (SIGTERM, the grace,
 * SIGKILL) and it fails with `reason` once they have ended, whatever its launcher
 * says, and is not restarted (distributed.max_restarts). false: no such unfinished
 * run, or one already ending (canceled, failed by the server). */
bool scheduler_fail(int64_t id, const char *reason);

/* 1-based position among the queued runs of its pool in the order they will start
 * (queue_policy.h), or 0 when not queued. */
int scheduler_queue_position(int64_t id);

/* Ingest's hooks (ingest.h): a connection's hello, true when the secret is the run's
 * (the run then counts as running once a rank has said hello); the launcher's `end`,
 * taken only from the launcher of the run's start now (`launch`: the secret its
 * connection said hello with; NULL: the journal's word). */
bool scheduler_hello(int64_t id, const char *secret, int rank, long peer_uid);
void scheduler_end_event(int64_t id, const char *status, const char *reason, long peer_pid, const char *launch);
/* A rank's progress (ingest's hook): the hang watch of command runs
 * (distributed.hang_timeout_s) counts from each rank's first report. */
void scheduler_progress(int64_t id, int rank, int64_t global_step);
/* The steps a run will take in all (its trainer's hello: total_steps), for its ETA. */
void scheduler_planned(int64_t id, int64_t total_steps);
/* Rank 0 of the run said it is writing a checkpoint (`saved` false), or that one is
 * written (true): the time since the newest is what a preemption would throw away. */
void scheduler_checkpoint(int64_t id, bool saved);
/* A rank's `preempt` event (ingest): `listening` (it answers a preemption's notice with
 * a checkpoint: a preemption would throw away about nothing) or `heard`. */
void scheduler_preempt_word(int64_t id, int rank, const char *state);
/* A launcher's attempt started or ended, or a rank's process did (ingest's hook, with
 * the op it queues): the run's attempt, its MASTER_PORT (a restart's may be another),
 * the hang watch counted anew, the rank an attempt across nodes failed on. Taken only
 * from the launcher of one of the run's parts here, from this server's own relay (an
 * agent's or Slurm part's words), or from the journal (peer_pid 0), and only from a
 * connection of the run's start now (`launch`, as the end's: a launcher of an earlier
 * start, before a resize or a restart, has another secret); false: not taken. An
 * attempt's end that a resize's stop caused is not taken either: the attempt goes on
 * at the new size. */
bool scheduler_attempt(store_op *op, long peer_pid, const char *launch);

/* The supervisor's hooks (supervisor.h), for this host's executor (executor_local.h):
 * a start it was asked for is done (pid, or -1 and why not); a child was reaped; and
 * about every 100 ms, the scheduler's tick (the hang watch, adopted runs' journals,
 * and the executors' own: kills after their grace, lost nodes). */
void scheduler_spawned(int64_t id, int group, pid_t pid, const char *err);
void scheduler_child_exited(pid_t pid, int wstatus);
void scheduler_tick(void);

/* ---- runs across nodes ----
 * A run that does not fit this host (or asks for distributed.nodes > 1) is placed on
 * k nodes at once (placement.h): this host (when it has an advertised address) and
 * agent nodes, world_size / k ranks each; each node's part is its own launcher
 * (--nodes k --node-rank i), this host's started by its supervisor, an agent's handed
 * over in its heartbeat's answer (executor_agents.h). The first part to fail stops
 * the others; a node that stops heartbeating fails the run naming it; the run ends
 * once every part has. */

/* Can the run ever be placed (this host and the nodes registered now)? false with why
 * in err, naming what there is. */
bool scheduler_can_place(const run_needs *n, char *err, size_t errlen);

/* What a queued run waits for, for a person (malloc'd), or NULL when not queued: the
 * queue policy's words, or the batch system's (Slurm's pending reason). */
char *scheduler_waiting_for(int64_t id);
/* Why a queued run waits, as a code, and when it is expected to start: GET
 * /runs/{id}'s `pending` {reason, detail, blocked_by, estimated_start, estimate_basis}
 * (a new reference), with a hash of it into *hash; NULL when it is not queued. Made
 * at the scheduler's decisions and ticks; with `decide`, a change not decided yet is
 * decided first (else: as last decided, NULL for a run not decided yet). */
json_t *scheduler_pending(int64_t id, uint32_t *hash, bool decide);
/* What a queued run's GET /runs/{id} says of the queue, under one lock, from the
 * queue's last decision (scheduler_queue_decisions; `decide` as for
 * scheduler_pending): its queue_position into *position (scheduler_queue_position;
 * 0: not decided yet), the hash of its pending into *pending_hash (0: none), and its
 * waiting_for (returned, malloc'd, or NULL: scheduler_waiting_for). Whether a cached
 * answer still holds. This and scheduler_pending read what the decision published,
 * without the scheduler's lock (a decision under way does not hold them up), unless a
 * change waits to be decided. */
char *scheduler_queued_view(int64_t id, int *position, uint32_t *pending_hash, bool decide);
/* GET /queue: the queued runs in the order they will start, each with its decision and
 * what it waits for; each owner of a live run with its decayed usage, devices in use
 * and quota. Its JSON text (malloc'd, *len bytes, ending in a newline) and its tag
 * (an ETag, quotes included: a hash of the text, so the same answer rebuilt keeps it).
 * Written once per decision, and from each queued run's entry as last written: only
 * the entries whose run's decision or pending changed are written again. Read from
 * where it is published, without the scheduler's lock, unless a change waits to be
 * decided. */
#define SCHED_QUEUE_TAG_LEN 32
char *scheduler_queue_text(size_t *len, char tag[SCHED_QUEUE_TAG_LEN]);
/* Its tag alone (a conditional read that matches needs no copy of the text). */
void scheduler_queue_tag(char tag[SCHED_QUEUE_TAG_LEN]);
/* How often the queue policy decided since the server started: for a change (a
 * submission, an end, a cancel), for a read that found a change not decided yet, and
 * by the tick (the submissions it coalesced, and once a second for the rules that
 * move with time). A read of a decided queue decides nothing. */
void scheduler_queue_decisions(uint64_t counts[3]);
/* What went without the scheduler's lock, and what could not: the submissions that
 * came while a decision held it (they waited in its inbox, not for it), and the reads
 * of the queue or of a queued run that took it (a change waited to be decided, or the
 * run was not among the published ones). A read of a decided queue takes it never. */
void scheduler_queue_lock_stats(uint64_t *submitted_to_inbox, uint64_t *lock_reads);

/* At start-up, before scheduler_recover: each owner's decayed usage as the store kept
 * it (owner "" or NULL: nobody in particular). */
void scheduler_load_usage(const char *const *owners, const double *values, const int64_t *as_of, int n);

/* GET /nodes: this host first ("local": true), then every agent node, each with its
 * `suspect` mark (suspects.h; null when none), and `suspects`: every mark, those of
 * nodes not up now too. */
json_t *scheduler_nodes_json(void);
/* The marks alone: [{node, device, since, last, class, evidence, run_id, failed_runs, excluded, ...}]. */
json_t *scheduler_suspects_json(void);
/* An admin clears node `name`'s suspect mark (`by`: who, for the log and the audit):
 * true when it had one; the queue is decided again. */
bool scheduler_node_clear(const char *name, const char *by);
/* This host's name among the nodes (serve --node-name; "local" without it): no agent may take it. */
const char *scheduler_local_name(void);

/* Shutting down: no more starts; active runs are canceled ("the server shut down")
 * and waited for (queued runs stay queued for the next start). */
void scheduler_shutdown(void);

/* For /healthz and /metrics: devices in all and free, runs queued and active. */
typedef struct {
    int cpu_slots, cpu_free, gpus, gpu_free, queued, active;
} scheduler_snapshot;
void scheduler_take_snapshot(scheduler_snapshot *out);

#endif
