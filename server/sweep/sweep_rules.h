/* A sweep's rules as pure functions of plain tables of its trials: median stopping,
 * ASHA (a command trial judged at each rung as it comes; a built-in trial's rungs, its
 * promotions and whether a rung is closed), the best trial and the sweep's end. No
 * database, no clock, no log, no action: the searcher (sweep.c) reads its tables,
 * asks these functions, records each decision and acts on it; the rules are tested
 * on hand-made tables (tests/unit/sweeps/test_sweep_rules.c).
 *
 * A metric that is NaN is no metric: it is never better than another, nor another
 * better than it; a table's NaN entries are left out (not counted, not ranked), and a
 * trial whose own value is NaN is never stopped by it. */
#ifndef DDPD_SERVER_SWEEP_SWEEP_RULES_H
#define DDPD_SERVER_SWEEP_SWEEP_RULES_H

#include <stdbool.h>

/* What the rules need of a sweep's spec. */
typedef struct {
    bool maximize;        /* the goal: a higher metric is better, else a lower one */
    int epochs;           /* a built-in trial's train.epochs; 0: a command trial's (its length is its own) */
    int min_resource;     /* ASHA: the first rung's epochs; median: epochs before the first judgement */
    int reduction_factor; /* ASHA's eta: the top 1/eta of a rung go on */
    int min_trials;       /* median: how many other trials must have a value at the epoch */
    int max_resource;     /* ASHA: no rung at or past this many epochs (a trial's full length); 0: none */
} sweep_rules;

/* A trial's metric at a rung (ASHA) or at an epoch (median). */
typedef struct {
    int trial;
    double metric;
} sweep_mark;

/* Where a trial is, as the sweep's tables say (its state's word: sweep_phase_parse). */
typedef enum {
    SWEEP_PENDING,   /* made, its run not stored yet */
    SWEEP_RUNNING,   /* its run is queued or running (or promoted, about to be resumed) */
    SWEEP_PAUSED,    /* ASHA paused it at a rung: its run stopped, checkpointed */
    SWEEP_SUCCEEDED,
    SWEEP_FAILED,
    SWEEP_CANCELED,
    SWEEP_STOPPED,   /* the searcher stopped it for good */
} sweep_phase;

typedef struct {
    int trial;
    sweep_phase phase;
    int rung;      /* the highest rung it reached (ASHA), -1: none */
    int promoted;  /* the highest rung it was promoted from, -1: none */
    double metric; /* its newest value of the metric, NaN: none yet */
} sweep_trial_view;

/* "pending", "running", ... as sweep_trials.state spells them; false for another word. */
bool sweep_phase_parse(const char *word, sweep_phase *out);

/* Whether metric a is strictly better than b by the goal (false when either is NaN). */
bool sweep_rules_better(const sweep_rules *r, double a, double b);

/* The newest epoch of values[0..n) that has a value (not NaN), or -1. */
int sweep_rules_latest(const double *values, int n);

/* ---- ASHA: rungs ---- */

/* The epochs at rung k: min_resource * reduction_factor^k, or 0 where there is no such
 * rung: for a built-in trial, from train.epochs on (a rung is only where a trial still
 * has epochs to go); from max_resource on (a trial that reached it has trained its
 * full length: it is never stopped there); for any trial, past 2^30 epochs. */
int sweep_rules_rung_epochs(const sweep_rules *r, int k);

/* Whether a trial's metric per epoch (values[e], NaN where missing; n of them) has
 * reached rung k: the rung exists and the trial has a value at its last epoch; its
 * epochs in *epochs. */
bool sweep_rules_rung_reached(const sweep_rules *r, int k, const double *values, int n, int *epochs);

/* ---- ASHA on a command trial: judged at each rung as it comes ---- */

typedef struct {
    bool stop;  /* not in the top 1/reduction_factor of the rung so far */
    int better; /* how many of the rung's values are strictly better than the trial's */
    int keep;   /* how many go on: n / reduction_factor, at least 1 */
    int n;      /* the values at the rung so far, the trial's own among them */
} sweep_asha_verdict;

