/* Where each run's device time goes: the usage ledger (migration 0015's run_usage and
 * usage_days). The store's writer shows it every op it applies, in order, inside the
 * op's transaction, and it writes what it accounted in that same transaction: what the
 * database says of a run's usage is always that of the ops committed, and a server
 * killed with SIGKILL goes on from there.
 *
 * Each piece of time a run's devices are held (from its start, OP_RUN_STARTING, to its
 * requeue, restart or finish) goes to one phase, as its events come:
 *   startup     from the devices given (or a restart of its ranks) to its first step
 *   productive  between steps (up to the idle threshold each), and after the last
 *   checkpoint  rank 0's `checkpointing` status to its checkpoint event (without that
 *               status, a reporter's ddpd.checkpoint_saved: from the step before it)
 *   idle        a gap between steps beyond USAGE_IDLE_AFTER_MS, its part beyond it
 *   unknown     a hold in which a command run reported no step
 *   lost        productive time moved here when the run goes back to an earlier point
 *               (a restart or a resume from a checkpoint: its first step is not past
 *               the last one seen): the time spent since that checkpoint's step
 * so the phases add up to the time held, by construction, and a run's device time is
 * that times its devices. The time queued (submitted or queued again, to its start) is
 * wall time, `queue`.
 *
 * A preemption's cost is its preemptor's (migration 0016): a run queued again after a
 * preemption (OP_RUN_REQUEUE with `by`) is `charged_to` that run until its first step
 * after it: the productive time its rollback moves to lost, and the start-up before
 * that step, leave its own phases and go to the preemptor's run and owner as phase
 * `lost` (usage_days), recorded with who caused them (usage_charged, GET /usage's
 * `charged`). Its own phases then add up to the time held less what was charged. */
#ifndef DDPD_SERVER_STORE_USAGE_LEDGER_H
#define DDPD_SERVER_STORE_USAGE_LEDGER_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "op_types.h"

#define USAGE_IDLE_AFTER_MS 60000 /* a gap between two steps beyond this is idle, for its part beyond it */

typedef enum { USAGE_STARTUP, USAGE_PRODUCTIVE, USAGE_CHECKPOINT, USAGE_LOST, USAGE_IDLE, USAGE_UNKNOWN, USAGE_QUEUE,
               USAGE_PHASES } usage_phase;
extern const char *const usage_phase_names[USAGE_PHASES];

/* On the writer's connection, after the migrations. 0, or -1 and why. */
int usage_ledger_attach(sqlite3 *db, char *err, size_t errlen);
void usage_ledger_detach(void);
/* An op applied (with its result), inside the transaction. */
void usage_ledger_note(const store_op *op, int64_t result);
/* Writes what the transaction accounted, before its COMMIT. */
void usage_ledger_write(void);
/* The transaction was rolled back: what was accounted in memory is forgotten (read
 * again from the database when next needed). */
void usage_ledger_forget(void);

#endif
