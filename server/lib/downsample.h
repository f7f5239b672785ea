/* Downsampling a metric series for charts. Points arrive in ascending step order.
 * While the series fits in max_points it is returned whole; past that, the step range
 * is cut into (max_points - 1) / 2 equal buckets, each keeps its lowest and its
 * highest point (so a spike survives however wide the bucket), and the series' last
 * point is always kept: at most max_points points. A null value (NaN: a loss that
 * blew up) counts as the highest value of its bucket, so it survives too. */
#ifndef DDPD_SERVER_LIB_DOWNSAMPLE_H
#define DDPD_SERVER_LIB_DOWNSAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int64_t step;
    double value; /* NaN: null */
    int64_t t;    /* unix ms */
} ds_point;

typedef struct {
    int64_t first_step, last_step; /* the range the points will cover */
    size_t max_points;             /* 0: keep everything */
    int64_t buckets;               /* 0 while everything still fits */
    ds_point *out;
    size_t n_out, cap;
    size_t count; /* points seen */
    int64_t bucket;
    ds_point lo, hi; /* the current bucket's extremes */
    bool have_lo, have_hi, in_bucket;
    ds_point last;
} downsampler;

/* max_points: 0 keeps every point; otherwise at least 3. */
void ds_init(downsampler *d, int64_t first_step, int64_t last_step, size_t max_points);
void ds_add(downsampler *d, int64_t step, double value, int64_t t);
/* After the last ds_add: d->out[0 .. d->n_out) are the points to serve. */
void ds_finish(downsampler *d);
void ds_free(downsampler *d);

#endif
