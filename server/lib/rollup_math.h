/* The maths of a series' rollups: what one bucket of points keeps (its count, the sum
 * of its numbers, its lowest, highest and last point), built from points or merged
 * from two adjacent buckets, and which level of buckets a chart of N points reads.
 * Buckets are aligned: level k's bucket b holds the steps [b << k, (b + 1) << k).
 * A null value (NaN: a loss that blew up) counts as the highest of its bucket, as in
 * downsample.h, so a chart shows it; the first of equal extremes is the one kept.
 * Pure functions: the store keeps the rows (server/store/rollups.c). */
#ifndef DDPD_SERVER_LIB_ROLLUP_MATH_H
#define DDPD_SERVER_LIB_ROLLUP_MATH_H

#include <stdbool.h>
#include <stdint.h>

/* The finest level kept (buckets of 64 steps) and the coarsest (2^40 steps). A chart
 * finer than ROLLUP_LEVEL_MIN reads the points themselves (at most 64 per bucket). */
#define ROLLUP_LEVEL_MIN 6
#define ROLLUP_LEVEL_MAX 40

typedef struct {
    int64_t step;
    double value; /* NaN: null */
    int64_t t;    /* unix ms */
} rollup_point;

typedef struct {
    int64_t n;      /* points, nulls included */
    int64_t n_num;  /* of them numbers: mean = sum / n_num */
    double sum;
    bool has_min;   /* false: no number in the bucket */
    rollup_point min, max, last; /* max.value NaN: the bucket holds a null, the first at max.step */
} rollup_agg;

void rollup_agg_init(rollup_agg *a);
/* A point after those already added (ascending steps). */
void rollup_agg_add(rollup_agg *a, int64_t step, double value, int64_t t);
/* `later` (the points after all of *into's) merged into *into. */
void rollup_agg_merge(rollup_agg *into, const rollup_agg *later);
/* The bucket's mean; NaN when it holds no number. */
double rollup_agg_mean(const rollup_agg *a);

/* The number of level-k buckets that steps [first, last] touch. */
int64_t rollup_buckets(int64_t first, int64_t last, int level);
/* The finest level (0 = single steps .. ROLLUP_LEVEL_MAX) at which steps [first, last]
 * touch at most `buckets` buckets; ROLLUP_LEVEL_MAX when none does. */
int rollup_level_for(int64_t first, int64_t last, int64_t buckets);

/* A bucket's points for a chart, in step order: its lowest and its highest (one when
 * they are the same point; only the highest when it holds no number). Returns 0..2. */
int rollup_agg_extremes(const rollup_agg *a, rollup_point out[2]);

#endif
