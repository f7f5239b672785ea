/* A live run's status moves only as its life allows (server/sched/run_life.c: one
 * setter against one table of legal moves). The table against the life written out
 * here from run_status.h and the scheduler's transitions (queued -> starting ->
 * running -> canceling -> final; a queued run canceled, stopped or failed where it
 * waits; a started one queued again by a preemption or a restart; a start or a cancel
 * overtaken by an end); then the transitions themselves on live runs in the scheduler's
 * table: the legal ones move the status (and a canceling run taken back after a
 * restart is asked again, not refused), each illegal one is refused, logged, and the
 * run left as it was (in the sanitizer build the server aborts there instead: each
 * illegal move runs in a child, whose end says which build it was). No store is open:
 * the transitions' ops wait in the writer's queue, which nothing drains. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "check.h"
#include "ddpd_build_config.h"
#include "sched_state.h"

static bool final(run_status s) {
    return s == RUN_SUCCEEDED || s == RUN_FAILED || s == RUN_CANCELED || s == RUN_STOPPED || s == RUN_TIMEOUT;
}

/* The life of a run, as the scheduler's transitions make it. */
static bool expected_legal(run_status from, run_status to) {
    switch (from) {
    case RUN_QUEUED: /* started; or ended where it waits: canceled, stopped (a sweep), failed (a cap, a quota) */
        return to == RUN_STARTING || to == RUN_FAILED || to == RUN_CANCELED || to == RUN_STOPPED;
    case RUN_STARTING: /* a hello; a cancel; a preemption or a restart; an end before any hello */
        return to == RUN_RUNNING || to == RUN_CANCELING || to == RUN_QUEUED || final(to);
    case RUN_RUNNING:
        return to == RUN_CANCELING || to == RUN_QUEUED || final(to);
    case RUN_CANCELING: /* only an end: the cancel's, or one that came first */
        return final(to);
    default: /* a final status never moves */
        return false;
    }
}

static void check_table(void) {
    int legal = 0;
    for (int f = 0; f < RUN_STATUS_COUNT; f++) {
        for (int t = 0; t < RUN_STATUS_COUNT; t++) {
            bool want = expected_legal((run_status)f, (run_status)t);
            legal += want;
            CHECK(run_move_legal((run_status)f, (run_status)t) == want, "%s -> %s is %s", run_status_name((run_status)f),
                  run_status_name((run_status)t), want ? "legal" : "refused");
        }
    }
    CHECK(legal == 24, "24 legal moves in all (counted %d)", legal);
    CHECK(!run_move_legal(RUN_STATUS_COUNT, RUN_QUEUED) && !run_move_legal(RUN_QUEUED, RUN_STATUS_COUNT),
          "no status past the list moves or is moved to");
}

static int64_t next_id = 100;

/* A run of one CPU slot in the scheduler's table at status `at`. */
static live_run *live(run_status at) {
    run_needs n = {.id = next_id++, .world_size = 1, .pool = POOL_CPU};
    return live_run_add(&n, at);
}

typedef enum { MARK_RUNNING, CANCEL, SUCCEED, QUEUE_START } transition;

static const char *transition_name(transition t) {
    return t == MARK_RUNNING ? "running" : t == CANCEL ? "canceling" : t == SUCCEED ? "succeeded" : "starting";
}

static void apply(live_run *r, transition t) {
    if (t == MARK_RUNNING) mark_running_locked(r);
    else if (t == CANCEL) signal_cancel_locked(r);
    else if (t == SUCCEED) finish_locked(r, RUN_SUCCEEDED, NULL, 0, NO_INT);
    else start_batch_locked(r); /* (no batch system: a start refused before it looks for one) */
}

/* Transition `t` on a run at status `at`, in a child with its stderr in a file: the
 * move is illegal, so the child exits 0 when the run is as it was and still in the
 * table (a server in production), or is ended by SIGABRT (the sanitizer build). The
 * log names the move either way. */
static void check_refused(run_status at, transition t) {
    char path[] = "/tmp/ddpd-moves-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0, "mkstemp: %s", strerror(errno));
    fflush(NULL);
    pid_t pid = fork();
    REQUIRE(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd, STDERR_FILENO);
        live_run *r = live(at);
        int64_t id = r->id;
        apply(r, t);
        _exit(find_run(id) == r && r->status == at ? 0 : 3);
    }
    close(fd);
    int st = 0;
    REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid: %s", strerror(errno));
    char log[4096] = "";
    FILE *f = fopen(path, "r");
    if (f) {
        size_t n = fread(log, 1, sizeof log - 1, f);
        log[n] = '\0';
        fclose(f);
    }
    unlink(path);
    char said[128];
    snprintf(said, sizeof said, "cannot move from %s to %s", run_status_name(at), transition_name(t));
    if (DDPD_SANITIZED)
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "%s -> %s aborts the sanitizer build (status %d)",
              run_status_name(at), transition_name(t), st);
    else
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s -> %s is refused, the run left as it was (status %d)",
              run_status_name(at), transition_name(t), st);
    CHECK(strstr(log, said) && strstr(log, "refused"), "the refusal is logged, naming the move (%s): %s", said, log);
}

static void check_transitions(void) {
    /* legal: a run starting that says hello, is canceled, is asked again, and ends canceled */
    live_run *r = live(RUN_STARTING);
    int64_t id = r->id;
    mark_running_locked(r);
    CHECK(r->status == RUN_RUNNING, "starting -> running (%s)", run_status_name(r->status));
    r->cancel_reason = xstrdup("canceled by request");
    signal_cancel_locked(r);
    CHECK(r->status == RUN_CANCELING, "running -> canceling (%s)", run_status_name(r->status));
    signal_cancel_locked(r); /* a run taken back after a restart while canceling is asked again */
    CHECK(r->status == RUN_CANCELING, "a canceling run asked again stays canceling (%s)", run_status_name(r->status));
    finish_locked(r, RUN_CANCELED, "canceled by request", NO_INT, NO_INT);
    CHECK(!find_run(id), "canceling -> canceled: the run left the table");
    /* a queued run canceled where it waits */
    r = live(RUN_QUEUED);
    id = r->id;
    finish_locked(r, RUN_CANCELED, "canceled by request", NO_INT, NO_INT);
    CHECK(!find_run(id), "queued -> canceled: the run left the table");

    /* illegal: each refused */
    check_refused(RUN_QUEUED, MARK_RUNNING);  /* running needs a start */
    check_refused(RUN_QUEUED, CANCEL);        /* a queued run is finished canceled, never canceling */
    check_refused(RUN_QUEUED, SUCCEED);       /* a run that never started never succeeded */
    check_refused(RUN_RUNNING, QUEUE_START);  /* a started run starts again only from the queue */
    check_refused(RUN_CANCELING, MARK_RUNNING); /* a hello after a cancel */
}

int main(void) {
    check_table();
    pthread_mutex_lock(&sched.mu); /* as every transition runs: under the scheduler's lock */
    check_transitions();
    pthread_mutex_unlock(&sched.mu);
    return test_done("test_scheduler_moves");
}
