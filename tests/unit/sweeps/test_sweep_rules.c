/* Unit tests of a sweep's rules (server/sweep/sweep_rules.c) on hand-made tables, with
 * no database, clock or process: the goal both ways and NaN (no metric); ASHA's rungs
 * (a built-in trial's below its epochs, a command trial's without end) and when a
 * trial has reached one; a command trial judged at a rung as it comes (the top
 * 1/eta so far, at least one, ties going on); whether a rung is closed (pending,
 * running below it, paused below it) and a built-in rung's promotions (the top 1/eta
 * go on, at least the best once closed, the rest stopped then and waiting before,
 * ties by trial number, only trials paused there decided); median stopping (an odd
 * and an even count, min_trials not reached, the trial's own value left out, from
 * min_resource on, never at a built-in trial's last epoch); the best trial
 * (succeeded first, ties to the first) and the sweep's end. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sweep_rules.h"

static const sweep_rules MIN9 = {.maximize = false, .epochs = 9, .min_resource = 1, .reduction_factor = 3, .min_trials = 3};
static const sweep_rules MAX9 = {.maximize = true, .epochs = 9, .min_resource = 1, .reduction_factor = 3, .min_trials = 3};
/* a command trial's: no end known */
static const sweep_rules CMD = {.maximize = false, .epochs = 0, .min_resource = 1, .reduction_factor = 3, .min_trials = 2};

static sweep_trial_view trial(int n, sweep_phase phase, int rung, int promoted, double metric) {
    return (sweep_trial_view){.trial = n, .phase = phase, .rung = rung, .promoted = promoted, .metric = metric};
}

static void goal_and_nan(void) {
    CHECK(sweep_rules_better(&MIN9, 0.1, 0.2) && !sweep_rules_better(&MIN9, 0.2, 0.1), "minimize: lower is better");
    CHECK(sweep_rules_better(&MAX9, 0.2, 0.1) && !sweep_rules_better(&MAX9, 0.1, 0.2), "maximize: higher is better");
    CHECK(!sweep_rules_better(&MIN9, 0.1, 0.1) && !sweep_rules_better(&MAX9, 0.1, 0.1), "a tie is not better");
    CHECK(!sweep_rules_better(&MIN9, NAN, 1) && !sweep_rules_better(&MIN9, 1, NAN) && !sweep_rules_better(&MAX9, NAN, 1) &&
              !sweep_rules_better(&MAX9, 1, NAN),
          "NaN is never better, nor anything better than it");
    const double v[5] = {0.5, NAN, 0.4, NAN, NAN};
    CHECK(sweep_rules_latest(v, 5) == 2 && sweep_rules_latest(v, 2) == 0 && sweep_rules_latest(v + 3, 2) == -1 &&
              sweep_rules_latest(v, 0) == -1,
          "the newest epoch with a value: %d", sweep_rules_latest(v, 5));
    sweep_phase p;
    CHECK(sweep_phase_parse("paused", &p) && p == SWEEP_PAUSED && sweep_phase_parse("stopped", &p) && p == SWEEP_STOPPED &&
              !sweep_phase_parse("done", &p) && !sweep_phase_parse(NULL, &p),
          "the trials' state words");
}

