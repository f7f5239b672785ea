/* The launcher: see launcher.h. Its start-up here (the config, this node's ranks, the
 * hand-off of a GPU run, the event sink, the backend) and the run's last event; the
 * rest in the files launcher_state.h lists. Signals are handled synchronously
 * (blocked, then taken with sigtimedwait), so the supervision loop is plain
 * sequential code. */
#include "launcher.h"

#include <errno.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "launcher_state.h"
#include "backend_select.h"
#include "ddpd_build_config.h"
#include "log.h"
#include "dirs.h"
#include "paths.h"
#include "run_dir.h"

/* The run's last event, with the exit status the launcher exits with next: a server
 * that is not its parent (one restarted meanwhile) learns it from the journal. */
void launcher_end_run(launcher *L, const char *status, const char *reason, int exit_code) {
    if (reason && reason[0]) log_msg(strcmp(status, "succeeded") ? LOG_ERROR : LOG_INFO, "run %s: %s", status, reason);
    else log_msg(LOG_INFO, "run %s", status);
    if (L->events) {
        log_set_events(NULL);
        event_emit(L->events, "end", json_pack("{s:s, s:s, s:i}", "status", status, "reason", reason ? reason : "",
                                               "exit_code", exit_code));
        event_sink_close(L->events);
        L->events = NULL;
    }
    if (strcmp(status, "succeeded") != 0) fprintf(stderr, "ddp-trainer: run %s: %s\n", status, reason);
}

static int load_config(launcher *L) {
    schema_errors errs = {0};
    json_t *doc = NULL;
    if (run_config_load_file(L->o->config_path, &L->cfg, &doc, &errs) != 0) {
        fprintf(stderr, "ddp-trainer: %s is not a valid run config:\n", L->o->config_path);
        for (size_t i = 0; i < errs.count; i++)
            fprintf(stderr, "  %s%s%s\n", errs.items[i].pointer, errs.items[i].pointer[0] ? ": " : "",
                    errs.items[i].message);
        if (errs.dropped) fprintf(stderr, "  (and %zu more: %zu violations in all)\n", errs.dropped, schema_errors_total(&errs));
        schema_errors_free(&errs);
        json_decref(doc);
        return -1;
    }
    schema_errors_free(&errs);
    /* Keep the config as it was run, defaults filled, beside the run's outputs. */
    char path[2048];
    snprintf(path, sizeof path, "%s/config.resolved.json", L->o->run_dir);
    if (mkdir_p(L->o->run_dir, 0755) == 0) json_dump_file(doc, path, JSON_INDENT(2) | JSON_SORT_KEYS);
    json_decref(doc);
    return 0;
}

/* The run's secret, taken out of the environment: the ranks get it from memory, and
 * the value in the process's environment block (which /proc shows) is blanked. */
static const char *take_secret(void) {
    static char secret[256];
    char *v = getenv("DDPD_RUN_SECRET");
    if (!v) return NULL;
    snprintf(secret, sizeof secret, "%s", v);
    memset(v, '-', strlen(v));
    unsetenv("DDPD_RUN_SECRET");
    return secret;
}

static void send_hello(launcher *L) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    json_t *hello = json_pack("{s:i, s:s, s:n, s:i}", "pid", (int)getpid(), "host", host, "device", "world_size",
                              L->cfg.distributed.world_size); /* the run's width, however many ranks (--ranks) */
    event_emit(L->events, "hello", hello); /* the sink adds the secret on the socket only */
}

/* The launcher's own thread: SIGUSR1 is blocked there and taken with sigtimedwait. */
static pid_t launcher_tid;

/* SIGUSR1 that the kernel gave to another thread of the launcher (a library's, started
 * before main, e.g. OpenBLAS's, which does not block it): handed on to the launcher's
 * thread, where it waits for sigtimedwait, instead of its default ending the process.
 * In a rank (forked: that thread is not there) it does nothing. */
static void hand_usr1_on(int sig) {
    int saved = errno;
    syscall(SYS_tgkill, getpid(), launcher_tid, sig);
    errno = saved;
}

/* --ranks: how many processes train the run's world_size batch shards. 0, or -1
 * having said why. */
