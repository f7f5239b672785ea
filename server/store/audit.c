/* The audit log's writes: see audit.h. */
#include "audit.h"

#include <stdio.h>
#include <stdlib.h>

#include "base.h"
#include "kind_fields.h"
#include "store.h"

const char *audit_actor(const caller *who, char *buf, size_t len) {
    if (!who) snprintf(buf, len, "%s", AUDIT_SERVER);
    else if (who->kind == CALLER_USER) snprintf(buf, len, "%s", who->name);
    else if (who->kind == CALLER_ADMIN_TOKEN) snprintf(buf, len, "(admin token)");
    else snprintf(buf, len, "(anonymous)");
    return buf;
}

static store_op audit_op(const char *actor, const char *action, int64_t run_id, const char *target,
                         const char *subject, json_t *detail) {
    store_op op = {.kind = OP_AUDIT, .run_id = run_id, .t = now_ms()};
    op.u.audit.actor = xstrdup(actor ? actor : AUDIT_SERVER);
    op.u.audit.action = xstrdup(action);
    op.u.audit.target = xstrdup(target);
    op.u.audit.subject = subject && *subject ? xstrdup(subject) : NULL;
    op.u.audit.detail = detail ? json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(detail);
    return op;
}

int64_t audit_write(const char *actor, const char *action, int64_t run_id, const char *target, const char *subject,
                    json_t *detail) {
    store_op op = audit_op(actor, action, run_id, target, subject, detail);
    int64_t id = store_submit_wait(&op);
    if (id <= 0) log_error("audit: %s %s by %s could not be recorded: the database cannot be written", action, target,
                           actor ? actor : AUDIT_SERVER);
    return id > 0 ? id : -1;
}

void audit_queue(const char *actor, const char *action, int64_t run_id, const char *target, const char *subject,
                 json_t *detail) {
    store_op op = audit_op(actor, action, run_id, target, subject, detail);
    store_submit_now(&op);
}

int audit_insert_db(sqlite3 *db, const char *actor, const char *action, const char *target, const char *subject,
                    json_t *detail, char *err, size_t errlen) {
    sqlite3_stmt *st;
    char *text = detail ? json_dumps(detail, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(detail);
    if (sqlite3_prepare_v2(db, "INSERT INTO audit (t, actor, action, target, subject, detail) VALUES (?1, ?2, ?3, ?4,"
                           " ?5, ?6)", -1, &st, NULL) != SQLITE_OK) {
        snprintf(err, errlen, "the database: %s", sqlite3_errmsg(db));
        free(text);
        return -1;
    }
    sqlite3_bind_int64(st, 1, now_ms());
    bind_text_or_null(st, 2, actor);
    bind_text_or_null(st, 3, action);
    bind_text_or_null(st, 4, target);
    bind_text_or_null(st, 5, subject);
    bind_text_or_null(st, 6, text);
    int rc = sqlite3_step(st);
    if (rc != SQLITE_DONE) snprintf(err, errlen, "the audit log cannot be written: %s", sqlite3_errmsg(db));
    sqlite3_finalize(st);
    free(text);
    return rc == SQLITE_DONE ? 0 : -1;
}
