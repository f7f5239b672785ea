/* A run's attempts as the server sees them, and whether another attempt may mend a run
 * that failed. See sched_state.h.
 *
 * A launcher restarts its own ranks (trainer/attempts.h) while distributed.max_restarts
 * allows. The server starts a run's next attempt itself when the launcher cannot: its
 * processes or a node were lost (the launcher went with them), the hang watch stopped
 * it, or a part of a run across nodes failed (a node's part never restarts alone).
 * Then every part has ended, the attempt's end is recorded here as the server saw it,
 * and while restarts remain run_life.c queues the run again (OP_RUN_RESTART, at its
 * place in submission order, so it is the first of its pool to start once it fits):
 * it gives back what it held, and its launchers start with the next restart count
 * (--restart-count, TORCHELASTIC_RESTART_COUNT one higher) within the same restarts
 * (--restarts-from). A built-in run's ranks carry on from its newest checkpoint. */
#include "sched_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "event_kinds.h"
#include "failure_class.h"
#include "kind_fields.h"
#include "monotonic.h"
#include "nodes.h"
#include "store.h"
#include "suspects.h"

/* The part whose ranks hold `rank`: a run's parts hold world_size / n_parts each. */
static run_part *part_of_rank(live_run *r, int64_t rank) {
    if (!r->n_parts || rank < 0 || rank >= r->world_size) return NULL;
    int64_t part = rank / (r->world_size / r->n_parts);
    return part < r->n_parts ? &r->parts[part] : NULL;
}

/* The end of an attempt stopped for a preemption, as the preempted user should read it:
 * preempted_reason's. */
char *preempted_reason(const live_run *r) {
    const char *how = r->notice_answered ? ": stopped once the checkpoint its notice asked for was durable"
                      : r->notice_ms && r->answers_notices
                          ? ": its ranks listened for the notice, and no checkpoint came by the grace's end"
                          : "";
    if (r->preempt_slice && r->preempt_by > 0)
        return xasprintf("yielded its devices to run %lld at its time slice's end (serve --time-slice)%s",
                         (long long)r->preempt_by, how);
    return r->preempt_by > 0 ? xasprintf("preempted by run %lld%s", (long long)r->preempt_by, how)
                             : xasprintf("preempted%s", how);
}

/* The name of the node a part runs on (this host's for a part here). */
static void node_of_part(const run_part *p, char *node, size_t n) {
    char address[NODE_ADDR_MAX];
    if (p && p->handle.place[0]) snprintf(node, n, "%s", p->handle.place);
    else if (p && p->node && nodes_describe(p->node, node, n, address, sizeof address)) return;
    else snprintf(node, n, "%s", p && p->node ? "" : local_node_name());
}

/* The device of `rank` as its start gave it, without its node ("cpu:1", "gpu:UUID"):
 * the rank-th of the run's devices (parts in order, world_size / n_parts each); ""
 * when not known (a batch system's GPUs, a resized run). */
static void device_of_rank(const live_run *r, int64_t rank, char *dev, size_t n) {
    dev[0] = 0;
    json_t *all = r->devices_json && rank >= 0 ? json_loads(r->devices_json, 0, NULL) : NULL;
    const char *name = json_string_value(json_array_get(all, (size_t)rank));
    if (name && json_array_size(all) == (size_t)r->world_size) {
        const char *slash = strrchr(name, '/');
        snprintf(dev, n, "%s", slash ? slash + 1 : name);
    }
    json_decref(all);
}

/* A failure of the run at `node` (and `dev` there, "" when not known): kept as a place
 * its retry_elsewhere restarts avoid (and a batch system's --exclude names), and
 * counted on the node's mark when its class blames the place. */
