/* A command run's attempts: see restarts.h. */
#include "restarts.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "alloc.h"
#include "log.h"
#include "ports.h"
#include "rank_output.h"

/* Where each of this launcher's ranks' logs begins this attempt, {"RANK": offset}
 * (null for a log that cannot be written): at the attempt's banner there. */
static json_t *begin_rank_logs(const restart_params *p, int attempt) {
    char marker[2 * PATH_MAX + 256], which[128];
    attempts_describe(&p->plan, attempt, which, sizeof which);
    snprintf(marker, sizeof marker, "--- ddp-run: %s; program %s; working directory %s ---", which, p->program,
             p->gang.working_dir);
    json_t *offsets = json_object();
    for (int r = 0; r < p->env->local_ranks; r++) {
        int rank = p->env->first_rank + r;
        long long at = rank_output_begin_attempt(p->gang.run_dir, rank, marker);
        p->log_from[r] = at;
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
                port, p->port_lo, p->port_hi, attempt);
        return;
    }
    log_msg(LOG_WARN, "MASTER_PORT %d is taken now (by another program): attempt %d uses %d%s", port, attempt,
            fresh, p->port_lo ? "" : " (a port the kernel picked: give ddp-run --port-range to keep to a range)");
    p->env->master_port = fresh;
}

static json_t *prepare_attempt(void *ctx, int attempt) {
    restart_params *p = ctx;
    p->env->restart_count = attempt;
    if (attempt > p->plan.first) choose_port(p, attempt);
    if (!p->log_from) p->log_from = xcalloc((size_t)p->env->local_ranks, sizeof *p->log_from);
    char limit[64];
    p->journal_from = attempt_journal_size(p->gang.run_dir);
    p->oom_before = attempt_cgroup_oom_kills(limit, sizeof limit);
    return json_pack("{s:i, s:o}", "master_port", p->env->master_port, "log_offsets", begin_rank_logs(p, attempt));
}

static void run_attempt(void *ctx, int attempt, attempt_result *r) {
    (void)attempt;
    restart_params *p = ctx;
    static const char *const STATUS[] = {[GANG_SUCCEEDED] = "succeeded", [GANG_FAILED] = "failed",
                                         [GANG_CANCELED] = "canceled"};
    gang_result res;
    gang_run(&p->gang, &res);
    r->status = STATUS[res.outcome];
    snprintf(r->reason, sizeof r->reason, "%s", res.reason);
    if (res.outcome == GANG_CANCELED && res.signal == SIGUSR1) { /* ddpd's notice, not a cancel */
        const char *how = !res.noticed ? "every rank got SIGTERM"
                          : res.notice_answered ? "its ranks got the notice, and SIGTERM once ddpd had their checkpoint"
                                                : "its ranks got the notice, and no checkpoint came by the grace's end";
        if (res.stopped) { /* a sweep's pause, saying why (stop_reason.h): stopped, not preempted; its
                            * reason "WHY (SIGUSR1)" becomes "WHY (SIGUSR1; how)" */
            snprintf(r->reason, sizeof r->reason, "%.*s; %s)", (int)strlen(res.reason) - 1, res.reason, how);
        } else {
            r->status = "preempted";
            snprintf(r->reason, sizeof r->reason, "preempted: ddpd took its devices back for a run of a higher "
                     "priority (SIGUSR1; %s); ddpd starts it again once it is placed", how);
        }
    }
    r->cancel_signal = res.outcome == GANG_CANCELED ? res.signal : res.canceled_by;
    if (res.outcome != GANG_FAILED || res.failing_rank < 0) return; /* a rank that could not start: no restart mends it */
    r->may_restart = 1;
    r->failing_rank = res.failing_rank;
    r->exit_code = WIFEXITED(res.rank_status) ? WEXITSTATUS(res.rank_status) : -1;
    r->signal = WIFSIGNALED(res.rank_status) ? WTERMSIG(res.rank_status) : 0;
    snprintf(r->last_line, sizeof r->last_line, "%s", res.last_words);
    /* what tells the failure apart, and whether the attempt made progress (attempts.c) */
    int local = res.failing_rank - p->env->first_rank;
    long long from = p->log_from && local >= 0 && local < p->env->local_ranks ? p->log_from[local] : -1;
    if (from >= 0) {
        attempt_output_tail(p->gang.run_dir, res.failing_rank, from, p->tail, sizeof p->tail);
        r->output = p->tail;
    }
    long oom_after = attempt_cgroup_oom_kills(r->memory_max, sizeof r->memory_max);
    r->oom_kills = p->oom_before >= 0 && oom_after >= 0 ? oom_after - p->oom_before : -1;
    attempt_journal_progress(p->gang.run_dir, p->journal_from, &r->max_step, &r->checkpointed);
    gethostname(r->node, sizeof r->node - 1);
}

/* The pause, with the event sink flushed (the reason for the restart is on its way
 * at once) and given its chance to reconnect every second. */
static int pause_before_restart(void *ctx, double seconds) {
    restart_params *p = ctx;
    for (;;) {
        event_flush(p->gang.events);
        if (seconds <= 0) return 0;
        double now = seconds < 1.0 ? seconds : 1.0;
        int sig = gang_signals_wait_cancel(p->gang.signals, now);
        if (sig) return sig;
        seconds -= now;
    }
}

void restarts_run(restart_params *p, attempts_outcome *out) {
    attempt_hooks hooks = {.ctx = p, .prepare = prepare_attempt, .run = run_attempt, .pause = pause_before_restart};
    /* a launch of a later attempt (the server started it again): the steps its earlier
     * attempts reached, from the run's journal, are what its first attempt must pass to
     * have made progress */
    int checkpointed;
    if (p->plan.first > 0) attempt_journal_progress(p->gang.run_dir, 0, &p->plan.earlier_step, &checkpointed);
    attempts_run(p->gang.events, &p->plan, &hooks, out);
    free(p->log_from);
    p->log_from = NULL;
}
