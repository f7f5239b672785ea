/* The launcher's attempts (attempts.h): the data and the memory plan first, then
 * each attempt's rendezvous, ranks and supervision, the pause before a restart, and
 * the status the run ends with. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "launcher.h"
#include "launcher_state.h"
#include "checkpoint.h"
#include "engine.h"
#include "log.h"

#define ARENA_SLACK (64 * 1024)

/* Attempt hooks (attempts.h). A restart carries on from the run's newest checkpoint,
 * as a resume does (and from the start when it has none yet): every attempt after the
 * run's first, this launcher's own restarts and the first attempt of a launcher the
 * server started again (--restart-count K > 0: after it lost a node or the run's
 * processes, or to start it again where it was preempted). */
static json_t *prepare_attempt(void *ctx, int attempt) {
    launcher *L = ctx;
    char path[2048], err[512];
    int own = checkpoint_find_latest(L->o->run_dir, path, sizeof path, err, sizeof err) == 0;
    L->resume = L->o->resume || (attempt > 0 && own);
    const char *from = L->resume && own ? path : L->cfg.checkpoint.load[0] ? L->cfg.checkpoint.load : NULL;
    return json_pack("{s:s?}", "checkpoint", from);
}

static void run_attempt(void *ctx, int attempt, attempt_result *r) {
    (void)attempt;
    launcher *L = ctx;
    if (launcher_make_rendezvous(L, r->reason, sizeof r->reason) != 0 || launcher_fork_ranks(L, r->reason, sizeof r->reason) != 0)
        return;
    attempt_outcome out;
    launcher_supervise(L, &L->mask, &out);
    long stopped_at = out.failed || out.canceled_by ? 0 : launcher_stopped_preempted(L);
    bool paused = !out.failed && !out.canceled_by && !stopped_at && launcher_stopped_paused(L);
    r->status = out.failed ? "failed" : out.canceled_by ? "canceled" : stopped_at ? "preempted" : paused ? "stopped"
                                                                                                          : "succeeded";
    snprintf(r->reason, sizeof r->reason, "%s", out.reason);
    if (paused)
        snprintf(r->reason, sizeof r->reason, "stopped after epoch %d (train.stop_after_epochs of %d), where its "
                 "checkpoint was written; resumed from there it goes on as if it had not stopped",
                 L->cfg.train.stop_after_epochs - 1, L->cfg.train.epochs);
    if (stopped_at)
        snprintf(r->reason, sizeof r->reason, "preempted: every rank stopped after global step %ld, where its "
                 "checkpoint was written; resumed from there it goes on as if it had not stopped", stopped_at);
    r->cancel_signal = out.canceled_by;
    r->may_restart = out.failed;
    r->failing_rank = out.failing_rank;
    snprintf(r->last_line, sizeof r->last_line, "%s", out.last_line);
    if (!out.died) return;
    r->exit_code = WIFEXITED(out.status) ? WEXITSTATUS(out.status) : -1;
    r->signal = WIFSIGNALED(out.status) ? WTERMSIG(out.status) : 0;
}

static int pause_before_restart(void *ctx, double seconds) {
    launcher *L = ctx;
    for (;;) {
        event_flush(L->events); /* the reason for the restart goes out at once; the sink reconnects */
        if (seconds <= 0) return 0;
        double now = seconds < 1.0 ? seconds : 1.0;
        struct timespec wait = {(time_t)now, (long)((now - (double)(time_t)now) * 1e9)};
        siginfo_t info;
        int sig = sigtimedwait(&L->mask, &info, &wait);
        if (sig == SIGTERM || sig == SIGINT || sig == SIGHUP) return sig;
        if (sig == SIGUSR1) launcher_preempt_signal(L); /* the next attempt's ranks stop after their first step */
        if (sig < 0) seconds -= now; /* (a SIGCHLD, or an interrupted wait: round again) */
    }
}

int launcher_start_and_supervise(launcher *L) {
    char reason[1024];
    if (launcher_load_data(L, reason, sizeof reason) != 0) {
        launcher_end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    const idx_dataset *d = &L->test;
    model_shape shape;
    if (model_shape_init(&shape, &L->cfg, 1, d->rows, d->cols, d->num_classes, reason, sizeof reason) != 0) {
        launcher_end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    if (L->backend != BACKEND_NCCL && launcher_check_host_memory(L, &shape, reason, sizeof reason) != 0) {
        launcher_end_run(L, "failed", reason, EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    /* nccl hook: with nccl the cpu group only serves aborts, so its arena stays small. */
    /* a rank with several batch shards (--ranks) keeps each one's gradients */
    int width = L->cfg.distributed.world_size, parts = (width + L->world - 1) / L->world;
    L->arena = L->backend == BACKEND_NCCL ? ARENA_SLACK
                                          : engine_cpu_arena_bytes(&shape) +
                                                (size_t)(parts - 1) * (shape.n_params * sizeof(float) + 64) + ARENA_SLACK;
    L->ranks = calloc((size_t)L->local, sizeof *L->ranks);
    if (!L->ranks) {
        launcher_end_run(L, "failed", "out of memory", EXIT_RUN_FAILED);
        return EXIT_RUN_FAILED;
    }
    sigemptyset(&L->mask);
    sigaddset(&L->mask, SIGCHLD);
    sigaddset(&L->mask, SIGTERM);
    sigaddset(&L->mask, SIGINT);
    sigaddset(&L->mask, SIGHUP);
    sigaddset(&L->mask, SIGUSR1);
    sigprocmask(SIG_BLOCK, &L->mask, &L->child_mask);
    int from = L->o->restarts_from >= 0 ? L->o->restarts_from : L->o->restart_count;
    L->plan = (attempt_plan){.first = L->o->restart_count, .from = from, .restarts_allowed = L->o->nodes <= 1,
                             .earlier_step = -1};
    char bad[512];
    if (attempts_policy(&L->plan, L->o->config_path, L->cfg.distributed.max_restarts, "ddp-trainer", bad, sizeof bad) != 0) {
        launcher_end_run(L, "failed", bad, EXIT_RUN_FAILED); /* the server checked it: a config edited since */
        return EXIT_RUN_FAILED;
    }
    attempt_hooks hooks = {.ctx = L, .prepare = prepare_attempt, .run = run_attempt, .pause = pause_before_restart};
    attempts_outcome out;
    attempts_run(L->events, &L->plan, &hooks, &out);
    sigprocmask(SIG_SETMASK, &L->child_mask, NULL);
    int rc = strcmp(out.status, "succeeded") == 0   ? EXIT_RUN_SUCCEEDED
             : strcmp(out.status, "canceled") == 0  ? 128 + out.signal
             : strcmp(out.status, "preempted") == 0 ? EXIT_RUN_PREEMPTED
             : strcmp(out.status, "stopped") == 0   ? EXIT_RUN_STOPPED
                                                    : EXIT_RUN_FAILED;
    launcher_end_run(L, out.status, out.reason, rc);
    return rc;
}
