/* Whether the store's writer met a storage fault in the batch it is applying: the
 * disk is full, an I/O error, the file became read-only, another process holds the
 * lock, memory ran out. Such a failure is the database's, not the op's: the writer
 * rolls the whole batch back and tries it again later (store.c), where an op that
 * the database refuses for itself (a constraint) only fails that op.
 *
 * Every statement the writer runs for a batch (the op kinds' in event_kinds.c and
 * run_ops.c, the writer's own in store.c, the feed's in feed.c) notes its failure
 * here, and skips itself once a fault is noted: SQLite may have rolled the
 * transaction back on the fault, and a statement run after that would commit on its
 * own, outside the batch that is retried. Writer thread only. */
#ifndef DDPD_SERVER_STORE_WRITE_FAULT_H
#define DDPD_SERVER_STORE_WRITE_FAULT_H

#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Runs a bound statement of the batch to completion, by that rule: the rows it
 * changed, or -1 (it failed: logged unless it is a fault, noted; or a fault was
 * noted before it, and it did not run). Its bindings are cleared either way. */
int64_t write_fault_step(sqlite3 *db, sqlite3_stmt *st);

/* Whether a statement's result code (sqlite3_step's) is a storage fault. */
bool write_fault_is(int rc);

/* A statement failed with rc: a fault is noted (the first one's message is kept). */
void write_fault_note(sqlite3 *db, int rc);

/* Whether a fault was noted since write_fault_clear: the batch's statements stop. */
bool write_fault_noted(void);

/* The first fault's message ("database or disk is full"), "" when none. */
const char *write_fault_message(void);

/* Its SQLite code (SQLITE_FULL, ...); 0 when none. */
int write_fault_code(void);

/* At the start of each attempt at a batch. */
void write_fault_clear(void);

#endif
