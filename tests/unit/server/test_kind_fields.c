/* Unit tests of the trainer event kinds' field descriptors (server/store/event_kinds.h,
 * kind_fields.h), held against what they must agree with: the migrated schema (each
 * field's column exists, of its type; a row's key is its table's primary key; every
 * statement built from the fields prepares and takes as many parameters as its
 * binding binds), schema/events.schema.json (every field of an event kind there has
 * a descriptor or is named among the kind's other fields, and every descriptor is
 * there, of the same type; what the server requires, the schema requires), and
 * schema/openapi.json (the API's epochs and checkpoints have exactly the members
 * store_read.c writes from the descriptors, in that order). A descriptor's own
 * consistency too: names unique, a required field says why it is required, a key is
 * required. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "base.h"
#include "check.h"
#include "event_kinds.h"
#include "kind_fields.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"

static bool str_is(const char *a, const char *b) { return a && b && strcmp(a, b) == 0; }
static bool is_row_field(const op_field *f) { return !(f->flags & FIELD_OF_RUN); }

/* ---- the descriptors themselves ---- */

static void test_descriptors(void) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        const op_kind_desc *d = &OP_KINDS[k];
        CHECK((d->n_fields > 0) == (d->row != NULL), "kind %d: fields and a row go together", k);
        CHECK(!d->row || d->event, "kind %d: only a trainer event's fields are described", k);
        for (int i = 0; i < d->n_fields; i++) {
            const op_field *f = &d->fields[i];
            for (int j = 0; j < i; j++)
                CHECK(!str_is(d->fields[j].name, f->name), "%s: the field %s is described twice", d->event, f->name);
            if (f->flags & FIELD_REQUIRED) {
                char *says = xasprintf("%s event without", d->event);
                CHECK(f->missing && strstr(f->missing, says) && strstr(f->missing, f->name),
                      "%s.%s is required: its reason names the event and the field (\"%s\")", d->event, f->name,
                      f->missing ? f->missing : "(none)");
                free(says);
            } else {
                CHECK(!f->missing, "%s.%s is not required: no reason to be missing", d->event, f->name);
            }
            if (f->flags & FIELD_KEY)
                CHECK((f->flags & FIELD_REQUIRED) && !d->row->per_rank && is_row_field(f),
                      "%s.%s is a key of its row: required, of a row per run and key", d->event, f->name);
            if (f->flags & FIELD_KEEP) CHECK(d->row->write != ROW_REPLACE, "%s.%s: kept over a row that is replaced",
                                             d->event, f->name);
            const op_field *found = op_kind_field(d->kind, f->name);
            CHECK(found == f, "op_kind_field finds %s.%s", d->event, f->name);
        }
        CHECK(op_kind_field(d->kind, "no_such_field") == NULL, "kind %d: no field of another name", k);
    }
}

/* ---- against the migrated schema ---- */

/* The column's declared type, or NULL when the table has no such column; *pk: its
 * place in the primary key (0: none). */
static const char *column_type(sqlite3 *db, const char *table, const char *column, int *pk) {
    static char type[32];
    sqlite3_stmt *st = NULL;
    const char *found = NULL;
    if (sqlite3_prepare_v2(db, "SELECT type, pk FROM pragma_table_info(?1) WHERE name = ?2", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 2, column, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) {
            snprintf(type, sizeof type, "%s", (const char *)sqlite3_column_text(st, 0));
            if (pk) *pk = sqlite3_column_int(st, 1);
            found = type;
        }
    }
    sqlite3_finalize(st);
    return found;
}

static const char *sql_type(field_type t) { return t == FIELD_INT ? "INTEGER" : t == FIELD_REAL ? "REAL" : "TEXT"; }