static void failed_at_locked(live_run *r, const char *node, const char *dev, const char *cls, const char *evidence,
                             int64_t t) {
    if (!node[0]) return;
    char *place = dev[0] ? xasprintf("%s/%s", node, dev) : xstrdup(node);
    bool known = false;
    for (int i = 0; i < r->n_failed_at && !known; i++) known = strcmp(r->failed_at[i], place) == 0;
    if (known || r->n_failed_at >= RUN_FAILED_AT_MAX) free(place);
    else r->failed_at[r->n_failed_at++] = place;
    suspect_mark_locked(node, dev[0] ? dev : NULL, cls, evidence, r->id, r->attempt, r->owner, t);
}

/* The end of an attempt stopped for a preemption, as the preempted user should read it. */
static void say_preempted(const live_run *r, store_op *op) {
    char *reason = preempted_reason(r);
    free(op->u.attempt.status);
    free(op->u.attempt.reason);
    free(op->u.attempt.last_line);
    op->u.attempt.status = xstrdup("preempted");
    op->u.attempt.reason = reason;
    op->u.attempt.last_line = NULL;
    op->u.attempt.failing_rank = op->u.attempt.exit_code = op->u.attempt.signal = NO_INT;
    op->u.attempt.restarting = false;
}

/* The end of an attempt a sweep's searcher stopped (scheduler_stop: a trial stopped by
 * ASHA or the median rule; scheduler_pause: paused by ASHA or with its sweep): its
 * reason, not the launcher's "canceled by SIGTERM"; the launcher's own when it says
 * that reason with how its notice went ("WHY (SIGUSR1; its ranks got the notice, ...)"). */
static void say_stopped(const live_run *r, store_op *op) {
    const char *had = op->u.attempt.reason;
    bool said = had && strncmp(had, r->cancel_reason, strlen(r->cancel_reason)) == 0;
    free(op->u.attempt.status);
    op->u.attempt.status = xstrdup("stopped");
    if (said) return;
    free(op->u.attempt.reason);
    op->u.attempt.reason = xstrdup(r->cancel_reason);
}

bool attempt_seen_locked(live_run *r, store_op *op) {
    if (!r || r->status == RUN_QUEUED || op->u.attempt.attempt < r->attempt) return true; /* a launch before this one */
    /* stopped for a change of size (resize_locked): not the attempt's end, which goes on
     * at the new size (a launcher's own restart after a failure is an end all the same) */
    if (op->kind == OP_ATTEMPT_ENDED && r->resize_to && !r->preempt_by && !r->cancel_reason && !r->fail_reason &&
        !r->timeout_reason && !op->u.attempt.restarting && op->u.attempt.status &&
        strcmp(op->u.attempt.status, "succeeded") != 0)
        return false;
    if (op->kind == OP_ATTEMPT_STARTED && r->reopen_attempt && op->u.attempt.attempt == r->attempt)
        op->u.attempt.reopen = true; /* its start again at its new size */
    if (op->kind == OP_ATTEMPT_STARTED) r->reopen_attempt = false;
    r->attempt = (int)op->u.attempt.attempt;
    r->attempt_open = op->kind == OP_ATTEMPT_STARTED;
    if (op->kind == OP_ATTEMPT_ENDED && r->preempt_by && !r->cancel_reason && op->u.attempt.status &&
        strcmp(op->u.attempt.status, "succeeded") != 0)
        say_preempted(r, op);
    if (op->kind == OP_ATTEMPT_ENDED && r->cancel_reason && r->cancel_stops && op->u.attempt.status &&
        strcmp(op->u.attempt.status, "succeeded") != 0)
        say_stopped(r, op);
    if (op->kind == OP_ATTEMPT_STARTED && r->command && op->u.attempt.master_port > 0 &&
        op->u.attempt.master_port < 65536)
        r->port = (int)op->u.attempt.master_port; /* a restart's own, when its port was taken: the lease follows */
    /* the hang watch counts from each rank's first report of the attempt: not through
     * the pause before it, nor from what the last one's ranks said */
    for (int k = 0; r->last_progress_ms && k < r->world_size; k++) r->last_progress_ms[k] = r->rank_gone[k] = 0;
    if (op->kind != OP_ATTEMPT_ENDED || op->u.attempt.failing_rank == NO_INT || !op->u.attempt.status ||
        strcmp(op->u.attempt.status, "failed") != 0)
        return true;
    run_part *p = part_of_rank(r, op->u.attempt.failing_rank);
    if (!p) return true;
    if (p->handle.place[0] && op->u.attempt.failure_class) { /* a batch system's node: its name there (Slurm's
                                                              * SLURMD_NODENAME), not the host name its launcher says */
        free(op->u.attempt.failure_node);
        op->u.attempt.failure_node = xstrdup(p->handle.place);
    }
    failure_class said;
    r->ended_elsewhere = op->u.attempt.failure_class && failure_class_parse(op->u.attempt.failure_class, &said) == 0 &&
                         r->restart.on[said] == RESTART_RETRY_ELSEWHERE;
    /* a launcher's own classed failure marks its node (a run across nodes: the server's
     * blame among its parts does, as the other parts' ranks fail only for the loss) */
    if (!r->across && op->u.attempt.failure_class) {
        char node[NODE_NAME_MAX] = "", dev[128]; /* the node's name here, not the host name its launcher says */
        node_of_part(p, node, sizeof node);
        device_of_rank(r, op->u.attempt.failing_rank, dev, sizeof dev);
        failed_at_locked(r, node, dev, op->u.attempt.failure_class, op->u.attempt.failure_evidence, now_ms());
    }
    rank_failure_clear(&p->failure);
    p->failure = (rank_failure){.rank = op->u.attempt.failing_rank, .exit_code = op->u.attempt.exit_code,
                                .signal = op->u.attempt.signal,
                                .last_line = op->u.attempt.last_line ? xstrdup(op->u.attempt.last_line) : NULL};
    return true;
}

