/* A kind's fields, driven by their descriptors: see kind_fields.h. */
#include "kind_fields.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static void *value_at(store_op *op, const op_field *f) { return (char *)op + f->offset; }
static const void *value_of(const store_op *op, const op_field *f) { return (const char *)op + f->offset; }
static int64_t int_of(const store_op *op, const op_field *f) { return *(const int64_t *)value_of(op, f); }
static double real_of(const store_op *op, const op_field *f) { return *(const double *)value_of(op, f); }
static const char *text_of(const store_op *op, const op_field *f) { return *(char *const *)value_of(op, f); }

static bool is_row_field(const op_field *f) { return !(f->flags & FIELD_OF_RUN); }

/* ---- reading ---- */

int64_t event_int(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_real(v)) {
        double d = json_real_value(v);
        if (d == floor(d) && fabs(d) < 9e18) return (int64_t)d;
    }
    return NO_INT;
}

double event_real(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

char *event_str(const json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? xstrdup(json_string_value(v)) : NULL;
}

static void set_unknown(store_op *op, const op_field *f) {
    switch (f->type) {
    case FIELD_INT: *(int64_t *)value_at(op, f) = NO_INT; break;
    case FIELD_REAL: *(double *)value_at(op, f) = NAN; break;
    case FIELD_TEXT: *(char **)value_at(op, f) = NULL; break;
    }
}

const char *fields_parse(const op_kind_desc *k, const json_t *ev, store_op *op) {
    char *base = (char *)op;
    for (const op_field *f = k->fields, *end = f + k->n_fields; f < end; f++) {
        bool known;
        switch (f->type) {
        case FIELD_INT: known = (*(int64_t *)(base + f->offset) = event_int(ev, f->name)) != NO_INT; break;
        case FIELD_REAL: known = !isnan(*(double *)(base + f->offset) = event_real(ev, f->name)); break;
        default: known = (*(char **)(base + f->offset) = event_str(ev, f->name)) != NULL; break;
        }
        if (!known && (f->flags & FIELD_REQUIRED)) return f->missing;
    }
    return NULL;
}

void fields_from_values(const op_kind_desc *k, const json_t *values, store_op *op) {
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (f->type == FIELD_REAL) *(double *)value_at(op, f) = event_real(values, f->name);
        else set_unknown(op, f);
    }
}

void fields_unknown(const op_kind_desc *k, store_op *op) {
    for (int i = 0; i < k->n_fields; i++) set_unknown(op, &k->fields[i]);
}

bool fields_any_known(const op_kind_desc *k, const store_op *op, unsigned flag) {
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (!(f->flags & flag)) continue;
        switch (f->type) {
        case FIELD_INT: if (int_of(op, f) != NO_INT) return true; break;
        case FIELD_REAL: if (!isnan(real_of(op, f))) return true; break;
        case FIELD_TEXT: if (text_of(op, f)) return true; break;
        }
    }
    return false;
}

void fields_free(const op_kind_desc *k, store_op *op) {
    for (int i = 0; i < k->n_fields; i++)
        if (k->fields[i].type == FIELD_TEXT) free(*(char **)value_at(op, &k->fields[i]));
}

/* ---- storing ---- */

void bind_int_or_null(sqlite3_stmt *st, int i, int64_t v) {
    if (v == NO_INT) sqlite3_bind_null(st, i);
    else sqlite3_bind_int64(st, i, v);
}

void bind_real_or_null(sqlite3_stmt *st, int i, double v) {
    if (isfinite(v)) sqlite3_bind_double(st, i, v);
    else sqlite3_bind_null(st, i);
}

void bind_text_or_null(sqlite3_stmt *st, int i, const char *s) {
    if (s) sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else sqlite3_bind_null(st, i);
}

static void bind_field(sqlite3_stmt *st, int i, const store_op *op, const op_field *f) {
    switch (f->type) {
    case FIELD_INT: bind_int_or_null(st, i, int_of(op, f)); break;
    case FIELD_REAL: bind_real_or_null(st, i, real_of(op, f)); break;
    case FIELD_TEXT: bind_text_or_null(st, i, text_of(op, f)); break;
    }
}

