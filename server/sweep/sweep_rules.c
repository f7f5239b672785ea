/* A sweep's rules on plain tables: see sweep_rules.h. */
#include "sweep_rules.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* Past this many epochs there is no rung (and min_resource * eta^k cannot overflow). */
#define RUNG_EPOCHS_MAX (1L << 30)

static const char *const PHASES[] = {
    [SWEEP_PENDING] = "pending",     [SWEEP_RUNNING] = "running", [SWEEP_PAUSED] = "paused",
    [SWEEP_SUCCEEDED] = "succeeded", [SWEEP_FAILED] = "failed",   [SWEEP_CANCELED] = "canceled",
    [SWEEP_STOPPED] = "stopped",
};

bool sweep_phase_parse(const char *word, sweep_phase *out) {
    for (size_t i = 0; word && i < sizeof PHASES / sizeof *PHASES; i++)
        if (strcmp(word, PHASES[i]) == 0) {
            *out = (sweep_phase)i;
            return true;
        }
    return false;
}

bool sweep_rules_better(const sweep_rules *r, double a, double b) { return r->maximize ? a > b : a < b; }

int sweep_rules_latest(const double *values, int n) {
    int e = n - 1;
    while (e >= 0 && isnan(values[e])) e--;
    return e;
}

/* ---- ASHA ---- */

int sweep_rules_rung_epochs(const sweep_rules *r, int k) {
    if (k < 0 || r->min_resource < 1 || r->reduction_factor < 2) return 0;
    long e = r->min_resource;
    for (int j = 0; j < k && e <= RUNG_EPOCHS_MAX; j++) e *= r->reduction_factor;
    if (e > RUNG_EPOCHS_MAX || (r->epochs > 0 && e >= r->epochs) || (r->max_resource > 0 && e >= r->max_resource))
        return 0;
    return (int)e;
}

bool sweep_rules_rung_reached(const sweep_rules *r, int k, const double *values, int n, int *epochs) {
    int e = sweep_rules_rung_epochs(r, k);
    if (e <= 0 || n < e || isnan(values[e - 1])) return false;
    *epochs = e;
    return true;
}

sweep_asha_verdict sweep_asha_command_judge(const sweep_rules *r, double value, const sweep_mark *at, int n) {
    sweep_asha_verdict v = {0};
    for (int i = 0; i < n; i++) {
        if (isnan(at[i].metric)) continue;
        v.n++;
        if (sweep_rules_better(r, at[i].metric, value)) v.better++;
    }
    v.keep = v.n / r->reduction_factor > 1 ? v.n / r->reduction_factor : 1;
    v.stop = v.better >= v.keep;
    return v;
}

bool sweep_asha_rung_closed(int k, bool all_made, const sweep_trial_view *trials, int n) {
    if (!all_made) return false;
    for (int i = 0; i < n; i++) {
        const sweep_trial_view *t = &trials[i];
        if (t->phase == SWEEP_PENDING || (t->phase == SWEEP_RUNNING && t->promoted < k) ||
            (t->phase == SWEEP_PAUSED && t->rung < k))
            return false;
    }
    return true;
}

/* Sorting key: lower is better whatever the goal (a maximized metric negated). */
typedef struct {
    double key;
    int at; /* its index in the rung's table */
    int trial;
} ranked;

static int by_key(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->trial > y->trial) - (x->trial < y->trial);
}

static const sweep_trial_view *find_trial(const sweep_trial_view *trials, int n, int trial) {
    for (int i = 0; i < n; i++)
        if (trials[i].trial == trial) return &trials[i];
    return NULL;
}

int sweep_asha_promotions(const sweep_rules *r, int k, bool closed, const sweep_mark *at, int n_at,
                          const sweep_trial_view *trials, int n_trials, sweep_asha_pick *out, int *keep) {
    ranked *rk = xmalloc((size_t)(n_at > 0 ? n_at : 1) * sizeof *rk);
    int n = 0;
    for (int i = 0; i < n_at; i++)
        if (!isnan(at[i].metric))
            rk[n++] = (ranked){.key = r->maximize ? -at[i].metric : at[i].metric, .at = i, .trial = at[i].trial};
    qsort(rk, (size_t)n, sizeof *rk, by_key);
    *keep = n / r->reduction_factor;
    if (closed && *keep < 1 && n > 0) *keep = 1;
    for (int i = 0; i < n; i++) {
        const sweep_trial_view *t = find_trial(trials, n_trials, rk[i].trial);
        sweep_asha_action action = ASHA_NONE;
        if (t && t->phase == SWEEP_PAUSED && t->rung == k)
            action = i < *keep ? ASHA_PROMOTE : closed ? ASHA_STOP : ASHA_WAIT;
        out[i] = (sweep_asha_pick){.trial = rk[i].trial, .metric = at[rk[i].at].metric, .rank = i + 1, .action = action};
    }
    free(rk);
    return n;
}

/* ---- median stopping ---- */

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

sweep_median_verdict sweep_median_judge(const sweep_rules *r, int trial, int epoch, double value, const sweep_mark *at,
                                        int n) {
    sweep_median_verdict v = {.median = NAN};
    double *m = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *m);
    for (int i = 0; i < n; i++)
        if (at[i].trial != trial && !isnan(at[i].metric)) m[v.others++] = at[i].metric;
    bool in_reach = epoch + 1 >= r->min_resource && !(r->epochs > 0 && epoch + 1 >= r->epochs);
    if (in_reach && v.others >= r->min_trials && v.others > 0) {
        int k = v.others;
        qsort(m, (size_t)k, sizeof *m, by_value);
        v.judged = true;
        v.median = k % 2 ? m[k / 2] : (m[k / 2 - 1] + m[k / 2]) / 2;
        v.stop = sweep_rules_better(r, v.median, value);
    }
    free(m);
    return v;
}

/* ---- the sweep as a whole ---- */

int sweep_rules_active(const sweep_trial_view *trials, int n) {
    int active = 0;
    for (int i = 0; i < n; i++) active += trials[i].phase == SWEEP_PENDING || trials[i].phase == SWEEP_RUNNING;
    return active;
}

int sweep_rules_best(const sweep_rules *r, const sweep_trial_view *trials, int n) {
    int best = -1;
    for (int pass = 0; pass < 2 && best < 0; pass++)
        for (int i = 0; i < n; i++) {
            if (isnan(trials[i].metric) || (pass == 0 && trials[i].phase != SWEEP_SUCCEEDED)) continue;
            if (best < 0 || sweep_rules_better(r, trials[i].metric, trials[best].metric)) best = i;
        }
    return best < 0 ? -1 : trials[best].trial;
}

int sweep_rules_best_last(const sweep_rules *r, const sweep_trial_view *trials, int n) {
    int best = -1;
    for (int i = 0; i < n; i++) {
        if (isnan(trials[i].metric)) continue;
        if (best < 0 || sweep_rules_better(r, trials[i].metric, trials[best].metric)) best = i;
    }
    return best < 0 ? -1 : trials[best].trial;
}

sweep_end sweep_rules_end(bool all_made, const sweep_trial_view *trials, int n) {
    if (!all_made) return SWEEP_GOES_ON;
    int succeeded = 0;
    for (int i = 0; i < n; i++) {
        sweep_phase p = trials[i].phase;
        if (p == SWEEP_PENDING || p == SWEEP_RUNNING || p == SWEEP_PAUSED) return SWEEP_GOES_ON;
        succeeded += p == SWEEP_SUCCEEDED;
    }
    return succeeded ? SWEEP_ENDS_SUCCEEDED : SWEEP_ENDS_FAILED;
}
