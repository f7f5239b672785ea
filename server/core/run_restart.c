/* A run's attempts as the server sees them, and the restarts it makes itself. See
 * sched_state.h.
 *
 * A launcher restarts its own ranks (trainer/attempts.h) while distributed.max_restarts
 * allows. The server starts a run's next attempt itself when the launcher cannot: its
 * processes or a node were lost (the launcher went with them), the hang watch stopped
 * it, a part of a run across nodes failed (a node's part never restarts alone), or a
 * restart was asked for (restart_run_locked: the scheduler stops the run to start it
 * again later, as a preemption does). Then every part has ended, the attempt's end is
 * recorded as the server saw it, the run gives back what it held and is queued again
 * (OP_RUN_RESTART, at its place in submission order, so it is the first of its pool to
 * start once it fits), and its launchers start with the next restart count
 * (--restart-count, TORCHELASTIC_RESTART_COUNT one higher) within the same restarts
 * (--restarts-from). A built-in run's ranks carry on from its newest checkpoint. */
#include "sched_state.h"
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "event_kinds.h"
#include "kind_fields.h"
#include "store.h"

void rank_failure_clear(rank_failure *f) {
    free(f->last_line);
    *f = (rank_failure){.rank = NO_INT, .exit_code = NO_INT, .signal = NO_INT};
}

/* The part whose ranks hold `rank`: a run's parts hold world_size / n_parts each. */
static run_part *part_of_rank(live_run *r, int64_t rank) {
    if (!r->n_parts || rank < 0 || rank >= r->world_size) return NULL;
    int64_t part = rank / (r->world_size / r->n_parts);
    return part < r->n_parts ? &r->parts[part] : NULL;
}

void attempt_seen_locked(live_run *r, const store_op *op) {
    if (!r || r->status == RUN_QUEUED || op->u.attempt.attempt < r->attempt) return; /* a launch before this one */
    r->attempt = (int)op->u.attempt.attempt;
    r->attempt_open = op->kind == OP_ATTEMPT_STARTED;
    if (op->kind == OP_ATTEMPT_STARTED && r->command && op->u.attempt.master_port > 0 &&
        op->u.attempt.master_port < 65536)
        r->port = (int)op->u.attempt.master_port; /* a restart's own, when its port was taken: the lease follows */
    /* the hang watch counts from each rank's first report of the attempt: not through
     * the pause before it, nor from what the last one's ranks said */
    for (int k = 0; r->last_progress_ms && k < r->world_size; k++) r->last_progress_ms[k] = r->rank_gone[k] = 0;
    if (op->kind != OP_ATTEMPT_ENDED || op->u.attempt.failing_rank == NO_INT || !op->u.attempt.status ||
        strcmp(op->u.attempt.status, "failed") != 0)
        return;
    run_part *p = part_of_rank(r, op->u.attempt.failing_rank);
    if (!p) return;
    rank_failure_clear(&p->failure);
    p->failure = (rank_failure){.rank = op->u.attempt.failing_rank, .exit_code = op->u.attempt.exit_code,
                                .signal = op->u.attempt.signal,
                                .last_line = op->u.attempt.last_line ? xstrdup(op->u.attempt.last_line) : NULL};
}

void scheduler_attempt(const store_op *op) {
    pthread_mutex_lock(&K.mu);
    if (op->kind == OP_RANK_STATE) rank_state_seen_locked(find_run(op->run_id), op);
    else attempt_seen_locked(find_run(op->run_id), op);
    pthread_mutex_unlock(&K.mu);
}

/* The attempt's end as the server saw it, after whatever its launchers said of it. */
static void record_attempt_end_locked(live_run *r, const char *status, const char *reason,
                                      const rank_failure *f) {
    r->attempt_open = false;
    store_op op = {.kind = OP_ATTEMPT_ENDED, .run_id = r->id, .rank = -1, .t = now_ms()};
    fields_unknown(&OP_KINDS[OP_ATTEMPT_STARTED], &op);
    fields_unknown(&OP_KINDS[OP_ATTEMPT_ENDED], &op);
    op.u.attempt.attempt = r->attempt;
    op.u.attempt.status = xstrdup(status);
    op.u.attempt.reason = xstrdup(reason);
    if (f && f->rank != NO_INT) {
        op.u.attempt.failing_rank = f->rank;
        op.u.attempt.exit_code = f->exit_code;
        op.u.attempt.signal = f->signal;
        op.u.attempt.last_line = f->last_line ? xstrdup(f->last_line) : NULL;
    }
    store_submit_now(&op);
}

void close_open_attempt_locked(live_run *r, const char *status, const char *reason) {
    if (!r->attempt_open) return;
    log_info("run %lld: attempt %d was left open by its launcher: it ends %s", (long long)r->id, r->attempt + 1,
             status);
    record_attempt_end_locked(r, status, reason, NULL);
}

/* Everything it held goes back, and it waits to start its next attempt. */
static void queue_next_attempt_locked(live_run *r, const char *why) {
    int next = r->attempt + 1;
    store_op op = {.kind = OP_RUN_RESTART, .run_id = r->id, .t = now_ms()};
    op.u.restart.attempt = next;
    op.u.restart.reason = xstrdup(why);
    store_submit_now(&op);
    log_info("run %lld: attempt %d ended (%s): queued again to start attempt %d (TORCHELASTIC_RESTART_COUNT=%d)",
             (long long)r->id, r->attempt + 1, why, next + 1, next);
    release_started_locked(r);
    r->status = RUN_QUEUED;
    r->restart_count = r->attempt = next;
    r->start_stored = r->said_hello = r->parts_stopping = r->across = r->adopted = false;
    r->secret[0] = '\0';
    free(r->fail_reason);
    free(r->restart_why);
    free(r->end_status);
    free(r->end_reason);
    free(r->devices_json);
    r->fail_reason = r->restart_why = r->end_status = r->end_reason = r->devices_json = NULL;
    rank_failure_clear(&r->server_blame);
    journal_replay_close(r->journal); /* an adopted run's: its next launch is this server's child */
    r->journal = NULL;
    pthread_cond_broadcast(&K.changed);
}

bool restart_or_fail_locked(live_run *r, char **reason, const rank_failure *f) {
    if (r->cancel_reason) return false;
    bool asked = r->restart_why != NULL; /* not one of its restarts: it is started again whatever remain */
    const char *why = asked ? r->restart_why : *reason ? *reason : "its processes were gone";
    record_attempt_end_locked(r, asked ? "canceled" : "failed", why, asked ? NULL : f);
    int last = r->restarts_from + r->max_restarts;
    if (asked || (!K.shutting_down && r->attempt < last)) {
        if (asked) r->restarts_from++; /* the next attempt has as many restarts as this one had */
        queue_next_attempt_locked(r, why);
        return true;
    }
    if (r->max_restarts > 0) {
        char *spent = xasprintf("all %d attempts failed (distributed.max_restarts is %d); the last: %s",
                                r->attempt - r->restarts_from + 1, r->max_restarts, why);
        free(*reason);
        *reason = spent;
    }
    return false;
}

void restart_run_locked(live_run *r, const char *why) {
    if (r->status == RUN_QUEUED || r->cancel_reason || r->restart_why) return;
    r->restart_why = xstrdup(why);
    log_info("run %lld: stopped to start again later (%s)", (long long)r->id, why);
    if (r->start_stored) stop_parts_locked(r);
    /* else once its start is stored (store_start_locked) */
}
