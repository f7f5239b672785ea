/* The SQL of the steps' rows (migration 0021): a step is stored in step_rows under one
 * integer key, k = run_id << 32 | global_step, with step_back = global_step - step and
 * dt = t - the run's created_at. These spell a run's range of k, one lower and one
 * upper bound each (so that SQLite seeks the rowid range they give: one bound per
 * side, a step clamped into the run's range), and the columns as the steps table had
 * them. RUN and GS are SQL expressions, usually parameters ("?1"). */
#ifndef DDPD_SERVER_STORE_STEP_ROWS_H
#define DDPD_SERVER_STORE_STEP_ROWS_H

#include <stdint.h>

/* the highest global_step a step may have (ingest refuses higher ones) */
#define STEP_ROWS_MAX_STEP INT64_C(4294967295)

/* columns: the step, its step within the epoch, its time */
#define STEP_GS "(k & 4294967295)"
#define STEP_STEP "((k & 4294967295) - step_back)"
#define STEP_T0(RUN) "coalesce((SELECT created_at FROM runs WHERE id = " RUN "), 0)"
#define STEP_T(RUN) "(dt + " STEP_T0(RUN) ")"

/* ranges of k: the run's steps; those after GS; those from LO to HI; those up to GS;
 * the step GS itself */
#define STEP_OF_RUN(RUN) "k >= (" RUN ") << 32 AND k < ((" RUN ") + 1) << 32"
#define STEP_AFTER(RUN, GS) "k > ((" RUN ") << 32) + max(-1, min(" GS ", 4294967295)) AND k < ((" RUN ") + 1) << 32"
#define STEP_FROM_TO(RUN, LO, HI)                                                                \
    "k >= ((" RUN ") << 32) + max(0, min(" LO ", 4294967296))"                                   \
    " AND k <= ((" RUN ") << 32) + max(-1, min(" HI ", 4294967295))"
#define STEP_UP_TO(RUN, GS) "k >= (" RUN ") << 32 AND k <= ((" RUN ") << 32) + max(-1, min(" GS ", 4294967295))"
#define STEP_AT(RUN, GS) "k = ((" RUN ") << 32) + " GS " AND " GS " BETWEEN 0 AND 4294967295"

#endif
