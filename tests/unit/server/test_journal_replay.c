/* Unit tests of the journal replay (server/store/journal_replay.c) on a real SQLite
 * store in a fresh temporary state directory and a journal file written as a run's
 * processes write it: per rank, only the events newer than the newest the store has
 * of that rank are queued (so nothing is stored twice and nothing is missed); a last
 * line still being written is left for the next read and taken whole once it is;
 * once the writers are gone, a last line without its newline is torn and skipped; a
 * torn piece closed by a later write's newline is skipped, not parsed; another run's
 * events are not taken; the launcher's `end` (status, reason, exit_code) and the
 * newest step are what the scheduler finishes the run with; the launcher's attempts
 * are stored (and told), a second replay changing nothing, and the attempt the journal
 * ends in is said; and one process's events only (ingest's catch-up after a
 * reconnection), after its hello and the seq it had sent. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "check.h"
#include "journal_replay.h"
#include "scratch_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

#define T0 1700000000000LL

static int64_t new_run(void) {
    store_op op = {.kind = OP_RUN_INSERT, .t = T0};
    op.u.insert.name = xstrdup("replayed");
    op.u.insert.config = xstrdup("{}");
    op.u.insert.world_size = 2;
    op.u.insert.device_kind = "cpu";
    return store_submit_wait(&op);
}

/* A run directory of the scratch dir (`name`), and its journal's path in *journal
 * (both malloc'd): the replay opens the journal of a run directory. */
static char *run_dir_in(const char *dir, const char *name, char **journal) {
    char *run_dir = xasprintf("%s/%s", dir, name);
    mkdir(run_dir, 0700);
    *journal = xasprintf("%s/events.jsonl", run_dir);
    return run_dir;
}

static void append(const char *path, const char *text) {
    FILE *f = fopen(path, "ae");
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

static char *step_line(int64_t run, int rank, int64_t gs, int64_t t) {
    return xasprintf("{\"run\":\"%lld\",\"rank\":%d,\"seq\":%lld,\"t\":%lld,\"type\":\"step\",\"epoch\":0,\"step\":%lld,"
                     "\"global_step\":%lld,\"loss\":%g,\"lr\":0.001,\"samples_per_s\":100}\n",
                     (long long)run, rank, (long long)gs, (long long)t, (long long)gs - 1, (long long)gs, 2.0 / (double)gs);
}

/* Stores a step of rank 0 the way ingest would have (the socket's copy). */
static void store_step(int64_t run, int64_t gs, int64_t t) {
    store_op op = {.kind = OP_STEP, .run_id = run, .rank = 0, .t = t};
    op.u.step.global_step = gs;
    op.u.step.epoch = 0;
    op.u.step.step = gs - 1;
    op.u.step.loss = 2.0 / (double)gs;
    op.u.step.lr = 0.001;
    op.u.step.samples_per_s = 100;
    store_submit(&op, 1);
    store_sync();
}

/* The steps table's steps of the run, in order, as "1,2,3" (malloc'd). */
static char *loss_steps(int64_t run) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT group_concat(global_step) FROM (SELECT global_step FROM steps WHERE run_id = ?1"
                               " ORDER BY global_step)", -1, &st, NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) out = xstrdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out ? out : xstrdup("");
}

static void noop_progress(void *ctx, int rank, int64_t gs) {
    int64_t *newest = ctx;
    if (rank == 0 && gs > *newest) *newest = gs;
}

