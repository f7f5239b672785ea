/* The gang: every rank of a command run started, then supervised together. When a
 * rank exits non-zero or by a signal, every other rank's process group gets SIGTERM,
 * then SIGKILL after a grace, and the attempt fails naming the first failing rank,
 * how it ended and its last words (its error file's message, else its last non-empty
 * output line). SIGTERM, SIGINT or SIGHUP to the launcher stops every rank the same
 * way and cancels the run; SIGUSR1 (ddpd's preemption) too, with the preemption's
 * grace, except that a rank whose process catches SIGUSR1 gets that first, as a
 * notice to checkpoint, and SIGTERM only at ddpd's second SIGUSR1 (it has the
 * checkpoint), else SIGKILL at the grace's end. When a rank has exited 0 and the others still running write nothing for the
 * exit timeout, they are stopped the same way and the attempt succeeds, its reason
 * naming them (torchelastic's exit barrier). One gang_run is one attempt; the launcher's signals stay
 * with it across attempts (gang_signals), so that a cancel between two is heard. */
#ifndef DDPD_RUNNER_GANG_H
#define DDPD_RUNNER_GANG_H

#include <stdbool.h>
#include <signal.h>
#include <stddef.h>

#include "command_config.h"
#include "events.h"
#include "rank_env.h"
#include "warm_ranks.h"

typedef enum { GANG_SUCCEEDED, GANG_FAILED, GANG_CANCELED } gang_outcome;

/* SIGCHLD and the cancel signals (SIGTERM, SIGINT, SIGHUP, SIGUSR1), blocked and read from a
 * signalfd from gang_signals_open to gang_signals_close. */
typedef struct {
    int fd;
    sigset_t child_mask; /* the mask before: what the ranks start with */
} gang_signals;

/* 0, or -1 (errno). */
int gang_signals_open(gang_signals *s);
void gang_signals_close(gang_signals *s);

/* Waits up to `seconds` for a cancel signal while no rank runs: the signal, or 0
 * when the time passed. */
int gang_signals_wait_cancel(gang_signals *s, double seconds);

typedef struct {
    const command_config *cfg;
    const rank_env_params *env;
    const char *run_dir;
    const char *working_dir; /* where the ranks start */
    double grace_s;          /* between SIGTERM and SIGKILL: a failure, a cancel */
    double preempt_grace_s;  /* the same when the launcher is preempted (SIGUSR1) */
    double exit_timeout_s;   /* once a rank exited 0, the others still running are stopped after this long
                              * without output, and the attempt succeeds; 0: never */
    event_sink *events;      /* the launcher's own (rank -1) */
    gang_signals *signals;
    warm_link *warm; /* a trial zygote to fork the ranks from (warm_ranks.h); NULL or fd -1: exec them */
} gang_params;

typedef struct {
    gang_outcome outcome;
    int signal;        /* GANG_CANCELED: the signal that canceled the run */
    char reason[2048]; /* GANG_FAILED, GANG_CANCELED: why, for a person; GANG_SUCCEEDED: the ranks stopped at
                        * exit, else "" */
    /* GANG_FAILED because a rank failed (not because one could not start): */
    int failing_rank;  /* the rank the reason names (global), else -1 */
    int rank_status;   /* its wait status */
    char last_words[1024];
    int canceled_by;   /* a cancel signal that came while a failed attempt was being stopped, else 0 */
    /* preempted (SIGUSR1): how many ranks got the notice, and whether ddpd had their
     * checkpoint before the grace's end (a second SIGUSR1) */
    int noticed;
    int notice_answered;
    bool stopped; /* GANG_CANCELED by ddpd saying why (stop_reason.h; a sweep's rule or pause), in reason */
} gang_result;

/* Runs one attempt of the gang to its end (every rank gone, every output read). */
void gang_run(const gang_params *p, gang_result *result);

#endif
