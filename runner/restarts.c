/* A command run's attempts: see restarts.h. */
#include "restarts.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "log.h"
#include "ports.h"
#include "rank_output.h"
#include "utf8_text.h"

/* Where each of this launcher's ranks' logs begins this attempt, {"RANK": offset}
 * (null for a log that cannot be written), after the attempt's first line there. */
static json_t *begin_rank_logs(const restart_params *p, int attempt) {
    char marker[160], next[128];
    attempts_describe_next(&p->plan, attempt, next, sizeof next);
    snprintf(marker, sizeof marker, "--- ddp-run: %s ---", next);
    json_t *offsets = json_object();
    for (int r = 0; r < p->env->local_ranks; r++) {
        int rank = p->env->first_rank + r;
        long long at = rank_output_begin_attempt(p->gang.run_dir, rank, attempt > 0 ? marker : NULL);
        if (at < 0) log_msg(LOG_WARN, "cannot write ranks/rank-%d.log: %s", rank, strerror(errno));
        char key[16];
        snprintf(key, sizeof key, "%d", rank);
        json_object_set_new(offsets, key, at < 0 ? json_null() : json_integer(at));
    }
    return offsets;
}

/* The run's MASTER_PORT for a restart: its own while rank 0 can listen there again,
 * else another one. */
static void choose_port(restart_params *p, int attempt) {
    int port = p->env->master_port;
    if (port_is_listenable(port)) return;
    int fresh = p->port_lo ? port_next_listenable(p->port_lo, p->port_hi, port) : port_any_listenable();
    if (!fresh) {
        log_msg(LOG_WARN, "MASTER_PORT %d is taken and no other port of %d-%d is free: attempt %d tries it anyway",
                port, p->port_lo, p->port_hi, attempt + 1);
        return;
    }
    log_msg(LOG_WARN, "MASTER_PORT %d is taken now (by another program): attempt %d uses %d%s", port, attempt + 1,
            fresh, p->port_lo ? "" : " (a port the kernel picked: give ddp-run --port-range to keep to a range)");
    p->env->master_port = fresh;
}

static attempt_end ended(const gang_result *res, int attempt) {
    static const char *const STATUS[] = {[GANG_SUCCEEDED] = "succeeded", [GANG_FAILED] = "failed",
                                         [GANG_CANCELED] = "canceled"};
    int ranked = res->outcome == GANG_FAILED && res->failing_rank >= 0;
    return (attempt_end){
        .attempt = attempt,
        .status = STATUS[res->outcome],
        .reason = res->reason,
        .failing_rank = ranked ? res->failing_rank : -1,
        .exit_code = ranked && WIFEXITED(res->rank_status) ? WEXITSTATUS(res->rank_status) : -1,
        .signal = ranked && WIFSIGNALED(res->rank_status) ? WTERMSIG(res->rank_status) : 0,
        .last_line = ranked ? res->last_words : "",
    };
}

/* The pause before a restart, with the event sink flushed (the reason for the
 * restart is on its way at once) and given its chance to reconnect every second:
 * the cancel signal that ends it, or 0. */
static int pause_before_restart(const restart_params *p) {
    double left = p->backoff_s;
    for (;;) {
        event_flush(p->gang.events);
        if (left <= 0) return 0;
        double now = left < 1.0 ? left : 1.0;
        int sig = gang_signals_wait_cancel(p->gang.signals, now);
        if (sig) return sig;
        left -= now;
    }
}

/* A cancel that came while a failed attempt was being stopped, or during the pause
 * after it: the run is canceled, and its reason says what had happened. */
static void cancel_after_failure(gang_result *res, int sig, const char *when, const char *failure) {
    char why[sizeof res->reason];
    snprintf(why, sizeof why, "canceled by SIG%s %s (%.1800s)", sigabbrev_np(sig), when, failure); /* clipped: repaired below */
    utf8_repair(why);
    res->outcome = GANG_CANCELED;
    res->signal = sig;
    memcpy(res->reason, why, sizeof why);
}

void restarts_run(restart_params *p, gang_result *res) {
    const attempt_plan *plan = &p->plan;
    int restarts = plan->max_restarts > 0 && p->env->nodes <= 1;
    if (plan->max_restarts > 0 && !restarts)
        log_msg(LOG_WARN, "distributed.max_restarts is %d, but a node's part of a run across nodes is not restarted "
                "on its own (the other nodes' ranks lost their peers): its first failure ends it",
                plan->max_restarts);
    for (int attempt = plan->first;; attempt++) {
        p->env->restart_count = attempt;
        if (attempt > plan->first) choose_port(p, attempt);
        json_t *logs = begin_rank_logs(p, attempt);
        attempt_event_started(p->gang.events, plan, attempt,
                              json_pack("{s:i, s:o}", "master_port", p->env->master_port, "log_offsets", logs));
        gang_run(&p->gang, res);
        attempt_end end = ended(res, attempt);
        end.restarting = restarts && end.failing_rank >= 0 && !res->canceled_by && attempt < attempts_last(plan);
        end.backoff_s = p->backoff_s;
        attempt_event_ended(p->gang.events, &end);
        if (end.restarting) {
            char next[128];
            attempts_describe_next(plan, attempt + 1, next, sizeof next);
            log_msg(LOG_WARN, "%s in %g s: %s", next, p->backoff_s, res->reason);
            int sig = pause_before_restart(p);
            if (!sig) continue;
            char when[160];
            snprintf(when, sizeof when, "before attempt %d of %d", attempt + 2, attempts_last(plan) + 1);
            cancel_after_failure(res, sig, when, res->reason);
            log_msg(LOG_WARN, "received SIG%s during the pause: no attempt %d", sigabbrev_np(sig), attempt + 2);
            return;
        }
        if (res->outcome != GANG_FAILED) return;
        if (res->canceled_by && restarts && attempt < attempts_last(plan)) {
            cancel_after_failure(res, res->canceled_by, "as a failed attempt was being stopped", res->reason);
            return;
        }
        char last[sizeof res->reason];
        memcpy(last, res->reason, sizeof last);
        attempts_final_reason(plan, attempt, last, res->reason, sizeof res->reason);
        utf8_repair(res->reason);
        return;
    }
}
