/* Who may write a run's journal: the runs an executor started since their last final
 * status. journal_compact.c rewrites a finished run's journal only under this lock
 * and only for a run not in the set, and every executor enters a run in it (under the
 * same lock) before that run's processes exist; the store's writer takes the run out
 * as it commits the run's final status. Kept apart from journal_compact.c so that
 * the writer's ops (run_ops.c) and the executors reach it without the event kinds. */
#ifndef DDPD_SERVER_STORE_JOURNAL_WRITERS_H
#define DDPD_SERVER_STORE_JOURNAL_WRITERS_H

#include <stdbool.h>
#include <stdint.h>

/* An executor is about to start run `id`'s processes (a start, a restart, a resume). */
void journal_writers_started(int64_t id);
/* The writer: run `id`'s final status is being committed; the compactor is woken. */
void journal_writers_finished(int64_t id);

/* The compactor's side: the lock, and whether a run is in the set (locked). */
void journal_writers_lock(void);
void journal_writers_unlock(void);
bool journal_writers_has(int64_t id);
/* Waits (locked) until woken (a run finished, journal_writers_wake) or `seconds`
 * passed; clears the wake. Whether it was woken. */
bool journal_writers_wait(int seconds);
void journal_writers_wake(void);

#endif
