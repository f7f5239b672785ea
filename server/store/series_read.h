/* Reading a series for GET /runs/{id}/metrics from its rollups (rollups.h): a chart
 * of at most N points reads about N rows whatever the series' length, and the points
 * themselves come a page at a time. One read transaction each. */
#ifndef DDPD_SERVER_STORE_SERIES_READ_H
#define DDPD_SERVER_STORE_SERIES_READ_H

#include <stddef.h>
#include <stdint.h>

#include "rollup_math.h"

typedef struct {
    rollup_point *points;
    size_t n, cap;
    int64_t count;        /* the series' points after `after` */
    int64_t bucket_steps; /* a chart's: 1, its points themselves; else each bucket's steps (a power of 2) */
    int64_t next_after;   /* a page's: the `after` of the next page; NO_INT: this is the last */
} series_answer;

/* Run `run`'s series `name`: -1, -2, -3 for loss, lr, samples_per_s, else its key id
 * (> 0); 0 when it has none by that name, NO_INT on error. */
int64_t store_series_key(int64_t run, const char *name);

/* A chart of at most max_points (>= 3) points of the series' points after `after`
 * (NO_INT: all): the points themselves when they fit, else, for each bucket of the
 * finest level whose buckets number at most (max_points - 1) / 2, the bucket's lowest
 * and highest point (a null counts as the highest), in step order, then the series'
 * last point. 0, or -1 on a database error. */
int store_series_chart(int64_t run, int64_t key, int64_t after, int64_t max_points, series_answer *a);

/* The first `limit` points after `after`, in step order; next_after when more follow. */
int store_series_page(int64_t run, int64_t key, int64_t after, int64_t limit, series_answer *a);

void series_answer_free(series_answer *a);

/* The SQL of the reads' own statements, i from 0; NULL past the last (for the test
 * that holds their plans). */
const char *series_read_sql(int i);

#endif
