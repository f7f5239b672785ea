/* The scheduler's state machine: the files that share its lock (sched.mu), from the top
 * down. A file calls only the files below it: tests/layout/test_layer_calls.py reads
 * their objects in libddpd_sched.a and fails on a call upward (its SCHED_ORDER is this
 * list).
 *
 *   run_recovery.c  scheduler_recover: at start-up, the runs a previous server left,
 *                   queued again, taken back (adopted, or a batch system's job), or
 *                   finished from their journal
 *   scheduler.c     the front door: every other entry point of scheduler.h (submit,
 *                   resume, cancel, stop, fail, ingest's and the supervisor's hooks,
 *                   the tick, the queue's reads), the executors' hooks, and the queue
 *                   policy's decisions applied (schedule_locked)
 *   run_watch.c     the watches: a command run's hang watch, its ranks' progress and
 *                   rank_state, an adopted run's journal read on (and its points
 *                   counted against the cap)
 *   run_life.c      a run's transitions: its start (devices, secret, port, its
 *                   part_launch built in one place, its parts handed to their
 *                   executors), its parts' starts and ends, running, cancel, preemption,
 *                   the requeue after it, the queue again for a restart, its end; the
 *                   one setter of a run's status, against the table of legal moves
 *   run_restart.c   a run's attempts as the server sees them (its launchers' `attempt`
 *                   events, the attempt it leaves open), and whether another attempt
 *                   may mend a run that failed
 *   live_runs.c     the floor (live_runs.h): the table of live runs, find, add, drop,
 *                   what a start held given back, each owner's usage
 *
 * Beside them, called from any of them and calling none: the queue policy and its pure
 * rules (queue_policy.h, queue_forecast.h, fair_share.h, placement.h, part_blame.h), the device pool,
 * whom a run runs as (run_as.h), what it may hold (run_limits.h). The rest of the
 * component (runs.c, run_resume.c, users.c, disk_use.c) and of the server enters
 * through the front door: what scheduler.h declares.
 *
 * Everything here is read and written under sched.mu. Not for other modules: they use
 * scheduler.h. */
#ifndef DDPD_SERVER_SCHED_SCHED_STATE_H
#define DDPD_SERVER_SCHED_SCHED_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor.h"
#include "live_runs.h"
#include "op_types.h"
#include "run_account.h"
#include "run_status.h"

/* ---- scheduler.c ---- */
/* Starts every queued run that fits, in order, and preempts what the queue policy says. */
void schedule_locked(void);

/* ---- run_watch.c ---- */
/* A launcher's word on one of its ranks' processes (rank_state): a rank that has
 * ended is not hung, and never blamed for a hang. */
void rank_state_seen_locked(live_run *r, const store_op *op);
/* A rank reported (a command run's, with a hang watch): its watch counts from now. */
void progress_seen_locked(live_run *r, int rank, int64_t global_step);
/* Each tick: a command run that made no progress for its hang timeout is stopped. */
void watch_hang_locked(live_run *r, int64_t now);
/* Each tick: a run that has run its max_duration_s (its own, else its owner's
 * `ddpd user set --max-duration`; the shorter) in this start is stopped to end
 * `timeout`. now: unix ms. */
void watch_duration_locked(live_run *r, int64_t now);
/* A run taken back after a restart: its journal (events.jsonl) opened, fed to the store
 * from where the store is, its ranks' progress and its launchers' attempts seen, its
 * points counted against the cap (--max-points-per-run). NULL when the database cannot
 * say where it is. */
journal_replay *watch_journal_open(live_run *r);
/* Each tick: an adopted run's journal is read on. */
void watch_adopted_locked(live_run *r);

/* ---- run_life.c ---- */
/* Whether a live run's status may move from `from` to `to` (the table of legal moves;
 * a move to the same status is none). */
bool run_move_legal(run_status from, run_status to);
/* Starts a queued run on the nodes `ids` (node rank order; 0 is this host), k of
 * them; across: as a run across nodes (each part its launcher with --nodes k). false
 * when it failed instead (finished, its devices back). */
bool start_run_locked(live_run *r, bool across, const int *ids, int k);
/* Hands a queued run to the batch system (sched.batch) at once: one part per node it
 * asks for (distributed.nodes, else 1), each pending until its job runs. false when it
 * failed instead (finished). */
bool start_batch_locked(live_run *r);
/* What a part is started with beside the run's own settings (NULL for a batch system's
 * part, which gets none: its system places it): every part's device indices (part p's
 * at p * world_size / n_parts), this host's GPUs for its part as CUDA_VISIBLE_DEVICES
 * names them, every device for a person, the address of rank 0's node. */
typedef struct {
    const int *devices;
    const char *visible;
    const char *where;
    const char *master_addr;
} launch_place;
/* What part `part`'s launch points to, kept by its caller while the launch is used. */
typedef struct {
    char rendezvous[64];
    run_account account;
    char refused[1024];
    char memory_from[256];
} launch_keep;
/* The one place a part_launch is built: part `part` of run r (its parts made), to be
 * started or taken back, from the run's settings, whom it runs as (run_as.h, decided
 * here for every executor), what its cgroup holds it to (run_limits.h) and `at`. */
part_launch launch_of(const live_run *r, int part, const launch_place *at, launch_keep *keep);
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
/* Canceling: every part is asked to stop (asked again when it is canceling already: a
 * run taken back after a restart). */
