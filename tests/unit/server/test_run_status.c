/* The one list of run statuses (server/store/run_status.h) against the two other
 * places that spell it: the store's CHECK constraint, in a real database brought up
 * by the built-in migrations, and the API's enum, components.schemas.Status of
 * schema/openapi.json. Also each status's name parses back to it, and which are
 * final and which active. */
#include "check.h"
#include "migrate.h"
#include "migrations.h"
#include "run_status.h"

#include <jansson.h>
#include <sqlite3.h>
#include <string.h>

/* Inserts a run with `status`; SQLITE_OK or the CHECK's SQLITE_CONSTRAINT. */
static int insert_status(sqlite3 *db, const char *status) {
    sqlite3_stmt *st = NULL;
    const char *sql = "INSERT INTO runs (name, status, config, world_size, device_kind, created_at)"
                      " VALUES ('t', ?1, '{}', 1, 'cpu', 0)";
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_text(st, 1, status, -1, SQLITE_STATIC);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void against_the_store(void) {
    sqlite3 *db = NULL;
    REQUIRE(sqlite3_open(":memory:", &db) == SQLITE_OK, "an in-memory database");
    char err[512];
    int v = migrate_apply(db, ddpd_migrations, ddpd_migrations_count, err, sizeof err);
    REQUIRE(v == ddpd_migrations_count, "migrated: %s", v < 0 ? err : "");
    for (int s = 0; s < RUN_STATUS_COUNT; s++) {
        int rc = insert_status(db, run_status_name((run_status)s));
        CHECK(rc == SQLITE_OK, "the store takes status %s (%s)", run_status_name((run_status)s), sqlite3_errmsg(db));
    }
    const char *not_ours[] = {"paused", "QUEUED", "", "done"};
    for (size_t i = 0; i < sizeof not_ours / sizeof *not_ours; i++)
        CHECK(insert_status(db, not_ours[i]) == SQLITE_CONSTRAINT, "the store's CHECK refuses \"%s\"", not_ours[i]);
    sqlite3_close(db);
}

static void against_the_api(void) {
    const char *src = getenv("DDPD_SOURCE_DIR");
    REQUIRE(src, "DDPD_SOURCE_DIR names the source tree");
    char path[4096];
    snprintf(path, sizeof path, "%s/schema/openapi.json", src);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    REQUIRE(doc, "%s: %s", path, jerr.text);
    json_t *en = json_object_get(json_object_get(json_object_get(json_object_get(doc, "components"), "schemas"),
                                                 "Status"),
                                 "enum");
    REQUIRE(json_is_array(en), "openapi.json has components.schemas.Status.enum");
    CHECK(json_array_size(en) == RUN_STATUS_COUNT, "the API lists %zu statuses, the server %d", json_array_size(en),
          RUN_STATUS_COUNT);
    for (size_t i = 0; i < json_array_size(en); i++) {
        const char *name = json_string_value(json_array_get(en, i));
        run_status s;
        CHECK(name && run_status_parse(name, &s) && (size_t)s == i,
              "the API's status %zu, \"%s\", is the server's, in the same order", i, name ? name : "?");
    }
    json_decref(doc);
}

static void names_and_kinds(void) {
    for (int s = 0; s < RUN_STATUS_COUNT; s++) {
        run_status back;
        CHECK(run_status_parse(run_status_name((run_status)s), &back) && back == (run_status)s, "%s parses back",
              run_status_name((run_status)s));
        CHECK(!(run_status_is_final((run_status)s) && run_status_is_active((run_status)s)),
              "%s is not both final and active", run_status_name((run_status)s));
    }
    run_status x;
    CHECK(!run_status_parse("Running", &x) && !run_status_parse("", &x), "other spellings name no status");
    CHECK(run_status_is_final(RUN_SUCCEEDED) && run_status_is_final(RUN_FAILED) && run_status_is_final(RUN_CANCELED),
          "the three ends are final");
    CHECK(!run_status_is_final(RUN_QUEUED) && !run_status_is_active(RUN_QUEUED), "a queued run is neither");
    CHECK(run_status_is_active(RUN_STARTING) && run_status_is_active(RUN_RUNNING) &&
              run_status_is_active(RUN_CANCELING),
          "starting, running, canceling are active");
}

int main(void) {
    against_the_store();
    against_the_api();
    names_and_kinds();
    return test_done("test_run_status");
}