static void rungs(void) {
    CHECK(sweep_rules_rung_epochs(&MIN9, 0) == 1 && sweep_rules_rung_epochs(&MIN9, 1) == 3 &&
              sweep_rules_rung_epochs(&MIN9, 2) == 0 && sweep_rules_rung_epochs(&MIN9, -1) == 0,
          "a built-in trial of 9 epochs: rungs at 1 and 3 (9 is its end, no rung)");
    sweep_rules r27 = MIN9;
    r27.epochs = 27;
    r27.min_resource = 2;
    CHECK(sweep_rules_rung_epochs(&r27, 0) == 2 && sweep_rules_rung_epochs(&r27, 1) == 6 &&
              sweep_rules_rung_epochs(&r27, 2) == 18 && sweep_rules_rung_epochs(&r27, 3) == 0,
          "min_resource 2, eta 3, 27 epochs: 2, 6, 18");
    CHECK(sweep_rules_rung_epochs(&CMD, 3) == 27 && sweep_rules_rung_epochs(&CMD, 18) == 387420489 &&
              sweep_rules_rung_epochs(&CMD, 19) == 0 && sweep_rules_rung_epochs(&CMD, 100) == 0,
          "a command trial's rungs have no end but 2^30 epochs: %d %d", sweep_rules_rung_epochs(&CMD, 18),
          sweep_rules_rung_epochs(&CMD, 19));
    sweep_rules none = {.epochs = 9};
    CHECK(sweep_rules_rung_epochs(&none, 0) == 0, "no early stopping (min_resource 0): no rung");

    const double v[4] = {0.9, 0.8, NAN, 0.6};
    int e = -1;
    CHECK(sweep_rules_rung_reached(&MIN9, 0, v, 4, &e) && e == 1, "rung 0 reached at epoch 1: %d", e);
    CHECK(!sweep_rules_rung_reached(&MIN9, 1, v, 4, &e), "rung 1 (3 epochs) not reached: no value at its last epoch");
    CHECK(!sweep_rules_rung_reached(&MIN9, 1, v, 2, &e), "nor with 2 epochs");
    const double w[3] = {0.9, 0.8, 0.7};
    CHECK(sweep_rules_rung_reached(&MIN9, 1, w, 3, &e) && e == 3, "with a value at epoch 3: reached");
    CHECK(!sweep_rules_rung_reached(&MIN9, 2, w, 3, &e), "a rung that does not exist is never reached");
}

static void asha_command(void) {
    sweep_mark at[9];
    /* the first trial at a rung: alone, it is the top */
    at[0] = (sweep_mark){0, 0.5};
    sweep_asha_verdict v = sweep_asha_command_judge(&CMD, 0.5, at, 1);
    CHECK(!v.stop && v.n == 1 && v.keep == 1 && v.better == 0, "alone at a rung: goes on (keep %d)", v.keep);
    /* keep at least one: 2 of eta 3 */
    at[1] = (sweep_mark){1, 0.6};
    v = sweep_asha_command_judge(&CMD, 0.6, at, 2);
    CHECK(v.stop && v.n == 2 && v.keep == 1 && v.better == 1, "the second, worse: stopped (1 of 2 better, keep 1)");
    at[1].metric = 0.4;
    v = sweep_asha_command_judge(&CMD, 0.4, at, 2);
    CHECK(!v.stop && v.better == 0, "the second, better: goes on");
    at[1].metric = 0.5;
    v = sweep_asha_command_judge(&CMD, 0.5, at, 2);
    CHECK(!v.stop && v.better == 0, "a tie is not beaten: goes on");
    /* nine trials: keep 3 */
    for (int i = 0; i < 9; i++) at[i] = (sweep_mark){i, (i + 1) / 10.0}; /* 0.1 .. 0.9, as written */
    v = sweep_asha_command_judge(&CMD, 0.3, at, 9);
    CHECK(!v.stop && v.keep == 3 && v.better == 2, "third of nine, minimized: goes on (keep %d, better %d)", v.keep,
          v.better);
    v = sweep_asha_command_judge(&CMD, 0.4, at, 9);
    CHECK(v.stop && v.better == 3, "fourth of nine: stopped");
    sweep_rules cmax = CMD;
    cmax.maximize = true;
    v = sweep_asha_command_judge(&cmax, 0.7, at, 9);
    CHECK(!v.stop && v.better == 2, "maximized, 0.7 is third of nine: goes on");
    v = sweep_asha_command_judge(&cmax, 0.3, at, 9);
    CHECK(v.stop && v.better == 6, "maximized, 0.3: stopped");
    /* NaN: no metric */
    at[3].metric = NAN;
    at[4].metric = NAN;
    v = sweep_asha_command_judge(&CMD, 0.3, at, 9);
    CHECK(v.n == 7 && v.keep == 2 && v.stop, "NaN values left out: 7 counted, keep 2, third stopped (n %d keep %d)", v.n,
          v.keep);
    v = sweep_asha_command_judge(&CMD, NAN, at, 9);
    CHECK(!v.stop && v.better == 0, "a trial without a value there is not stopped");
}