static int primary_key_size(sqlite3 *db, const char *table) {
    sqlite3_stmt *st = NULL;
    int n = -1;
    if (sqlite3_prepare_v2(db, "SELECT count(*) FROM pragma_table_info(?1) WHERE pk > 0", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
        if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
    }
    sqlite3_finalize(st);
    return n;
}

static int count_fields(const op_kind_desc *d, bool row) {
    int n = 0;
    for (int i = 0; i < d->n_fields; i++) n += is_row_field(&d->fields[i]) == row;
    return n;
}

static void test_columns(sqlite3 *db) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        const op_kind_desc *d = &OP_KINDS[k];
        if (!d->row) continue;
        const char *table = d->row->table;
        /* a row written by its own SQL (the steps' step_rows, under one integer key:
         * test_step_rows holds it) is read through a view of these columns: they are
         * there by name, their types and keys are the SQL's */
        bool own = d->row->sql != NULL;
        int pk = 0, key_size = 1;
        CHECK(column_type(db, table, "run_id", &pk) && (own || pk == 1), "%s: %s is keyed by run_id first", d->event,
              table);
        if (d->row->per_rank) {
            CHECK(column_type(db, table, "rank", &pk) && pk == 2, "%s: %s is keyed by run_id and rank", d->event, table);
            key_size++;
        }
        for (int i = 0; i < d->n_fields; i++) {
            const op_field *f = &d->fields[i];
            const char *where = is_row_field(f) ? table : "runs";
            const char *type = column_type(db, where, f->name, &pk);
            CHECK(type, "%s.%s: the migrated schema has the column %s.%s", d->event, f->name, where, f->name);
            if (own && is_row_field(f)) continue;
            CHECK(!type || str_is(type, sql_type(f->type)), "%s.%s: %s.%s is %s, the field %s", d->event, f->name,
                  where, f->name, type ? type : "", sql_type(f->type));
            if (is_row_field(f)) CHECK((pk > 0) == ((f->flags & FIELD_KEY) != 0),
                                       "%s.%s: in %s's primary key if and only if it is a key field", d->event, f->name,
                                       table);
            key_size += (f->flags & FIELD_KEY) != 0;
        }
        CHECK(own || primary_key_size(db, table) == key_size, "%s: %s's primary key is run_id, %s", d->event, table,
              d->row->per_rank ? "rank" : "its key fields");
        for (int i = 0; i < 2 && d->row->t_columns[i]; i++) {
            const char *type = column_type(db, table, d->row->t_columns[i], NULL);
            CHECK(own ? type != NULL : str_is(type, "INTEGER"), "%s: its time goes to %s.%s, an INTEGER column (%s)", d->event, table,
                  d->row->t_columns[i], type ? type : "none");
        }
        CHECK(d->row->t_columns[0], "%s: its row keeps its time", d->event);
        if (d->row->insert_column)
            CHECK(column_type(db, table, d->row->insert_column, NULL) && d->row->insert_value, "%s: a new row's %s.%s",
                  d->event, table, d->row->insert_column);
    }
}

/* Each kind's statements prepare on the migrated schema; those built from the
 * fields take the parameters their binding binds. */
static void test_statements(sqlite3 *db) {
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        const op_kind_desc *d = &OP_KINDS[k];
        const char *sql;
        int n = 0;
        for (int i = 0; (sql = op_kind_sql(d->kind, i)); i++, n++) {
            sqlite3_stmt *st = NULL;
            int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
            CHECK(rc == SQLITE_OK, "kind %d statement %d prepares: %s (%s)", k, i, sqlite3_errmsg(db), sql);
            if (rc == SQLITE_OK && d->row && i == 0)
                CHECK(sqlite3_bind_parameter_count(st) == 1 + d->row->per_rank + count_fields(d, true) + 1,
                      "%s's row takes the run, %sits %d fields and its time: %d parameters", d->event,
                      d->row->per_rank ? "the rank, " : "", count_fields(d, true), sqlite3_bind_parameter_count(st));
            if (rc == SQLITE_OK && d->row && i == 1 && count_fields(d, false))
                CHECK(sqlite3_bind_parameter_count(st) == 1 + count_fields(d, false),
                      "%s's run update takes the run and its %d fields of the run", d->event, count_fields(d, false));
            sqlite3_finalize(st);
        }
        int own = 0;
        while (own < OP_MAX_SQL && d->sql[own]) own++;
        int built = d->row ? 1 + (count_fields(d, false) > 0) : 0;
        CHECK(n == built + own, "kind %d: %d statements, its row's %d and its own %d", k, n, built, own);
        CHECK(op_kind_sql(d->kind, n) == NULL && op_kind_sql(d->kind, -1) == NULL, "kind %d: none past the last", k);
    }
}