/* The class of an attempt that failed as the server saw it (failure_class.h): its own
 * end's (the hang watch, a lost node), else what the blamed rank's end and last words
 * say, else a loss (its launcher, or the processes, went without an end). The node
 * is the blamed rank's part's. */
static void classify_locked(live_run *r, const char *why, const rank_failure *f, failure_verdict *v, char *node,
                            size_t n, char *dev, size_t dn) {
    bool ranked = f && f->rank != NO_INT;
    failure_input in = {.exit_code = -1, .oom_kills = -1, .stepped = -1, .reason = why};
    if (ranked) {
        in.exit_code = f->exit_code != NO_INT ? (int)f->exit_code : -1;
        in.signal = f->signal != NO_INT ? (int)f->signal : 0;
        in.output = f->last_line;
    }
    in.hang = r->fail_class && strcmp(r->fail_class, "hang") == 0;
    if ((r->fail_class && strcmp(r->fail_class, "infra") == 0) || (!r->fail_reason && !ranked)) in.lost = why;
    failure_classify(&in, v);
    run_part *p = ranked ? part_of_rank(r, f->rank) : r->n_parts == 1 ? &r->parts[0] : NULL;
    node_of_part(p, node, n);
    if (ranked) device_of_rank(r, f->rank, dev, dn);
    else dev[0] = 0;
}

/* The attempt's end as the server saw it, after whatever its launchers said of it;
 * a failed one's class (its name), else NULL; *verdict (when given) its class. */
static const char *record_attempt_end_locked(live_run *r, const char *status, const char *reason,
                                             const rank_failure *f, failure_verdict *verdict) {
    const char *cls = NULL;
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
    if (strcmp(status, "failed") == 0) {
        failure_verdict v;
        char node[NODE_NAME_MAX] = "", dev[128] = "";
        classify_locked(r, reason, f, &v, node, sizeof node, dev, sizeof dev);
        op.u.attempt.failure_class = xstrdup(failure_class_name(v.cls));
        op.u.attempt.failure_evidence = xstrdup(v.evidence);
        op.u.attempt.failure_node = node[0] ? xstrdup(node) : NULL;
        cls = failure_class_name(v.cls);
        if (verdict) *verdict = v;
        failed_at_locked(r, node, dev, cls, v.evidence, op.t); /* the mark: its classes only */
    }
    store_submit_now(&op);
    return cls;
}

