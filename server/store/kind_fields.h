/* What a trainer event kind's field descriptors (op_field, op_row: op_types.h)
 * drive, so that each field is spelled once: reading the fields from an event (or
 * from a reporter's values), the SQL of the row they are stored in and binding them
 * to it, the JSON of them (the feed's data from an op; the API's rows from a query's
 * columns), and freeing them. */
#ifndef DDPD_SERVER_STORE_KIND_FIELDS_H
#define DDPD_SERVER_STORE_KIND_FIELDS_H

#include <jansson.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "op_types.h"

/* ---- reading ---- */

/* An event's field: NO_INT / NaN / NULL when absent or of another type. */
int64_t event_int(const json_t *ev, const char *key);
double event_real(const json_t *ev, const char *key);
char *event_str(const json_t *ev, const char *key); /* malloc'd */

/* Kind k's fields from the event: NULL, or the `missing` of the first required
 * field it lacks. The fields before it are read (store_op_free frees them). */
const char *fields_parse(const op_kind_desc *k, const json_t *ev, store_op *op);
/* A reporter's values as kind k's fields: its real fields by name; the others are
 * unknown (NO_INT, NULL). */
void fields_from_values(const op_kind_desc *k, const json_t *values, store_op *op);
/* Every field of kind k unknown. */
void fields_unknown(const op_kind_desc *k, store_op *op);
/* Whether the op knows any field of kind k with `flag`. */
bool fields_any_known(const op_kind_desc *k, const store_op *op, unsigned flag);
/* Frees the text fields of kind k's op. */
void fields_free(const op_kind_desc *k, store_op *op);

/* ---- storing ---- */

/* The row's statement: INSERT of run_id (and rank), the fields, the time, and what
 * its write says on a conflict (malloc'd). */
char *fields_row_sql(const op_kind_desc *k);
/* The run's UPDATE with the FIELD_OF_RUN fields the op knows (coalesce); NULL when
 * the kind has none (malloc'd). */
char *fields_run_sql(const op_kind_desc *k);
/* Binds the op to its row's statement, or to its run's UPDATE. */
void fields_bind_row(sqlite3_stmt *st, const op_kind_desc *k, const store_op *op);
void fields_bind_run(sqlite3_stmt *st, const op_kind_desc *k, const store_op *op);

/* Binding a value that may be unknown: NO_INT, NaN or infinity, NULL become NULL. */
void bind_int_or_null(sqlite3_stmt *st, int i, int64_t v);
void bind_real_or_null(sqlite3_stmt *st, int i, double v);
void bind_text_or_null(sqlite3_stmt *st, int i, const char *s);

/* ---- as JSON ---- */

/* {"run", "rank" (a rank's row), the FIELD_FEED fields, "t"}: the feed's data. */
json_t *fields_event(const op_kind_desc *k, const store_op *op);
/* Adds the FIELD_FEED fields to o. */
void fields_add_feed(json_t *o, const op_kind_desc *k, const store_op *op);
/* The API's rows of a kind: a run's rows in key order, each its stored fields and
 * the time as row->t_member. The query (malloc'd), and one row of it as JSON. */
char *fields_select_sql(const op_kind_desc *k);
json_t *fields_row_json(const op_kind_desc *k, sqlite3_stmt *st);
/* The same rows as a JSON array built by SQLite (for one statement per GET that
 * holds them with other things): "(SELECT json_group_array(...) ...)", of run ?1. */
char *fields_json_array_sql(const op_kind_desc *k);

#endif
