/* Attempts: what both launchers (ddp-trainer and ddp-run) share about running a
 * run's ranks again after a failure (distributed.max_restarts, torchrun's
 * --max-restarts). Attempt K (from 0) is the K-th start of the whole group, the
 * TORCHELASTIC_RESTART_COUNT its ranks see. Each launcher reports every attempt's
 * start and end as an `attempt` event (docs/events.md), says in its log why it starts
 * another, and waits the same pause between two; when every attempt failed, the
 * run's reason says how many there were. */
#ifndef DDPD_ATTEMPTS_H
#define DDPD_ATTEMPTS_H

#include <jansson.h>
#include <stddef.h>

#include "events.h"

#define ATTEMPTS_BACKOFF_S 1.0 /* the pause before a restart; DDPD_RESTART_BACKOFF_S overrides it */

/* The attempts of one launch: the first one's number (0, or more when a launcher
 * continues a run's count: --restart-count) and how many restarts may follow it. */
typedef struct {
    int first;
    int max_restarts;
} attempt_plan;

/* The last attempt number this launch may reach. */
int attempts_last(const attempt_plan *p);

/* How an attempt ended, for its `attempt` event. */
typedef struct {
    int attempt;
    const char *status;    /* "succeeded", "failed" or "canceled" */
    const char *reason;    /* a sentence; "" on success */
    int failing_rank;      /* the rank the reason names; -1: none (success, cancel, a rank that could not start) */
    int exit_code;         /* that rank's exit status; -1: none (killed by a signal, or no rank) */
    int signal;            /* the signal that killed that rank; 0: none */
    const char *last_line; /* that rank's last words (its error file's message, else its last line); "" */
    int restarting;        /* 1: another attempt follows, after backoff_s */
    double backoff_s;
} attempt_end;

/* {"attempt": K, "phase": "started", "max_restarts": M, ...extra} (extra: stolen, may be NULL). */
void attempt_event_started(event_sink *s, const attempt_plan *p, int attempt, json_t *extra);
void attempt_event_ended(event_sink *s, const attempt_end *e);

/* "attempt 2 of 3 starting (TORCHELASTIC_RESTART_COUNT=1)" into out. */
void attempts_describe_next(const attempt_plan *p, int attempt, char *out, size_t n);

/* A run whose every attempt failed: "all 3 attempts failed (distributed.max_restarts
 * is 2); the last: " + last_reason, into out. With no restart allowed, last_reason
 * alone (the reason a run without restarts always had). */
void attempts_final_reason(const attempt_plan *p, int last_attempt, const char *last_reason, char *out, size_t n);

/* The pause before a restart: DDPD_RESTART_BACKOFF_S (0 to 3600 s) when it is set
 * to such a number, else ATTEMPTS_BACKOFF_S (a value that is not such a number is
 * said on stderr, after `program`). */
double attempts_backoff_s(const char *program);

#endif
