/* The storage faults of the writer's current batch: see write_fault.h. */
#include "write_fault.h"

#include <stdio.h>
#include <string.h>

#include "base.h"

static struct {
    bool noted;
    int code;
    char message[256];
} W;

bool write_fault_is(int rc) {
    switch (rc & 0xff) {
    case SQLITE_FULL:      /* database or disk is full */
    case SQLITE_IOERR:     /* disk I/O error */
    case SQLITE_CANTOPEN:  /* the journal or the WAL cannot be made */
    case SQLITE_READONLY:  /* remounted read-only, permissions */
    case SQLITE_BUSY:      /* another process holds the lock */
    case SQLITE_LOCKED:
    case SQLITE_NOMEM:
    case SQLITE_INTERRUPT:
    case SQLITE_PROTOCOL:
    case SQLITE_CORRUPT:   /* retried, never dropped: /healthz says it, `ddpd check` tells more */
    case SQLITE_NOTADB:
        return true;
    default:
        return false;
    }
}

void write_fault_note(sqlite3 *db, int rc) {
    if (!write_fault_is(rc) || W.noted) return;
    W.noted = true;
    W.code = rc;
    const char *msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    /* the system's word for an I/O failure ("No space left on device") says more */
    int prim = rc & 0xff, e = db && (prim == SQLITE_FULL || prim == SQLITE_IOERR || prim == SQLITE_CANTOPEN)
                                 ? sqlite3_system_errno(db) : 0;
    if (e) snprintf(W.message, sizeof W.message, "%s: %s", msg, strerror(e));
    else snprintf(W.message, sizeof W.message, "%s", msg);
}

int write_fault_code(void) { return W.noted ? W.code : 0; }

bool write_fault_noted(void) { return W.noted; }

const char *write_fault_message(void) { return W.message; }

void write_fault_clear(void) {
    W.noted = false;
    W.code = 0;
    W.message[0] = '\0';
}

int64_t write_fault_step(sqlite3 *db, sqlite3_stmt *st) {
    if (W.noted) { /* the batch is rolled back and retried: nothing more runs */
        sqlite3_clear_bindings(st);
        return -1;
    }
    int rc = sqlite3_step(st);
    int64_t changes = rc == SQLITE_DONE ? sqlite3_changes(db) : -1;
    if (rc != SQLITE_DONE) {
        if (!write_fault_is(rc)) log_error("database write failed (%s): %s", sqlite3_sql(st), sqlite3_errmsg(db));
        write_fault_note(db, rc);
    }
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return changes;
}
