/* The types the scheduler's interface (scheduler.h) and its state (sched_state.h)
 * share: its configuration and what it needs of a run. Below both, so that the
 * scheduler's files include its state without an include cycle. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_SCHEDULER_TYPES_H
#define DDPD_SERVER_SCHED_INCLUDE_SCHEDULER_TYPES_H

#include <stdbool.h>
#include <stdint.h>

#include "device_pool.h"
#include "executor_slurm.h"
#include "restart_policy.h"

typedef struct {
    const char *trainer;
    const char *runner;      /* ddp-run: starts a command run's ranks */
    int port_lo, port_hi;    /* MASTER_PORTs leased to command runs */
    const char *const *data_roots; /* passed to the trainer (--data-root), which opens data beneath them */
    int n_data_roots;
    char **gpus;             /* GPU ids, as CUDA_VISIBLE_DEVICES names them */
    int n_gpus;
    int slots;               /* CPU slots */
    int cancel_grace_ms;     /* SIGTERM, then SIGKILL this much later */
    /* a run is finished (its final state queued to the store): its event connections
     * go (ingest_run_ended, wired by main.c); may be NULL */
    void (*run_ended)(int64_t id);
    /* a run is about to start: its config.json is there, or made again from the
     * database (runs_config_mend, wired by main.c); 0, or -1 with err (the run fails
     * saying so); may be NULL */
    int (*config_mend)(int64_t id, char *err, size_t errlen);
    /* Runs across nodes (agents, nodes.h): this host's name among the nodes, and the
     * address other nodes reach its ranks at (NULL: this host takes no part in runs
     * across nodes, only in its own); a node silent this long is lost. */
    const char *node_name;
    const char *advertise;
    int64_t node_timeout_ms;
    /* Sharing (queue_policy.h): a run may start ahead of a larger one of its pool while
     * that one has waited less than this (0: never); an owner's usage halves every
     * half-life (fair_share.h); a preempted run has this long to checkpoint and stop
     * before it is stopped as a cancel is. */
    int64_t backfill_window_ms;
    double fair_share_half_life_s;
    int preempt_grace_ms;
    /* a command run may ask (distributed.stop_grace_s) for a longer grace than the
     * server's, up to this */
    int max_stop_grace_ms;
    /* a run is not preempted before it has run this long in its attempt, unless its
     * config says (min_runtime_s); 0: at once */
    int64_t min_runtime_ms;
    /* an elastic run shrunk below its width grows back at most this often (0: as soon as devices are idle) */
    int64_t elastic_grow_interval_ms;
    /* a preemptible run that has held its devices this long in its attempt yields them,
     * at its next checkpoint, to a waiting run of its priority and another owner
     * (queue_policy.h: time slices); 0: never */
    int64_t time_slice_ms;
    /* a node where this many runs failed (suspect classes) within the window is excluded
     * until an admin clears it (suspects.h); 0: never */
    int exclude_node_after;
    int64_t exclude_node_window_ms;
    /* a node (or one device of it) where this many attempts failed within that window is suspect (suspects.h) */
    int suspect_after;
    /* serve --executor slurm: every run is a Slurm job (executor_slurm.h); NULL: runs
     * go to this host and the agents (--executor local) */
    const executor_slurm_config *slurm;
    /* What a run's cgroup holds it to on this host (run_cgroup.h): the memory a run gets
     * per device it holds when its config asks for none (ddpd serve
     * --run-memory-per-slot; per pool, 0: no limit), and the processes and threads a
     * run's part may hold (--max-run-processes; 0: none; -1: 1024 per device, at least 4096) */
    int64_t memory_per_device[2];
    long max_run_processes;
    uint64_t max_log_bytes; /* the cap on each log of a run (--max-log-bytes-per-run; 0: none): said at its end */
    int64_t max_points;     /* the cap on a run's stored points (--max-points-per-run; 0: none), for the points
                             * its journal brings to a run taken back after a restart (ingest caps the rest) */
} scheduler_config;

/* What the scheduler needs of a run, decided once where the run comes from: its
 * submission (runs_submit), its resume (runs_resume), or the store and its config.json
 * after a restart (scheduler_recover). The scheduler does not read a run's config. */
typedef struct {
    int64_t id;
    int world_size;
    pool_kind pool;
    int nodes_wanted;      /* distributed.nodes; 0: as few nodes as hold it */
    int min_world_size;    /* distributed.min_world_size: the fewest ranks it may train on (0: world_size, not elastic) */
    bool command;          /* a command run: ddp-run starts it, with a MASTER_PORT of its own */
    bool resume;           /* its trainer continues from the newest checkpoint in its run directory (--resume) */
    double hang_timeout_s; /* a command run's distributed.hang_timeout_s: no progress from a rank this long fails it; 0: off */
    const char *owner;     /* the user who submitted it; NULL: nobody in particular */
    int priority;          /* -100 to 100: the higher first */
    bool preemptible;      /* it may be preempted for a run of a higher priority */
    int64_t queued_ms;     /* unix ms it entered the queue (0: now) */
    int max_restarts;      /* distributed.max_restarts */
    restart_policy restart; /* distributed.restart_policy over it (base/restart_policy.h): the server's own
                             * restarts decide as its launchers do */
    int stop_grace_s;      /* distributed.stop_grace_s: the grace its ranks ask for when stopped; 0: the server's */
    int restart_count;     /* the attempt its launchers start at (--restart-count): 0, or more when its count goes on */
    int restarts_from;     /* the attempt its restarts count from: 0, or its latest resume's first */
    int64_t memory_bytes;  /* resources.memory_gb as submitted, in bytes (the store's, never config.json's); 0: the
                            * server's default (run_limits.h) */
    double max_duration_s; /* max_duration_s: it ends `timeout` after this long in one start; 0: no limit of its own */
    double min_runtime_s;  /* min_runtime_s: not preempted before it has run this long in an attempt; -1: the server's */
    int64_t expected_ms;   /* how long it is expected to run: the median of its owner's earlier runs of its name
                            * that succeeded (store_median_length); 0: not known. For the start estimate */
    int64_t sweep_id;     /* a sweep's trial: its sweep (a warm start's zygote is the sweep's); 0: none */
} run_needs;

#endif
