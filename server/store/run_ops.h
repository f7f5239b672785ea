/* The server's own ops on the store, beside the events trainers send (event_kinds.h):
 * a run's life (insert, starting, running, canceling, finish, delete, resume,
 * preempting, requeue, restart, submitted, reason, disk), the audit log's entries (audit.h), an owner's usage, a sync,
 * the sweeps' events and writes. For each kind, what its entry in OP_KINDS names:
 * OP_<KIND>_SQL, its statements (NULL-terminated, st[i] of its apply, in that order),
 * and op_<kind>_apply (binds the op to them and runs them in the writer's
 * transaction: its result), op_<kind>_sse (the feed's data of its durable SSE event,
 * or NULL), op_<kind>_ends_run (whether the feed forgets the run's progress) and
 * op_<kind>_free (what its op holds). Only OP_KINDS (event_kinds.c) calls them. */
#ifndef DDPD_SERVER_STORE_RUN_OPS_H
#define DDPD_SERVER_STORE_RUN_OPS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "op_types.h"

/* running, canceling, restart: a statement that takes the run's id alone */
int64_t op_apply_by_id(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);

extern const char *const OP_RUN_INSERT_SQL[];
int64_t op_run_insert_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_insert_sse(const store_op *op, int64_t result);
void op_run_insert_free(store_op *op);

extern const char *const OP_RUN_STARTING_SQL[];
int64_t op_run_starting_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_starting_sse(const store_op *op, int64_t result);
void op_run_starting_free(store_op *op);

extern const char *const OP_RUN_RUNNING_SQL[];
json_t *op_run_running_sse(const store_op *op, int64_t result);

extern const char *const OP_RUN_CANCELING_SQL[];
json_t *op_run_canceling_sse(const store_op *op, int64_t result);

extern const char *const OP_RUN_FINISH_SQL[];
int64_t op_run_finish_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_finish_sse(const store_op *op, int64_t result);
bool op_run_finish_ends_run(const store_op *op, int64_t result);
void op_run_finish_free(store_op *op); /* its reason: a reason op's too */

extern const char *const OP_RUN_DELETE_SQL[];
int64_t op_run_delete_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_delete_sse(const store_op *op, int64_t result);
bool op_run_delete_ends_run(const store_op *op, int64_t result);

extern const char *const OP_RUN_RESUME_SQL[];
int64_t op_run_resume_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_resume_sse(const store_op *op, int64_t result);
void op_run_resume_free(store_op *op);

extern const char *const OP_RUN_PREEMPTING_SQL[];
int64_t op_run_preempting_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);

extern const char *const OP_RUN_REQUEUE_SQL[];
int64_t op_run_requeue_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_requeue_sse(const store_op *op, int64_t result);
void op_run_requeue_free(store_op *op);

extern const char *const OP_RUN_RESTART_SQL[];
json_t *op_run_restart_sse(const store_op *op, int64_t result);
void op_run_restart_free(store_op *op);

extern const char *const OP_USAGE_SQL[];
int64_t op_usage_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
void op_usage_free(store_op *op);

extern const char *const OP_RUN_SUBMITTED_SQL[];
int64_t op_run_submitted_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_submitted_sse(const store_op *op, int64_t result);
void op_run_submitted_free(store_op *op);

int64_t op_sync_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);

extern const char *const OP_RUN_REASON_SQL[];
int64_t op_run_reason_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_run_reason_sse(const store_op *op, int64_t result);

int64_t op_sweep_event_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
json_t *op_sweep_event_sse(const store_op *op, int64_t result);
void op_sweep_event_free(store_op *op);

int64_t op_sweep_write_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
void op_sweep_write_free(store_op *op);

extern const char *const OP_RUN_DISK_SQL[];
extern const char *const OP_TIMELINE_SQL[];
int64_t op_timeline_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
void op_timeline_free(store_op *op);
int64_t op_run_disk_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);

extern const char *const OP_JOURNAL_COMPACTED_SQL[];

extern const char *const OP_AUDIT_SQL[];
int64_t op_audit_apply(sqlite3 *db, sqlite3_stmt *const *st, const store_op *op);
void op_audit_free(store_op *op);

#endif