/* A command trial whose value at a rung is `value`, against at[0..n), every value
 * recorded at the rung so far (its own among them): stopped unless fewer than `keep`
 * are strictly better. */
sweep_asha_verdict sweep_asha_command_judge(const sweep_rules *r, double value, const sweep_mark *at, int n);

/* ---- ASHA on built-in trials: promotions at a rung ---- */

/* Whether rung k is closed: every trial is made (all_made) and none can still reach the
 * rung: none is pending, running below it (promoted from a rung below k, or never) or
 * paused below it. */
bool sweep_asha_rung_closed(int k, bool all_made, const sweep_trial_view *trials, int n);

typedef enum {
    ASHA_NONE,    /* not paused at this rung: nothing to decide for it here */
    ASHA_WAIT,    /* paused here, not in the top: it waits until the rung closes */
    ASHA_PROMOTE, /* it goes on from its checkpoint to the next rung */
    ASHA_STOP,    /* the rung is closed and it is not in the top: it ends stopped */
} sweep_asha_action;

typedef struct {
    int trial;
    double metric;
    int rank; /* 1: the best at the rung */
    sweep_asha_action action;
} sweep_asha_pick;

/* Rung k's decisions: its values at[0..n_at) ranked best first (ties by trial number,
 * NaN left out) into out[] (room for n_at); for each, what becomes of its trial when
 * that is paused at rung k (in trials[0..n_trials)): the top keep = n / eta go on, at
 * least the best once the rung is `closed`; the rest end stopped once it is closed,
 * and wait until then. Returns how many were ranked (n); *keep how many go on. */
int sweep_asha_promotions(const sweep_rules *r, int k, bool closed, const sweep_mark *at, int n_at,
                          const sweep_trial_view *trials, int n_trials, sweep_asha_pick *out, int *keep);

/* ---- median stopping ---- */

typedef struct {
    bool judged;   /* the rule applied: past min_resource, not a built-in trial's last epoch, min_trials others */
    bool stop;     /* judged, and the median of the others is strictly better than the trial's value */
    double median; /* of the others' values (judged only) */
    int others;    /* how many other trials have a value at the epoch */
} sweep_median_verdict;

/* Trial `trial`'s value at (0-based) epoch `epoch` against at[0..n), the values
 * recorded at that epoch (its own, if there, left out by its number). Judged from
 * epoch min_resource - 1 on, never at a built-in trial's last epoch (it has finished),
 * once min_trials other trials have a value there; the median of an even count is the
 * mean of the middle two. */
sweep_median_verdict sweep_median_judge(const sweep_rules *r, int trial, int epoch, double value, const sweep_mark *at,
                                        int n);

/* ---- the sweep as a whole ---- */

/* How many trials hold a place of `parallel`: pending or running (a paused one holds none). */
int sweep_rules_active(const sweep_trial_view *trials, int n);

/* The best trial: among those that succeeded, else among all with a metric; the first
 * in the table's order among equals. Its number, or -1 when none has a metric. */
int sweep_rules_best(const sweep_rules *r, const sweep_trial_view *trials, int n);
/* A canceled or failed sweep's best: among every trial with a metric, whatever its end
 * (a trial canceled mid-way by its last reported value); the first among equals. Its
 * number, or -1 when none has a metric. */
int sweep_rules_best_last(const sweep_rules *r, const sweep_trial_view *trials, int n);

typedef enum {
    SWEEP_GOES_ON,
    SWEEP_ENDS_SUCCEEDED, /* every trial made and ended, one of them succeeded */
    SWEEP_ENDS_FAILED,    /* every trial made and ended, none succeeded */
} sweep_end;

/* Whether the sweep has ended: every trial made (all_made), none pending, running or paused. */
sweep_end sweep_rules_end(bool all_made, const sweep_trial_view *trials, int n);

#endif
