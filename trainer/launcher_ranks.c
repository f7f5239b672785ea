/* The launcher's ranks: the shared memory an attempt's ranks meet in, forking them,
 * what each does first (its signals, its tie to the launcher, its communicator), and
 * signalling them. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher.h"
#include "launcher_state.h"
#include "child_start.h"
#include "comm_watch.h"
#include "log.h"
#include "rank.h"

/* The shared memory an attempt's ranks meet in, and NCCL's unique id: made again
 * for every attempt (a failed one aborted its group). 0, or -1 and why. */
int launcher_make_rendezvous(launcher *L, char *why, size_t whylen) {
    if (L->group) coll_cpu_group_destroy(L->group);
    if (L->board) run_board_destroy(L->board);
    L->group = coll_cpu_group_create(L->local, L->arena);
    L->board = run_board_create(L->local);
    if (!L->group || !L->board) {
        snprintf(why, whylen, "cannot create the shared memory for %d ranks: %s", L->local, strerror(errno));
        return -1;
    }
    if (L->preempt_asked) run_board_request_preempt(L->board); /* it came between two attempts */
#if DDPD_NCCL_BACKEND
    /* nccl hook: the NCCL unique id, before fork and without initialising CUDA. */
    if (L->backend == BACKEND_NCCL && launcher_nccl_id_made(L, why, whylen) != 0) return -1;
#endif
    return 0;
}

static void child_start(launcher *L, int slot, pid_t launcher_pid, const sigset_t *old_mask) {
    int rank = L->first + slot;
    /* no rank outlives the launcher, even a SIGKILLed one */
    if (child_tie_to_parent(launcher_pid) < 0) _exit(EXIT_RUN_FAILED);
    sigset_t defaults; /* the launcher's cancel signals back to their defaults in the rank */
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGHUP);
    child_signals(&defaults, old_mask);
    if (L->have_train) idx_cache_map_in(&L->train); /* no page faults in the first epoch's steps */
    idx_cache_map_in(&L->test);
    rank_context ctx = {
        .cfg = &L->cfg,
        .run_dir = L->o->run_dir,
        .events_target = L->o->events_target,
        .run_id = L->run_id,
        .secret = L->secret,
        .rank = rank,
        .slot = slot,
        .resume = L->resume,
        .train = L->have_train ? &L->train : NULL,
        .test = &L->test,
        .board = L->board,
    };
#if DDPD_NCCL_BACKEND
    /* nccl hook: the rank selects its GPU and joins the communicator; a failure is
     * the rank's reason on the board, which the launcher reports. */
    char device[128], why[512];
    if (L->backend == BACKEND_NCCL) {
        ctx.comm = coll_nccl_attach(&L->nccl, rank, L->board, device, sizeof device, why, sizeof why);
        if (!ctx.comm) {
            run_board_set_failure(L->board, slot, why);
            _exit(EXIT_RUN_FAILED);
        }
        ctx.device = device;
        /* the run's batch shards over this host's GPUs (--ranks); across nodes, one each */
        if (L->o->nodes <= 1 && coll_set_width(ctx.comm, L->cfg.distributed.world_size) != 0) {
            run_board_set_failure(L->board, slot, "cannot spread the run's batch shards over its GPUs");
            _exit(EXIT_RUN_FAILED);
        }
    }
#endif
    if (!ctx.comm) {
        char why[1024];
        coll_comm *c = coll_cpu_attach(L->group, slot);
        /* the run's batch shards over this host's ranks (--ranks); across nodes, one each */
        if (c && L->o->nodes <= 1 && coll_set_width(c, L->cfg.distributed.world_size) != 0) {
            run_board_set_failure(L->board, slot, "cannot spread the run's batch shards over its ranks");
            _exit(EXIT_RUN_FAILED);
        }
        if (c && L->o->nodes > 1 && !(c = launcher_join_nodes(L, c, slot, why, sizeof why))) {
            run_board_set_failure(L->board, slot, why);
            _exit(EXIT_RUN_FAILED);
        }
        ctx.comm = comm_watch_wrap(c, L->board, slot);
    }
    if (!ctx.comm) _exit(EXIT_RUN_FAILED);
    fflush(NULL);
    _exit(rank_main(&ctx));
}

/* Forks the attempt's ranks. 0, or -1 and why (those started are killed and reaped). */
int launcher_fork_ranks(launcher *L, char *why, size_t whylen) {
    pid_t self = getpid();
    event_flush(L->events);
    fflush(NULL);
    memset(L->ranks, 0, (size_t)L->local * sizeof *L->ranks);
    for (int r = 0; r < L->local; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            child_start(L, r, self, &L->child_mask);
        } else if (pid < 0) {
            snprintf(why, whylen, "cannot start rank %d: fork: %s", L->first + r, strerror(errno));
            coll_cpu_group_abort(L->group);
            launcher_signal_ranks(L, SIGKILL);
            while (wait(NULL) > 0) {}
            return -1;
        }
        L->ranks[r] = (rank_proc){.pid = pid, .running = 1};
    }
    if (L->o->nodes > 1)
        log_msg(LOG_INFO, "started ranks %d to %d of %d (node %d of %d)", L->first, L->first + L->local - 1, L->world,
                L->o->node_rank, L->o->nodes);
    else
        log_msg(LOG_INFO, "started %d rank%s", L->world, L->world > 1 ? "s" : "");
    return 0;
}

void launcher_signal_ranks(launcher *L, int sig) {
    for (int r = 0; r < L->local; r++)
        if (L->ranks[r].running) kill(L->ranks[r].pid, sig);
}