static void test_replay(const char *dir) {
    int64_t run = new_run(), other = new_run();
    REQUIRE(run > 0 && other > 0, "runs inserted: %lld %lld", (long long)run, (long long)other);
    char *journal, *run_dir = run_dir_in(dir, "replay", &journal);

    REQUIRE(run == 1, "the first run is 1 (the journal lines name it): %lld", (long long)run);
    /* The server stored rank 0's hello and steps 1..3 from the socket before it died;
     * the journal has 1..6. */
    store_op hello = {.kind = OP_HELLO, .run_id = run, .rank = 0, .t = T0 + 1};
    hello.u.hello.pid = 8;
    hello.u.hello.total_steps = hello.u.hello.epochs = hello.u.hello.steps_per_epoch = NO_INT;
    store_submit(&hello, 1);
    for (int gs = 1; gs <= 3; gs++) store_step(run, gs, T0 + 10 * gs);
    append(journal, "{\"run\":\"1\",\"rank\":-1,\"seq\":0,\"t\":1700000000001,\"type\":\"hello\",\"pid\":7,\"secret\":null}\n");
    for (int gs = 1; gs <= 6; gs++) {
        char *line = step_line(run, 0, gs, T0 + 10 * gs);
        append(journal, line);
        free(line);
    }
    /* another run's event, and a torn piece a later write closed with its newline */
    char *foreign = step_line(other, 0, 99, T0 + 100);
    append(journal, foreign);
    free(foreign);
    append(journal, "{\"run\":\"1\",\"rank\":0,\"seq\":50,\"t\":1700000000200,\"type\":\"epoch\",\"epo\n");

    int64_t newest = 0;
    journal_replay *j = journal_replay_open(run, run_dir, &(journal_hooks){.ctx = &newest, .progress = noop_progress});
    REQUIRE(j, "journal_replay_open");
    /* a line being written: not read yet */
    append(journal, "{\"run\":\"1\",\"rank\":0,\"seq\":7,\"t\":1700000000070,\"type\":\"step\",\"global_step\":7,\"loss\":0.");
    journal_replay_read(j, false, 0);
    store_sync();
    const journal_outcome *o = journal_replay_outcome(j);
    char *steps = loss_steps(run);
    CHECK(strcmp(steps, "1,2,3,4,5,6") == 0, "steps 1..6, each once (3 replayed at the cut, 4..6 new): %s", steps);
    free(steps);
    CHECK(o->replayed == 4, "queued: step 3 (at the cut: the same ms) and 4..6, not 1..2: %lld", (long long)o->replayed);
    CHECK(o->skipped == 2, "skipped: the other run's event and the torn piece: %lld", (long long)o->skipped);
    CHECK(o->last_step == 6 && newest == 6, "the newest step: %lld (progress told %lld)", (long long)o->last_step,
          (long long)newest);
    CHECK(!o->ended, "no end yet");
    int64_t first, last;
    CHECK(store_series_range(other, NULL, NO_INT, &first, &last) == 0, "the other run got nothing");

    /* the line is finished, then more: read on, from where it was */
    append(journal, "14}\n");
    char *line8 = step_line(run, 0, 8, T0 + 80);
    append(journal, line8);
    free(line8);
    journal_replay_read(j, false, 0);
    store_sync();
    steps = loss_steps(run);
    CHECK(strcmp(steps, "1,2,3,4,5,6,7,8") == 0, "the finished line is read whole, and what follows: %s", steps);
    free(steps);

    /* the launcher's end, then a torn last line once the writers are gone */
    append(journal, "{\"run\":\"1\",\"rank\":-1,\"seq\":9,\"t\":1700000000090,\"type\":\"end\",\"status\":\"failed\","
                    "\"reason\":\"rank 1 exited with status 3\",\"exit_code\":1}\n");
    append(journal, "{\"run\":\"1\",\"rank\":0,\"seq\":10,\"t\":1700000000100,\"type\":\"step\",\"global_step\":9,\"lo");
    journal_replay_read(j, false, 0);
    CHECK(o->ended && strcmp(o->status, "failed") == 0 && o->reason && strcmp(o->reason, "rank 1 exited with status 3") == 0 &&
              o->exit_code == 1,
          "the end: %s %s %lld", o->status, o->reason ? o->reason : "(none)", (long long)o->exit_code);
    int64_t skipped = o->skipped;
    journal_replay_read(j, true, 0);
    store_sync();
    CHECK(o->skipped == skipped + 1, "the torn last line is skipped once the writers are gone: %lld", (long long)o->skipped);
    steps = loss_steps(run);
    CHECK(strcmp(steps, "1,2,3,4,5,6,7,8") == 0, "and never taken as a step: %s", steps);
    free(steps);
    journal_replay_close(j);

    /* a second replay (a second restart) from the store as it is now adds nothing */
    j = journal_replay_open(run, run_dir, NULL);
    REQUIRE(j, "journal_replay_open again");
    journal_replay_read(j, true, 0);
    CHECK(journal_replay_outcome(j)->replayed <= 1, "a replay from where the store is now queues at most the event at "
          "its cut: %lld", (long long)journal_replay_outcome(j)->replayed);
    journal_replay_close(j);

    /* a missing journal is an empty one */
    char *missing = xasprintf("%s/none", dir);
    j = journal_replay_open(other, missing, NULL);
    REQUIRE(j, "journal_replay_open of a missing file");
    journal_replay_read(j, true, 0);
    CHECK(journal_replay_outcome(j)->replayed == 0 && !journal_replay_outcome(j)->ended &&
              journal_replay_outcome(j)->last_step == NO_INT,
          "nothing, no end, no step");
    journal_replay_close(j);
    free(missing);
    free(journal);
    free(run_dir);
}

static void append_step(const char *path, int64_t run, int rank, int64_t seq, int64_t gs) {
    char *line = xasprintf("{\"run\":\"%lld\",\"rank\":%d,\"seq\":%lld,\"t\":%lld,\"type\":\"step\",\"epoch\":0,"
                           "\"step\":%lld,\"global_step\":%lld,\"loss\":0.5,\"lr\":0.001,\"samples_per_s\":100}\n",
                           (long long)run, rank, (long long)seq, (long long)(T0 + 50 + gs), (long long)gs - 1,
                           (long long)gs);
    append(path, line);
    free(line);
}

