/* A run's transitions, from queued to its end: its start (devices, secret, port, its
 * part_launch built in one place, its parts handed to their executors), its parts'
 * starts and ends, running, cancel, preemption and the requeue after it, the queue
 * again for a restart, and how it ends (the blame among the parts of a run across
 * nodes, the end its journal gives it). Every move of a run's status is made here,
 * by one setter, against one table of legal moves. See sched_state.h. */
#include "sched_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "audit.h"
#include "base.h"
#include "ckpt_header.h"
#include "ddpd_build_config.h"
#include "disk_use.h"
#include "journal_replay.h"
#include "launcher_argv.h"
#include "node_relay.h"
#include "nodes.h"
#include "part_blame.h"
#include "ports.h"
#include "rendezvous.h"
#include "run_as.h"
#include "run_limits.h"
#include "secret.h"
#include "state_layout.h"
#include "store.h"
#include "suspects.h"

/* ---- a run's status: the one setter, and its table of legal moves ---- */

#define FINAL_MOVES \
    [RUN_SUCCEEDED] = true, [RUN_FAILED] = true, [RUN_CANCELED] = true, [RUN_STOPPED] = true, [RUN_TIMEOUT] = true

/* MOVES[from][to]: queued -> starting -> running -> canceling -> final, and
 *  - queued -> failed, canceled, stopped: a cancel or a stop while it waits, a failure
 *    the server decides for it (a cap, a quota, a host that no longer has its devices);
 *  - starting, running -> queued: preempted (queued again once it ended, to continue),
 *    or failed in a way another attempt may mend (the server's restart);
 *  - starting -> canceling, and starting -> final: canceled, or ended, before any of
 *    its processes said hello (a launcher that fails at once; running needs a hello);
 *  - canceling -> succeeded, failed: it ended on its own before the cancel took (every
 *    part exited 0), or a part's start failed under the cancel.
 * Nothing leaves a final status (its run is freed), and canceling goes nowhere but an
 * end: a canceled run is never preempted, restarted or started again. */
static const bool MOVES[RUN_STATUS_COUNT][RUN_STATUS_COUNT] = {
    [RUN_QUEUED] = {[RUN_STARTING] = true, [RUN_FAILED] = true, [RUN_CANCELED] = true, [RUN_STOPPED] = true},
    [RUN_STARTING] = {[RUN_RUNNING] = true, [RUN_CANCELING] = true, [RUN_QUEUED] = true, FINAL_MOVES},
    [RUN_RUNNING] = {[RUN_CANCELING] = true, [RUN_QUEUED] = true, FINAL_MOVES},
    [RUN_CANCELING] = {FINAL_MOVES},
};

bool run_move_legal(run_status from, run_status to) {
    return (unsigned)from < RUN_STATUS_COUNT && (unsigned)to < RUN_STATUS_COUNT && MOVES[from][to];
}

/* The one place a live run's status moves. An illegal move is refused: logged as the
 * bug it is, the run left as it was, and the caller queues nothing to the store (each
 * transition asks here first), so memory and the store still agree. In the sanitizer
 * build, where the tests run every server under checks, it also aborts: a test that
 * makes one fails there, loudly, instead of passing over a log line. A server in
 * production goes on: one run left as it was is better than every run lost with it. */
static bool set_status_locked(live_run *r, run_status to) {
    if (run_move_legal(r->status, to)) {
        r->status = to;
        live_runs_changed(); /* what the tick watches */
        return true;
    }
    log_error("run %lld: its status cannot move from %s to %s: the move is refused (a bug in the scheduler)",
              (long long)r->id, run_status_name(r->status), run_status_name(to));
    if (DDPD_SANITIZED) abort();
    return false;
}

/* ---- how a run ends ---- */

void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code, int64_t exit_signal) {
    if (!set_status_locked(r, status)) return;
    close_open_attempt_locked(r, run_status_name(status), reason); /* its launcher was killed before it closed it */
    /* its timeline's end before its final status, in the store's order: whoever reads
     * the run ended reads that entry too (they may fall in two commits) */
    timeline_note_locked(r, "ended", json_pack("{s:s, s:o}", "status", run_status_name(status), "reason",
                                               json_string_or_null(reason)));
    store_op op = {.kind = OP_RUN_FINISH, .run_id = r->id, .t = now_ms()};
    op.u.finish.status = run_status_name(status);
    op.u.finish.reason = xstrdup(reason);
    op.u.finish.exit_code = exit_code;
    op.u.finish.exit_signal = exit_signal;
    store_submit_now(&op);
    usage_fold_locked(r);
    log_info("run %lld %s%s%s", (long long)r->id, run_status_name(status), reason ? ": " : "", reason ? reason : "");
    if (sched.c.run_ended) sched.c.run_ended(r->id); /* no hello opens a connection for it from now on */
    disk_use_run_ended(r->id); /* what it left on disk, measured (disk_use.h) */
    release_started_locked(r);
    relay_run_ended(r->id); /* where its agents' logs were, kept across its attempts */
    live_run_drop(r);
}

bool fail_for_good_locked(live_run *r, const char *reason) {
    bool done = r && !r->cancel_reason && !r->fail_reason;
    if (done && r->status == RUN_QUEUED) {
        finish_locked(r, RUN_FAILED, reason, NO_INT, NO_INT);
    } else if (done) {
        r->fail_reason = xstrdup(reason);
        r->fail_final = true;
        log_warn("run %lld: %s: %s", (long long)r->id, reason,
                 r->across ? "its nodes are told to stop it" : "its launcher is told to stop");
        if (r->start_stored || batch_pending(r)) stop_parts_locked(r); /* else once its start is done */
    }
    return done;
}

/* ---- stops: a cancel, a preemption ---- */

int run_stop_grace_ms(const live_run *r, bool preemption) {
    int server = preemption ? sched.c.preempt_grace_ms : sched.c.cancel_grace_ms;
    int64_t asked = (int64_t)r->stop_grace_s * 1000;
    if (asked > sched.c.max_stop_grace_ms) asked = sched.c.max_stop_grace_ms;
    return asked > server ? (int)asked : server;
}

/* How long the executor waits after its SIGTERM before it kills a part's launcher: a
 * command run's launcher kills its ranks at their grace and then closes its attempt. */
