/* A series' rollup buckets: built, merged, and the level a chart reads (see
 * rollup_math.h). */
#include "rollup_math.h"

#include <math.h>
#include <string.h>

void rollup_agg_init(rollup_agg *a) { memset(a, 0, sizeof *a); }

/* NaN ranks above every number: a loss that became NaN is the spike to keep. */
static bool higher(double a, double b) { return isnan(a) ? !isnan(b) : (!isnan(b) && a > b); }

void rollup_agg_add(rollup_agg *a, int64_t step, double value, int64_t t) {
    rollup_point p = {step, value, t};
    if (!isnan(value)) {
        a->n_num++;
        a->sum += value;
        if (!a->has_min || value < a->min.value) {
            a->min = p;
            a->has_min = true;
        }
    }
    if (a->n == 0 || higher(value, a->max.value)) a->max = p;
    a->last = p;
    a->n++;
}

void rollup_agg_merge(rollup_agg *into, const rollup_agg *later) {
    if (later->n == 0) return;
    if (into->n == 0) {
        *into = *later;
        return;
    }
    into->n_num += later->n_num;
    into->sum += later->sum;
    if (later->has_min && (!into->has_min || later->min.value < into->min.value)) {
        into->min = later->min;
        into->has_min = true;
    }
    if (higher(later->max.value, into->max.value)) into->max = later->max;
    into->last = later->last;
    into->n += later->n;
}

double rollup_agg_mean(const rollup_agg *a) { return a->n_num ? a->sum / (double)a->n_num : NAN; }

int64_t rollup_buckets(int64_t first, int64_t last, int level) {
    if (last < first) return 0;
    return (last >> level) - (first >> level) + 1;
}

int rollup_level_for(int64_t first, int64_t last, int64_t buckets) {
    for (int k = 0; k < ROLLUP_LEVEL_MAX; k++)
        if (rollup_buckets(first, last, k) <= buckets) return k;
    return ROLLUP_LEVEL_MAX;
}

int rollup_agg_extremes(const rollup_agg *a, rollup_point out[2]) {
    if (a->n == 0) return 0;
    if (!a->has_min || a->min.step == a->max.step) {
        out[0] = a->max;
        return 1;
    }
    bool min_first = a->min.step < a->max.step;
    out[0] = min_first ? a->min : a->max;
    out[1] = min_first ? a->max : a->min;
    return 2;
}