/* Parameters: ?1 the run, ?2 the rank (a rank's row), then the fields in their
 * order, then the time (once, for all its columns). */
char *fields_row_sql(const op_kind_desc *k) {
    const op_row *r = k->row;
    if (r->sql) return xasprintf("%s", r->sql);
    buf_t cols = {0}, vals = {0}, keys = {0}, sets = {0}, was = {0}, now = {0};
    buf_printf(&cols, "run_id");
    buf_printf(&vals, "?1");
    buf_printf(&keys, "run_id");
    int p = 2;
    if (r->per_rank) {
        buf_printf(&cols, ", rank");
        buf_printf(&vals, ", ?%d", p++);
        buf_printf(&keys, ", rank");
    }
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (!is_row_field(f)) continue;
        buf_printf(&cols, ", %s", f->name);
        buf_printf(&vals, ", ?%d", p++);
        if (f->flags & FIELD_KEY) {
            buf_printf(&keys, ", %s", f->name);
            continue;
        }
        if (f->flags & FIELD_KEEP) buf_printf(&sets, "%s%s = coalesce(excluded.%s, %s)", sets.len ? ", " : "", f->name,
                                              f->name, f->name);
        else buf_printf(&sets, "%s%s = excluded.%s", sets.len ? ", " : "", f->name, f->name);
        buf_printf(&was, "%s%s.%s", was.len ? ", " : "", r->table, f->name);
        /* what the row would be: a kept field the op does not know stays what it was */
        if (f->flags & FIELD_KEEP) buf_printf(&now, "%scoalesce(excluded.%s, %s.%s)", now.len ? ", " : "", f->name,
                                              r->table, f->name);
        else buf_printf(&now, "%sexcluded.%s", now.len ? ", " : "", f->name);
    }
    for (int i = 0; i < 2 && r->t_columns[i]; i++) {
        buf_printf(&cols, ", %s", r->t_columns[i]);
        buf_printf(&vals, ", ?%d", p);
        buf_printf(&sets, "%s%s = excluded.%s", sets.len ? ", " : "", r->t_columns[i], r->t_columns[i]);
    }
    if (r->insert_column) {
        buf_printf(&cols, ", %s", r->insert_column);
        buf_printf(&vals, ", %s", r->insert_value);
    }
    char *sql;
    if (r->write == ROW_REPLACE)
        sql = xasprintf("INSERT OR REPLACE INTO %s (%s) VALUES (%s)", r->table, cols.data, vals.data);
    else
        sql = xasprintf("INSERT INTO %s (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s%s%s%s%s%s", r->table,
                        cols.data, vals.data, keys.data, sets.data, r->write == ROW_UPSERT_CHANGED ? " WHERE (" : "",
                        r->write == ROW_UPSERT_CHANGED ? was.data : "",
                        r->write == ROW_UPSERT_CHANGED ? ") IS NOT (" : "",
                        r->write == ROW_UPSERT_CHANGED ? now.data : "", r->write == ROW_UPSERT_CHANGED ? ")" : "");
    buf_free(&cols);
    buf_free(&vals);
    buf_free(&keys);
    buf_free(&sets);
    buf_free(&was);
    buf_free(&now);
    return sql;
}

/* ?1 the run, then its fields in their order. */
char *fields_run_sql(const op_kind_desc *k) {
    buf_t sets = {0};
    int p = 2;
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (!is_row_field(f))
            buf_printf(&sets, "%s%s = coalesce(?%d, %s)", sets.len ? ", " : "", f->name, p++, f->name);
    }
    char *sql = sets.len ? xasprintf("UPDATE runs SET %s WHERE id = ?1", sets.data) : NULL;
    buf_free(&sets);
    return sql;
}

void fields_bind_row(sqlite3_stmt *st, const op_kind_desc *k, const store_op *op) {
    int p = 1;
    sqlite3_bind_int64(st, p++, op->run_id);
    if (k->row->per_rank) sqlite3_bind_int(st, p++, op->rank);
    for (int i = 0; i < k->n_fields; i++)
        if (is_row_field(&k->fields[i])) bind_field(st, p++, op, &k->fields[i]);
    if (k->row->t_columns[0]) sqlite3_bind_int64(st, p, op->t);
}