static void append_hello(const char *path, int64_t run, int rank, int64_t pid, int64_t t) {
    char *line = xasprintf("{\"run\":\"%lld\",\"rank\":%d,\"seq\":0,\"t\":%lld,\"type\":\"hello\",\"pid\":%lld,"
                           "\"secret\":null}\n", (long long)run, rank, (long long)t, (long long)pid);
    append(path, line);
    free(line);
}

/* One process's events only (ingest's catch-up after a reconnection): those after its
 * own hello, past the seq it had sent; another rank's, and a later process's of the
 * same rank (the run resumed), are not taken. */
static void test_replay_process(const char *dir) {
    int64_t run = new_run();
    REQUIRE(run > 0, "a run inserted: %lld", (long long)run);
    char *journal, *run_dir = run_dir_in(dir, "process", &journal);
    append_hello(journal, run, 0, 10, T0 + 1);
    append_hello(journal, run, 1, 12, T0 + 2);
    for (int64_t k = 1; k <= 4; k++) {
        append_step(journal, run, 0, k, k);
        append_step(journal, run, 1, k, 100 + k); /* rank 1's, not rank 0's process */
    }
    append_hello(journal, run, 0, 11, T0 + 100); /* rank 0 again: a later process */
    for (int64_t k = 1; k <= 3; k++) append_step(journal, run, 0, k, 4 + k);

    journal_process first = {.rank = 0, .pid = 10, .hello_t = T0 + 1, .hello_seq = 0, .after_seq = 2};
    journal_replay *j = journal_replay_open_process(run, run_dir, &first, NULL);
    journal_replay_read(j, false, 0);
    const journal_outcome *o = journal_replay_outcome(j);
    CHECK(o->replayed == 2 && o->last_seq == 4, "the first process: its seqs 3 and 4 replayed: %lld, through %lld",
          (long long)o->replayed, (long long)o->last_seq);
    journal_replay_close(j);
    store_sync();
    char *got = loss_steps(run);
    CHECK(strcmp(got, "3,4") == 0, "its steps after seq 2 only, not rank 1's or the later process's: %s", got);
    free(got);

    journal_process later = {.rank = 0, .pid = 11, .hello_t = T0 + 100, .hello_seq = 0, .after_seq = NO_INT};
    j = journal_replay_open_process(run, run_dir, &later, NULL);
    journal_replay_read(j, false, 0);
    o = journal_replay_outcome(j);
    CHECK(o->replayed == 3 && o->last_seq == 3, "the later process: its 3 events: %lld, through %lld",
          (long long)o->replayed, (long long)o->last_seq);
    journal_replay_close(j);
    store_sync();
    got = loss_steps(run);
    CHECK(strcmp(got, "3,4,5,6,7") == 0, "then its steps: %s", got);
    free(got);

    journal_process stranger = {.rank = 0, .pid = 99, .hello_t = T0 + 1, .hello_seq = 0, .after_seq = NO_INT};
    j = journal_replay_open_process(run, run_dir, &stranger, NULL);
    journal_replay_read(j, false, 0);
    CHECK(journal_replay_outcome(j)->replayed == 0 && journal_replay_outcome(j)->last_seq == NO_INT,
          "a process the journal has no hello of: nothing (%lld)", (long long)journal_replay_outcome(j)->replayed);
    journal_replay_close(j);
    free(journal);
    free(run_dir);
}

