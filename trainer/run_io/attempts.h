/* Attempts: the one loop both launchers (ddp-trainer and ddp-run) run their ranks in,
 * so that a run restarts the same way whatever it trains (distributed.max_restarts,
 * torchrun's --max-restarts). Attempt K (from 0) is the K-th start of the whole
 * group, the TORCHELASTIC_RESTART_COUNT its ranks see. The loop reports every
 * attempt's start and end as an `attempt` event (docs/events.md), decides whether
 * another follows, says why in the log, waits the pause between two (a cancel ends
 * it), and gives the run its end: a run whose every attempt failed has a reason
 * that says how many there were. How an attempt's ranks start and are watched is the
 * launcher's (the hooks). */
#ifndef DDPD_TRAINER_RUN_IO_ATTEMPTS_H
#define DDPD_TRAINER_RUN_IO_ATTEMPTS_H

#include <jansson.h>
#include <stddef.h>

#include "events.h"
#include "restart_policy.h"

#define ATTEMPTS_BACKOFF_S 1.0 /* the pause before a restart; DDPD_RESTART_BACKOFF_S overrides it */

/* The attempts of one launch: the first one's number (0, or more when a launcher
 * continues a run's count: --restart-count), the attempt from which the restarts
 * allowed count (`from`: the first, unless the server started the launcher again
 * within one launch's restarts, after it lost the run's processes or a node:
 * --restarts-from), how many restarts may follow that one (attempts from .. from +
 * max_restarts), and whether this launcher may restart at all (not a node's part of
 * a run across nodes: the other nodes' ranks lost their peers, and only the
 * coordinator can start every part again). */
typedef struct {
    int first;
    int from;
    int restarts_allowed;
    long long earlier_step; /* the best global step of the run's attempts before `first` (-1: none, or not
                             * known): its first attempt's steps are progress beyond it (restart_policy.h) */
    restart_policy policy; /* distributed.restart_policy (restart_policy.h): max_restarts, the pause, each class's action */
} attempt_plan;

/* How one attempt ended, as the launcher's hook tells it. */
typedef struct {
    const char *status;    /* "succeeded", "failed", "canceled" or "preempted" (stopped where a checkpoint is) */
    char reason[2048];     /* a sentence; "" on success */
    int failing_rank;      /* the rank the reason names; -1: none (success, cancel, a rank that could not start) */
    int exit_code;         /* that rank's exit status; -1: none (killed by a signal, or no rank) */
    int signal;            /* the signal that killed that rank; 0: none */
    char last_line[1024];  /* that rank's last words (its own reason, else its last line); "" */
    int cancel_signal;     /* canceled: the signal; failed: one that came while the ranks were being stopped; else 0 */
    int may_restart;       /* failed in a way another attempt may mend (a rank died or hung; not a start that failed) */
    /* what the launcher saw of a failure, for its class (failure_class.h) and the restart policy: */
    const char *output;    /* the failing rank's output this attempt, its tail; NULL: not known */
    long oom_kills;        /* OOM kills the run's cgroup counted this attempt; -1: not known */
    char memory_max[64];   /* that cgroup's memory limit, said ("256 MiB"); "" */
    long long max_step;    /* the highest global step a rank reported this attempt; -1: none */
    int checkpointed;      /* a checkpoint was written this attempt */
    char node[64];         /* the host it ran on */
} attempt_result;

typedef struct {
    void *ctx;
    /* Makes ready attempt `attempt`: the extra fields of its `started` event (NULL: none). */
    json_t *(*prepare)(void *ctx, int attempt);
    /* Runs the attempt's ranks to their end (result: zeroed, failing_rank -1, exit_code -1). */
    void (*run)(void *ctx, int attempt, attempt_result *result);
    /* The pause before a restart: the cancel signal that ends it early, or 0. */
    int (*pause)(void *ctx, double seconds);
} attempt_hooks;

/* How the run ended, after its last attempt. */
typedef struct {
    const char *status; /* "succeeded", "failed", "canceled" or "preempted" */
    char reason[2304];
    int signal;         /* canceled: the signal */
} attempts_outcome;

/* Runs attempt after attempt until one succeeds, is canceled, or fails without a
 * restart left (or in a way a restart would not mend). */
void attempts_run(event_sink *events, const attempt_plan *plan, const attempt_hooks *hooks, attempts_outcome *out);

/* "attempt 2 of 3 starting (TORCHELASTIC_RESTART_COUNT=1)" into out. */
void attempts_describe(const attempt_plan *p, int attempt, char *out, size_t n);

/* The pause before a restart: DDPD_RESTART_BACKOFF_S (0 to 3600 s) when it is set
 * to such a number, else ATTEMPTS_BACKOFF_S (a value that is not such a number is
 * said on stderr, after `program`). */
double attempts_backoff_s(const char *program);

/* plan->policy from the run config at config_path: distributed.max_restarts
 * (max_restarts), the pause attempts_backoff_s(program), and over them
 * distributed.restart_policy when it is there. 0, or -1 with err naming what is wrong. */
int attempts_policy(attempt_plan *plan, const char *config_path, int max_restarts, const char *program, char *err,
                    size_t n);

#endif
