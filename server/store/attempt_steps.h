/* A restart's first step, stored with its attempt as the steps are written
 * (run_attempts.first_global_step, migration 0020) rather than found by a scan of the
 * run's steps on every read of the run. */
#ifndef DDPD_SERVER_STORE_ATTEMPT_STEPS_H
#define DDPD_SERVER_STORE_ATTEMPT_STEPS_H

#include <sqlite3.h>
#include <stdint.h>

/* Run `run` wrote a point at `step`, at time `t` (unix ms): when its newest restart
 * (attempt > 0) had started by then and this step is lower than its first step so
 * far, it becomes the attempt's first step. 0, or -1 on a database error. */
int attempt_step_written(sqlite3 *db, int64_t run, int64_t step, int64_t t);
/* Run `run` started an attempt: what the writer remembers of its newest one goes. */
void attempt_steps_forget_run(int64_t run);
/* The transaction was rolled back, or a run deleted: all of it goes. */
void attempt_steps_forget(void);

#endif