/* ---- against the schemas ---- */

static json_t *load_schema(const char *name) {
    const char *src = getenv("DDPD_SOURCE_DIR");
    REQUIRE(src && *src, "DDPD_SOURCE_DIR names the source tree (ctest sets it)");
    char *path = xasprintf("%s/schema/%s", src, name);
    json_error_t jerr;
    json_t *schema = json_load_file(path, 0, &jerr);
    REQUIRE(schema, "%s: %s", path, jerr.text);
    free(path);
    return schema;
}

/* Whether a JSON schema's type admits `type` (a "type" string or array; an enum of strings is a string). */
static bool admits(const json_t *s, const char *type) {
    const json_t *t = json_object_get(s, "type");
    if (json_is_string(t)) return str_is(json_string_value(t), type);
    size_t i;
    const json_t *v;
    json_array_foreach(t, i, v) if (str_is(json_string_value(v), type)) return true;
    if (!t && str_is(type, "string")) {
        const json_t *e = json_object_get(s, "enum");
        json_array_foreach(e, i, v) if (!json_is_string(v)) return false;
        return json_array_size(e) > 0;
    }
    return false;
}

static const char *schema_type(field_type t) { return t == FIELD_INT ? "integer" : t == FIELD_REAL ? "number" : "string"; }

static bool in_list(const char *const *list, const char *name) {
    for (; list && *list; list++)
        if (str_is(*list, name)) return true;
    return false;
}

/* The "then" of the allOf entry for events of `type`; NULL when there is none. */
static const json_t *event_schema(const json_t *schema, const char *type) {
    size_t i;
    const json_t *entry;
    json_array_foreach(json_object_get(schema, "allOf"), i, entry) {
        const json_t *is = json_object_get(json_object_get(json_object_get(json_object_get(entry, "if"), "properties"),
                                                           "type"), "const");
        if (str_is(json_string_value(is), type)) return json_object_get(entry, "then");
    }
    return NULL;
}

static void test_events_schema(void) {
    json_t *schema = load_schema("events.schema.json");
    const json_t *types = json_object_get(json_object_get(json_object_get(schema, "properties"), "type"), "enum");
    REQUIRE(json_array_size(types) > 0, "events.schema.json lists the event types");
    /* the types ingest takes itself, not as an op: a log line (ignored), the launcher's end (ingest's end hook),
     * a rank's word on preemption notices (ingest's preempt hook) */
    static const char *const not_kinds[] = {"log", "end", "preempt", NULL};
    size_t i;
    const json_t *v;
    json_array_foreach(types, i, v) {
        const char *type = json_string_value(v);
        CHECK(op_kind_for_event(type) || in_list(not_kinds, type), "the event type %s is a kind's", type);
    }
    for (int k = 0; k < OP_KIND_COUNT; k++) {
        const op_kind_desc *d = &OP_KINDS[k];
        if (!d->event) continue;
        bool listed = false;
        json_array_foreach(types, i, v) listed = listed || str_is(json_string_value(v), d->event);
        CHECK(listed, "the kind %s is an event type of events.schema.json", d->event);
        const json_t *then = event_schema(schema, d->event);
        const json_t *props = json_object_get(then, "properties"), *required = json_object_get(then, "required");
        CHECK(json_is_object(props), "events.schema.json says what a %s event holds", d->event);
        const char *name;
        const json_t *prop;
        json_object_foreach((json_t *)props, name, prop) {
            const op_field *f = op_kind_field(d->kind, name);
            CHECK(f || in_list(d->other_fields, name),
                  "the %s event's field %s (events.schema.json) has a descriptor, or is one of the kind's others",
                  d->event, name);
            CHECK(!(f && in_list(d->other_fields, name)), "%s.%s: a descriptor and among the others", d->event, name);
            if (f) CHECK(admits(prop, schema_type(f->type)), "%s.%s: the schema's type admits %s", d->event, name,
                         schema_type(f->type));
        }
        for (int j = 0; j < d->n_fields; j++) {
            const op_field *f = &d->fields[j];
            CHECK(json_object_get(props, f->name), "%s.%s is a field of the event in events.schema.json", d->event,
                  f->name);
            if (!(f->flags & FIELD_REQUIRED)) continue;
            bool req = false;
            json_array_foreach(required, i, v) req = req || str_is(json_string_value(v), f->name);
            CHECK(req, "%s.%s: what the server requires, events.schema.json requires", d->event, f->name);
        }
        for (const char *const *o = d->other_fields; o && *o; o++)
            CHECK(json_object_get(props, *o), "%s's other field %s is in events.schema.json", d->event, *o);
    }
    json_decref(schema);
}

