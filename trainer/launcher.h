/* The launcher (the tutorial's mp.spawn, done natively): checks the config, loads
 * the data once, creates the rendezvous (shared memory), forks one process per
 * rank, and supervises them: when a rank dies the others are stopped within a
 * second and the run fails with a reason naming the rank, unless
 * distributed.max_restarts allows another attempt, which starts every rank again
 * from the run's newest checkpoint (attempts.h); SIGTERM/SIGINT cancel the run; no
 * rank outlives the launcher. Across nodes, one launcher per node runs
 * that node's ranks, and the ranks of different nodes meet through the
 * coordinator's rendezvous (nodes/). */
#ifndef DDPD_TRAINER_LAUNCHER_H
#define DDPD_TRAINER_LAUNCHER_H

#include "data_open.h"

typedef struct launcher_options {
    const char *config_path;
    const char *run_dir;
    const char *events_target; /* NULL: journal only */
    int resume;
    int restart_count; /* --restart-count: the first attempt's number (a run whose count goes on) */
    int restarts_from; /* --restarts-from: the attempt its restarts count from (-1: restart_count) */
    data_roots data_roots; /* --data-root: data files are opened beneath these (none: as given) */
    char **argv; /* the command line, to hand the run over to ddp-trainer-nccl */
    /* Across nodes (ddpd's scheduler and agents pass them): this launcher runs node
     * `node_rank`'s world_size/nodes ranks; the nodes meet through the coordinator's
     * `rendezvous` URL, and this node's ranks listen on `node_addr` (or on the
     * interface GLOO_SOCKET_IFNAME names). nodes 0 means 1. */
    int nodes, node_rank;
    const char *node_addr, *rendezvous;
    /* --ranks: the processes to train the run's world_size batch shards on (0: one per
     * shard); from distributed.min_world_size to world_size, on one host, cpu backend. */
    int ranks;
} launcher_options;

/* Exit codes of ddp-trainer. */
#define EXIT_RUN_SUCCEEDED 0
#define EXIT_RUN_FAILED 1
#define EXIT_BAD_INPUT 2 /* bad config or command line: nothing was started */
#define EXIT_RUN_PREEMPTED 3 /* stopped for a preemption (SIGUSR1): a checkpoint where it stopped */
#define EXIT_RUN_STOPPED 4 /* stopped at train.stop_after_epochs: a checkpoint where it stopped */

/* Returns the process exit code: 0, 1, 2, 3, or 128 + signal when canceled. SIGUSR1
 * asks it to stop for a preemption: every rank stops after the same step, rank 0
 * writes a checkpoint there, and the run ends "preempted" (a run across nodes ignores
 * it: its nodes could not agree on the step). */
int launcher_run(const launcher_options *o);

#endif