static void rung_closed(void) {
    sweep_trial_view t[3] = {trial(0, SWEEP_PAUSED, 1, 0, 0.3), trial(1, SWEEP_STOPPED, 0, -1, 0.9),
                             trial(2, SWEEP_RUNNING, -1, 1, 0.2)};
    CHECK(sweep_asha_rung_closed(1, true, t, 3), "paused at it, stopped below it, running promoted from it: closed");
    CHECK(!sweep_asha_rung_closed(1, false, t, 3), "not every trial made yet: open");
    CHECK(!sweep_asha_rung_closed(2, true, t, 3), "rung 2: one paused below it, one running below it: open");
    t[2].promoted = 0;
    CHECK(!sweep_asha_rung_closed(1, true, t, 3), "one running, promoted from below it only: open");
    t[2].phase = SWEEP_PENDING;
    t[2].promoted = -1;
    CHECK(!sweep_asha_rung_closed(0, true, t, 3), "a pending trial can still reach any rung: open");
    t[2].phase = SWEEP_SUCCEEDED;
    t[0].rung = 0;
    CHECK(!sweep_asha_rung_closed(1, true, t, 3), "one paused below it: open");
    CHECK(sweep_asha_rung_closed(0, true, t, 3), "rung 0: paused at it, the others ended: closed");
    CHECK(sweep_asha_rung_closed(0, true, t, 0), "no trials, all made: closed");
}

static const char *action_name(sweep_asha_action a) {
    return a == ASHA_PROMOTE ? "promote" : a == ASHA_STOP ? "stop" : a == ASHA_WAIT ? "wait" : "none";
}

static void promotions(void) {
    sweep_asha_pick out[8];
    int keep = -1;
    /* an open rung: five there, the top 1/3 (one) goes on, the others wait */
    sweep_mark at[5] = {{0, 0.5}, {1, 0.2}, {2, 0.9}, {3, 0.4}, {4, 0.3}};
    sweep_trial_view tr[6];
    for (int i = 0; i < 5; i++) tr[i] = trial(i, SWEEP_PAUSED, 0, -1, at[i].metric);
    tr[5] = trial(5, SWEEP_PENDING, -1, -1, NAN);
    int n = sweep_asha_promotions(&MIN9, 0, false, at, 5, tr, 6, out, &keep);
    CHECK(n == 5 && keep == 1, "five ranked, keep 1: %d %d", n, keep);
    CHECK(out[0].trial == 1 && out[0].rank == 1 && out[0].action == ASHA_PROMOTE && out[0].metric == 0.2,
          "the best (trial 1, 0.2) promoted: trial %d %s", out[0].trial, action_name(out[0].action));
    int order[5] = {1, 4, 3, 0, 2}, ok = 0;
    for (int i = 0; i < 5; i++) ok += out[i].trial == order[i] && out[i].rank == i + 1 && (i == 0 || out[i].action == ASHA_WAIT);
    CHECK(ok == 5, "ranked 1, 4, 3, 0, 2; the rest wait while the rung is open (%d of 5)", ok);
    /* the same rung closed: the rest stop */
    tr[5].phase = SWEEP_STOPPED;
    n = sweep_asha_promotions(&MIN9, 0, true, at, 5, tr, 6, out, &keep);
    ok = 0;
    for (int i = 1; i < 5; i++) ok += out[i].action == ASHA_STOP;
    CHECK(n == 5 && keep == 1 && out[0].action == ASHA_PROMOTE && ok == 4, "closed: the best goes on, 4 stopped");
    /* maximize: the order turns */
    n = sweep_asha_promotions(&MAX9, 0, true, at, 5, tr, 6, out, &keep);
    CHECK(out[0].trial == 2 && out[0].action == ASHA_PROMOTE && out[4].trial == 1, "maximized: trial 2 (0.9) first");
    /* keep at least one: two at a rung of eta 3, open then closed */
    n = sweep_asha_promotions(&MIN9, 0, false, at, 2, tr, 6, out, &keep);
    CHECK(n == 2 && keep == 0 && out[0].action == ASHA_WAIT && out[1].action == ASHA_WAIT,
          "two of eta 3, open: none goes on yet (keep %d: %s %s)", keep, action_name(out[0].action),
          action_name(out[1].action));
    n = sweep_asha_promotions(&MIN9, 0, true, at, 2, tr, 6, out, &keep);
    CHECK(keep == 1 && out[0].trial == 1 && out[0].action == ASHA_PROMOTE && out[1].action == ASHA_STOP,
          "two of eta 3, closed: at least the best goes on (keep %d)", keep);
    /* ties by trial number; only trials paused at this rung are decided; NaN not ranked */
    sweep_mark tie[4] = {{3, 0.5}, {1, 0.5}, {2, NAN}, {0, 0.7}};
    sweep_trial_view tt[4] = {trial(0, SWEEP_RUNNING, 0, 0, 0.7), trial(1, SWEEP_PAUSED, 0, -1, 0.5),
                              trial(2, SWEEP_PAUSED, 0, -1, NAN), trial(3, SWEEP_PAUSED, 1, 0, 0.5)};
    n = sweep_asha_promotions(&MIN9, 0, true, tie, 4, tt, 4, out, &keep);
    CHECK(n == 3 && keep == 1, "NaN left out: 3 ranked, keep 1 (%d %d)", n, keep);
    CHECK(out[0].trial == 1 && out[1].trial == 3 && out[2].trial == 0, "a tie goes to the lower trial number: %d %d %d",
          out[0].trial, out[1].trial, out[2].trial);
    CHECK(out[0].action == ASHA_PROMOTE && out[1].action == ASHA_NONE && out[2].action == ASHA_NONE,
          "trial 3 is paused at rung 1, trial 0 already promoted: nothing to decide for them here (%s %s)",
          action_name(out[1].action), action_name(out[2].action));
    n = sweep_asha_promotions(&MIN9, 0, true, tie, 0, tt, 4, out, &keep);
    CHECK(n == 0 && keep == 0, "an empty rung: nothing ranked, nobody kept");
}

