/* A sweep as submitted (POST /sweeps): checked against schema/sweep.schema.json (its
 * defaults filled), then for what a schema cannot say, and expanded into its trials.
 * What a trial is (its parameters, its run config) is a pure function of the spec and
 * the trial's number, so a restarted server makes the same trial again and a seeded
 * random search gives the same trials twice.
 *
 * Parameters are named by where they go:
 *   "train.optimizer.lr", "model.hidden.0"  a JSON path into the base config (an object
 *                                           member or an array index that is there,
 *                                           defaults filled)
 *   "env.LR"                                a command run's environment variable
 *   "{lr}"                                  a placeholder in a command run's `command`
 * each with `values: [...]`, or `min`/`max` with `log` and `type` ("float", "int"),
 * and `when: {"OTHER": [values]}` for a parameter that applies only when another has
 * one of those values (a conditional parameter: Optuna's suggest inside an `if`). A
 * trial's params hold only the parameters that apply to it; one that does not apply
 * leaves the base's value in its config. */
#ifndef DDPD_SERVER_SWEEP_SWEEP_SPEC_H
#define DDPD_SERVER_SWEEP_SWEEP_SPEC_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sweep_rules.h"
#include "sweep_tpe.h"
#include "validator.h"

/* The most trials one sweep may make (a grid larger than this is refused). */
#define SWEEP_MAX_TRIALS 1000

typedef enum { PARAM_PATH, PARAM_ENV, PARAM_PLACEHOLDER } param_target;

/* One condition of a conditional parameter ("when"): parameter `param` (an index into
 * the spec's params, one with values) has one of `values`. */
typedef struct {
    int param;
    json_t *values;
} sweep_cond;

typedef struct {
    char *key;           /* as submitted: "train.optimizer.lr", "env.LR", "{lr}" */
    param_target target;
    json_t *values;      /* an array, or NULL for a range */
    double min, max;
    bool log, is_int;
    sweep_cond *when;    /* it applies only when each holds (and each's parameter applies) */
    int n_when;          /* 0: it always applies */
} sweep_param;

typedef enum { METHOD_GRID, METHOD_RANDOM, METHOD_TPE } sweep_method;
typedef enum { STOP_NONE, STOP_ASHA, STOP_MEDIAN } stop_rule;

typedef struct {
    char *name;
    json_t *spec;        /* the body, defaults filled: what GET /sweeps/{id} shows */
    json_t *base;        /* the base run config as submitted */
    bool command;        /* the base is a command run */
    int epochs;          /* the base's train.epochs (what a built-in trial runs) */
    sweep_param *params;
    int n_params;
    bool conditional;    /* some parameter has `when` */
    json_t *grid;        /* a conditional grid's points, in order, each once (NULL: the product, by arithmetic) */
    sweep_method method;
    uint64_t seed;
    tpe_options tpe;     /* method tpe's settings */
    int max_trials, parallel;
    int n_trials;        /* how many it makes: the grid's size, or max_trials */
    char metric[64];
    stop_rule stop;
    sweep_rules rules;   /* the goal, the rungs, the median's: what the rules take (sweep_rules.h) */
    bool preemptible;    /* every trial preemptible */
} sweep_spec;

/* Checks a body against the sweep's schema (every violation, with its pointer) and the
 * base as a run config (its violations under /base), then, when those pass, what a
 * schema cannot say (a sentence naming the parameter): NULL when there is one
 * violation or more, all in errs. The caller frees the spec. */
sweep_spec *sweep_spec_parse(const json_t *body, schema_errors *errs);
/* Parses a spec stored by sweep_spec_parse's `spec` (it was checked then). */
sweep_spec *sweep_spec_load(const char *spec_json);
void sweep_spec_free(sweep_spec *s);

/* Trial `trial`'s parameters: {"key": value, ...} (new reference). */
json_t *sweep_trial_params(const sweep_spec *s, int trial);
/* A configuration given by hand (POST /sweeps/{id}/trials, as Optuna's enqueue_trial):
 * one value for each of the sweep's parameters and no other, each one of its values or
 * within its range, making a valid run config: the parameters in the sweep's order
 * (new reference), else NULL with every violation in errs (pointers /params/KEY). */
json_t *sweep_params_given(const sweep_spec *s, const json_t *given, schema_errors *errs);
/* Method tpe's next configuration (sweep_tpe.h) for trial `trial`, from the trials so
 * far: params[i] (JSON text) with metric[i] (NaN: none; the goal's direction taken into
 * account here), draw `attempt` of the stream (another when a draw repeats a trial's
 * configuration): {"key": value, ...} (new reference). Fewer than
 * tpe.n_startup_trials with a metric: a uniform draw. */
json_t *sweep_tpe_params(const sweep_spec *s, int trial, int attempt, const char *const *params, const double *metric,
                         int n);

/* How many configurations the method's sequence has (sweep_trial_params(s, 0..n-1)):
 * a grid's size; -1 for a random search (no end). */
long sweep_sequence_length(const sweep_spec *s);

/* The base config with `params` applied and the trial's name (new reference). */
json_t *sweep_trial_config(const sweep_spec *s, const json_t *params, const char *run_name);

/* The parameter sets that a sweep's checks take before any trial starts (each makes
 * a config that must be valid, and pass every gate a run passes: sweep.c): every
 * point of a grid; for a random search the base alone, then each parameter at each
 * of its values (a float range's two ends; an int range's every integer while it has
 * at most SWEEP_MAX_TRIALS of them, else its two ends), the others as the base has
 * them. sweep_check_points says how many; sweep_check_point gives the i-th,
 * {"key": value, ...} ({} for the base alone; new reference). */
int sweep_check_points(const sweep_spec *s);
json_t *sweep_check_point(const sweep_spec *s, int i);

/* Whether a parameter's values reach a command run's environment or its command's
 * arguments ("env.NAME", a "{placeholder}", a path into env or command): such
 * values are their owner's to see, as a run's env values and arguments are
 * (api/run_mask.h). Decided by the key alone. */
bool sweep_param_secret(const char *key);

#endif
