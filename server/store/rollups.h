/* A series' keys and rollups, kept by the database writer as points are written
 * (migrations/0018_series_keys_and_rollups.sql says what the rows hold): a named
 * series' key id, the step before a write, the buckets a write completes, what a
 * deletion of a series' tail leaves, and the rollups of points stored before 0018.
 * The SQL and row readers are shared with the chart reads (series_read.c). */
#ifndef DDPD_SERVER_STORE_ROLLUPS_H
#define DDPD_SERVER_STORE_ROLLUPS_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "rollup_math.h"

/* The steps table's series as one group: its keys -1 (loss), -2 (lr), -3 (samples_per_s). */
#define ROLLUP_STEPS (-1)
#define ROLLUP_STEP_KEYS 3

/* The writer's statements on `db` (store_open); rollup_detach before it closes. */
int rollup_attach(sqlite3 *db, char *err, size_t errlen);
void rollup_detach(void);

/* The id of run `run`'s series `key`, made on first use; -1 on error. */
int64_t rollup_key_id(sqlite3 *db, int64_t run, const char *key);
/* The series' (ROLLUP_STEPS or a key id) highest step now: call before writing a
 * point; NO_INT when it has none. */
int64_t rollup_prev_step(sqlite3 *db, int64_t run, int64_t key);
/* A point at `step` was written to the series whose highest step was `prev`
 * (rollup_prev_step): the buckets it completes (or changes, written again or out of
 * order) are rolled up. 0, or -1 on a database error. */
int rollup_written(sqlite3 *db, int64_t run, int64_t key, int64_t step, int64_t prev);
/* The database's transaction was rolled back: what the writer remembers of the
 * series' highest steps is forgotten (read again). Also after a run is deleted. */
void rollup_forget(void);
/* The run's points past `step` were deleted (a resume, a restart's cut): the rollups
 * of every series of the run are made right again past it. */
int rollup_cut(sqlite3 *db, int64_t run, int64_t step);
/* The rollups of series stored before migration 0018 (its rollup_backfill rows). */
int rollup_backfill(sqlite3 *db, char *err, size_t errlen);

/* ---- shared with the reads ---- */

enum {
    RQ_MAX_STEPS, RQ_MAX_POINTS, RQ_RAW_STEPS, RQ_RAW_POINTS, RQ_ROWS, RQ_PUT, RQ_DEL, RQ_KEY_GET, RQ_KEY_NEW,
    RQ_KEYS_OF_RUN, RQ_STEPS_AFTER, RQ_POINTS_AFTER, RQ_PREV_STEPS, RQ_PREV_POINTS, RQ_BACKFILL_NEXT,
    RQ_BACKFILL_DONE, RQ_COUNT
};
/* Statement `which`'s SQL: RQ_RAW_*: (step, value(s), t) of steps [?lo, ?hi] of a
 * series in step order; RQ_ROWS: the rows (bucket, then the aggregate) of one level's
 * buckets [?lo, ?hi]. Parameters: ?1 run, ?2 key (RQ_*_POINTS, RQ_ROWS), then the rest. */
const char *rollup_sql(int which);
/* The aggregate of an RQ_ROWS row (its columns from 1). */
void rollup_agg_from_row(sqlite3_stmt *st, rollup_agg *a);
/* Adds a raw row's point of key `key` (RQ_RAW_STEPS: the column of -key; RQ_RAW_POINTS:
 * its one value) to *a; a step without a samples_per_s is no point of that series. */
void rollup_add_raw(sqlite3_stmt *st, int64_t key, rollup_agg *a);

#endif
