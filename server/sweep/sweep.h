/* Sweeps: a base run config, its parameters, a search method and a searcher, whose
 * trials are runs of the sweep's owner (POST /sweeps, api/routes_sweeps.c).
 *
 * The searcher is one thread that looks at every running sweep about four times a
 * second: it reads its trials' runs (status, the metric per epoch) from the
 * database, records what it decides in the sweeps' tables (sweep_store.h) and only
 * then asks the scheduler to act (runs_submit, scheduler_stop, runs_resume,
 * scheduler_cancel). It keeps nothing in memory that the tables do not hold, so a
 * restarted server carries each sweep on where it was: a trial's run is found by
 * its sweep and number before a new one is made, a pause that had not landed is
 * asked again, a promotion that had not been queued is queued.
 *
 * Early stopping: ASHA (asynchronous successive halving) pauses a built-in trial at
 * each rung (min_resource * reduction_factor^k epochs): its run is stopped (status
 * `stopped`, the rung in its reason) and continues from its checkpoint when it ranks
 * in the top 1/reduction_factor of its rung; a command trial is judged at the rung
 * and stopped or left to run. Median stopping stops a trial whose metric at an epoch
 * is worse than the median of the other trials' at that epoch. Those rules are
 * sweep_rules.h's, pure functions of the tables read here: this file reads, asks them,
 * records what they decide (a decision and the trial's row it changes in one
 * transaction, sweep_store_begin/commit) and acts. */
#ifndef DDPD_SERVER_SWEEP_SWEEP_H
#define DDPD_SERVER_SWEEP_SWEEP_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "validator.h"

/* After the store and the scheduler are up: opens the sweeps' connection and starts
 * the searcher's thread. */
int sweep_start(const char *db_path, char *err, size_t errlen);
/* Before the scheduler shuts down (so the searcher does not take the shutdown's
 * cancels for its trials' ends). */
void sweep_stop(void);

typedef enum {
    SWEEP_OK, SWEEP_INVALID, SWEEP_FORBIDDEN, SWEEP_NOT_FOUND, SWEEP_FINISHED, SWEEP_CONFLICT, SWEEP_ERROR
} sweep_result;

/* A sweep submitted by `who`: checked whole (every violation in errs: SWEEP_INVALID),
 * then every point its trials can reach (a grid's every point; a random search's base,
 * and each parameter at each of its values, a range's ends) through every gate a run
 * passes (runs.h), as who's run with who's limits: the first refused is named in errs
 * (the parameter and its value, or the base's pointer) and is SWEEP_INVALID where the
 * config is wrong or can never run here, SWEEP_FORBIDDEN (the sentence in err) where
 * the server forbids it or who may not; then stored (*id). Each trial passes the
 * gates again when it is submitted, with its owner's limits then: one refused ends
 * `failed` with the gate's reason, once. */
sweep_result sweep_submit(const json_t *body, const caller *who, schema_errors *errs, int64_t *id, char *err,
                          size_t errlen);
/* GET /sweeps/{id}: NULL when there is none. */
json_t *sweep_json(int64_t id);
/* GET /sweeps: {"sweeps": [...]}, newest first. */
json_t *sweep_list_json(void);
/* Cancels a running sweep and its trials (owner or admin). */
sweep_result sweep_cancel(int64_t id, const caller *who, char *why, size_t whylen);


/* The changes below are its owner's or an admin's (SWEEP_FORBIDDEN else), each audited
 * and a decision of the sweep's (in GET /events), why said in `why` when refused. */

/* Pauses a running sweep: it makes, submits, judges and promotes no trial until it is
 * resumed; its running trials' runs are stopped (scheduler_stop: a built-in trial keeps
 * its checkpoint) and keep their place (their state `running`, their rung): the resume
 * continues each from where it stopped. SWEEP_FINISHED: it has ended; SWEEP_CONFLICT:
 * already paused. GET /sweeps/{id} says `paused`. */
sweep_result sweep_pause(int64_t id, const caller *who, char *why, size_t whylen);
/* Carries a paused sweep on (SWEEP_CONFLICT: it is not paused). */
sweep_result sweep_resume(int64_t id, const caller *who, char *why, size_t whylen);
/* Raises max_trials, on a running or finished (not canceled) sweep: the method's
 * sequence continues where it was (a random search's next draws; a grid's points not
 * yet made), never a configuration a trial has; a finished sweep runs again.
 * SWEEP_CONFLICT: max_trials not raised, or a grid with no point left. */
sweep_result sweep_extend(int64_t id, int max_trials, const caller *who, char *why, size_t whylen);
/* A configuration given by hand (as Optuna's enqueue_trial): {"KEY": value} for each
 * parameter (sweep_params_given), through the gates of POST /runs as the owner's run,
 * made the sweep's next trial (*trial), submitted before the method's next ones; a
 * finished sweep runs again. SWEEP_INVALID (errs), SWEEP_CONFLICT: a trial has these
 * parameters already. */
sweep_result sweep_enqueue(int64_t id, const json_t *params, const caller *who, schema_errors *errs, int *trial,
                           char *why, size_t whylen);

#endif
