/* The host-memory plan of a CPU run: what its processes (the launcher and every
 * rank) will hold in memory, computed from the config and the dataset's header
 * before anything is allocated. The server checks it at submission against the
 * run's share of the host (its world_size of the CPU slots), the trainer again
 * before it forks its ranks, by the same code, so that a run that cannot fit is
 * refused with both numbers instead of swapping the host or being killed.
 *
 *   total = shared mapping (collectives: the optimizer states, every rank's
 *           gradients and copy of the parameters, staging chunks: the pages the
 *           run touches, not the arenas' reserved size)
 *         + per rank: the workspace of model_workspace_init for its largest batch,
 *           batch norm's statistics, the batch's labels, its threads, a process base
 *         + per process (launcher and ranks): the dataset (train and test images and
 *           labels; counted in each, as their resident set counts a shared cache)
 * Pure C, no BLAS: linked by the server and the trainer. */
#ifndef DDPD_TRAINER_MODEL_PLAN_HOST_PLAN_H
#define DDPD_TRAINER_MODEL_PLAN_HOST_PLAN_H

#include <stddef.h>

#include "model_shape.h"

#define HOST_PLAN_COLL_CHUNK (512u * 1024)           /* coll_cpu's staging chunk */
#define HOST_PLAN_PROCESS_BASE (24u << 20)           /* code, libraries, heap of one process (estimate) */
#define HOST_PLAN_THREAD_BYTES (2u << 20)            /* stack and BLAS buffer touched by a thread (estimate) */
#define HOST_PLAN_EVAL_ROWS 512                      /* rank.c's evaluation batch */

typedef struct {
    const model_shape *shape;
    int world_size;
    int local_batch;       /* batch_size / world_size */
    int threads_per_rank;
    int n_opt_states;      /* host_plan_optimizer_states */
    size_t pixels;         /* bytes of one example's image */
    size_t train_count, test_count;
} host_plan_input;

typedef struct {
    size_t shared_bytes;   /* the collectives' mapping */
    size_t rank_bytes;     /* one rank, without the dataset */
    size_t data_bytes;     /* the dataset, once */
    size_t total_bytes;    /* the whole run */
} host_plan;

/* Optimizer state buffers of a config: 0 (plain SGD), 1 (SGD momentum), 2 (Adam, AdamW). */
int host_plan_optimizer_states(const run_config *cfg);
/* A rank's arena in the collectives' mapping: its gradients and its copy of the
 * parameters (and the shared one's size: the optimizer's states). */
size_t host_plan_arena_bytes(const model_shape *s);
/* Bytes model_workspace_init allocates for batches of max_rows. */
size_t host_plan_workspace_bytes(const model_shape *s, int max_rows);
void host_plan_compute(const host_plan_input *in, host_plan *plan);
/* The run's share of the host: world_size / slots of host_total. */
size_t host_plan_share(int world_size, int slots, size_t host_total);
/* 0 when the plan fits the share (and the memory available now, 0 = unknown); else
 * -1 and `why`: "needs 258 GiB of host memory, its share is 7.8 GiB (1 of 2 CPU
 * slots of 15.6 GiB)", and what to change. */
int host_plan_check(const host_plan *plan, int world_size, int slots, size_t host_total, size_t available,
                    char *why, size_t whylen);
/* The host's memory (MemTotal) and what is available now (MemAvailable); 0 unknown. */
size_t host_plan_host_total(void);
size_t host_plan_host_available(void);

#endif