static void median(void) {
    /* odd count: 3 others at epoch 2 (0.3, 0.5, 0.4): median 0.4 */
    sweep_mark at[5] = {{0, 0.3}, {1, 0.5}, {2, 0.4}, {3, 0.45}, {4, 0.1}};
    sweep_median_verdict v = sweep_median_judge(&MIN9, 3, 2, 0.45, at, 4);
    CHECK(v.judged && v.stop && v.others == 3 && v.median == 0.4, "0.45 against the median 0.4 of 3: stopped (%g, %d)",
          v.median, v.others);
    v = sweep_median_judge(&MIN9, 3, 2, 0.4, at, 4);
    CHECK(v.judged && !v.stop, "equal to the median: goes on");
    v = sweep_median_judge(&MAX9, 3, 2, 0.45, at, 4);
    CHECK(v.judged && !v.stop, "maximized, 0.45 beats the median 0.4: goes on");
    /* even count: 4 others (0.3, 0.5, 0.4, 0.1): the mean of the middle two, 0.35 */
    v = sweep_median_judge(&MIN9, 3, 2, 0.36, at, 5);
    CHECK(v.judged && v.stop && v.others == 4 && fabs(v.median - 0.35) < 1e-12, "even count: median %g, stopped",
          v.median);
    v = sweep_median_judge(&MIN9, 3, 2, 0.34, at, 5);
    CHECK(v.judged && !v.stop, "0.34 beats the even median 0.35");
    /* min_trials not reached: 2 others of 3 needed */
    v = sweep_median_judge(&MIN9, 3, 2, 0.9, at, 2);
    CHECK(!v.judged && !v.stop && v.others == 2, "2 others, min_trials 3: not judged");
    /* the trial's own value is left out, by its number */
    v = sweep_median_judge(&MIN9, 0, 2, 0.9, at, 3);
    CHECK(!v.judged && v.others == 2, "its own value is not one of the others");
    /* NaN others left out; a NaN value is never stopped */
    sweep_mark withnan[4] = {{0, 0.3}, {1, NAN}, {2, 0.4}, {4, 0.2}};
    v = sweep_median_judge(&MIN9, 3, 2, 0.5, withnan, 4);
    CHECK(v.judged && v.stop && v.others == 3 && v.median == 0.3, "NaN left out: 3 others, median 0.3");
    v = sweep_median_judge(&MIN9, 3, 2, NAN, withnan, 4);
    CHECK(v.judged && !v.stop, "a trial without a value is not stopped");
    /* from min_resource on */
    sweep_rules late = MIN9;
    late.min_resource = 4;
    v = sweep_median_judge(&late, 3, 2, 0.9, at, 4);
    CHECK(!v.judged, "epoch 2 is before min_resource 4 (epoch index 3): not judged");
    v = sweep_median_judge(&late, 3, 3, 0.9, at, 4);
    CHECK(v.judged && v.stop, "epoch index 3 is min_resource 4's: judged");
    /* a built-in trial's last epoch is never judged (it has finished); a command trial has none */
    v = sweep_median_judge(&MIN9, 3, 8, 0.9, at, 4);
    CHECK(!v.judged && !v.stop, "epoch 8 of 9, a built-in trial's last: not judged");
    v = sweep_median_judge(&MIN9, 3, 7, 0.9, at, 4);
    CHECK(v.judged && v.stop, "epoch 7 of 9: judged");
    v = sweep_median_judge(&CMD, 3, 8, 0.9, at, 4);
    CHECK(v.judged && v.stop, "a command trial at epoch 8: judged (min_trials 2)");
}