/* The API's rows of a kind (store_read.c: fields_row_json, fields_json_array_sql):
 * its stored fields then its time, as openapi.json's object of them says, in order. */
static void check_api_rows(const json_t *items, store_op_kind kind, const char *where) {
    const op_kind_desc *d = &OP_KINDS[kind];
    const json_t *props = json_object_get(items, "properties");
    REQUIRE(json_is_object(props), "openapi.json has %s", where);
    void *it = json_object_iter((json_t *)props);
    for (int i = 0; i < d->n_fields; i++) {
        const op_field *f = &d->fields[i];
        if (!is_row_field(f)) continue;
        const char *name = it ? json_object_iter_key(it) : "(nothing)";
        CHECK(str_is(name, f->name), "%s: the member after the last is %s, got %s", where, f->name, name);
        if (it) CHECK(admits(json_object_iter_value(it), schema_type(f->type)), "%s.%s admits %s", where, f->name,
                      schema_type(f->type));
        if (it) it = json_object_iter_next((json_t *)props, it);
    }
    CHECK(it && str_is(json_object_iter_key(it), d->row->t_member), "%s: then its time, %s", where, d->row->t_member);
    CHECK(it && !json_object_iter_next((json_t *)props, it), "%s: nothing more", where);
}

static void test_openapi(void) {
    json_t *api = load_schema("openapi.json");
    const json_t *schemas = json_object_get(json_object_get(api, "components"), "schemas");
    check_api_rows(json_object_get(json_object_get(json_object_get(json_object_get(schemas, "Epochs"), "properties"),
                                                   "epochs"), "items"),
                   OP_EPOCH, "GET /runs/{id}/epochs' epochs");
    check_api_rows(json_object_get(json_object_get(json_object_get(json_object_get(schemas, "Run"), "properties"),
                                                   "checkpoints"), "items"),
                   OP_CHECKPOINT, "GET /runs/{id}'s checkpoints");
    for (int k = 0; k < OP_KIND_COUNT; k++)
        CHECK(!OP_KINDS[k].row || !OP_KINDS[k].row->t_member || k == OP_EPOCH || k == OP_CHECKPOINT,
              "kind %d: the rows the API shows are held against openapi.json here", k);
    json_decref(api);
}

int main(void) {
    char *dir = scratch_dir_make("kind-fields");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    REQUIRE(store_open(layout_db_path(), NULL, NULL, err, sizeof err) == 0, "store_open: %s", err);
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK, "open the database");

    test_descriptors();
    test_columns(db);
    test_statements(db);
    test_events_schema();
    test_openapi();

    sqlite3_close(db);
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("test_kind_fields");
}
