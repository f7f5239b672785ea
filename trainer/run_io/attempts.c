/* The attempts of a run: see attempts.h. */
#include "attempts.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "env_seconds.h"
#include "log.h"

static int last_attempt(const attempt_plan *p) { return p->from + p->max_restarts; }

static json_t *int_or_null(int v, int none) { return v == none ? json_null() : json_integer(v); }

static void event_started(event_sink *s, const attempt_plan *p, int attempt, json_t *extra) {
    json_t *ev = json_pack("{s:i, s:s, s:i}", "attempt", attempt, "phase", "started", "max_restarts", p->max_restarts);
    if (extra) json_object_update(ev, extra);
    json_decref(extra);
    event_emit(s, "attempt", ev);
}

static void event_ended(event_sink *s, const attempt_plan *p, int attempt, const attempt_result *r, int restarting) {
    json_t *ev = json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:b}", "attempt", attempt, "phase", "ended",
                           "status", r->status, "reason", r->reason, "failing_rank", int_or_null(r->failing_rank, -1),
                           "exit_code", int_or_null(r->exit_code, -1), "signal", int_or_null(r->signal, 0),
                           "last_line", r->last_line, "restarting", restarting);
    if (restarting) json_object_set_new(ev, "backoff_s", json_real(p->backoff_s));
    event_emit(s, "attempt", ev);
}

void attempts_describe(const attempt_plan *p, int attempt, char *out, size_t n) {
    /* numbered as TORCHELASTIC_RESTART_COUNT and the API's `attempt` are, from 0 */
    snprintf(out, n, "attempt %d starting (TORCHELASTIC_RESTART_COUNT=%d; the last allowed is attempt %d)", attempt,
             attempt, last_attempt(p));
}

/* Canceled after a failure that would have been restarted: the reason says what had
 * happened (`when`: "before attempt 1", ...). */
static void canceled_after(attempts_outcome *out, int sig, const char *when, const char *failure) {
    out->status = "canceled";
    out->signal = sig;
    snprintf(out->reason, sizeof out->reason, "canceled by SIG%s %s (%s)", sigabbrev_np(sig), when, failure);
}

void attempts_run(event_sink *events, const attempt_plan *plan, const attempt_hooks *h, attempts_outcome *out) {
    if (plan->max_restarts > 0 && !plan->restarts_allowed)
        log_msg(LOG_WARN, "distributed.max_restarts is %d, but a node's part of a run across nodes is not restarted "
                "on its own (the other nodes' ranks lost their peers): its first failure ends it",
                plan->max_restarts);
    for (int attempt = plan->first;; attempt++) {
        event_started(events, plan, attempt, h->prepare(h->ctx, attempt));
        attempt_result r = {.status = "failed", .failing_rank = -1, .exit_code = -1};
        h->run(h->ctx, attempt, &r);
        int failed = strcmp(r.status, "failed") == 0;
        int more = plan->restarts_allowed && attempt < last_attempt(plan);
        int restarting = failed && r.may_restart && !r.cancel_signal && more;
        event_ended(events, plan, attempt, &r, restarting);
        char next[128];
        attempts_describe(plan, attempt + 1, next, sizeof next);
        if (restarting) {
            log_msg(LOG_WARN, "%s in %g s: %s", next, plan->backoff_s, r.reason);
            int sig = h->pause(h->ctx, plan->backoff_s);
            if (!sig) continue;
            log_msg(LOG_WARN, "received SIG%s during the pause: no attempt %d", sigabbrev_np(sig), attempt + 1);
            char when[64];
            snprintf(when, sizeof when, "before attempt %d", attempt + 1);
            canceled_after(out, sig, when, r.reason);
        } else if (failed && r.cancel_signal && r.may_restart && more) {
            canceled_after(out, r.cancel_signal, "as a failed attempt was being stopped", r.reason);
        } else if (failed && plan->max_restarts > 0 && attempt > plan->from) {
            out->status = "failed";
            snprintf(out->reason, sizeof out->reason, "all %d attempts failed (distributed.max_restarts is %d); the last: %s",
                     attempt - plan->from + 1, plan->max_restarts, r.reason);
        } else {
            out->status = r.status;
            out->signal = r.cancel_signal;
            snprintf(out->reason, sizeof out->reason, "%s", r.reason);
        }
        return;
    }
}

double attempts_backoff_s(const char *program) {
    return env_seconds_between("DDPD_RESTART_BACKOFF_S", ATTEMPTS_BACKOFF_S, 0, 3600, program);
}
