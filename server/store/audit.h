/* The audit log: who did what to whom, and when (migration 0015's table `audit`).
 * Every state-changing action and decision is an entry, written through the store's
 * one writer (the op OP_AUDIT) BEFORE the action acts: audit_write waits until it is
 * committed, so a server killed with `kill -9` right after loses none; audit_queue
 * queues it without waiting (for the scheduler's decisions, under its lock), ahead of
 * the ops that carry them out, which the writer applies after it, in the same
 * transaction or a later one. A run's submission is recorded by its insert op itself
 * (u.insert.actor), in the same transaction. `ddpd user` writes its entries with
 * audit_insert_db in the transaction of the change it makes.
 *
 * actor: a user's name, or one of no name in parentheses: AUDIT_SERVER, "(admin
 * token)", "(anonymous)", "(ddpd user: ACCOUNT)". target: "run/ID", "sweep/ID",
 * "user/NAME", "server". subject: the user the entry is about (NULL with a run: the
 * run's owner, looked up as the entry is written). detail: a JSON object. */
#ifndef DDPD_SERVER_STORE_AUDIT_H
#define DDPD_SERVER_STORE_AUDIT_H

#include <jansson.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"

#define AUDIT_SERVER "(server)"

/* The actor a caller is written as, into buf (at least 72 bytes): buf. */
const char *audit_actor(const caller *who, char *buf, size_t len);

/* Writes an entry and waits until it is committed: its id, or -1 when the database
 * cannot be written (the caller then refuses the action). `detail` is taken (NULL:
 * none). run_id 0: not about a run. */
int64_t audit_write(const char *actor, const char *action, int64_t run_id, const char *target, const char *subject,
                    json_t *detail);
/* The same, queued without waiting (never blocks). */
void audit_queue(const char *actor, const char *action, int64_t run_id, const char *target, const char *subject,
                 json_t *detail);
/* The same on a connection of the caller's (ddpd user), inside its transaction. 0, or
 * -1 and why. */
int audit_insert_db(sqlite3 *db, const char *actor, const char *action, const char *target, const char *subject,
                    json_t *detail, char *err, size_t errlen);

#endif