void fields_bind_run(sqlite3_stmt *st, const op_kind_desc *k, const store_op *op) {
    int p = 1;
    sqlite3_bind_int64(st, p++, op->run_id);
    for (int i = 0; i < k->n_fields; i++)
        if (!is_row_field(&k->fields[i])) bind_field(st, p++, op, &k->fields[i]);
}

/* ---- as JSON ---- */

void fields_add_feed(json_t *o, const op_kind_desc *k, const store_op *op) {
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (!(f->flags & FIELD_FEED)) continue;
        json_t *v = NULL;
        switch (f->type) {
        case FIELD_INT: v = json_int_or_null(int_of(op, f)); break;
        case FIELD_REAL: v = json_real_or_null(real_of(op, f)); break;
        case FIELD_TEXT: v = json_string_or_null(text_of(op, f)); break;
        }
        json_object_set_new(o, f->name, v);
    }
}

json_t *fields_event(const op_kind_desc *k, const store_op *op) {
    json_t *o = json_object();
    json_object_set_new(o, "run", json_integer(op->run_id));
    if (k->row->per_rank) json_object_set_new(o, "rank", json_integer(op->rank));
    fields_add_feed(o, k, op);
    json_object_set_new(o, "t", json_int_or_null(op->t));
    return o;
}

/* "a, b, c": the row's stored fields, with `key_only` its key fields only. */
static void field_list(buf_t *b, const op_kind_desc *k, bool key_only) {
    const char *sep = "";
    for (int i = 0; i < k->n_fields; i++) {
        const op_field *f = &k->fields[i];
        if (!is_row_field(f) || (key_only && !(f->flags & FIELD_KEY))) continue;
        buf_printf(b, "%s%s", sep, f->name);
        sep = ", ";
    }
}

char *fields_select_sql(const op_kind_desc *k) {
    buf_t cols = {0}, key = {0};
    field_list(&cols, k, false);
    field_list(&key, k, true);
    char *sql = xasprintf("SELECT %s, %s FROM %s WHERE run_id = ?1 ORDER BY %s", cols.data, k->row->t_columns[0],
                          k->row->table, key.data);
    buf_free(&cols);
    buf_free(&key);
    return sql;
}

static json_t *column_json(sqlite3_stmt *st, int i, field_type type) {
    if (sqlite3_column_type(st, i) == SQLITE_NULL) return json_null();
    switch (type) {
    case FIELD_INT: return json_int_or_null(sqlite3_column_int64(st, i));
    case FIELD_REAL: return json_real_or_null(sqlite3_column_double(st, i));
    case FIELD_TEXT: return json_string((const char *)sqlite3_column_text(st, i));
    }
    return json_null();
}

json_t *fields_row_json(const op_kind_desc *k, sqlite3_stmt *st) {
    json_t *o = json_object();
    int col = 0;
    for (int i = 0; i < k->n_fields; i++)
        if (is_row_field(&k->fields[i]))
            json_object_set_new(o, k->fields[i].name, column_json(st, col++, k->fields[i].type));
    json_object_set_new(o, k->row->t_member,
                        json_time(sqlite3_column_type(st, col) == SQLITE_NULL ? NO_INT : sqlite3_column_int64(st, col)));
    return o;
}

char *fields_json_array_sql(const op_kind_desc *k) {
    buf_t members = {0}, key = {0};
    for (int i = 0; i < k->n_fields; i++)
        if (is_row_field(&k->fields[i])) buf_printf(&members, "'%s', %s, ", k->fields[i].name, k->fields[i].name);
    field_list(&key, k, true);
    char *sql = xasprintf("(SELECT json_group_array(json_object(%s'%s', strftime('%%Y-%%m-%%dT%%H:%%M:%%fZ', %s / 1000.0,"
                          " 'unixepoch'))) FROM (SELECT * FROM %s WHERE run_id = ?1 ORDER BY %s))",
                          members.data, k->row->t_member, k->row->t_columns[0], k->row->table, key.data);
    buf_free(&members);
    buf_free(&key);
    return sql;
}
