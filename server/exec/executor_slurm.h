/* The Slurm executor (executor.h): every run is one Slurm job, submitted with sbatch
 * at once (Slurm keeps the queue, owns the nodes and the GPUs, and places the job),
 * whose batch script starts one `ddpd part` per node with srun. Each part reports to
 * this server over HTTP with the run's secret (POST /runs/{id}/parts): its ranks'
 * events and logs, relayed as an agent's are (node_relay.h), and how its launcher
 * ended; the answer tells it what to start (part_desc.h). The run's parts are the
 * job's nodes, node rank i the node with SLURM_NODEID i.
 *
 * Slurm's state is the truth for placement: while the job waits, the run is queued
 * and waits for Slurm's pending reason; its parts start as they report; the job is
 * followed (squeue, about once a second) until it ends, and its parts' ends are told
 * then, with Slurm's word where Slurm ended it (a time limit, a failed node,
 * preemption, scancel from a shell). A requeued job is followed again, not failed.
 * A stop is scancel. A server that restarts takes its jobs back by their ids (the
 * store keeps them), and their parts go on reporting to it.
 *
 * Commands run on the executor's own thread, never under the scheduler's lock; the
 * hooks are called from that thread and from the parts' requests (HTTP threads),
 * never holding the executor's lock. */
#ifndef DDPD_SERVER_EXEC_EXECUTOR_SLURM_H
#define DDPD_SERVER_EXEC_EXECUTOR_SLURM_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "executor.h"

typedef struct {
    const char *partition, *account;  /* NULL: Slurm's defaults */
    /* the runs' sharing settings in Slurm's (slurm_cli.h's slurm_job_spec): "USER=ACCOUNT"
     * pairs (a user's runs go under their account, others' under `account`), whether the
     * site lets ddpd raise a job's priority, the QOS of preemptible runs (NULL: none) */
    const char *const *user_accounts;
    int n_user_accounts;
    bool allow_priority;
    const char *preemptible_qos;
    const char *const *options;       /* more sbatch options, the site's own (serve --slurm-option) */
    int n_options;
    const char *work_dir;             /* on the nodes: where parts keep their run directories, DIR/ID/part-K */
    const char *ddpd;                 /* the ddpd binary on the nodes */
    const char *const *data_roots;    /* a built-in part's --data-root */
    int n_data_roots;
    bool gpus;                        /* the nodes have GPUs: a backend "auto" asks for them */
    int poll_ms;                      /* how often squeue is asked (0: 1000) */
    int checkin_s;                    /* a job running this long with a part that never reported is canceled (0: 120) */
} executor_slurm_config;

/* Its executor: its set_server_url takes where the parts reach this server (no job is
 * submitted before), gives_gpus says c->gpus, and shut_down stops its thread (the jobs
 * go on in Slurm). */
const executor *executor_slurm_init(const executor_slurm_config *c, const executor_hooks *hooks);

/* A part's report (POST /runs/{id}/parts), in two steps around the relay of its
 * events and logs. First who it is: `body` has node_rank, node (Slurm's name of its
 * node), address (where the other nodes reach it), boot (its process's own id),
 * master_port (node 0 of a command run: the MASTER_PORT it picked) and stop_t (when
 * Slurm asked it to stop, unix ms; 0: not). 0 with the relay source of its lines and
 * its node's name; else an HTTP status (401: not the run's secret; 404: no such run
 * on Slurm here; 400: a bad body) with why in err. */
int executor_slurm_checkin(int64_t run, const char *secret, const json_t *body, int *relay, char *node,
                           size_t node_len, char *err, size_t errlen);
/* Then its word on its launcher (`reports`, as an agent's: [{run, state: "running" |
 * "exited", exit_code, signal, reason, end_t}]); returns the parts it should run (a
 * JSON array, new reference: its description once it can start, empty before it can
 * and once it has ended), and *stop: whether it should stop what it runs (its run
 * is canceled or over). An empty list alone stops nothing: after a restart, node 0
 * of a command run may report after the others. */
json_t *executor_slurm_report(int64_t run, int node_rank, const json_t *reports, bool *stop);

#endif