static int plan_ranks(launcher *L) {
    const run_config *c = &L->cfg;
    int ranks = L->o->ranks, width = c->distributed.world_size;
    int least = c->distributed.min_world_size ? c->distributed.min_world_size : width; /* 0: not elastic */
    if (!ranks) return 0;
    if (ranks > width || ranks < least) {
        fprintf(stderr, "ddp-trainer: --ranks %d is outside the run's range: from distributed.min_world_size (%d) "
                "to distributed.world_size (%d)\n", ranks, least, width);
        return -1;
    }
    if (ranks != width && L->o->nodes > 1) {
        fprintf(stderr, "ddp-trainer: --ranks %d with --nodes %d: a run across nodes trains on world_size (%d) "
                "ranks; leave --ranks out\n", ranks, L->o->nodes, width);
        return -1;
    }
    L->world = ranks;
    return 0;
}

int launcher_run(const launcher_options *o) {
    launcher L = {.o = o};
    /* A preemption (SIGUSR1) that comes while the data loads waits for the ranks: its
     * default would end the launcher (the mask goes on through an exec and to the ranks). */
    launcher_tid = (pid_t)syscall(SYS_gettid);
    struct sigaction hand_on = {.sa_handler = hand_usr1_on, .sa_flags = SA_RESTART};
    sigemptyset(&hand_on.sa_mask);
    sigaction(SIGUSR1, &hand_on, NULL);
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_BLOCK, &usr1, NULL);
    if (load_config(&L) != 0) return EXIT_BAD_INPUT;
    L.world = L.cfg.distributed.world_size;
    if (plan_ranks(&L) != 0) return EXIT_BAD_INPUT;
    if (launcher_plan_nodes(&L) != 0) return EXIT_BAD_INPUT;
    char nccl_path[4096];
    if (backend_handoff(&L.cfg, nccl_path, sizeof nccl_path)) { /* a GPU run: the GPU build takes it */
        execv(nccl_path, o->argv);
        fprintf(stderr, "ddp-trainer: cannot start the GPU backend %s: %s\n", nccl_path, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    if (mkdir_p(o->run_dir, 0755) != 0) {
        fprintf(stderr, "ddp-trainer: cannot create the run directory %s: %s\n", o->run_dir, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    char run_dir_copy[2048], path[2048], err[1024], warning[1024], why[512];
    snprintf(run_dir_copy, sizeof run_dir_copy, "%s", o->run_dir);
    L.run_id = getenv("DDPD_RUN_ID") ? getenv("DDPD_RUN_ID") : basename(run_dir_copy);
    L.secret = take_secret();

    snprintf(path, sizeof path, "%s/" RUN_DIR_LOG, o->run_dir);
    log_open(path, "launcher");
    snprintf(path, sizeof path, "%s/" RUN_DIR_JOURNAL, o->run_dir);
    L.events = event_sink_open(o->events_target, path, L.run_id, EVENT_RANK_LAUNCHER, L.secret, err, sizeof err, warning,
                               sizeof warning);
    if (!L.events) {
        fprintf(stderr, "ddp-trainer: %s\n", err);
        return EXIT_BAD_INPUT;
    }
    log_set_events(L.events);
    send_hello(&L);
    if (warning[0]) log_msg(LOG_WARN, "%s", warning);

    int backend = backend_select(&L.cfg, L.local, why, sizeof why);
    if (backend < 0) {
        launcher_end_run(&L, "failed", why, EXIT_BAD_INPUT);
        return EXIT_BAD_INPUT;
    }
    L.backend = backend;
    if (L.world != L.cfg.distributed.world_size)
        log_msg(LOG_INFO, "run %s: %d batch shards on %d rank%s, %s", L.run_id, L.cfg.distributed.world_size, L.world,
                L.world > 1 ? "s" : "", why);
    else
        log_msg(LOG_INFO, "run %s: %d rank%s, %s", L.run_id, L.world, L.world > 1 ? "s" : "", why);
    int rc = launcher_start_and_supervise(&L);
    if (L.have_train) idx_free(&L.train);
    if (L.have_test) idx_free(&L.test);
    if (L.group) coll_cpu_group_destroy(L.group);
    run_board_destroy(L.board);
    free(L.ranks);
    log_close();
    return rc;
}
