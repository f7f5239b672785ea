/* The compute engine of one rank: where the model's parameters (and batch norm's
 * running statistics) live and how a training step, an evaluation and the optimizer
 * run there. The rank loop
 * (rank.c) drives an engine and never touches device memory itself: `cpu`
 * (engine_cpu.c: the BLAS and shared-memory collectives) and, in CUDA builds,
 * `cuda` (cuBLAS kernels and NCCL) implement the same operations.
 *
 * Checkpoints and logs read the model through host views (`params`, `stats`, `opt`), which
 * an engine brings up to date on request (sync_to_host) and reads back after a
 * checkpoint was loaded into them (sync_from_host). */
#ifndef DDPD_TRAINER_ENGINE_H
#define DDPD_TRAINER_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "collectives.h"
#include "idx.h"
#include "model.h"
#include "optim.h"
#include "run_config.h"

typedef struct engine engine;

typedef struct {
    /* Initialises the parameters (PyTorch's scheme, from `seed`) identically on
     * every rank: rank 0 draws them and broadcasts. Collective. */
    int (*init_params)(engine *e, uint64_t seed);
    /* One optimisation step with learning rate `lr` on this rank's batch shards
     * (comm->parts of them, comm->first_part first): shard j's examples are
     * `indices[j][0..rows[j])` of the training set. Forward and backward of each
     * shard on its own, the gradients averaged over all the run's shards (in shard
     * order, whatever the number of ranks, where the backend can:
     * reduce_scatter_parts_f32_ex), clipping, optimizer update. `global_step` (steps
     * done before this one) keys the dropout masks. *loss gets the batch loss
     * averaged over shards. Collective; -1 when the group was aborted. */
    int (*step)(engine *e, const size_t *const *indices, const int *rows, double lr, long global_step, double *loss);
    /* Sums over test examples [begin[j], end[j]) for j < ranges (this rank's batch
     * shards' parts of the test set): sums[2 j] loss, sums[2 j + 1] hits (batch norm
     * with running statistics, no dropout). Collective (per-rank batch norm
     * statistics: rank 0's are shared first, as in sync_to_host). */
    int (*evaluate)(engine *e, int ranges, const size_t *begin, const size_t *end, double *sums);
    /* Brings the host views (params, stats, opt) up to date. Collective: with
     * per-rank batch norm statistics, every rank gets rank 0's running statistics
     * (as DDP's broadcast_buffers), which evaluation then uses. */
    int (*sync_to_host)(engine *e);
    /* Takes the host views as the new state (after a checkpoint was loaded). Called
     * by every rank (it may be collective). */
    int (*sync_from_host)(engine *e);
    /* Where this rank's training steps spent their time since the last call, as one
     * line of "phase ms" per step into `out` ("" when no step ran), then counts
     * afresh. Optional: NULL where an engine does not time its steps. */
    void (*step_profile)(engine *e, char *out, size_t n);
    /* The device's memory in use now (by every process) and its total, for
     * heartbeats: 0, or -1 when the device cannot say. NULL where the engine has no
     * device memory of its own (cpu). */
    int (*device_memory)(engine *e, size_t *used, size_t *total);
    void (*destroy)(engine *e);
} engine_ops;

struct engine {
    const engine_ops *ops;
    char device[128];   /* "cpu", "cuda:0 NVIDIA H200", ... */
    model_shape shape;
    float *params;      /* host view of the parameters */
    float *stats;       /* host view of batch norm's running statistics (NULL when none) */
    optimizer opt;      /* host view of the optimizer state */
    coll_comm *comm;
    const run_config *cfg;
    void *impl;
};

typedef struct {
    const run_config *cfg;
    coll_comm *comm;
    const idx_dataset *train; /* NULL in eval mode */
    const idx_dataset *test;
    int max_rows;             /* the largest batch step() or evaluate() will get */
} engine_params;

/* NULL (and err) on failure. A rank makes its engine through backend_engine_create
 * (backend_select.h), which picks the one of its comm's backend. */
engine *engine_cpu_create(const engine_params *p, char *err, size_t errlen);
/* The shared arena each rank's cpu engine needs for a model of this shape. */
size_t engine_cpu_arena_bytes(const model_shape *s);

#endif