static int launcher_kill_ms(const live_run *r, bool preemption) {
    return r->command ? run_stop_grace_ms(r, preemption) + LAUNCHER_GRACE_MARGIN_MS : sched.c.cancel_grace_ms;
}

void stop_parts_locked(live_run *r) {
    if (r->across && r->parts_stopping) return; /* a run of this host alone is asked again (a cancel after a hang) */
    r->parts_stopping = true;
    for (int i = 0; i < r->n_parts; i++) {
        run_part *p = &r->parts[i];
        if (p->ended) continue;
        p->stop = true;
        p->stop_t = now_ms();
        p->exec->stop(r->id, i, launcher_kill_ms(r, false));
    }
}

void signal_cancel_locked(live_run *r) {
    if (r->status != RUN_CANCELING && !set_status_locked(r, RUN_CANCELING)) return;
    /* a paused sweep trial of this host alone: the notice first, as a preemption's, so
     * that it checkpoints before its SIGTERM (its nodes would not agree on a step) */
    if (r->cancel_notice && !r->across) stop_with_notice_locked(r);
    else stop_parts_locked(r);
    store_op op = {.kind = OP_RUN_CANCELING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    log_info("run %lld canceling: %s", (long long)r->id,
             r->across ? "its nodes are told to stop it" : "its launcher is told to stop");
}

/* The parts are asked to stop for a preemption (its executor's preempt: SIGUSR1 to the
 * launcher), the notice: a built-in run's launcher writes a checkpoint at its next step
 * and stops; a command run's sends SIGUSR1 on to the ranks that listen for it (the
 * others get SIGTERM), which checkpoint and say so, and stops them once the server has
 * that checkpoint (notice_checkpoint_locked) or at the preemption's grace's end
 * (SIGKILL: --preempt-grace passed to ddp-run). Where the executor has no preempt, it
 * is stopped as a cancel stops it. */
void stop_with_notice_locked(live_run *r) {
    if (!r->notice_ms) {
        r->notice_ms = now_ms();
        r->notice_answered = false;
        timeline_note_locked(r, "notice", json_pack("{s:i}", "grace_s", run_stop_grace_ms(r, true) / 1000));
    }
    for (int i = 0; i < r->n_parts; i++) {
        run_part *p = &r->parts[i];
        if (p->ended) continue;
        p->stop = true;
        p->stop_t = now_ms();
        int preempt_ms = r->command ? launcher_kill_ms(r, true) : sched.c.preempt_grace_ms;
        if (p->exec->preempt) p->exec->preempt(r->id, i, preempt_ms, launcher_kill_ms(r, false));
        else p->exec->stop(r->id, i, launcher_kill_ms(r, false));
    }
}

/* The audit log's entry of the scheduler's decision `action` on run r, queued ahead
 * of the ops that carry it out (audit.h). */
static void audit_decision_locked(const live_run *r, const char *action, json_t *detail) {
    char target[40];
    snprintf(target, sizeof target, "run/%lld", (long long)r->id);
    audit_queue(AUDIT_SERVER, action, r->id, target, r->owner, detail);
}

void preempt_locked(live_run *r, int64_t by) {
    r->preempt_by = by;
    live_run *p = by > 0 ? find_run(by) : NULL;
    audit_decision_locked(r, "run.preempt", json_pack("{s:I,s:s?}", "preemptor", (json_int_t)by, "preemptor_owner",
                                                      p ? p->owner : NULL));
    store_op op = {.kind = OP_RUN_PREEMPTING, .run_id = r->id, .t = now_ms()};
    op.u.preempting.by = by;
    store_submit_now(&op); /* before the signal: a server that dies now queues it again at start-up */
    timeline_note_locked(r, "preempted", json_pack("{s:I,s:b}", "by", (json_int_t)by, "time_slice", r->preempt_slice));
    log_info("run %lld %s run %lld: %s", (long long)r->id,
             r->preempt_slice ? "yields its devices at its time slice's end to" : "preempted for", (long long)by,
             r->command ? "its launcher is told to stop; it restarts once placed again"
                        : "its launcher is told to checkpoint at the current step and stop; it resumes from there "
                          "once placed again");
    if (r->start_stored) stop_with_notice_locked(r); /* else once its start is done (store_start_locked) */
}

void preempt_again_locked(live_run *r) { stop_with_notice_locked(r); }

bool notice_checkpoint_locked(live_run *r) {
    if (!r || !r->notice_ms || r->notice_answered || !r->command || r->across) return false;
    r->notice_answered = true;
    log_info("run %lld: its checkpoint is durable %lld ms after the notice: its launcher is told to stop its ranks "
             "now", (long long)r->id, (long long)(now_ms() - r->notice_ms));
    timeline_note_locked(r, "notice_answered", json_pack("{s:I}", "after_ms", (json_int_t)(now_ms() - r->notice_ms)));
    for (int i = 0; i < r->n_parts; i++) { /* SIGUSR1 again: ddp-run stops its ranks (SIGTERM) */
        run_part *p = &r->parts[i];
        if (!p->ended && p->exec->preempt)
            p->exec->preempt(r->id, i, launcher_kill_ms(r, true), launcher_kill_ms(r, false));
    }
    return true;
}

void resize_locked(live_run *r, int to, int64_t by) {
    if (to < r->min_ranks || to > r->width || to == r->world_size) return;
    r->resize_to = to;
    r->resize_by = by;
    live_run *p = by > 0 ? find_run(by) : NULL;
    audit_decision_locked(r, "run.resize", json_pack("{s:i,s:i,s:s,s:o,s:s?}", "from", r->world_size, "to", to, "why",
                                                     by ? "shrink" : "grow", "for_run", by > 0 ? json_integer(by) : json_null(),
                                                     "for_owner", p ? p->owner : NULL));
    char for_run[48] = "";
    if (by > 0) snprintf(for_run, sizeof for_run, " for run %lld", (long long)by);
    log_info("run %lld: %s from %d to %d ranks%s: its launcher is told to checkpoint at the current step and stop; it "
             "starts again at once on %d ranks from there", (long long)r->id, to < r->world_size ? "shrunk" : "grown",
             r->world_size, to, for_run, to);
    /* in the store before the stop: a server that dies before the relaunch goes on with it at start-up */
    timeline_note_locked(r, "resizing", json_pack("{s:i, s:i, s:s, s:o}", "from", r->world_size, "to", to, "why",
                                                  by ? "shrink" : "grow", "by", by > 0 ? json_integer(by) : json_null()));
    if (r->start_stored) stop_with_notice_locked(r); /* else once its start is done (store_start_locked) */
}

void resize_again_locked(live_run *r, int to, int64_t by) {
    r->resize_to = to;
    r->resize_by = by;
    log_info("run %lld: its change of size to %d ranks was under way when the server stopped: its launcher is told "
             "again to checkpoint and stop, and it starts again on %d ranks", (long long)r->id, to, to);
    stop_with_notice_locked(r);
}

void timeout_locked(live_run *r, const char *reason) {
    if (r->timeout_reason || r->cancel_reason || r->fail_reason) return;
    r->timeout_reason = xstrdup(reason);
    audit_decision_locked(r, "run.timeout", json_pack("{s:s}", "reason", reason));
    timeline_note_locked(r, "timeout", json_pack("{s:s}", "reason", reason));
    log_info("run %lld: %s: %s", (long long)r->id, reason,
             r->across ? "its nodes are told to stop it"
             : r->command ? "its launcher is told to stop its ranks (SIGTERM, the grace)"
                          : "its launcher is told to checkpoint at the current step and stop");
    if (!r->start_stored) return; /* asked once its start is done (store_start_locked) */
    if (r->across) stop_parts_locked(r); /* its nodes would not agree on a step to stop at */
    else stop_with_notice_locked(r);
}

/* ---- back to the queue: after a preemption, for a restart ---- */

/* A built-in run's position to continue from: its newest checkpoint's (it resumes
 * from it), else the start. */
static void continue_point(live_run *r, int64_t *global_step, int64_t *epoch) {
    char *dir = layout_run_dir(r->id), *path = ckpt_newest(dir);
    free(dir);
    ckpt_header h = {0};
    char err[512];
    *global_step = 0;
    *epoch = -1;
    r->resume = path && ckpt_header_read(layout_runs_dir(), path, &h, err, sizeof err) == 0 && h.global_step >= 0 && h.next_epoch >= 0;
    if (r->resume) {
        *global_step = h.global_step;
        *epoch = h.next_epoch - 1;
    } else if (path) {
        log_warn("run %lld: its newest checkpoint cannot be read (%s): it starts again from the beginning",
                 (long long)r->id, err);
    }
    ckpt_header_free(&h);
    free(path);
}

/* A preempted run that ended: queued again, its devices back, to continue from its
 * newest checkpoint (a built-in run) or with its restart count one higher (a command
 * run). */
static void requeue_locked(live_run *r) {
    if (!set_status_locked(r, RUN_QUEUED)) return;
    int64_t by = r->preempt_by, now = now_ms();
    char said[64] = "preempted";
    if (by > 0) snprintf(said, sizeof said, "preempted by run %lld", (long long)by);
    char *how = preempted_reason(r);
    close_open_attempt_locked(r, "preempted", how);
    audit_decision_locked(r, "run.requeue", json_pack("{s:I,s:s}", "preemptor", (json_int_t)by, "reason", said));
    store_op op = {.kind = OP_RUN_REQUEUE, .run_id = r->id, .t = now};
    op.u.requeue.by = by;
    op.u.requeue.reason = how; /* the attempt's end, as its user reads it */
    if (r->command) {
        op.u.requeue.from_global_step = op.u.requeue.from_epoch = NO_INT;
        r->restart_count++; /* TORCHELASTIC_RESTART_COUNT one higher: the script loads its own checkpoint */
        r->restarts_from++; /* a preemption is no failure: it uses none of distributed.max_restarts */
    } else {
        continue_point(r, &op.u.requeue.from_global_step, &op.u.requeue.from_epoch);
    }
    store_submit_now(&op);
    timeline_note_locked(r, "queued_again", json_pack("{s:o, s:o}", "by", by > 0 ? json_integer(by) : json_null(),
                                                      "from_global_step", json_int_or_null(op.u.requeue.from_global_step)));
    /* the work since its newest checkpoint is thrown away: its preemptor's owner pays for
     * it in fair share, not its own (the usage ledger charges it likewise, measured) */
    int64_t since = r->checkpoint_ms > r->started_ms ? r->checkpoint_ms : r->started_ms;
    double lost_s = since > 0 && now > since ? (double)(now - since) / 1000.0 * r->world_size : 0;
    live_run *preemptor = by > 0 ? find_run(by) : NULL;
    char *payer = preemptor && preemptor->owner ? xstrdup(preemptor->owner) : NULL;
    bool known = preemptor != NULL;
    back_to_queue_locked(r);
    if (known) usage_charge_locked(r->owner, payer, lost_s);
    free(payer);
    r->queued_ms = now;
    r->requeued_by = by ? by : -1;
    r->requeued_slice = r->preempt_slice;
    r->preempt_by = 0;
    r->preempt_slice = false;
    r->world_size = r->width; /* an elastic run shrunk, preempted whole: it asks for its width again */
    r->resize_to = 0;
    char why[64] = "its preemption";
    if (by > 0) snprintf(why, sizeof why, "its preemption for run %lld", (long long)by);
    if (r->command)
        log_info("run %lld queued again after %s: it restarts with TORCHELASTIC_RESTART_COUNT %d", (long long)r->id,
                 why, r->restart_count);
    else
        log_info("run %lld queued again after %s: it continues from global step %lld", (long long)r->id, why,
                 (long long)op.u.requeue.from_global_step);
}

/* An elastic run stopped to be resized has ended (resize_locked): queued again from
 * its newest checkpoint and started at once on its new number of ranks (a grow: on
 * what is free of it now, at least what it had), before anything else can take the
 * devices it keeps. No preemption is counted, no restart used and no attempt ended:
 * its start again goes on with the same attempt, whose row reads running again; its
 * timeline says "resized" (from, to, why, for which run), which its sizes read. */
static void relaunch_resized_locked(live_run *r, bool start_now) {
    int from = r->world_size, to = r->resize_to;
    int64_t by = r->resize_by, now = now_ms();
    if (!set_status_locked(r, RUN_QUEUED)) return;
    const char *why = by ? "shrink" : "grow";
    store_op op = {.kind = OP_RUN_REQUEUE, .run_id = r->id, .t = now};
    op.u.requeue.by = by;
    /* a command run resumes from its own checkpoint, its steps reported again; its
     * TORCHELASTIC_RESTART_COUNT stays what it is now (its launcher's own restarts
     * included), as torchrun's scaling events count no restart */
    if (r->attempt > r->restart_count) r->restart_count = r->attempt;
    if (r->command) op.u.requeue.from_global_step = op.u.requeue.from_epoch = NO_INT;
    else continue_point(r, &op.u.requeue.from_global_step, &op.u.requeue.from_epoch);
    back_to_queue_locked(r); /* its devices back: it takes what it starts on again below */
    int free_now = device_pool_free(&sched.devices, r->pool); /* at least `from`: its own are back */
    if (start_now && to > free_now) to = free_now; /* a grow whose free devices another start took meanwhile */
    if (to < r->min_ranks) to = r->min_ranks;
    op.u.requeue.resized_to = to;
    store_submit_now(&op);
    timeline_note_locked(r, "resized", json_pack("{s:i, s:i, s:s, s:o, s:o}", "from", from, "to", to, "why", why, "by",
                                                 by > 0 ? json_integer(by) : json_null(), "from_global_step",
                                                 json_int_or_null(op.u.requeue.from_global_step)));
    r->world_size = to;
    r->resize_to = 0;
    r->resize_by = 0;
    r->resized_ms = now;
    r->reopen_attempt = true; /* a resize is no attempt: its start again goes on with the same one */
    r->queued_ms = now;
    log_info("run %lld resized from %d to %d ranks (%s): it continues from global step %lld%s", (long long)r->id, from,
             to, why, (long long)op.u.requeue.from_global_step, start_now ? "" : " once placed");
    int here = 0;
    if (start_now) start_run_locked(r, false, &here, 1); /* a start that fails finishes it, saying why */
}

/* A resize's stop has ended the run without its succeeding: it starts again resized,
 * unless it was canceled, stopped for its time, failed or preempted meanwhile. */
static bool relaunches(const live_run *r, bool succeeded) {
    return r->resize_to && !succeeded && !r->cancel_reason && !r->timeout_reason && !r->fail_reason && !r->preempt_by;
}

/* A run asked to stop for a preemption has ended without succeeding: it is queued
 * again, unless it was canceled meanwhile (the cancel stands). */
static bool requeues(const live_run *r, bool succeeded) {
    return r->preempt_by && !succeeded && !r->cancel_reason && !r->timeout_reason;
}

/* A run that failed with *reason, in a way another attempt may mend (f: the rank
 * blamed): its attempt's end recorded (run_restart.c) and, while restarts remain,
 * queued again to start its next attempt: everything it held goes back. true then (r
 * stays, queued; *reason is left); else false, *reason reworded when no restart
 * remained, and the caller finishes it. */
static bool restart_locked(live_run *r, char **reason, const rank_failure *f) {
    if (!restart_or_fail_locked(r, reason, f) || !set_status_locked(r, RUN_QUEUED)) return false;
    const char *why = *reason ? *reason : "its processes were gone";
    int next = r->attempt + 1;
    audit_decision_locked(r, "run.restart", json_pack("{s:i,s:s}", "attempt", next, "reason", why));
    store_op op = {.kind = OP_RUN_RESTART, .run_id = r->id, .t = now_ms()};
    op.u.restart.attempt = next;
    op.u.restart.reason = xstrdup(why);
    store_submit_now(&op);
    timeline_note_locked(r, "restarted", json_pack("{s:i, s:s}", "attempt", next, "reason", why));
    log_info("run %lld: attempt %d ended (%s): queued again to start attempt %d (TORCHELASTIC_RESTART_COUNT=%d)",
             (long long)r->id, r->attempt, why, next, next);
    back_to_queue_locked(r);
    r->restart_count = r->attempt = next;
    free(r->fail_reason);
    r->fail_reason = NULL;
    r->fail_class = NULL;
    rank_failure_clear(&r->server_blame);
    return true;
}

/* ---- a start ---- */

/* A MASTER_PORT for a command run: in the range, held by no live run, free on the
 * host now (a bind succeeds); taken round the range so a port just released is not
 * the next one given. 0 when none is. */
static int lease_port_locked(void) {
    int span = sched.c.port_hi - sched.c.port_lo + 1;
    if (sched.next_port < sched.c.port_lo || sched.next_port > sched.c.port_hi) sched.next_port = sched.c.port_lo;
    for (int i = 0; i < span; i++) {
        int port = sched.c.port_lo + (sched.next_port - sched.c.port_lo + i) % span;
        bool held = false;
        for (live_run *o = sched.runs; o && !held; o = o->next) held = o->port == port;
        if (!held && port_is_free(port)) {
            sched.next_port = port + 1;
            return port;
        }
    }
    return 0;
}

bool batch_pending(const live_run *r) {
    return r->status != RUN_QUEUED && !r->start_stored && r->n_parts > 0 && r->parts[0].exec->batch;
}

/* What every start does before its launchers run, the run starting: a secret and (a
 * command run) a MASTER_PORT, unless a batch system places it (its node 0 picks one
 * there). false when it failed instead (finished). */
static bool begin_start_locked(live_run *r, buf_t *json) {
    buf_printf(json, "]");
    r->devices_json = json->data;
    json->data = NULL;
    char why[1024];
    if (sched.c.config_mend && sched.c.config_mend(r->id, why, sizeof why) != 0) { /* its submission's write unflushed */
        finish_locked(r, RUN_FAILED, why, NO_INT, NO_INT);
        return false;
    }
    if (random_hex(r->secret, 32) != 0) {
        char err[256];
        snprintf(err, sizeof err, "cannot make a secret for the run: getrandom failed: %s", strerror(errno));
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        return false;
    }
    rendezvous_open(r->id, r->secret); /* its processes exchange their addresses there */
    if (r->command && !r->parts[0].exec->batch) {
        r->port = lease_port_locked();
        if (!r->port) {
            char err[256];
            snprintf(err, sizeof err, "no free port for MASTER_PORT in --port-range %d-%d (all held by runs or by "
                     "other programs): an operator can give ddpd serve a wider --port-range", sched.c.port_lo,
                     sched.c.port_hi);
            finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
            return false;
        }
    }
    if (r->command) watch_hangs_of(r);
    return true;
}

/* A batch run's devices, once its parts run: each node's ranks, named by the node the
 * batch system gave it (["n1/cpu:0","n1/cpu:1","n2/cpu:0",...]). */
static void name_batch_devices_locked(live_run *r) {
    buf_t json = {0};
    int per_node = r->world_size / r->n_parts;
    buf_printf(&json, "[");
    for (int p = 0; p < r->n_parts; p++) {
        for (int d = 0; d < per_node; d++) {
            char name[200], gpu[16];
            snprintf(gpu, sizeof gpu, "%d", d); /* the node's d-th of those the system gave the job */
            const char *place = r->parts[p].handle.place;
            device_name(r->pool, place[0] ? place : NULL, gpu, d, name, sizeof name);
            buf_printf(&json, "%s\"%s\"", json.len > 1 ? "," : "", name);
        }
    }
    buf_printf(&json, "]");
    free(r->devices_json);
    r->devices_json = json.data;
}

/* Every part's start is done: the run's start is stored, with this host's launcher
 * (pid and start time) when it has a part here, or its batch system's job. */
static void store_start_locked(live_run *r) {
    pid_t pid = 0;
    uint64_t start_time = 0;
    bool batch = r->parts[0].exec->batch;
    for (int i = 0; i < r->n_parts && !batch; i++) {
        if (r->parts[i].node) continue;
        pid = r->parts[i].handle.pid;
        start_time = r->parts[i].handle.start_time;
    }
    if (batch) name_batch_devices_locked(r);
    store_op op = {.kind = OP_RUN_STARTING, .run_id = r->id, .t = now_ms()};
    op.u.starting.job = batch && r->parts[0].handle.job[0] ? xstrdup(r->parts[0].handle.job) : NULL;
    op.u.starting.devices = xstrdup(r->devices_json);
    op.u.starting.pid = pid > 0 ? pid : NO_INT;
    op.u.starting.pid_start_time = pid > 0 && start_time ? (int64_t)start_time : NO_INT;
    op.u.starting.secret = xstrdup(r->secret);
    store_submit_now(&op);
    r->start_stored = true;
    if (pid > 0) log_info("run %lld: trainer started (pid %d)", (long long)r->id, (int)pid);
    if (r->cancel_reason) signal_cancel_locked(r); /* canceled while its start was under way */
    else if (r->fail_reason) stop_parts_locked(r); /* failed by the server (scheduler_fail) meanwhile */
    else if (r->preempt_by || r->resize_to) stop_with_notice_locked(r); /* preempted, resized meanwhile */
    else if (r->timeout_reason && r->across) stop_parts_locked(r); /* its time was up meanwhile */
    else if (r->timeout_reason) stop_with_notice_locked(r);
    else if (r->said_hello && r->status == RUN_STARTING) mark_running_locked(r);
}

part_launch launch_of(const live_run *r, int part, const launch_place *at, launch_keep *keep) {
    const run_part *p = &r->parts[part];
    int per_node = r->world_size / r->n_parts;
    snprintf(keep->rendezvous, sizeof keep->rendezvous, "/runs/%lld/rendezvous", (long long)r->id);
    /* whom its processes run as (run_as.h), decided here for every executor */
    run_as_verdict as = run_as_resolve(r->owner, r->command, &keep->account, keep->refused, sizeof keep->refused);
    /* what its cgroup holds its part to (run_limits.h; where the executor has none, it
     * ignores them: an agent's node, a batch system's) */
    int64_t memory = run_memory_limit(r->memory_asked, r->owner, r->pool, per_node, r->world_size,
                                      sched.c.memory_per_device[r->pool], keep->memory_from, sizeof keep->memory_from);
    long pids = run_pids_limit(sched.c.max_run_processes, per_node);
    return (part_launch){
        .run = r->id, .part = part, .nodes = r->across ? r->n_parts : 0, .node = p->node, .world_size = r->world_size,
        .gpu = r->pool == POOL_GPU, .command = r->command, .resume = r->resume, .secret = r->secret,
        .ranks = r->world_size != r->width ? r->world_size : 0, /* an elastic run, resized (--ranks) */
        .master_port = r->port, /* a batch system's node 0 picks one there */
        .port_lo = sched.c.port_lo, .port_hi = sched.c.port_hi,
        /* a batch system's parts too: a restart the server makes of such a run (a new job, by
         * retry_elsewhere) is its next attempt, whose launcher's events count as that attempt's */
        .restart_count = r->restart_count, .restarts_from = r->restarts_from,
        .master_addr = at ? at->master_addr : NULL, .rendezvous = keep->rendezvous, .n_devices = per_node,
        .devices = at ? at->devices + part * per_node : NULL, .visible = at && !p->node ? at->visible : NULL,
        .where = at ? at->where : NULL, .owner = r->owner, .priority = r->priority, .preemptible = r->preemptible,
        .stop_grace_s = run_stop_grace_ms(r, false) / 1000, .preempt_grace_s = run_stop_grace_ms(r, true) / 1000,
        .account = as == RUN_AS_ACCOUNT ? &keep->account : NULL,
        .account_refused = as == RUN_AS_REFUSED ? keep->refused : NULL,
        .memory_bytes = memory, .memory_from = keep->memory_from, .pids_max = pids, .sweep_id = r->sweep_id};
}

/* Which devices of a node (`node`: its name; `id`: 0 for this host) r is given last:
 * the suspect ones (suspects.h), and those its attempts failed on (failed_at). */
static bool *take_last(const live_run *r, int id, const char *node) {
    node_pool np = r->pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU;
    int n = id ? nodes_capacity(id, np) : device_pool_capacity(&sched.devices, r->pool);
    bool *last = xcalloc(n > 0 ? (size_t)n : 1, sizeof *last);
    for (int i = 0; i < n; i++) {
        char dev[200];
        device_name(r->pool, NULL, id ? nodes_gpu_id(id, i) : r->pool == POOL_GPU ? sched.devices.gpus[i] : NULL, i,
                    dev, sizeof dev);
        last[i] = suspect_device_of(node, dev);
        char *place = xasprintf("%s/%s", node, dev);
        for (int j = 0; j < r->n_failed_at && !last[i]; j++) last[i] = strcmp(r->failed_at[j], place) == 0;
        free(place);
    }
    return last;
}

bool start_run_locked(live_run *r, bool across, const int *ids, int k) {
    if (!set_status_locked(r, RUN_STARTING)) return true; /* nothing changed: nothing to decide again */
    int per_node = r->world_size / k;
    r->across = across;
    r->started_ms = now_ms();
    r->requeued_by = 0;
    r->requeued_slice = r->preempt_slice = false;
    r->attempt = r->restart_count;
    r->attempt_open = false;
    r->n_parts = k;
    r->parts = xcalloc((size_t)k, sizeof *r->parts);
    int *devices = xmalloc((size_t)r->world_size * sizeof *devices); /* part p's: devices + p * per_node */
    buf_t names = {0}, json = {0}, visible = {0};
    buf_printf(&json, "[");
    char master_addr[NODE_ADDR_MAX] = "";
    for (int p = 0; p < k; p++) {
        run_part *part = &r->parts[p];
        part->node = ids[p];
        part->node_rank = p;
        part->exec = part->node ? sched.agents : sched.local;
        part->exit_code = part->exit_signal = NO_INT;
        part->failure = (rank_failure){.rank = NO_INT, .exit_code = NO_INT, .signal = NO_INT};
        int *mine = devices + p * per_node;
        if (!part->node) {
            bool *last = take_last(r, 0, local_node_name());
            device_pool_take(&sched.devices, r->pool, per_node, r->id, last, mine, &names, &json, &visible);
            free(last);
            if (p == 0 && across) snprintf(master_addr, sizeof master_addr, "%s", sched.c.advertise);
            continue;
        }
        char node_name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
        nodes_describe(part->node, node_name, sizeof node_name, address, sizeof address);
        if (p == 0) snprintf(master_addr, sizeof master_addr, "%s", address);
        bool *last = take_last(r, part->node, node_name);
        nodes_take(part->node, r->pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU, per_node, r->id, last, mine);
        free(last);
        for (int d = 0; d < per_node; d++) {
            char name[200];
            device_name(r->pool, node_name, nodes_gpu_id(part->node, mine[d]), mine[d], name, sizeof name);
            buf_printf(&names, "%s%s", names.len ? ", " : "", name);
            buf_printf(&json, "%s\"%s\"", json.len > 1 ? "," : "", name);
        }
    }
    bool ok = begin_start_locked(r, &json);
    if (ok) {
        json_t *given = r->devices_json ? json_loads(r->devices_json, 0, NULL) : NULL;
        timeline_note_locked(r, "admitted", json_pack("{s:o, s:i}", "devices", given ? given : json_array(), "nodes", k));
        if (across)
            log_info("run %lld starting on %d nodes (%d ranks each): %s; MASTER_ADDR %s", (long long)r->id, k,
                     per_node, names.data, master_addr);
        else log_info("run %lld starting on %s", (long long)r->id, names.data);
        if (r->command && (int64_t)r->stop_grace_s * 1000 > sched.c.max_stop_grace_ms)
            log_warn("run %lld asks for a stop grace of %d s (distributed.stop_grace_s); this server allows at most "
                     "%d s (--max-stop-grace): its ranks get that", (long long)r->id, r->stop_grace_s,
                     sched.c.max_stop_grace_ms / 1000);
        launch_place at = {.devices = devices, .visible = visible.data, .where = names.data, .master_addr = master_addr};
        bool pending = false;
        for (int p = 0; p < k; p++) {
            run_part *part = &r->parts[p];
            launch_keep keep;
            part_launch l = launch_of(r, p, &at, &keep);
            part->pending = part->exec->start(&l, &part->handle) == START_PENDING;
            pending |= part->pending;
        }
        if (!pending) store_start_locked(r); /* no launcher whose start is still under way */
    }
    free(devices);
    buf_free(&json);
    buf_free(&names);
    buf_free(&visible);
    return ok;
}

#define BATCH_EXCLUDE_MAX (RUN_FAILED_AT_MAX + 48)

/* The nodes a run restarted by retry_elsewhere keeps away from on a batch system (its
 * job's --exclude), each with why: the nodes its attempts failed on (failed_at, less
 * the device: Slurm gives whole nodes) and the nodes ddpd marks suspect as a whole, or
 * excludes (suspects.h; a node with suspect devices alone is not, as Slurm cannot keep
 * a job off one device). None for any other start: Slurm places it. Their count. */
static int batch_exclusions_locked(const live_run *r, char names[][NODE_NAME_MAX], const char **why, int max) {
    int n = 0;
    for (int i = 0; r->elsewhere && i < r->n_failed_at && n < max; i++) {
        size_t len = strcspn(r->failed_at[i], "/");
        bool known = false;
        for (int k = 0; k < n && !known; k++) known = strlen(names[k]) == len && !strncmp(names[k], r->failed_at[i], len);
        if (known || !len || len >= NODE_NAME_MAX) continue;
        snprintf(names[n], NODE_NAME_MAX, "%.*s", (int)len, r->failed_at[i]);
        why[n++] = "its attempt failed there";
    }
    json_t *marks = r->elsewhere ? suspects_json_locked() : NULL;
    size_t i;
    json_t *m;
    json_array_foreach(marks, i, m) {
        const char *node = json_string_value(json_object_get(m, "node"));
        bool excluded = false, known = false;
        if (!node || !node[0] || strlen(node) >= NODE_NAME_MAX || n >= max) continue;
        for (int k = 0; k < n && !known; k++) known = strcmp(names[k], node) == 0;
        if (known || !(suspect_of(node, &excluded) || excluded)) continue;
        snprintf(names[n], NODE_NAME_MAX, "%s", node);
        why[n++] = excluded ? "excluded: it failed too many runs" : "suspect";
    }
    json_decref(marks);
    return n;
}

bool start_batch_locked(live_run *r) {
    if (!set_status_locked(r, RUN_STARTING)) return true;
    int k = r->nodes_wanted > 1 ? r->nodes_wanted : 1;
    r->across = k > 1;
    r->n_parts = k;
    r->parts = xcalloc((size_t)k, sizeof *r->parts);
    for (int p = 0; p < k; p++)
        r->parts[p] = (run_part){.node_rank = p, .exec = sched.batch, .exit_code = NO_INT, .exit_signal = NO_INT};
    buf_t json = {0};
    buf_printf(&json, "[");
    if (!begin_start_locked(r, &json)) return false;
    log_info("run %lld handed to %s: %d node%s, %d rank%s each", (long long)r->id, sched.batch->title, k,
             k > 1 ? "s" : "", r->world_size / k, r->world_size / k > 1 ? "s" : "");
    char names[BATCH_EXCLUDE_MAX][NODE_NAME_MAX];
    const char *why[BATCH_EXCLUDE_MAX], *list[BATCH_EXCLUDE_MAX];
    int n_exclude = batch_exclusions_locked(r, names, why, BATCH_EXCLUDE_MAX);
    if (n_exclude) { /* the attempt's timeline says where its job may not go */
        json_t *nodes = json_array(), *whys = json_object();
        for (int i = 0; i < n_exclude; i++) {
            list[i] = names[i];
            json_array_append_new(nodes, json_string(names[i]));
            json_object_set_new(whys, names[i], json_string(why[i]));
        }
        timeline_note_locked(r, "excluded_nodes", json_pack("{s:i, s:o, s:o}", "attempt", r->restart_count, "nodes",
                                                             nodes, "why", whys));
        log_info("run %lld: restarted by retry_elsewhere: its job excludes %d node%s", (long long)r->id, n_exclude,
                 n_exclude > 1 ? "s" : "");
    }
    for (int p = 0; p < k; p++) {
        launch_keep keep;
        part_launch l = launch_of(r, p, NULL, &keep);
        l.exclude = list;
        l.exclude_why = why;
        l.n_exclude = n_exclude;
        r->parts[p].pending = sched.batch->start(&l, &r->parts[p].handle) == START_PENDING;
    }
    return true;
}

void job_submitted_locked(live_run *r, const part_handle *h) {
    for (int i = 0; i < r->n_parts; i++) snprintf(r->parts[i].handle.job, sizeof r->parts[i].handle.job, "%s", h->job);
    store_op op = {.kind = OP_RUN_SUBMITTED, .run_id = r->id, .t = now_ms()};
    op.u.submitted.job = xstrdup(h->job);
    op.u.submitted.secret = xstrdup(r->secret);
    store_submit_now(&op);
    log_info("run %lld is %s job %s", (long long)r->id, r->parts[0].exec->title, h->job);
}

void part_started_locked(live_run *r, int part, const part_handle *h) {
    if (part < 0 || part >= r->n_parts || !r->parts[part].pending) return;
    r->parts[part].pending = false;
    r->parts[part].handle = *h;
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].pending) return;
    store_start_locked(r);
}

