/* A restart's first step, kept with its attempt as the steps are written: see
 * attempt_steps.h. The writer remembers, for the runs it wrote lately, their newest
 * restart's start and first step, so that a step costs a statement only when it is
 * the restart's first (or a lower one). */
#include "attempt_steps.h"

#include <string.h>

#include "base.h"
#include "write_fault.h"

#define SLOTS 256

typedef struct {
    int64_t run;     /* 0: empty */
    int64_t attempt; /* its newest restart (attempt > 0); 0: none */
    int64_t started; /* that restart's started_at; NO_INT: not known */
    int64_t first;   /* its first step so far; NO_INT: none */
} slot;

static struct {
    sqlite3 *db;
    slot s[SLOTS];
} A;

void attempt_steps_forget(void) { memset(A.s, 0, sizeof A.s); }

static slot *slot_of(int64_t run) { return &A.s[((uint64_t)run * 0x9E3779B97F4A7C15u >> 32) % SLOTS]; }

void attempt_steps_forget_run(int64_t run) {
    slot *s = slot_of(run);
    if (s->run == run) s->run = 0;
}

static const char NEWEST_SQL[] = "SELECT attempt, started_at, first_global_step FROM run_attempts"
                                 " WHERE run_id = ?1 AND attempt > 0 ORDER BY attempt DESC LIMIT 1";
static const char SET_SQL[] = "UPDATE run_attempts SET first_global_step = ?3 WHERE run_id = ?1 AND attempt = ?2"
                              " AND (first_global_step IS NULL OR first_global_step > ?3)";

static int load(sqlite3 *db, int64_t run, slot *s) {
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, NEWEST_SQL, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, run);
    *s = (slot){run, 0, NO_INT, NO_INT};
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        s->attempt = sqlite3_column_int64(st, 0);
        if (sqlite3_column_type(st, 1) != SQLITE_NULL) s->started = sqlite3_column_int64(st, 1);
        if (sqlite3_column_type(st, 2) != SQLITE_NULL) s->first = sqlite3_column_int64(st, 2);
    }
    sqlite3_finalize(st);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) {
        s->run = 0;
        return -1;
    }
    return 0;
}

int attempt_step_written(sqlite3 *db, int64_t run, int64_t step, int64_t t) {
    if (db != A.db) {
        attempt_steps_forget();
        A.db = db;
    }
    slot *s = slot_of(run);
    if (s->run != run && load(db, run, s) != 0) return -1;
    if (!s->attempt || s->started == NO_INT || t < s->started) return 0; /* no restart, or a step before it */
    if (s->first != NO_INT && s->first <= step) return 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, SET_SQL, -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, run);
    sqlite3_bind_int64(st, 2, s->attempt);
    sqlite3_bind_int64(st, 3, step);
    int64_t n = write_fault_step(db, st);
    sqlite3_finalize(st);
    if (n < 0) {
        s->run = 0;
        return -1;
    }
    s->first = step;
    return 0;
}
