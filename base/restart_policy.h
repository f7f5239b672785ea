/* distributed.restart_policy (docs/failures.md): what a launcher does with each class
 * of failed attempt (failure_class.h): restart it, fail the run, or restart it
 * elsewhere; how many restarts it has, how long it waits before one (a backoff that
 * doubles), whether an attempt that made progress (a new checkpoint, a step beyond
 * the best before it) leaves the budget as it was, and when failures without progress
 * are a crash loop that ends the run. The parse and the decision are pure functions:
 * the launchers' loop (attempts.c) keeps the budget and asks. */
#ifndef DDPD_BASE_RESTART_POLICY_H
#define DDPD_BASE_RESTART_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include "failure_class.h"

typedef enum { RESTART_RETRY, RESTART_FAIL, RESTART_RETRY_ELSEWHERE } restart_action;

#define CRASH_LOOP_MAX 100 /* crash_loop.failures at most (distributed.max_restarts' bound) */

typedef struct {
    int given;                           /* distributed.restart_policy was in the config */
    int max_restarts;                    /* its max_restarts, else distributed.max_restarts */
    int own_max_restarts;                /* max_restarts came from the policy (the reasons name which) */
    restart_action on[FAILURE_CLASS_COUNT];
    double backoff_initial_s, backoff_max_s; /* without a policy: the launcher's fixed pause, both */
    int reset_on_progress;               /* default true with a policy; false without (torchrun's count) */
    int crash_loop_failures;             /* 0: no crash loop watch */
    double crash_loop_window_s;
} restart_policy;

/* The policy without distributed.restart_policy: max_restarts restarts, each class's
 * default action, a fixed pause of backoff_s, every failure counted, no loop watch. */
void restart_policy_defaults(restart_policy *p, int max_restarts, double backoff_s);

/* Reads distributed.restart_policy from `distributed` (the config's object; NULL or
 * without it: the defaults stay) over p's defaults. 0, or -1 with err naming the
 * field by its JSON pointer and what it takes. */
int restart_policy_parse(const json_t *distributed, restart_policy *p, char *err, size_t n);

const char *restart_action_name(restart_action a);

/* The field the budget came from, for a reason: "distributed.restart_policy.max_restarts"
 * or "distributed.max_restarts". */
const char *restart_policy_budget_field(const restart_policy *p);

/* What the launcher knows of the failures so far in this launch. */
typedef struct {
    int used;                          /* the restarts used up */
    long long best_step;               /* the highest global step an attempt reached; -1: none */
    int baseline;                      /* best_step is an earlier attempt's: a step beyond it is progress
                                        * (the run's first attempt only sets it: reaching step 37 from
                                        * nothing is no progress over an earlier attempt) */
    int streak;                        /* failures in a row without progress (the backoff's exponent) */
    int loop_n;                        /* failures without progress in a row, their times: */
    double loop_t[CRASH_LOOP_MAX];
} restart_budget;

void restart_budget_init(restart_budget *b, int used);

/* The best step of the attempts before this budget's first (a launch that starts at
 * a later attempt reads it from the run's journal): the next attempt's steps are
 * compared with it. A step below 0 (none reported) leaves the budget as it was. */
void restart_budget_baseline(restart_budget *b, long long best_step);

typedef enum {
    NEXT_RESTART,       /* restart it, after *backoff_s */
    NEXT_RESTART_ELSEWHERE, /* restart it away from the node it failed on: a launcher leaves it to the server */
    NEXT_FAIL_CLASS,    /* its class's action is fail */
    NEXT_FAIL_SPENT,    /* no restart left */
    NEXT_FAIL_LOOP,     /* a crash loop */
} restart_next;

/* A failed attempt of class cls that reached max_step (-1: no step reported) and
 * wrote a checkpoint or not, at time now_s: what follows, with the budget updated,
 * *progress whether it counted as progress (a checkpoint, or a step beyond an
 * earlier attempt's best: never the first attempt's steps alone, so that a script
 * failing at the same step every time gets max_restarts restarts, no more),
 * *backoff_s the pause before a restart. */
restart_next restart_decide(const restart_policy *p, restart_budget *b, failure_class cls, long long max_step,
                            int checkpointed, double now_s, int *progress, double *backoff_s);

#endif