static void sweep_level(void) {
    sweep_trial_view t[5] = {trial(0, SWEEP_FAILED, -1, -1, 0.1), trial(1, SWEEP_SUCCEEDED, -1, -1, 0.5),
                             trial(2, SWEEP_SUCCEEDED, -1, -1, 0.3), trial(3, SWEEP_SUCCEEDED, -1, -1, 0.3),
                             trial(4, SWEEP_STOPPED, 0, -1, NAN)};
    CHECK(sweep_rules_best(&MIN9, t, 5) == 2, "the best that succeeded (not the failed 0.1), the first of a tie: %d",
          sweep_rules_best(&MIN9, t, 5));
    CHECK(sweep_rules_best(&MAX9, t, 5) == 1, "maximized: trial 1");
    CHECK(sweep_rules_best_last(&MIN9, t, 5) == 0, "a canceled sweep's best: the failed 0.1 counts: %d",
          sweep_rules_best_last(&MIN9, t, 5));
    t[0].phase = SWEEP_CANCELED;
    CHECK(sweep_rules_best_last(&MIN9, t, 5) == 0, "a trial canceled mid-way with the best value is the best");
    CHECK(sweep_rules_best_last(&MAX9, t, 5) == 1, "maximized: trial 1");
    t[0].phase = SWEEP_FAILED;
    t[1].phase = t[2].phase = t[3].phase = SWEEP_STOPPED;
    CHECK(sweep_rules_best(&MIN9, t, 5) == 0, "none succeeded: the best of all with a metric (trial 0)");
    t[0].metric = t[1].metric = t[2].metric = t[3].metric = NAN;
    CHECK(sweep_rules_best(&MIN9, t, 5) == -1, "none with a metric: -1");
    CHECK(sweep_rules_best_last(&MIN9, t, 5) == -1, "none with a metric: no last best either");
    CHECK(sweep_rules_best(&MIN9, t, 0) == -1, "no trials: -1");

    sweep_trial_view u[4] = {trial(0, SWEEP_PENDING, -1, -1, NAN), trial(1, SWEEP_RUNNING, -1, -1, 0.5),
                             trial(2, SWEEP_PAUSED, 0, -1, 0.4), trial(3, SWEEP_SUCCEEDED, -1, -1, 0.3)};
    CHECK(sweep_rules_active(u, 4) == 2, "pending and running hold a place; paused and ended do not");
    CHECK(sweep_rules_end(false, u + 3, 1) == SWEEP_GOES_ON, "not every trial made: it goes on");
    CHECK(sweep_rules_end(true, u, 4) == SWEEP_GOES_ON, "a trial active: it goes on");
    CHECK(sweep_rules_end(true, u + 2, 2) == SWEEP_GOES_ON, "a trial paused: it goes on");
    CHECK(sweep_rules_end(true, u + 3, 1) == SWEEP_ENDS_SUCCEEDED, "all ended, one succeeded: succeeded");
    CHECK(sweep_rules_end(true, t, 5) == SWEEP_ENDS_FAILED, "all ended, none succeeded: failed");
}

int main(void) {
    goal_and_nan();
    rungs();
    asha_command();
    rung_closed();
    promotions();
    median();
    sweep_level();
    return test_done("test_sweep_rules");
}