/* The rows of run_attempts of the run, "attempt status reason offsets;..." (malloc'd). */
static char *attempt_rows(int64_t run) {
    sqlite3 *db = NULL;
    sqlite3_stmt *st = NULL;
    char *out = NULL;
    if (sqlite3_open_v2(layout_db_path(), &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(db, "SELECT group_concat(attempt || ' ' || coalesce(status, '-') || ' ' || coalesce(reason, '-')"
                               " || ' ' || coalesce(log_offsets, '-') || ' ' || coalesce(master_port, '-'), ';')"
                               " FROM (SELECT * FROM run_attempts WHERE run_id = ?1 ORDER BY attempt)", -1, &st,
                           NULL) == SQLITE_OK) {
        sqlite3_bind_int64(st, 1, run);
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) out = xstrdup((const char *)sqlite3_column_text(st, 0));
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out ? out : xstrdup("");
}

static void count_attempt(void *ctx, store_op *op) {
    int *told = ctx;
    if (op->kind == OP_ATTEMPT_STARTED || op->kind == OP_ATTEMPT_ENDED) (*told)++;
}

/* The launcher's (rank -1) attempt events are the run's attempts: replayed into
 * run_attempts, told to the hook; replaying them again (a second restart) changes
 * nothing; the outcome says the newest attempt and whether it had ended. */
static void test_replay_attempts(const char *dir) {
    int64_t run = new_run();
    REQUIRE(run > 0, "a run inserted: %lld", (long long)run);
    char *journal, *run_dir = run_dir_in(dir, "attempts", &journal);
    char *lines = xasprintf(
        "{\"run\":\"%lld\",\"rank\":-1,\"seq\":0,\"t\":1700000000001,\"type\":\"hello\",\"pid\":7,\"secret\":null}\n"
        "{\"run\":\"%lld\",\"rank\":-1,\"seq\":1,\"t\":1700000000002,\"type\":\"attempt\",\"attempt\":0,"
        "\"phase\":\"started\",\"max_restarts\":1,\"master_port\":29601,\"log_offsets\":{\"0\":0,\"1\":0}}\n"
        "{\"run\":\"%lld\",\"rank\":-1,\"seq\":2,\"t\":1700000000003,\"type\":\"attempt\",\"attempt\":0,"
        "\"phase\":\"ended\",\"status\":\"failed\",\"reason\":\"rank 1 exited with status 3\",\"failing_rank\":1,"
        "\"exit_code\":3,\"signal\":null,\"last_line\":\"boom\",\"restarting\":true,\"backoff_s\":1.0}\n"
        "{\"run\":\"%lld\",\"rank\":-1,\"seq\":3,\"t\":1700000000004,\"type\":\"attempt\",\"attempt\":1,"
        "\"phase\":\"started\",\"max_restarts\":1,\"master_port\":29601,\"log_offsets\":{\"0\":120,\"1\":80}}\n",
        (long long)run, (long long)run, (long long)run, (long long)run);
    append(journal, lines);
    free(lines);
    int told = 0;
    journal_replay *j = journal_replay_open(run, run_dir, &(journal_hooks){.ctx = &told, .attempt = count_attempt});
    REQUIRE(j, "journal_replay_open");
    journal_replay_read(j, false, 0);
    store_sync();
    const journal_outcome *o = journal_replay_outcome(j);
    char *rows = attempt_rows(run);
    CHECK(strcmp(rows, "0 failed rank 1 exited with status 3 {\"0\":0,\"1\":0} 29601;1 - - {\"0\":120,\"1\":80} 29601") == 0,
          "both attempts stored, the first ended: %s", rows);
    free(rows);
    CHECK(told == 3, "the hook told of each of the 3 attempt events: %d", told);
    CHECK(o->last_attempt == 1 && o->attempt_open, "the journal ends in attempt 1, started: %lld %d",
          (long long)o->last_attempt, o->attempt_open);
    journal_replay_close(j);

    /* again from the start (a second restart): the same rows */
    told = 0;
    j = journal_replay_open(run, run_dir, &(journal_hooks){.ctx = &told, .attempt = count_attempt});
    journal_replay_read(j, false, 0);
    store_sync();
    rows = attempt_rows(run);
    CHECK(strcmp(rows, "0 failed rank 1 exited with status 3 {\"0\":0,\"1\":0} 29601;1 - - {\"0\":120,\"1\":80} 29601") == 0,
          "replayed again: the same rows: %s", rows);
    free(rows);
    char *ended = xasprintf("{\"run\":\"%lld\",\"rank\":-1,\"seq\":4,\"t\":1700000000005,\"type\":\"attempt\","
                            "\"attempt\":1,\"phase\":\"ended\",\"status\":\"succeeded\",\"reason\":\"\",\"failing_rank\":null,"
                            "\"exit_code\":null,\"signal\":null,\"last_line\":\"\",\"restarting\":false}\n", (long long)run);
    append(journal, ended);
    free(ended);
    journal_replay_read(j, true, 0);
    o = journal_replay_outcome(j);
    CHECK(o->last_attempt == 1 && !o->attempt_open, "attempt 1 ended: %lld %d", (long long)o->last_attempt,
          o->attempt_open);
    journal_replay_close(j);
    free(journal);
    free(run_dir);
}

int main(void) {
    char *dir = scratch_dir_make("journal");
    REQUIRE(dir, "mkdtemp: %s", strerror(errno));
    state_layout_init(dir);
    char err[512];
    REQUIRE(store_open(layout_db_path(), NULL, NULL, err, sizeof err) == 0, "store_open: %s", err);
    test_replay(dir);
    test_replay_process(dir);
    test_replay_attempts(dir);
    store_read_release();
    store_close();
    state_layout_free();
    scratch_dir_remove(dir);
    free(dir);
    return test_done("journal_replay");
}
