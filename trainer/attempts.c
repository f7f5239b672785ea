/* Attempts of a run: see attempts.h. */
#include "attempts.h"

#include <stdio.h>

#include "env_seconds.h"

int attempts_last(const attempt_plan *p) { return p->first + p->max_restarts; }

void attempt_event_started(event_sink *s, const attempt_plan *p, int attempt, json_t *extra) {
    json_t *ev = json_pack("{s:i, s:s, s:i}", "attempt", attempt, "phase", "started", "max_restarts", p->max_restarts);
    if (extra) json_object_update(ev, extra);
    json_decref(extra);
    event_emit(s, "attempt", ev);
}

static json_t *int_or_null(int v, int none) { return v == none ? json_null() : json_integer(v); }

void attempt_event_ended(event_sink *s, const attempt_end *e) {
    json_t *ev = json_pack("{s:i, s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:b}", "attempt", e->attempt, "phase", "ended",
                           "status", e->status, "reason", e->reason ? e->reason : "", "failing_rank",
                           int_or_null(e->failing_rank, -1), "exit_code", int_or_null(e->exit_code, -1), "signal",
                           int_or_null(e->signal, 0), "last_line", e->last_line ? e->last_line : "", "restarting",
                           e->restarting);
    if (e->restarting) json_object_set_new(ev, "backoff_s", json_real(e->backoff_s));
    event_emit(s, "attempt", ev);
}

void attempts_describe_next(const attempt_plan *p, int attempt, char *out, size_t n) {
    snprintf(out, n, "attempt %d of %d starting (TORCHELASTIC_RESTART_COUNT=%d)", attempt + 1, attempts_last(p) + 1,
             attempt);
}

void attempts_final_reason(const attempt_plan *p, int last_attempt, const char *last_reason, char *out, size_t n) {
    int made = last_attempt - p->first + 1;
    if (p->max_restarts == 0 || made < 2) {
        snprintf(out, n, "%s", last_reason);
        return;
    }
    snprintf(out, n, "all %d attempts failed (distributed.max_restarts is %d); the last: %s", made, p->max_restarts,
             last_reason);
}

double attempts_backoff_s(const char *program) {
    return env_seconds_between("DDPD_RESTART_BACKOFF_S", ATTEMPTS_BACKOFF_S, 0, 3600, program);
}