void signal_cancel_locked(live_run *r);
/* Preempted for run `by`: asked to checkpoint and stop (a built-in run) or stopped
 * (a command run); it is queued again once it has ended. */
void preempt_locked(live_run *r, int64_t by);
/* An elastic run (live_run.min_ranks) resized to `to` ranks: shrunk for run `by`
 * (the queue policy took only what `by` needs), or grown back (by 0). It is asked to
 * stop as a preemption asks (a checkpoint at its current step) and, once it has ended,
 * starts again at once on `to` ranks (ddp-trainer --ranks) from that checkpoint, bit
 * for bit the run it was (a grow: on as many of `to` as are free then); a command run
 * starts again on `to` ranks (ddp-run --ranks), its script resuming from its own
 * checkpoint. No failure and no attempt of its own: an entry of its timeline
 * ("resized") and of the audit log. */
void resize_locked(live_run *r, int to, int64_t by);
/* A run adopted after a restart while it was being resized (its timeline's newest
 * "resizing" entry comes after its newest start): asked again to stop, to start again
 * on `to` ranks (for run `by`: a shrink; 0: a grow). */
void resize_again_locked(live_run *r, int to, int64_t by);
/* A run adopted after a restart while it was being preempted: asked again. */
void preempt_again_locked(live_run *r);
/* The stop of a preemption or a timeout, in two phases: first a notice (its executor's
 * preempt: SIGUSR1 to its launcher), on which a built-in run checkpoints at its next
 * step and stops, and a command run's ranks that listen (ddpd.preempt_requested) are
 * told to; then, once the checkpoint is durable (notice_checkpoint_locked), or at the
 * grace's end (the executor), it is stopped. Any stop of a run that may keep its work
 * (a preemption, a timeout, a shrink) goes through here. */
void stop_with_notice_locked(live_run *r);
/* A checkpoint of r became durable: when a notice is out and this is the checkpoint it
 * asked for, the run is stopped now (a command run: SIGUSR1 again to its launcher,
 * which stops its ranks), instead of at the grace's end. Whether it was. */
bool notice_checkpoint_locked(live_run *r);
/* Its time is up (`reason`): asked to stop as a preemption asks (a built-in run writes a
 * checkpoint at its current step), and it ends `timeout`, resumable. */
void timeout_locked(live_run *r, const char *reason);
/* The grace a run's ranks get between SIGTERM and SIGKILL, in ms: the server's for
 * the cause (--cancel-grace for a cancel or shutdown, --preempt-grace for a
 * preemption), or the longer one its config asks for (distributed.stop_grace_s),
 * at most --max-stop-grace. Its launcher is killed LAUNCHER_GRACE_MARGIN_MS later. */
int run_stop_grace_ms(const live_run *r, bool preemption);
/* Every part still running is asked to stop (a run across nodes: once). */
void stop_parts_locked(live_run *r);
/* The server fails the run for good (a cap or quota it passed): a queued run at once
 * (the caller schedules: its devices may let others start), a started one once its
 * parts are stopped; no restart mends it. False when it is canceled or failed already. */
bool fail_for_good_locked(live_run *r, const char *reason);
/* Queues the run's final state and forgets it: its devices go back. */
void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code, int64_t exit_signal);
/* The end a run's journal gives it once its processes are gone (adopted or not):
 * the journal's `end`, unless the server canceled or stopped it; without an `end`,
 * failed with `gone` (what became of its processes) and where its journal ends. An
 * elastic run whose resize was under way (resize_to) and that did not succeed starts
 * again at its new size instead: at once, or (at_start: found gone at start-up)
 * queued at that size. */
void finish_from_journal_locked(live_run *r, const char *gone, bool at_start);

/* ---- run_restart.c ---- */
/* A launcher's attempt started or ended (ingest's hook, or an adopted run's journal),
 * before its op is queued: the end of an attempt stopped for a preemption is reworded
 * "preempted by run N", whatever the launcher called the stop (a command run's ranks
 * are stopped by SIGTERM, which its launcher reports as a cancel). A resize is no
 * attempt: the end its stop caused is not taken (false: not queued), and the start
 * again at the new size reopens the same attempt. */
bool attempt_seen_locked(live_run *r, store_op *op);
/* A started run whose ranks are all gone would fail with *reason (malloc'd), in a way
 * another attempt may mend (its processes or a node lost, a hang, a failed part of a
 * run across nodes, a restart asked for): the attempt's end is recorded as the server
 * saw it (f: the rank blamed, may be NULL), and true while restarts remain: the caller
 * queues the run again for its next attempt (run_life.c; *reason is left). Else false,
 * and *reason says that none remained when distributed.max_restarts gave the run any. */
bool restart_or_fail_locked(live_run *r, char **reason, const rank_failure *f);
/* The attempt its launchers left open (they died, or were killed, before they closed
 * it) ends as the run does: `status`, `reason`. Nothing when none is open. */
void close_open_attempt_locked(live_run *r, const char *status, const char *reason);
/* How an attempt stopped for a preemption ends, as its user should read it (malloc'd):
 * "preempted by run N", and how its notice went where its ranks listened for one
 * (stop_with_notice_locked): stopped at the checkpoint it asked for, or at the grace's
 * end without one. */
char *preempted_reason(const live_run *r);

#endif
