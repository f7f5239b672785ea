/* What the API and the sweeps do to runs, top to bottom in one place: submit, cancel
 * and delete (the store's rows and the directory).
 *
 * Every run passes the same gates, in one function (runs_check), whoever asks:
 * POST /runs, each trial of a sweep as it is submitted, each point a sweep can reach
 * at POST /sweeps, and (runs_check_resume) a run about to be resumed. In order:
 *   1. what the server forbids: command runs, on a server without --allow-commands
 *      (SUBMIT_FORBIDDEN);
 *   2. what its owner may (users.h, with the limits as they are now): a priority over
 *      its max-priority, a world size over its quota (such a run could never start),
 *      an account it may run as (run_as.h) (SUBMIT_NOT_PERMITTED);
 *   3. the schema, its defaults filled into the config, and this host: the devices
 *      it can never give (placement), the data roots, the work roots, checkpoint.load
 *      (SUBMIT_INVALID, every violation at once); but a path into a run that is not
 *      its owner's (run_reads.h) is SUBMIT_FORBIDDEN, those alone reported (a
 *      checkpoint's shapes are its owner's to know);
 *   4. whether the checkpoint it loads fits it, the model and a CPU run's host memory
 *      (run_fit.h) (SUBMIT_INVALID).
 * The outcome carries the result, each problem at its JSON pointer (into the config)
 * and one sentence that says what is wrong, so that the caller answers 400, 403 or
 * 503 naming it. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_RUNS_H
#define DDPD_SERVER_SCHED_INCLUDE_RUNS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "datapaths.h"
#include "run_status.h"
#include "validator.h"

typedef struct {
    const data_roots *data_roots; /* where configs may read data */
    const data_roots *runs_root;  /* the runs directory as a root: where checkpoint.load may point */
    const data_roots *work_roots; /* where a command run's working_dir may lie */
    bool allow_commands;          /* command runs accepted (ddpd serve --allow-commands) */
} runs_config;

void runs_init(const runs_config *c);

/* What became of a submission, or of a check. */
typedef enum {
    SUBMIT_OK,            /* it passed every gate (and, submitted, was stored and queued): 201 */
    SUBMIT_INVALID,       /* the config is wrong, or this server can never run it: 400 */
    SUBMIT_FORBIDDEN,     /* the server forbids it, or it names files of another member's run: 403 */
    SUBMIT_NOT_PERMITTED, /* over its owner's limits, or no account it may run as: 403 */
    SUBMIT_UNAVAILABLE,   /* the database cannot be written now (a full disk, ...): 503, try again later */
    SUBMIT_FAILED,        /* stored but not set up, or refused by the database: 500, see the server's log */
} submit_result;

typedef struct {
    submit_result result;
    int64_t id;         /* runs_submit: the new run (SUBMIT_OK; SUBMIT_FAILED when it was stored, failed) */
    schema_errors errs; /* INVALID, FORBIDDEN, NOT_PERMITTED: each problem at its pointer into the config */
    char why[1536];     /* every result but OK: one sentence naming what is wrong (the first problem) */
} submit_outcome;

void submit_outcome_free(submit_outcome *o);
/* The HTTP status a result is answered with (201, 400, 403, 503, 500). */
int submit_http_status(submit_result r);

/* Every gate (above) on a parsed config (defaults are filled into it) that `who`
 * submits: nothing is stored. Returns out->result. */
submit_result runs_check(json_t *config, const caller *who, submit_outcome *out);
/* runs_check, and the config as its run's start would read it (its paths resolved: a
 * command's working_dir absolute), new; NULL when refused. */
json_t *runs_resolve(json_t *config, const caller *who);
/* runs_check, then the run stored (owned by `who` when a user, else by nobody; with
 * its sweep and trial number when sweep_id > 0, in the same insert, so that a
 * restarted sweep finds it and never makes it twice), its directory and config.json
 * written, and queued: SUBMIT_OK with out->id. */
submit_result runs_submit(json_t *config, const caller *who, int64_t sweep_id, int trial, submit_outcome *out);
/* Run `id`'s config.json before its start: written at its submission without a flush
 * (its durable copy is the database row), so a power cut may have taken it; then it is
 * made again from the row, its paths resolved as at the submission. 0 when it is
 * there (or made again), -1 with err when it cannot be (the run fails saying so).
 * The scheduler calls it through its config's hook (scheduler_types.h). */
int runs_config_mend(int64_t id, char *err, size_t errlen);
/* The gates again for a run about to be resumed (run_resume.h), as its owner (NULL:
 * none) may now: `config` is the one its launcher reads back (config.json, paths made
 * absolute at submission, and the run's account may have written it since);
 * `priority` and `world_size` are the run's as stored. What the server forbids now,
 * the owner's current limits and account, the config's world size against the
 * stored one, and every path it names made canonical again: inside the roots of its
 * kind and not into another member's run (FORBIDDEN). Returns out->result. */
submit_result runs_check_resume(const json_t *config, const char *owner, int priority, int world_size,
                                submit_outcome *out);

typedef enum {
    RUNS_DONE,          /* canceled (queued), signaled (started), or deleted */
    RUNS_NOT_FOUND,
    RUNS_FINISHED,      /* nothing to cancel or already finished; *status says how */
    RUNS_SETTING_UP,    /* its POST is still writing its config: try again */
    RUNS_NOT_FINISHED,  /* delete: cancel it first; *status says how it is */
    RUNS_CHANGED,       /* delete: it changed meanwhile */
    RUNS_STORE_ERROR,
    RUNS_FORBIDDEN,     /* not the run's owner nor an admin: why names the owner */
} runs_result;

/* Whether `who` may change run `id` (`verb`: "cancel", "delete", "resume"): its
 * owner may, and an admin. RUNS_DONE when it may; RUNS_FORBIDDEN with why naming the
 * owner; RUNS_NOT_FOUND; RUNS_STORE_ERROR. */
runs_result runs_may_change(int64_t id, const caller *who, const char *verb, char *why, size_t whylen);

runs_result runs_cancel(int64_t id, run_status *status);
/* A stopped run's reason, rewritten (a sweep's searcher: the rung it stopped at, and
 * why); queued to the store. */
void runs_set_stopped_reason(int64_t id, const char *reason);
runs_result runs_delete(int64_t id, run_status *status);

#endif
