/* The GPU memory plan of one rank: every device buffer the cuda engine will use,
 * computed before anything is allocated, so that a run that cannot fit fails
 * before training with a reason naming both numbers, and so that nothing is
 * allocated inside the training loop. The engine makes ONE cudaMalloc of
 * `arena_bytes` and carves the regions below out of it at their offsets: the plan
 * is not an estimate of the engine's allocations, it is their layout.
 *
 *   total = arena + collective staging + runtime reserve   (against the share)
 *   arena + margin                                        (against what is free)
 *   arena = params + grads (one buffer per batch shard the rank computes, each
 *           at memory_plan_grad_stride) + optimizer states (0, 1 or 2 x params)
 *         + batch norm's running statistics
 *         + activations (input, each layer's output, gelu's pre-activations,
 *           dropout masks and max-pool indices when training, batch norm's batch
 *           statistics, two gradient ping-pong buffers of the widest layer) for
 *           max_rows
 *         + the im2col chunk of the widest convolution (at most
 *           MEMORY_PLAN_IM2COL_BYTES: bigger batches are convolved in chunks)
 *         + with a logical width above 1 (several batch shards): the fixed-order
 *           reduce-scatter's scratch (width rows of a bucket's share), each shard's
 *           batch loss (width doubles) and, with several shards on the rank, the
 *           running statistics of shards past the first (never read)
 *         + reduction scratch (bias-gradient partials, per-channel partials and
 *           sums, per-row loss and hit, norm partials, scalars) + the batch
 *           (indices, labels, dropout keys)
 *         + the dataset (train and test images and labels, when resident) or a
 *           staging buffer of max_rows images (when it is not)
 *         + the cuBLAS workspace
 * Each region starts on a 256-byte boundary. Pure C (no CUDA), compiled always. */
#ifndef DDPD_TRAINER_MODEL_PLAN_MEMORY_PLAN_H
#define DDPD_TRAINER_MODEL_PLAN_MEMORY_PLAN_H

#include <stddef.h>

#include "model_shape.h"

