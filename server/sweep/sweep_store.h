/* The sweeps' tables (migrations/0012_sweeps.sql) on a connection of their own: the
 * sweeps, their trials, the metric each trial had at each rung, and the searcher's
 * decisions. Every function is called with sweep_store_lock held (the searcher's
 * thread holds it for a whole pass; the API's handlers for one read or write). The
 * runs' own rows are the store's (store/store.h); only read here. */
#ifndef DDPD_SERVER_SWEEP_SWEEP_STORE_H
#define DDPD_SERVER_SWEEP_SWEEP_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sweep_rules.h"

typedef struct {
    int64_t id;
    char *name, *owner, *spec, *reason; /* owner NULL: nobody in particular */
    char status[16];
    int n_trials, best_trial; /* best_trial -1: none yet */
    int64_t created_at, finished_at; /* finished_at 0: not yet */
    bool paused; /* running, and its newest pause or resume (its decisions) is a pause */
} sweep_row;

typedef struct {
    int trial;
    char *params; /* JSON text */
    int64_t run_id; /* 0: not stored yet */
    char state[16];
    int rung, promoted;
    double metric; /* NaN: none yet */
    int metric_epoch; /* -1: none */
    char *reason;
    char run_status[16]; /* its run's status as read ("" none; not written back) */
    bool resumed_since;  /* its run was resumed (run_resumes) after the row was last written */
} trial_row;

int sweep_store_open(const char *db_path, char *err, size_t errlen);
void sweep_store_close(void);
void sweep_store_lock(void);
void sweep_store_unlock(void);
int sweep_store_begin(void);
int sweep_store_commit(void);

int64_t sweep_store_insert(const char *name, const char *owner, const char *spec, int n_trials, int64_t t);
/* running_only: the sweeps the searcher carries on. Returns how many (*out malloc'd), or -1. */
int sweep_store_list(sweep_row **out, bool running_only);
/* 1 found, 0 not, -1 error. */
int sweep_store_get(int64_t id, sweep_row *out);
void sweep_row_free(sweep_row *r);
int sweep_store_finish(int64_t id, const char *status, const char *reason, int64_t t);
int sweep_store_set_best(int64_t id, int trial);

int sweep_store_trials(int64_t id, trial_row **out);
void trial_rows_free(trial_row *t, int n);
int sweep_store_trial_put(int64_t id, const trial_row *t, int64_t now);

/* A sweep's n_trials and spec changed (more trials); reopen: a finished one runs again. */
int sweep_store_grow(int64_t id, int n_trials, const char *spec, bool reopen);
/* The finished (succeeded, failed) sweeps one of whose ended trials has its run queued
 * or running again, resumed (run_resumes) after the trial ended: by hand. How many
 * (*ids malloc'd), or -1. */
int sweep_store_revived(int64_t **ids);
extern const char SWEEP_REVIVED_SQL[]; /* its statement (a test holds its plan) */
/* Whether the trial's run was resumed by hand after the sweep had ended it (its
 * decision `resumed by hand`): the rules stop it no more. */
bool sweep_store_trial_by_hand(int64_t id, int trial);

/* Whether a run can be stopped now and continued later: a command run (started again),
 * or a built-in one that has written a checkpoint (continued from it). */
bool sweep_store_run_stoppable(int64_t run_id);
/* The detail of sweep `id`'s newest decision `action` of its own (no trial's), malloc'd;
 * NULL when it has none. */
char *sweep_store_sweep_detail(int64_t id, const char *action);

int sweep_store_decide(int64_t id, int trial, const char *action, const char *detail, int64_t t);
int sweep_store_rung_put(int64_t id, int rung, int trial, double metric, int64_t t);
/* The metrics recorded at `rung` (ASHA; median: the epoch), trial by trial: how many
 * (*out malloc'd, NULL when none), or -1. */
int sweep_store_rung(int64_t id, int rung, sweep_mark **out);

/* A run's status and reason (reason malloc'd or NULL): 1, 0 (no such run), -1. */
int sweep_store_run_state(int64_t run_id, char status[16], char **reason);
/* The run a sweep's trial has (0: none): for a restart that finds a trial's run stored
 * but not yet its row. */
int64_t sweep_store_trial_run(int64_t id, int trial);
/* A run's metric per epoch (key: a column of the epoch table; else the per-epoch
 * series of that name (event_kinds.h's EPOCH_SERIES_PREFIX), its step the epoch; else
 * a series' key, whose points are per step): values[e] for e < n, NaN where missing.
 * Returns n (the newest epoch + 1; for a step series the number of points, its latest
 * last), or -1. */
int sweep_store_run_metric(int64_t run_id, const char *key, double **values);
/* The names a run reported a value of per epoch or per step ("test_loss", "val_acc",
 * ...: the epoch table's columns that have one, then its series' keys, the per-epoch
 * ones without their prefix), comma-separated (malloc'd; "" when none). */
char *sweep_store_run_metric_names(int64_t run_id);

#endif
