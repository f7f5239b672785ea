/* Which runs a page of GET /runs holds: the ids, newest first, of the runs that pass
 * a filter (statuses, owner, name prefix, sweep, creation time) below a cursor. Each
 * filter is a seek into an index of migration 0019 and every page a keyset (ids below
 * the cursor, never an OFFSET), so a page costs the same for the newest runs and the
 * oldest of a long history:
 *
 *  - a time window (since, until) is first turned into the ids it starts and ends at,
 *    one seek each into runs_by_created (creation times never go back as ids go up:
 *    run_ops.c, migration 0019), and bounds every statement below as an id range;
 *  - a name prefix that few runs have (fewer than RUN_LIST_NAME_FEW in the window,
 *    counted in runs_by_name up to that) drives the page: its range of runs_by_name,
 *    sorted by id (at most that many);
 *  - else the page is driven by the sweep (runs_by_sweep_id), the owner with each
 *    status (runs_by_owner_status) or alone (runs_by_owner), each status
 *    (runs_by_status), or the primary key, in that order of preference: each a range
 *    in id order read from the cursor down until the page is full, the statuses
 *    merged here; the other filters are checked on the rows so read.
 *
 * The statements are built for the filters given (no "?1 IS NULL OR" form, which
 * keeps SQLite off its indexes); run_list_plans gives their EXPLAIN QUERY PLAN for a
 * test to hold (tests/unit/server/test_run_list.c). */
#ifndef DDPD_SERVER_STORE_RUN_LIST_H
#define DDPD_SERVER_STORE_RUN_LIST_H

#include <stdint.h>

#include "buf.h"

typedef struct sqlite3 sqlite3;

#define RUN_LIST_STATUSES_MAX 7
#define RUN_LIST_NAME_FEW 2000

typedef struct {
    const char *statuses[RUN_LIST_STATUSES_MAX]; /* run_status names, each once */
    int n_statuses;                              /* 0: any status */
    const char *owner;                           /* NULL: any */
    const char *name_prefix;                     /* NULL or "": any name */
    int64_t sweep_id;                            /* 0: any (or none) */
    int64_t since_ms, until_ms;                  /* created at or after / before; INT64_MIN, INT64_MAX: open */
    int64_t before;                              /* the cursor: ids below it; 0: from the newest */
} run_filter;

/* A filter that passes every run. */
void run_filter_init(run_filter *f);

/* The ids of at most `max` runs that pass f, newest first, into ids (room for max);
 * their count, or -1 (the database's message logged). */
int run_list_ids(sqlite3 *db, const run_filter *f, int max, int64_t *ids);

/* The plans of the statements run_list_ids runs for f (each statement's SQL, then
 * its EXPLAIN QUERY PLAN lines, "plan: DETAIL"), appended to out; 0, or -1. */
int run_list_plans(sqlite3 *db, const run_filter *f, int max, buf_t *out);

#endif