void mark_running_locked(live_run *r) {
    if (!set_status_locked(r, RUN_RUNNING)) return;
    store_op op = {.kind = OP_RUN_RUNNING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    timeline_note_locked(r, "started", NULL);
    log_info("run %lld running", (long long)r->id);
}

/* The end the server itself gave a run that did not succeed: canceled by request,
 * or failed by its own decision (a hang, a lost node). Sets *status and a copy of
 * the reason; false when it gave none. */
static bool server_end_locked(const live_run *r, run_status *status, char **reason) {
    const char *why = r->cancel_reason ? r->cancel_reason : r->timeout_reason ? r->timeout_reason : r->fail_reason;
    if (!why) return false;
    *status = r->cancel_reason ? (r->cancel_stops ? RUN_STOPPED : RUN_CANCELED)
              : r->timeout_reason ? RUN_TIMEOUT : RUN_FAILED;
    *reason = xstrdup(why);
    return true;
}

/* A part's reason with what its place said beside it (part_end): that it ran out of
 * its memory limit first, that its log reached its cap last; malloc'd, NULL when
 * there is nothing to say. `failed`: the memory counts only where the run failed. */
static char *with_notes(const char *reason, const part_end *e, bool failed) {
    const char *oom = failed ? e->out_of_memory : NULL;
    if (!oom && !e->log_capped) return reason ? xstrdup(reason) : NULL;
    return xasprintf("%s%s%s%s%s", oom ? oom : "", oom && reason ? ": " : "", reason ? reason : "",
                     e->log_capped && (oom || reason) ? "; " : "", e->log_capped ? e->log_capped : "");
}

/* ---- runs across nodes: their parts' ends ---- */

static const char *part_node_name(const run_part *p, char *buf, size_t n) {
    char address[NODE_ADDR_MAX];
    if (p->handle.place[0]) return p->handle.place; /* named where it ran (a batch system's node) */
    if (!p->node) return local_node_name();
    if (!nodes_describe(p->node, buf, n, address, sizeof address)) snprintf(buf, n, "node %d", p->node);
    return buf;
}

/* The run's end, once every part has ended: succeeded when all did; else the
 * server's own end (a cancel, a lost node, a hang); else the likeliest cause among
 * the parts that failed (part_blame.h), named with its node and ranks. */
static void finish_parts_locked(live_run *r) {
    part_fate *fates = xmalloc((size_t)r->n_parts * sizeof *fates);
    for (int i = 0; i < r->n_parts; i++) {
        const run_part *p = &r->parts[i];
        fates[i] = (part_fate){.exit_code = p->exit_code, .reason = p->reason, .end_t = p->end_t, .stop = p->stop,
                               .stop_t = p->stop_t};
    }
    int who = part_to_blame(fates, r->n_parts);
    free(fates);
    const run_part *blamed = who >= 0 ? &r->parts[who] : NULL;
    bool all_ok = !blamed;
    run_status status = RUN_SUCCEEDED;
    char *reason = NULL;
    int64_t code = 0, sig = NO_INT;
    if (!all_ok && !server_end_locked(r, &status, &reason)) {
        status = RUN_FAILED;
        int per_node = r->world_size / r->n_parts;
        char name[NODE_NAME_MAX];
        reason = xasprintf("node %s (ranks %d to %d): %s", part_node_name(blamed, name, sizeof name),
                           blamed->node_rank * per_node, (blamed->node_rank + 1) * per_node - 1,
                           blamed->reason ? blamed->reason : "its launcher failed");
    }
    if (!all_ok) {
        code = blamed ? blamed->exit_code : NO_INT;
        sig = blamed ? blamed->exit_signal : NO_INT;
    }
    /* A node's part never restarts on its own: the run's next attempt is the server's
     * to start, when another may mend it (a rank died, a node was lost, a hang) */
    bool mendable = (r->fail_reason && !r->fail_final) ||
                    (blamed && (blamed->failure.rank != NO_INT || (blamed->exit_signal != NO_INT && !blamed->reason)));
    if (status == RUN_FAILED && mendable &&
        restart_locked(r, &reason, r->fail_reason ? &r->server_blame : blamed ? &blamed->failure : NULL)) {
        free(reason);
        return;
    }
    finish_locked(r, status, reason, code, sig);
    free(reason);
}

/* A run of this host alone ended with its launcher: its exit status; when it
 * failed, the server's own end, else the launcher's `end` event, else how it ended. */
static void finish_alone_locked(live_run *r, const part_end *e) {
    run_status status = e->exit_code == 0 ? RUN_SUCCEEDED : RUN_FAILED;
    char *reason = NULL;
    if (e->exit_code != 0 && !server_end_locked(r, &status, &reason)) {
        reason = xstrdup(r->end_reason ? r->end_reason : e->how);
        /* its launcher stopped it, checkpointed, at train.stop_after_epochs */
        if (r->end_status && strcmp(r->end_status, run_status_name(RUN_STOPPED)) == 0) status = RUN_STOPPED;
    }
    else if (e->exit_code == 0 && r->command && r->end_reason) /* a success's note: ranks ddp-run stopped at exit */
        reason = xstrdup(r->end_reason);
    if (!r->fail_reason && !r->cancel_reason) { /* the server's own end says why itself */
        char *noted = with_notes(reason, e, status == RUN_FAILED);
        free(reason);
        reason = noted;
    }
    /* its launcher restarts its ranks itself: the server does when it stopped them (a
     * hang, a restart asked for), or when the launcher was killed before its end */
    bool mendable = (r->fail_reason && !r->fail_final) || (!r->end_status && e->exit_signal != NO_INT) ||
                    r->ended_elsewhere; /* retry_elsewhere: its launcher left the restart to the server */
    const rank_failure *blamed = r->fail_reason ? &r->server_blame
                                 : r->ended_elsewhere && r->n_parts ? &r->parts[0].failure : NULL;
    if (status == RUN_FAILED && mendable && restart_locked(r, &reason, blamed)) {
        free(reason);
        return;
    }
    finish_locked(r, status, reason, e->exit_code, e->exit_signal);
    free(reason);
}

bool part_ended_locked(live_run *r, int part, const part_end *e) {
    if (part < 0 || part >= r->n_parts || r->parts[part].ended) return false;
    if (r->adopted) { /* its launcher, not this server's child, is gone: its journal says how it ended */
        finish_from_journal_locked(r, e->how, false);
        return true;
    }
    run_part *p = &r->parts[part];
    p->ended = true;
    p->exit_code = e->exit_code;
    p->exit_signal = e->exit_signal;
    p->end_t = e->end_t;
    if (e->stop_t && !p->stop) { /* its place stopped it, as another part failed */
        p->stop = true;
        p->stop_t = e->stop_t;
    }
    /* its place ended it (a lost node, a batch system's time limit or scancel): the
     * server's own end of the run */
    if (e->lost && !r->fail_reason && !r->cancel_reason) {
        r->fail_reason = xstrdup(e->reason);
        r->fail_class = "infra"; /* its attempt's failure class (run_restart.c) */
    }
    if (e->canceled && !r->fail_reason && !r->cancel_reason) r->cancel_reason = xstrdup(e->reason);
    if (!r->across) {
        if (relaunches(r, e->exit_code == 0)) relaunch_resized_locked(r, true);
        else if (requeues(r, e->exit_code == 0)) requeue_locked(r);
        else finish_alone_locked(r, e);
        return true;
    }
    p->reason = with_notes(e->reason ? e->reason : e->exit_code != 0 ? e->how : NULL, e, e->exit_code != 0);
    if (p->exit_code != 0) stop_parts_locked(r); /* the first failure stops the others */
    for (int i = 0; i < r->n_parts; i++)
        if (!r->parts[i].ended) return false;
    finish_parts_locked(r);
    return true;
}

/* "its journal ends at step 812 without an end event" (malloc'd). */
static char *journal_ending(const live_run *r) {
    const journal_outcome *o = r->journal ? journal_replay_outcome(r->journal) : NULL;
    if (!o || o->last_step == NO_INT) return xstrdup("its journal has no step and no end event");
    return xasprintf("its journal ends at step %lld without an end event", (long long)o->last_step);
}

void finish_from_journal_locked(live_run *r, const char *gone, bool at_start) {
    if (r->journal) journal_replay_read(r->journal, true, 0);
    const journal_outcome *o = r->journal ? journal_replay_outcome(r->journal) : NULL;
    run_status said = RUN_FAILED;
    bool ended = o && o->ended && run_status_parse(o->status, &said) && run_status_is_final(said);
    /* an elastic run whose resize was under way (after a restart of the server): it
     * starts again at its new size; at once when its launcher ended under this server
     * (its devices are known), else once the queue places it (`gone`: at start-up,
     * before every run is taken back) */
    if (relaunches(r, ended && said == RUN_SUCCEEDED)) {
        relaunch_resized_locked(r, !at_start);
        return;
    }
    bool preempted = o && o->ended && strcmp(o->status, "preempted") == 0;
    if (preempted && !r->cancel_reason && !r->timeout_reason && !r->preempt_by) r->preempt_by = -1; /* its launcher said so; for which run the store knows */
    if (requeues(r, ended && said == RUN_SUCCEEDED)) { /* stopped for a preemption: queued again, never failed */
        requeue_locked(r);
        return;
    }
    int64_t code = ended ? o->exit_code : NO_INT;
    if (ended && code == NO_INT) code = said == RUN_SUCCEEDED ? 0 : said == RUN_FAILED ? 1 : NO_INT;
    /* a success stands; else the server's own end; else the journal's; else `gone` */
    run_status status = said;
    char *reason = NULL; /* copied: finishing frees the run and its journal */
    if (!(ended && said == RUN_SUCCEEDED) && !server_end_locked(r, &status, &reason)) {
        if (ended) {
            reason = o->reason ? xstrdup(o->reason) : NULL;
        } else {
            char *ending = journal_ending(r);
            reason = xasprintf("%s; %s", gone, ending);
            free(ending);
        }
    }
    /* processes lost without their end (the server was not there to see them go) */
    bool mendable = (r->fail_reason && !r->fail_final) || !ended;
    if (status == RUN_FAILED && mendable &&
        restart_locked(r, &reason, r->fail_reason ? &r->server_blame : NULL)) {
        free(reason);
        return;
    }
    finish_locked(r, status, reason, code, NO_INT);
    free(reason);
}
