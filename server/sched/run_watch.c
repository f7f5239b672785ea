/* The scheduler's watches: the hang watch of command runs (their ranks' progress and
 * rank_state), and the journal of a run a previous server started, taken back at
 * start-up (run_recovery.c) and fed from it at every tick. See sched_state.h. */
#include "sched_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "journal_replay.h"
#include "logtail.h"
#include "run_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "users.h"

void rank_state_seen_locked(live_run *r, const store_op *op) {
    if (!r || !r->rank_gone || r->status == RUN_QUEUED || op->rank < 0 || op->rank >= r->world_size) return;
    const char *state = op->u.rank_state.state;
    r->rank_gone[op->rank] = state && strcmp(state, "started") != 0;
}

void progress_seen_locked(live_run *r, int rank, int64_t global_step) {
    if (r && rank == 0 && global_step != NO_INT && r->status != RUN_QUEUED) { /* its ETA (scheduler.c) */
        int64_t t = now_ms();
        if (!r->eta_first_ms) timeline_note_locked(r, "first_step", json_pack("{s:I}", "global_step", (json_int_t)global_step));
        if (!r->eta_first_ms || global_step < r->eta_first_step) {
            r->eta_first_step = global_step;
            r->eta_first_ms = t;
        }
        r->eta_last_step = global_step;
        r->eta_last_ms = t;
    }
    if (!r || !r->last_progress_ms || rank < 0 || rank >= r->world_size) return;
    r->last_progress_ms[rank] = mono_ms();
    if (global_step != NO_INT) r->last_step[rank] = global_step;
}

void watch_duration_locked(live_run *r, int64_t now) {
    if (r->status != RUN_RUNNING || !r->started_ms || r->timeout_reason || r->cancel_reason || r->fail_reason ||
        r->preempt_by)
        return;
    long long users = users_max_duration(r->owner);
    int64_t limit = r->max_duration_ms;
    bool owners = users > 0 && (!limit || users * 1000 < limit);
    if (owners) limit = users * 1000;
    if (!limit || now - r->started_ms < limit) return;
    char reason[200];
    snprintf(reason, sizeof reason, "timeout: it ran %lld s, %s max_duration_s of %lld s; resume it to go on from its "
             "newest checkpoint", (long long)((now - r->started_ms) / 1000), owners ? "its owner's" : "its",
             (long long)(limit / 1000));
    timeout_locked(r, reason);
}

/* Command runs only: a rank that has reported and then says nothing for
 * hang_timeout_s stops the run, which fails naming the ranks furthest behind. */
void watch_hang_locked(live_run *r, int64_t now) {
    if (!r->last_progress_ms || r->hang_timeout_s <= 0 || r->fail_reason || r->cancel_reason || !r->start_stored)
        return;
    int64_t limit = (int64_t)(r->hang_timeout_s * 1000);
    bool hung = false;
    int64_t behind = INT64_MAX;
    for (int k = 0; k < r->world_size; k++) {
        if (!r->last_progress_ms[k] || r->rank_gone[k]) continue; /* a rank that exited is not hung */
        if (now - r->last_progress_ms[k] > limit) hung = true;
        if (r->last_step[k] < behind) behind = r->last_step[k];
    }
    if (!hung) return;
    buf_t who = {0};
    int n = 0;
    rank_failure_clear(&r->server_blame);
    for (int k = 0; k < r->world_size; k++) {
        if (!r->last_progress_ms[k] || r->rank_gone[k] || r->last_step[k] != behind) continue;
        buf_printf(&who, "%s%d", n++ ? ", " : "", k);
        if (r->server_blame.rank != NO_INT) continue;
        r->server_blame.rank = k; /* the attempt's failing rank: the first furthest behind, and its last line */
        char *dir = layout_run_dir(r->id), rel[64];
        snprintf(rel, sizeof rel, RUN_DIR_RANK_LOG, k);
        r->server_blame.last_line = logtail_last_line(dir, rel, 1000);
        free(dir);
    }
    r->fail_class = "hang";
    r->fail_reason = xasprintf("no progress for %.0f s (distributed.hang_timeout_s): rank%s %s furthest behind, at "
                               "step %lld; the run was stopped", r->hang_timeout_s, n > 1 ? "s" : "", who.data,
                               (long long)behind);
    buf_free(&who);
    log_warn("run %lld: %s: %s", (long long)r->id, r->fail_reason,
             r->across ? "its nodes are told to stop it" : "its launcher is told to stop");
    stop_parts_locked(r);
}

/* ---- runs a previous server started: fed from their journal ---- */

/* The journal's hooks: a rank of an adopted command run made progress (hang watch);
 * its launcher's attempt started or ended. */
static void journal_progress(void *ctx, int rank, int64_t global_step) { progress_seen_locked(ctx, rank, global_step); }
static void journal_attempt(void *ctx, store_op *op) {
    if (op->kind == OP_RANK_STATE) rank_state_seen_locked(ctx, op);
    else attempt_seen_locked(ctx, op);
}

/* A point its journal brings counts against the run's cap (--max-points-per-run), as
 * ingest counts those its sockets bring: past it the point is not stored and the run
 * fails for good, with ingest's words. */
static bool journal_keep(void *ctx, const store_op *op) {
    live_run *r = ctx;
    int64_t points = store_op_points(op);
    if (!points || sched.c.max_points <= 0) return true;
    if (r->journal_points < 0) {
        int64_t held = store_count_points(r->id);
        r->journal_points = held > 0 ? held : 0;
    }
    if (r->journal_points + points <= sched.c.max_points) {
        r->journal_points += points;
        return true;
    }
    if (!r->fail_reason) {
        char *reason = xasprintf("its metrics passed the cap of %lld points a run may store (ddpd serve "
                                 "--max-points-per-run): it had stored %lld (steps, epochs and series values, its "
                                 "journal's among them) and was stopped as a runaway flood; what it reported past the "
                                 "cap was not stored. Report less often (every N steps), or ask the operator for a "
                                 "larger cap", (long long)sched.c.max_points, (long long)r->journal_points);
        fail_for_good_locked(r, reason); /* a run taken back is started: nothing to schedule */
        free(reason);
    }
    return false;
}

journal_replay *watch_journal_open(live_run *r) {
    char *dir = layout_run_dir(r->id);
    journal_replay *j = journal_replay_open(
        r->id, dir, &(journal_hooks){.ctx = r, .progress = journal_progress, .attempt = journal_attempt, .keep = journal_keep});
    free(dir);
    return j;
}

void watch_adopted_locked(live_run *r) {
    if (r->journal) journal_replay_read(r->journal, false, 4 << 20);
}