#define MEMORY_PLAN_ALIGN 256
#define MEMORY_PLAN_CUBLAS_WORKSPACE (32u << 20)  /* cuBLAS's recommendation for Hopper */
#define MEMORY_PLAN_COLL_STAGING (4u << 20)       /* coll_nccl's device buffer for host collectives */
#define MEMORY_PLAN_RUNTIME_RESERVE (320u << 20)  /* CUDA context, cuBLAS and NCCL internals (estimate) */
#define MEMORY_PLAN_FREE_MARGIN (256u << 20)      /* left free on the device past the arena: what CUDA and
                                                     cuBLAS load on first use (kernels' modules, lazily) */
#define MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS 256      /* see k_bias_grad_cuda */
#define MEMORY_PLAN_NORM_BLOCKS 512               /* see clip_grad_norm_cuda */
#define MEMORY_PLAN_SCALARS 8                     /* doubles: step loss sum, hits, mean; eval sums */
#define MEMORY_PLAN_CHANNEL_CHUNKS 64             /* see k_channel_sums_cuda */
#define MEMORY_PLAN_IM2COL_BYTES (256u << 20)     /* the largest im2col chunk */

typedef struct {
    const model_shape *shape;
    int max_rows;          /* the largest batch step() or evaluate() gets */
    int train;             /* 1: gradients and optimizer state are needed; 0: eval mode */
    int n_opt_states;      /* 0 (plain SGD), 1 (SGD momentum), 2 (Adam, AdamW) */
    size_t pixels;         /* bytes of one example's image */
    size_t train_count;    /* examples in the training set (0 in eval mode) */
    size_t test_count;
    int width;             /* the run's logical width (batch shards); 0 or 1: one */
    int parts;             /* the batch shards this rank computes; 0 or 1: one */
} memory_plan_input;

typedef struct {
    size_t offset, bytes;
} memory_region;

typedef struct {
    memory_region params, grads, opt_state[2];
    memory_region stats;                   /* batch norm's running statistics */
    memory_region act[MODEL_MAX_LAYERS + 1]; /* act[0]: input; act[l+1]: layer l's output */
    memory_region pre[MODEL_MAX_LAYERS];     /* gelu only: hidden layer l's pre-activation */
    memory_region mask[MODEL_MAX_LAYERS];    /* dropout, training: one byte per element */
    memory_region argmax[MODEL_MAX_LAYERS];  /* max-pool, training: int32 per output */
    memory_region bn_mean[MODEL_MAX_LAYERS], bn_invstd[MODEL_MAX_LAYERS]; /* batch norm: floats per channel */
    memory_region dz[2];                   /* gradient ping-pong, max_rows x widest layer */
    memory_region im2col;                  /* conv2d: one chunk's patches */
    memory_region bias_partials;           /* MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS x widest layer floats */
    memory_region channel_partials;        /* 2 x MEMORY_PLAN_CHANNEL_CHUNKS x widest channels doubles */
    memory_region bn_sums;                 /* 2 x widest channels + 1 doubles */
    memory_region row_keys;                /* dropout: max_rows uint64 */
    memory_region row_loss, row_hit;       /* max_rows floats, max_rows ints */
    memory_region norm_partials;           /* MEMORY_PLAN_NORM_BLOCKS doubles */
    memory_region scalars;                 /* MEMORY_PLAN_SCALARS doubles */
    memory_region batch_indices;           /* max_rows uint64 */
    memory_region batch_labels;            /* max_rows bytes */
    memory_region train_images, train_labels, test_images, test_labels; /* resident data */
    memory_region stage_images;            /* max_rows images, when the data is not resident */
    memory_region cublas_workspace;
    memory_region parts_scratch;           /* width > 1: memory_plan_parts_scratch_floats floats */
    memory_region part_losses;             /* width > 1: width doubles */
    memory_region spare_stats;             /* parts > 1: n_stats floats */
    memory_region bn_shards;               /* sync batch norm, width > 1: memory_plan_bn_shards_doubles doubles */
    int data_resident;
    size_t arena_bytes;                    /* the one cudaMalloc */
    /* By kind, for the log and the refusal message. */
    size_t model_bytes, optimizer_bytes, activation_bytes, data_bytes, scratch_bytes;
    size_t coll_staging_bytes, runtime_reserve_bytes;
    size_t total_bytes;                    /* what the run needs on its GPU */
} memory_plan;

/* Sync batch norm over batch shards (width > 1): each sync point's totals (a batch
 * norm layer's forward, and its backward when it passes a gradient on: 2 x 2 C + 1
 * doubles at most) and the shards' sums gathered for one of them (width x 2 C + 1),
 * C the widest batch norm's channels; 0 when the model has no batch norm. */
size_t memory_plan_bn_shards_doubles(const model_shape *s, int width);
/* The sync points of a training step (as above), and *ld the doubles of each. */
int memory_plan_bn_points(const model_shape *s, size_t *ld);
/* Floats from one batch shard's gradients to the next's (whole 64-byte lines). */
size_t memory_plan_grad_stride(size_t n_params);
/* The fixed-order reduce-scatter's scratch for buckets of at most n floats: width
 * rows of the largest share a rank of `parts` shards can own (coll_part_share). */
size_t memory_plan_parts_scratch_floats(size_t n, int width, int parts);

/* Examples per im2col chunk of conv2d layer L on the GPU for batches of max_rows. */
int memory_plan_conv_chunk(const model_layer *L, int max_rows);

/* Lays out the plan. With `share_bytes` > 0 the dataset is kept resident when the
 * whole plan fits in the share, else staged batch by batch; 0 means resident. */
void memory_plan_compute(const memory_plan_input *in, size_t share_bytes, memory_plan *plan);

/* The share of a device the run may use: fraction x total, rounded down. */
size_t memory_plan_share(double gpu_memory_fraction, size_t device_total);

/* 0 when the plan fits both the share (gpu_memory_fraction of device_total: the
 * plan's total, its runtime reserve included) and the memory free now
 * (device_free, 0 = unknown): the arena and MEMORY_PLAN_FREE_MARGIN. device_free is
 * measured once the CUDA context, the collective staging buffer, cuBLAS's handle
 * and NCCL's connections exist (the engine makes them first), so none of those is
 * counted again. Else -1 and `why` says, e.g. "needs 3.1 GiB of GPU memory, its
 * share is 2.0 GiB (gpu_memory_fraction 0.25 of 8.0 GiB)", and what to change. */
int memory_plan_check(const memory_plan *plan, double gpu_memory_fraction, size_t device_total, size_t device_free,
                      char *why, size_t whylen);

/* "3.1 GiB", "412 MiB", "96 KiB". */
void memory_plan_format_bytes(size_t bytes, char *out, size_t outlen);

/* One line for the log: total and the big items. */
void memory_plan_describe(const memory_plan *plan, char *out, size_t outlen);

#endif
