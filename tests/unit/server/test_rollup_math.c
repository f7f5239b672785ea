/* Unit tests of server/lib/rollup_math.c: a bucket built point by point equals the
 * merge of its two halves, at every level of a noisy series with a planted spike, dip
 * and null (NaN); the first of equal extremes is kept; a bucket's extremes come in
 * step order (one point when they are the same, the null alone when it holds no
 * number); the level a chart reads is the finest whose buckets fit. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "rollup_math.h"

#define N 5000

static double values[N + 1];

static bool same_point(rollup_point a, rollup_point b) {
    return a.step == b.step && a.t == b.t && ((isnan(a.value) && isnan(b.value)) || a.value == b.value);
}

static bool same_agg(const rollup_agg *a, const rollup_agg *b) {
    return a->n == b->n && a->n_num == b->n_num && fabs(a->sum - b->sum) <= 1e-9 * (1 + fabs(b->sum)) &&
           a->has_min == b->has_min && (!a->has_min || same_point(a->min, b->min)) && same_point(a->max, b->max) &&
           same_point(a->last, b->last);
}

/* Steps [lo, hi] of the series added one by one (steps with no value: a gap). */
static rollup_agg direct(int64_t lo, int64_t hi) {
    rollup_agg a;
    rollup_agg_init(&a);
    for (int64_t s = lo < 1 ? 1 : lo; s <= hi && s <= N; s++)
        if (s % 97 != 13) rollup_agg_add(&a, s, values[s], 1000 * s);
    return a;
}

static rollup_agg tree(int64_t bucket, int level) {
    if (level == 0) return direct(bucket, bucket);
    rollup_agg a = tree(bucket * 2, level - 1), b = tree(bucket * 2 + 1, level - 1);
    rollup_agg_merge(&a, &b);
    return a;
}

int main(void) {
    for (int s = 1; s <= N; s++) values[s] = 2.0 * exp(-(double)s / N) + 0.01 * (double)((s * 7919) % 13);
    values[1234] = 50.0;
    values[3001] = -5.0;
    values[4321] = NAN;

    /* every level: a bucket built from its points = the merge of its halves, recursively */
    int mismatches = 0, compared = 0;
    for (int level = 1; level <= 12; level++) {
        for (int64_t b = 0; (b << level) <= N; b++) {
            rollup_agg d = direct(b << level, ((b + 1) << level) - 1), t = tree(b, level);
            compared++;
            if (!same_agg(&d, &t)) mismatches++;
        }
    }
    CHECK(compared > 5000 && mismatches == 0, "%d of %d buckets differ from the merge of their halves", mismatches,
          compared);

    /* the whole series: the spike, the dip survive; the null is its highest */
    rollup_agg all = tree(0, 13);
    CHECK(all.has_min && all.min.step == 3001 && all.min.value == -5.0, "the dip is the minimum: step %lld",
          (long long)all.min.step);
    CHECK(all.max.step == 4321 && isnan(all.max.value), "the null is the maximum: step %lld", (long long)all.max.step);
    CHECK(all.last.step == N, "the last point: step %lld", (long long)all.last.step);
    CHECK(all.n == N - (N + 83) / 97 && all.n_num == all.n - 1, "counts: %lld points, %lld numbers", (long long)all.n,
          (long long)all.n_num);
    double sum = 0;
    for (int s = 1; s <= N; s++)
        if (s % 97 != 13 && !isnan(values[s])) sum += values[s];
    CHECK_NEAR(rollup_agg_mean(&all), sum / (double)all.n_num, 1e-12, 0, "the mean of the numbers");
    rollup_agg spike = tree(1234 >> 6, 6);
    CHECK(spike.max.step == 1234 && spike.max.value == 50.0, "the spike is its bucket's maximum");

    /* equal extremes: the first is kept, built or merged */
    rollup_agg flat, half2;
    rollup_agg_init(&flat);
    rollup_agg_init(&half2);
    rollup_agg_add(&flat, 10, 1.0, 1);
    rollup_agg_add(&flat, 11, 1.0, 2);
    rollup_agg_add(&half2, 12, 1.0, 3);
    rollup_agg_merge(&flat, &half2);
    CHECK(flat.min.step == 10 && flat.max.step == 10 && flat.last.step == 12, "first of equals: min %lld max %lld",
          (long long)flat.min.step, (long long)flat.max.step);

    /* extremes in step order */
    rollup_point p[2];
    CHECK(rollup_agg_extremes(&flat, p) == 1 && p[0].step == 10, "one point when min and max are the same");
    rollup_agg up;
    rollup_agg_init(&up);
    rollup_agg_add(&up, 1, 5.0, 1);
    rollup_agg_add(&up, 2, 1.0, 2);
    CHECK(rollup_agg_extremes(&up, p) == 2 && p[0].step == 1 && p[1].step == 2 && p[0].value == 5.0,
          "the max first when it comes first");
    rollup_agg nulls;
    rollup_agg_init(&nulls);
    rollup_agg_add(&nulls, 7, NAN, 1);
    rollup_agg_add(&nulls, 8, NAN, 2);
    CHECK(rollup_agg_extremes(&nulls, p) == 1 && p[0].step == 7 && isnan(rollup_agg_mean(&nulls)),
          "a bucket of nulls: its first null, no mean");
    rollup_agg empty;
    rollup_agg_init(&empty);
    rollup_agg_merge(&up, &empty);
    CHECK(up.n == 2 && up.last.step == 2, "merging an empty bucket changes nothing");
    CHECK(rollup_agg_extremes(&empty, p) == 0, "an empty bucket has no points");

    /* the level a chart reads */
    CHECK(rollup_buckets(1, 10000000, 14) == (10000000 >> 14) + 1, "buckets touched");
    CHECK(rollup_level_for(1, 10000000, 999) == 14, "10M steps in at most 999 buckets: level %d",
          rollup_level_for(1, 10000000, 999));
    CHECK(rollup_level_for(1, 10000000, 29) == 19, "10M steps in at most 29 buckets: level %d",
          rollup_level_for(1, 10000000, 29));
    CHECK(rollup_level_for(5, 8, 4) == 0, "steps that fit need no bucket");
    CHECK(rollup_level_for(0, INT64_MAX / 2, 1) == ROLLUP_LEVEL_MAX, "past the coarsest level: the coarsest");
    for (int64_t last = 100; last < 20000000; last = last * 3 + 7) {
        int k = rollup_level_for(1, last, 100);
        CHECK(rollup_buckets(1, last, k) <= 100 && (k == 0 || rollup_buckets(1, last, k - 1) > 100),
              "level %d is the finest that fits 1..%lld in 100 buckets", k, (long long)last);
    }
    return test_done("test_rollup_math");
}
