/* Every kind of change ddpd makes to its store, in one table: the events trainers
 * report (hello, status, step, heartbeat, epoch, checkpoint, a reporter's metric, a
 * launcher's attempt and rank_state) and the server's own ops (a run's life: insert,
 * starting, running, canceling, finish, delete, resume, preempting, requeue, restart,
 * submitted, reason, disk; an owner's usage, a sync, the sweeps' events and writes).
 *
 * One entry per kind says everything about it: the event type it is on the socket
 * and how its fields are read from one (ingest), the SQL that applies it and how it
 * is bound (the store's writer), and what the live feed publishes for it (a durable
 * SSE event, or coalesced progress). Ingest's dispatch, the writer's apply and the
 * feed's record are loops over this table. A kind's parse may hand the op to another
 * kind (a reporter's `metric` becomes a step, an epoch or, from a rank other than 0,
 * a heartbeat): it sets op->kind.
 *
 * Where each kind lives: the table (OP_KINDS) and the trainer events' fields, rows,
 * parse, statements, apply and feed data are event_kinds.c's; the server's own ops'
 * statements, apply and feed data are run_ops.c's (run_ops.h names them after their
 * kind). In both, a kind's statements (its `sql`) sit right above the function that
 * binds them, in the order it binds them (st[i]).
 *
 * A trainer event's fields are described once, each by an op_field (its name, type,
 * place in store_op, flags), and the descriptors drive everything done with them
 * (kind_fields.h): reading them from the event, the SQL of the row they are stored
 * in and its binding, the feed's data, and the API's rows (store_read.c's epochs and
 * checkpoints). A field has one name: in the event, as the column, in the feed's
 * data and in the API.
 *
 * A new field of an event kind is: its member in the kind's struct (op_types.h), one
 * op_field line in its kind's list (event_kinds.c), its column's migration
 * (migrations/NNNN_*.sql), and its place in schema/events.schema.json and
 * schema/openapi.json. With that it is read, stored, published (FIELD_FEED) and, an
 * epoch's or a checkpoint's, in the API's rows. Two views list their columns
 * themselves (store_read.c): GET /runs/{id}/ranks, which joins what hello, status
 * and heartbeat store in a rank's row in its own order (the GPU's memory nested),
 * and a step's series (metric_names). A new event kind is all that for each field,
 * its member of store_op's union and of store_op_kind, its entry in OP_KINDS (fields,
 * the row they go to, how it applies: most kinds use the generic functions), its
 * table's migration, and its `type` in the two schemas. A new op of the server's is
 * its member of the union and of store_op_kind, its statements and functions in
 * run_ops.c (declared in run_ops.h), and its entry in OP_KINDS.
 * tests/unit/server/test_kind_fields.c holds the descriptors against the migrated schema
 * and both schemas; tests/unit/server/test_kind_bytes.c holds what every kind becomes,
 * byte for byte. */
#ifndef DDPD_SERVER_STORE_EVENT_KINDS_H
#define DDPD_SERVER_STORE_EVENT_KINDS_H

#include <jansson.h>
#include <stdint.h>

#include "kind_fields.h"
#include "op_types.h"

extern const op_kind_desc OP_KINDS[OP_KIND_COUNT];

/* A reporter's epoch metric names beyond the epoch table's columns are per-epoch series,
 * kept as the series "epoch:NAME" whose step is the epoch (from 0): GET
 * /runs/{id}/metrics?key=epoch:NAME. A step's metric may not take the prefix. */
#define EPOCH_SERIES_PREFIX "epoch:"

/* The kind whose socket event type is `type`; NULL when none is. */
const op_kind_desc *op_kind_for_event(const char *type);

/* The SQL of kind k's statement i (st[i] of its apply): its row's statements, built
 * from its fields (the row; with FIELD_OF_RUN fields, the run's UPDATE), then its
 * `sql`. NULL past the last. Built once; kept for the life of the process. */
const char *op_kind_sql(store_op_kind k, int i);

/* Kind k's field `name`; NULL when it has none. */
const op_field *op_kind_field(store_op_kind k, const char *name);

/* Frees an op's strings (ops that were never queued, or once applied). */
void store_op_free(store_op *op);

/* event_int, event_real, event_str: reading an event's fields (kind_fields.h). */

#endif