void close_open_attempt_locked(live_run *r, const char *status, const char *reason) {
    if (!r->attempt_open) return;
    log_info("run %lld: attempt %d was left open by its launcher: it ends %s", (long long)r->id, r->attempt + 1,
             status);
    record_attempt_end_locked(r, status, reason, NULL, NULL);
}

/* What the run's distributed.restart_policy says of this failure, as its launchers
 * decide (base/restart_policy.h): the budget used is counted from the attempts, as a
 * launcher counts it when it starts; the crash-loop watch and the best step are the
 * run's. A restart after progress that the policy does not count moves restarts_from
 * on, so its next launchers count the same (as a preemption does). */
static restart_next decide_locked(live_run *r, failure_class cls, double *backoff_s) {
    r->budget.used = r->attempt - r->restarts_from;
    long long step = r->eta_last_ms > 0 ? (long long)r->eta_last_step : -1;
    bool checkpointed = r->started_ms > 0 && r->checkpoint_ms > r->started_ms;
    int progress = 0;
    restart_next next = restart_decide(&r->restart, &r->budget, cls, step, checkpointed, (double)mono_ms() / 1000.0,
                                       &progress, backoff_s);
    if ((next == NEXT_RESTART || next == NEXT_RESTART_ELSEWHERE) && progress && r->restart.reset_on_progress)
        r->restarts_from++;
    return next;
}

bool restart_or_fail_locked(live_run *r, char **reason, const rank_failure *f) {
    if (r->cancel_reason) return false;
    const char *why = *reason ? *reason : "its processes were gone";
    failure_verdict v = {.cls = FAILURE_EXIT};
    const char *cls = record_attempt_end_locked(r, "failed", why, f, &v);
    double backoff_s = 0;
    restart_next next = decide_locked(r, v.cls, &backoff_s);
    r->ended_elsewhere = false;
    if (!sched.shutting_down && (next == NEXT_RESTART || next == NEXT_RESTART_ELSEWHERE)) {
        /* run_life.c queues it for the next, which waits out the backoff (reason restart_backoff) */
        r->not_before_ms = backoff_s > 0 ? now_ms() + (int64_t)(backoff_s * 1000) : 0;
        r->elsewhere = next == NEXT_RESTART_ELSEWHERE; /* its next start avoids the suspect nodes */
        return true;
    }
    /* the run's reason names the last attempt's class (docs/failures.md), unless it is
     * an exit or a crash, which the reason says (its status or signal) */
    bool said = !cls || strcmp(cls, "exit") == 0 || strcmp(cls, "crash") == 0;
    const restart_policy *p = &r->restart;
    char *spent;
    if (next == NEXT_FAIL_CLASS && p->max_restarts > 0) {
        spent = xasprintf("%s; failure: %s; not restarted: distributed.restart_policy.on.%s is fail%s", why, cls, cls,
                          p->given ? "" : " (its default)");
    } else if (next == NEXT_FAIL_LOOP) {
        char where[64] = "before any step";
        if (r->budget.best_step >= 0) snprintf(where, sizeof where, "at step %lld", r->budget.best_step);
        spent = xasprintf("crash loop: %d attempts failed %s with no progress (%s) within %g s "
                          "(distributed.restart_policy.crash_loop); the last: %s",
                          r->budget.loop_n, where, cls ? cls : "exit", p->crash_loop_window_s, why);
    } else if (p->max_restarts > 0) {
        spent = xasprintf("all %d attempts failed (%s is %d); the last: %s%s%s", r->attempt - r->restarts_from + 1,
                          restart_policy_budget_field(p), p->max_restarts, why, said ? "" : "; failure: ",
                          said ? "" : cls);
    } else {
        spent = xasprintf("%s%s%s", why, said ? "" : "; failure: ", said ? "" : cls);
    }
    free(*reason);
    *reason = spent;
    return false;
}
