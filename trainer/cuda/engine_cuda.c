/* The cuda engine: the twin of engine_cpu.c on one GPU. See engine.h.
 *
 * Memory: memory_plan.c lays out every device buffer before anything is
 * allocated; the plan is checked against gpu_memory_fraction of the device and
 * against what is free once cuBLAS and NCCL hold theirs (prepare_device), then ONE
 * cudaMalloc holds it all. Nothing is allocated after create().
 *
 * Data: the uint8 dataset is resident on the device when the plan allows (it
 * does for Fashion-MNIST: 47 MB); a step then copies only its indices (from
 * pinned memory, asynchronously) and a gather kernel builds the float batch.
 * Otherwise the batch's images are gathered on the host into pinned memory and
 * copied asynchronously. Either way the pinned buffers are reused only after the
 * event recorded behind their last copy (ev_staged) has passed.
 *
 * A step, on two streams (world_size > 1, or DDPD_NCCL_FORCE_COLLECTIVES=1):
 *   compute: indices -> gather -> forward -> softmax/loss -> [ev_loss_ready]
 *            -> backward, layer by layer from the last; after the last layer of
 *               each gradient bucket: [ev_bucket[k]]
 *            -> wait [ev_comm_done] -> clip -> optimizer
 *   comm:    wait ev_loss_ready -> all-reduce(sum) of the mean loss -> copy it
 *               to pinned memory -> [ev_loss_copied]
 *            -> for each bucket k: wait ev_bucket[k] -> all-reduce(avg) in place
 *            -> [ev_comm_done]
 * so the buckets' all-reduces run while backward computes the earlier layers, and
 * the optimizer starts only once every bucket is averaged. The host waits only for
 * ev_loss_copied (the step's loss), not for backward or the optimizer: it reports
 * and prepares the next batch while the GPU finishes the step. With one rank there
 * is nothing to average: the comm stream is not used and the loss is copied on the
 * compute stream (coll_nccl_collectives_on: a debug switch makes one rank take the
 * two-stream path). Every wait goes through coll_nccl_wait_* (the watchdog).
 *
 * Batch shards (a run's logical width, distributed.world_size, above 1): the rank
 * computes its comm->parts shards one after the other, each its own forward and
 * backward on its own rows (per-rank batch norm: each shard's own statistics; only
 * the first shard's running statistics are kept, the others' go to a spare buffer
 * that is never read, as on the cpu engine), shard j's gradients at d_grads + j *
 * grad_stride. Only the last shard's backward hands buckets over (the others' are
 * complete by then); each bucket is summed in shard order whatever the number of
 * ranks (coll_nccl_reduce_scatter_parts_device: an all-to-all and a fixed-order
 * sum), and its average all-gathered to every rank, so every rank clips and updates
 * the whole model from the same bits. Each shard's batch loss goes to its row of
 * d_part_losses; the rows (zeros but for a rank's own) are summed over ranks and
 * totalled on the host in shard order, as engine_cpu.c's total_over_shards does.
 * The weights then do not depend on how many GPUs hold the shards. Sync batch norm
 * with batch shards totals each batch norm's sums (forward, and backward where it
 * passes a gradient on) over every shard of the run in shard order, as engine_cpu.c's
 * total_over_shards does (shard_sums): each shard's sums into its row of a width-row
 * buffer, zeros elsewhere, summed over ranks (exact: one value and zeros), then a
 * fixed-order sum (k_parts_sum_f64_cuda). With one shard per GPU that happens as the
 * pass reaches the point. With several, the shards share one workspace and cannot
 * wait for each other mid-pass: before the step's passes, each sync point in turn
 * has every shard run up to it (from the start, its earlier points taking the totals
 * already made) and leave its sums there; the step's passes then take every total.
 * That costs about 2K + 1 passes a shard for K batch norm layers (no more memory
 * than a shard's own), and gives the bits of any number of GPUs holding the shards.
 *
 * Batch norm (cnn): with sync statistics, the per-channel sums go to the comm stream
 * for an all-reduce in the middle of forward and backward, and the compute stream
 * waits for it (ev_sync_ready, ev_sync_done); with per-rank statistics, rank 0's
 * running statistics are broadcast before evaluation and checkpoints, as on the
 * cpu engine. Dropout: the host makes each row's key (rng_dropout_row_key) and
 * copies them with the batch's indices. */
#include "engine_cuda.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coll_nccl.h"
#include "cuda_check.h"
#include "gpu_versions.h"
#include "grad_buckets.h"
#include "kernels.h"
#include "log.h"
#include "memory_plan.h"
#include "model_cuda.h"
#include "optim_cuda.h"
#include "rng.h"

#define PIXEL_SCALE (1.0f / 255.0f) /* as engine_cpu.c */

/* The scalars region (doubles): [0..2] the step's loss sum, hits and mean
 * (k_loss_reduce_cuda), [3] the gradient norm squared, [4..5] evaluation sums. */
#define SC_STEP 0
#define SC_NORM 3
#define SC_EVAL 4

typedef struct {
    engine pub;
    const idx_dataset *train, *test;
    memory_plan plan;
    char *arena;
    float *d_params, *d_grads, *d_state[2], *d_stats;
    double *d_scalars, *d_norm_partials;
    uint64_t *d_indices, *d_row_keys;
    uint8_t *d_labels, *d_train_images, *d_train_labels, *d_test_images, *d_test_labels, *d_stage;
    model_cuda net;
    cudaStream_t stream; /* compute */
    cublasHandle_t blas;
    cudaEvent_t ev_staged, ev_loss_ready, ev_loss_copied, ev_comm_done, ev_eval, ev_sync_ready, ev_sync_done;
    cudaEvent_t ev_bucket[MODEL_MAX_LAYERS];
    uint64_t *pinned_indices, *pinned_row_keys;
    uint8_t *pinned_images, *pinned_labels;
    double *pinned_scalars;
    grad_buckets buckets; /* launched by bucket_ready as backward completes them */
    /* batch shards (see above): fixed is width > 1 */
    int parts, fixed;
    size_t grad_stride;
    float *d_spare_stats, *d_parts_scratch;
    double *d_part_losses, *pinned_part_losses;
    /* sync batch norm with batch shards (shard_sums): each sync point's totals, and the
     * shards' sums gathered for one point (width rows of bn_n) */
    double *d_bn_points, *d_bn_stage;
    size_t bn_ld, bn_n;    /* the doubles of a point's totals (at most); the gathered point's */
    int bn_points;         /* sync points a training pass goes through */
    int bn_rounds;         /* several shards on some GPU: each point gathered before the step's passes */
    int bn_target;         /* the point whose shards' sums a pass gathers (-1: every total made) */
    int bn_seen, bn_part;  /* points the pass went through; the shard it computes (of this rank's) */
    gpu_error ge;
} cuda_engine;

/* Hands the recorded CUDA failure to the comm (the rank reports it) and returns -1. */
static int fail(cuda_engine *c) {
    if (c->ge.msg[0]) coll_nccl_set_failure(c->pub.comm, c->ge.msg);
    return -1;
}

static void *region(cuda_engine *c, memory_region r) { return r.bytes ? c->arena + r.offset : NULL; }

/* Host <-> device copies outside the step (setup, checkpoints): on the compute
 * stream, then waited for, so they are complete when this returns. The stream is
 * drained first (a watched wait): a copy to pageable memory would otherwise block
 * inside cudaMemcpyAsync, behind earlier work, where the watchdog cannot see it. */
static int copy_and_wait(cuda_engine *c, void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    if (bytes == 0) return 0;
    if (coll_nccl_wait_stream(c->pub.comm, c->stream, "the GPU's work before a copy") != 0) return -1;
    CUDA_TRY(&c->ge, cudaMemcpyAsync(dst, src, bytes, kind, c->stream));
    return coll_nccl_wait_stream(c->pub.comm, c->stream, "a copy between host and GPU");
}

static int cuda_init_params(engine *e, uint64_t seed) {
    cuda_engine *c = (cuda_engine *)e;
    size_t bytes = sizeof(float) * e->shape.n_params, stat_bytes = sizeof(float) * e->shape.n_stats;
    if (e->comm->rank == 0) {
        model_init_params(&e->shape, e->params, e->stats, seed);
        if (copy_and_wait(c, c->d_params, e->params, bytes, cudaMemcpyHostToDevice) != 0 ||
            copy_and_wait(c, c->d_stats, e->stats, stat_bytes, cudaMemcpyHostToDevice) != 0)
            return fail(c);
    }
    if (!coll_nccl_collectives_on(e->comm)) return 0;
    if (coll_nccl_broadcast_device(e->comm, c->d_params, bytes, 0, NULL) != 0) return -1;
    if (stat_bytes && coll_nccl_broadcast_device(e->comm, c->d_stats, stat_bytes, 0, NULL) != 0) return -1;
    return coll_nccl_wait_stream(e->comm, coll_nccl_stream(e->comm), "the broadcast of the initial parameters");
}

/* model_cuda_pass.allreduce_sum (sync batch norm): the sums go through the comm
 * stream, after the compute stream's work so far; the compute stream waits. */
static int sum_over_ranks(void *arg, double *dbuf, size_t n) {
    cuda_engine *c = arg;
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_sync_ready, c->stream));
    if (coll_nccl_allreduce_sum_f64_device(c->pub.comm, dbuf, n, c->ev_sync_ready) != 0) return -1;
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_sync_done, coll_nccl_stream(c->pub.comm)));
    CUDA_TRY(&c->ge, cudaStreamWaitEvent(c->stream, c->ev_sync_done, 0));
    return 0;
}

/* The totals of a sync point over every shard of the run, into out (n doubles): the
 * shards' rows gathered in d_bn_stage (this rank's written, zeros elsewhere) summed
 * over ranks, then in shard order (k_parts_sum_f64_cuda). */
static int gather_totals(cuda_engine *c, size_t n, double *out) {
    coll_comm *comm = c->pub.comm;
    if (coll_nccl_collectives_on(comm) && sum_over_ranks(c, c->d_bn_stage, (size_t)comm->width * n) != 0) return -1;
    CUDA_TRY(&c->ge, k_parts_sum_f64_cuda(out, c->d_bn_stage, n, n, comm->width, c->stream));
    return 0;
}

/* model_cuda_pass.allreduce_sum for sync batch norm with batch shards (width > 1):
 * dbuf (shard bn_part's sums at the pass's next sync point) <- their totals over every
 * shard. A point before bn_target (or any, bn_target -1) takes the totals made; at
 * bn_target the shard's sums go to its row of d_bn_stage, and then with several shards
 * per GPU the pass stops (1: gather_rounds), with one the totals are made at once. */
static int shard_sums(void *arg, double *dbuf, size_t n) {
    cuda_engine *c = arg;
    coll_comm *comm = c->pub.comm;
    int p = c->bn_seen++;
    if (p >= c->bn_points || n > c->bn_ld) {
        gpu_error_set(&c->ge, "sync batch norm: a pass reached sync point %d of %zu doubles (planned: %d of %zu)", p, n,
                      c->bn_points, c->bn_ld);
        return -1;
    }
    double *total = c->d_bn_points + (size_t)p * c->bn_ld;
    if (c->bn_target < 0 || p < c->bn_target) {
        CUDA_TRY(&c->ge, cudaMemcpyAsync(dbuf, total, n * sizeof(double), cudaMemcpyDeviceToDevice, c->stream));
        return 0;
    }
    if (!c->bn_rounds) /* one shard here: its row alone, the other shards' rows zeros */
        CUDA_TRY(&c->ge, cudaMemsetAsync(c->d_bn_stage, 0, (size_t)comm->width * n * sizeof(double), c->stream));
    CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_bn_stage + (size_t)(comm->first_part + c->bn_part) * n, dbuf,
                                     n * sizeof(double), cudaMemcpyDeviceToDevice, c->stream));
    c->bn_n = n;
    if (c->bn_rounds) return 1;
    if (gather_totals(c, n, total) != 0) return -1;
    c->bn_target++;
    CUDA_TRY(&c->ge, cudaMemcpyAsync(dbuf, total, n * sizeof(double), cudaMemcpyDeviceToDevice, c->stream));
    return 0;
}

/* Per-rank batch norm: every rank takes rank 0's running statistics (device). */
static int share_rank0_stats(cuda_engine *c) {
    engine *e = &c->pub;
    if (!e->shape.n_stats || e->shape.sync_bn || !coll_nccl_collectives_on(e->comm)) return 0;
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_sync_ready, c->stream));
    if (coll_nccl_broadcast_device(e->comm, c->d_stats, sizeof(float) * e->shape.n_stats, 0, c->ev_sync_ready) != 0)
        return -1;
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_sync_done, coll_nccl_stream(e->comm)));
    CUDA_TRY(&c->ge, cudaStreamWaitEvent(c->stream, c->ev_sync_done, 0));
    return 0;
}

/* Dropout: each row's key, next to the batch's indices (before ev_staged). */
static int stage_row_keys(cuda_engine *c, const size_t *indices, int rows, long global_step) {
    if (!indices || !c->d_row_keys) return 0;
    for (int i = 0; i < rows; i++)
        c->pinned_row_keys[i] = rng_dropout_row_key(c->pub.cfg->seed, (uint64_t)global_step, (uint64_t)indices[i]);
    CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_row_keys, c->pinned_row_keys, sizeof(uint64_t) * (size_t)rows,
                                     cudaMemcpyHostToDevice, c->stream));
    return 0;
}

/* Puts `rows` examples of `d` (indices[i], or first + i when indices is NULL)
 * into the input activations and the batch labels, as floats in [0, 1]. */
static int stage_batch(cuda_engine *c, const idx_dataset *d, const size_t *indices, size_t first, int rows,
                       long global_step) {
    size_t pixels = (size_t)d->rows * d->cols;
    /* The pinned buffers may be rewritten once the copy out of them has finished. */
    if (coll_nccl_wait_event(c->pub.comm, c->ev_staged, "a copy of a batch to the GPU") != 0) return -1;
    if (stage_row_keys(c, indices, rows, global_step) != 0) return -1;
    if (c->plan.data_resident) {
        int train = d == c->train;
        const uint64_t *d_indices = NULL;
        if (indices) {
            for (int i = 0; i < rows; i++) c->pinned_indices[i] = (uint64_t)indices[i];
            CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_indices, c->pinned_indices, sizeof(uint64_t) * (size_t)rows,
                                             cudaMemcpyHostToDevice, c->stream));
            CUDA_TRY(&c->ge, cudaEventRecord(c->ev_staged, c->stream));
            d_indices = c->d_indices;
        }
        CUDA_TRY(&c->ge, k_u8_to_f32_gather_cuda(c->net.act[0], c->d_labels,
                                                 train ? c->d_train_images : c->d_test_images,
                                                 train ? c->d_train_labels : c->d_test_labels, d_indices, first, rows,
                                                 pixels, PIXEL_SCALE, c->stream));
        return 0;
    }
    for (int i = 0; i < rows; i++) {
        size_t k = indices ? indices[i] : first + (size_t)i;
        memcpy(c->pinned_images + (size_t)i * pixels, d->images + k * pixels, pixels);
        c->pinned_labels[i] = d->labels[k];
    }
    CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_stage, c->pinned_images, pixels * (size_t)rows, cudaMemcpyHostToDevice,
                                     c->stream));
    CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_labels, c->pinned_labels, (size_t)rows, cudaMemcpyHostToDevice, c->stream));
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_staged, c->stream));
    CUDA_TRY(&c->ge, k_u8_to_f32_gather_cuda(c->net.act[0], NULL, c->d_stage, NULL, NULL, 0, rows, pixels, PIXEL_SCALE,
                                             c->stream));
    return 0;
}

/* bucket_ready_fn (grad_buckets.h), called by grad_buckets_layer_ready as soon as
 * backward has enqueued a bucket's last layer: an event on the compute stream,
 * and the comm stream's all-reduce (average, in place) behind it. */
static int bucket_ready(void *arg, const grad_bucket *b) {
    cuda_engine *c = arg;
    coll_comm *comm = c->pub.comm;
    if (!c->fixed && !coll_nccl_collectives_on(comm)) return 0; /* nothing to average */
    int k = (int)(b - c->buckets.bucket); /* which bucket: its event */
    if (gpu_check_cuda(&c->ge, cudaEventRecord(c->ev_bucket[k], c->stream), "cudaEventRecord") != 0) return -1;
    size_t n = b->end - b->begin;
    if (!c->fixed) return coll_nccl_allreduce_avg_device(comm, c->d_grads + b->begin, n, c->ev_bucket[k]);
    if (coll_nccl_reduce_scatter_parts_device(comm, c->d_grads + b->begin, c->grad_stride, n, c->d_parts_scratch,
                                              c->ev_bucket[k]) != 0)
        return -1;
    return coll_nccl_allgather_parts_device(comm, c->d_grads + b->begin, n);
}

/* The step's loss, on the comm stream once forward is done (ev_loss_ready) into
 * pinned memory [ev_loss_copied]: with batch shards, every shard's row of
 * d_part_losses summed over ranks (the host totals them in shard order); else the
 * sum over ranks of the ranks' means. */
static int enqueue_loss(cuda_engine *c, const double *sc) {
    coll_comm *comm = c->pub.comm;
    cudaStream_t comm_stream = coll_nccl_stream(comm);
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_loss_ready, c->stream));
    if (c->fixed) {
        if (coll_nccl_allreduce_sum_f64_device(comm, c->d_part_losses, (size_t)comm->width, c->ev_loss_ready) != 0)
            return -1;
        CUDA_TRY(&c->ge, cudaMemcpyAsync(c->pinned_part_losses, c->d_part_losses, sizeof(double) * (size_t)comm->width,
                                         cudaMemcpyDeviceToHost, comm_stream));
    } else {
        if (coll_nccl_allreduce_sum_f64_device(comm, (double *)sc + 2, 1, c->ev_loss_ready) != 0) return -1;
        CUDA_TRY(&c->ge, cudaMemcpyAsync(c->pinned_scalars + SC_STEP, sc, 3 * sizeof(double), cudaMemcpyDeviceToHost,
                                         comm_stream));
    }
    CUDA_TRY(&c->ge, cudaEventRecord(c->ev_loss_copied, comm_stream));
    return 0;
}

/* Sync batch norm with several shards on some GPU (bn_rounds): each sync point's
 * totals in turn, before the step's passes: every shard of this rank runs from the
 * start to the point (its running statistics into the spare buffer, its gradients
 * written again by the step's pass), leaves its sums in its row, and stops there. */
static int gather_rounds(cuda_engine *c, const size_t *const *part_indices, const int *part_rows, long global_step,
                         const model_cuda_pass *pass) {
    double *sc = c->d_scalars + SC_STEP;
    for (int p = 0; p < c->bn_points; p++) {
        CUDA_TRY(&c->ge, cudaMemsetAsync(c->d_bn_stage, 0, (size_t)c->pub.comm->width * c->bn_ld * sizeof(double),
                                         c->stream));
        c->bn_target = p;
        for (int j = 0; j < c->parts; j++) {
            c->bn_seen = 0;
            c->bn_part = j;
            if (stage_batch(c, c->train, part_indices[j], 0, part_rows[j], global_step) != 0) return -1;
            int rc = model_loss_cuda(&c->net, c->d_params, c->d_spare_stats, c->d_labels, part_rows[j], 1, sc, 0, pass);
            if (rc == 0)
                rc = model_backward_cuda(&c->net, c->d_params, c->d_grads + (size_t)j * c->grad_stride, part_rows[j],
                                         pass, NULL, NULL);
            if (rc == 0)
                gpu_error_set(&c->ge, "sync batch norm: batch shard %d's pass ended before sync point %d",
                              c->pub.comm->first_part + j, p);
            if (rc != 1) return -1;
        }
        if (gather_totals(c, c->bn_n, c->d_bn_points + (size_t)p * c->bn_ld) != 0) return -1;
    }
    return 0;
}

/* One step: each of this rank's batch shards' forward and backward, the buckets
 * reduced as the last shard's backward completes them, then clipping and the
 * optimizer. */
static int enqueue_step(cuda_engine *c, const size_t *const *part_indices, const int *part_rows, double lr,
                        long global_step) {
    engine *e = &c->pub;
    coll_comm *comm = e->comm;
    double *sc = c->d_scalars + SC_STEP;
    model_cuda_pass pass = {.train = 1, .row_keys = c->d_row_keys};
    int collectives = coll_nccl_collectives_on(comm), two_streams = collectives || c->fixed;
    if (e->shape.sync_bn && c->fixed) pass.allreduce_sum = shard_sums, pass.allreduce_arg = c;
    else if (e->shape.sync_bn && collectives) pass.allreduce_sum = sum_over_ranks, pass.allreduce_arg = c;
    if (c->fixed) /* the other shards' rows: zeros, summed over ranks with everyone's own */
        CUDA_TRY(&c->ge, cudaMemsetAsync(c->d_part_losses, 0, sizeof(double) * (size_t)comm->width, c->stream));
    if (e->shape.sync_bn && c->bn_rounds && gather_rounds(c, part_indices, part_rows, global_step, &pass) != 0)
        return -1;
    c->bn_target = c->bn_rounds ? -1 : 0; /* every total made; or made as each point comes */
    grad_buckets_begin(&c->buckets);
    for (int j = 0; j < c->parts; j++) {
        int last = j == c->parts - 1, rows = part_rows[j];
        c->bn_seen = 0;
        c->bn_part = j;
        if (stage_batch(c, c->train, part_indices[j], 0, rows, global_step) != 0) return -1;
        if (model_loss_cuda(&c->net, c->d_params, j ? c->d_spare_stats : c->d_stats, c->d_labels, rows, 1, sc, 0,
                            &pass) != 0)
            return -1;
        if (c->fixed) /* the shard's batch mean into its row */
            CUDA_TRY(&c->ge, cudaMemcpyAsync(c->d_part_losses + comm->first_part + j, sc + 2, sizeof(double),
                                             cudaMemcpyDeviceToDevice, c->stream));
        if (last && two_streams && enqueue_loss(c, sc) != 0) return -1;
        if (last && !two_streams) {
            CUDA_TRY(&c->ge, cudaMemcpyAsync(c->pinned_scalars + SC_STEP, sc, 3 * sizeof(double),
                                             cudaMemcpyDeviceToHost, c->stream));
            CUDA_TRY(&c->ge, cudaEventRecord(c->ev_loss_copied, c->stream));
        }
        if (model_backward_cuda(&c->net, c->d_params, c->d_grads + (size_t)j * c->grad_stride, rows, &pass,
                                last ? grad_buckets_layer_ready : NULL, &c->buckets) != 0 ||
            c->buckets.failed)
            return -1;
    }
    if (two_streams) {
        CUDA_TRY(&c->ge, cudaEventRecord(c->ev_comm_done, coll_nccl_stream(comm)));
        CUDA_TRY(&c->ge, cudaStreamWaitEvent(c->stream, c->ev_comm_done, 0));
    }
    size_t n = e->shape.n_params;
    if (e->cfg->train.grad_clip_norm > 0 &&
        clip_grad_norm_cuda_step(c->d_grads, n, e->cfg->train.grad_clip_norm, c->d_norm_partials,
                                 c->d_scalars + SC_NORM, c->stream, &c->ge) != 0)
        return -1;
    return optimizer_step_cuda(&e->opt, c->d_params, c->d_grads, c->d_state[0], c->d_state[1], lr, c->stream, &c->ge);
}

static int cuda_step(engine *e, const size_t *const *part_indices, const int *part_rows, double lr, long global_step,
                     double *loss) {
    cuda_engine *c = (cuda_engine *)e;
    for (int j = 0; j < c->parts; j++)
        if (part_rows[j] < 1 || part_rows[j] > c->net.max_rows) {
            gpu_error_set(&c->ge, "a step of %d rows in batch shard %d (the engine was planned for 1 to %d)",
                          part_rows[j], e->comm->first_part + j, c->net.max_rows);
            return fail(c);
        }
    if (enqueue_step(c, part_indices, part_rows, lr, global_step) != 0) return fail(c);
    if (coll_nccl_wait_event(e->comm, c->ev_loss_copied, "a training step") != 0) return -1;
    if (!c->fixed) {
        *loss = c->pinned_scalars[SC_STEP + 2] / e->comm->world_size;
        return 0;
    }
    /* the shards' batch means in shard order, as engine_cpu.c's total_over_shards (a
     * + 0.0 each: a zero's sign never depends on a peer's zero added to it) */
    int width = e->comm->width;
    double t = c->pinned_part_losses[0] + 0.0;
    for (int k = 1; k < width; k++) t += c->pinned_part_losses[k] + 0.0;
    *loss = t / width;
    return 0;
}

static int evaluate_range(engine *e, size_t begin, size_t end, double sums[2]) {
    cuda_engine *c = (cuda_engine *)e;
    double *acc = c->d_scalars + SC_EVAL;
    size_t max_rows = (size_t)c->net.max_rows;
    model_cuda_pass eval = {.train = 0};
    if (gpu_check_cuda(&c->ge, cudaMemsetAsync(acc, 0, 2 * sizeof(double), c->stream), "cudaMemsetAsync") != 0)
        return fail(c);
    for (size_t i = begin; i < end; i += max_rows) {
        int rows = (int)(end - i < max_rows ? end - i : max_rows);
        if (stage_batch(c, c->test, NULL, i, rows, 0) != 0 ||
            model_loss_cuda(&c->net, c->d_params, c->d_stats, c->d_labels, rows, 0, acc, 1, &eval) != 0)
            return fail(c);
    }
    if (gpu_check_cuda(&c->ge,
                       cudaMemcpyAsync(c->pinned_scalars + SC_EVAL, acc, 2 * sizeof(double), cudaMemcpyDeviceToHost,
                                       c->stream),
                       "cudaMemcpyAsync") != 0 ||
        gpu_check_cuda(&c->ge, cudaEventRecord(c->ev_eval, c->stream), "cudaEventRecord") != 0)
        return fail(c);
    if (coll_nccl_wait_event(e->comm, c->ev_eval, "an evaluation") != 0) return -1;
    sums[0] += c->pinned_scalars[SC_EVAL];
    sums[1] += c->pinned_scalars[SC_EVAL + 1];
    return 0;
}

static int cuda_evaluate(engine *e, int ranges, const size_t *begin, const size_t *end, double *sums) {
    if (share_rank0_stats((cuda_engine *)e) != 0) return fail((cuda_engine *)e);
    for (int j = 0; j < ranges; j++)
        if (evaluate_range(e, begin[j], end[j], sums + 2 * j) != 0) return -1;
    return 0;
}

static int cuda_sync_to_host(engine *e) {
    cuda_engine *c = (cuda_engine *)e;
    size_t bytes = sizeof(float) * e->shape.n_params;
    if (share_rank0_stats(c) != 0) return fail(c);
    if (copy_and_wait(c, e->params, c->d_params, bytes, cudaMemcpyDeviceToHost) != 0 ||
        copy_and_wait(c, e->stats, c->d_stats, sizeof(float) * e->shape.n_stats, cudaMemcpyDeviceToHost) != 0)
        return fail(c);
    float *host_state[2] = {e->opt.state1, e->opt.state2};
    for (int k = 0; k < 2; k++)
        if (c->d_state[k] && host_state[k] &&
            copy_and_wait(c, host_state[k], c->d_state[k], bytes, cudaMemcpyDeviceToHost) != 0)
            return fail(c);
    return 0;
}

/* Across nodes only rank 0's host loaded the checkpoint (it holds the run's
 * checkpoints): the other ranks take rank 0's host views first. */
static int cuda_sync_from_host(engine *e) {
    cuda_engine *c = (cuda_engine *)e;
    size_t bytes = sizeof(float) * e->shape.n_params;
    coll_comm *m = e->comm;
    float *views[4] = {e->params, e->stats, e->opt.state1, e->opt.state2};
    size_t sizes[4] = {bytes, sizeof(float) * e->shape.n_stats, bytes, bytes};
    for (int k = 0; m->nodes > 1 && k < 4; k++)
        if (views[k] && sizes[k] && m->broadcast(m, views[k], sizes[k], 0) != 0) return fail(c);
    if (m->nodes > 1 && m->broadcast(m, &e->opt.step, sizeof e->opt.step, 0) != 0) return fail(c);
    if (copy_and_wait(c, c->d_params, e->params, bytes, cudaMemcpyHostToDevice) != 0 ||
        copy_and_wait(c, c->d_stats, e->stats, sizeof(float) * e->shape.n_stats, cudaMemcpyHostToDevice) != 0)
        return fail(c);
    float *host_state[2] = {e->opt.state1, e->opt.state2};
    for (int k = 0; k < 2; k++)
        if (c->d_state[k] && host_state[k] &&
            copy_and_wait(c, c->d_state[k], host_state[k], bytes, cudaMemcpyHostToDevice) != 0)
            return fail(c);
    return 0;
}

static void cuda_destroy(engine *e) {
    cuda_engine *c = (cuda_engine *)e;
    if (c->stream) cudaStreamSynchronize(c->stream);
    cudaEvent_t *events[] = {&c->ev_staged,   &c->ev_loss_ready,  &c->ev_loss_copied, &c->ev_comm_done,
                             &c->ev_eval,     &c->ev_sync_ready,  &c->ev_sync_done};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        if (*events[i]) cudaEventDestroy(*events[i]);
    for (int k = 0; k < MODEL_MAX_LAYERS; k++)
        if (c->ev_bucket[k]) cudaEventDestroy(c->ev_bucket[k]);
    if (c->blas) cublasDestroy(c->blas);
    if (c->stream) cudaStreamDestroy(c->stream);
    cudaFree(c->arena);
    cudaFreeHost(c->pinned_indices);
    cudaFreeHost(c->pinned_images);
    cudaFreeHost(c->pinned_labels);
    cudaFreeHost(c->pinned_scalars);
    cudaFreeHost(c->pinned_row_keys);
    cudaFreeHost(c->pinned_part_losses);
    optimizer_free(&e->opt);
    free(e->params);
    free(e->stats);
    free(c);
}

static int cuda_device_memory(engine *e, size_t *used, size_t *total) {
    size_t free_b = 0, total_b = 0;
    (void)e;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return -1;
    *used = total_b - free_b;
    *total = total_b;
    return 0;
}

int engine_cuda_data_resident(const engine *e) { return ((const cuda_engine *)e)->plan.data_resident; }

static const engine_ops cuda_ops = {
    .init_params = cuda_init_params,
    .step = cuda_step,
    .evaluate = cuda_evaluate,
    .sync_to_host = cuda_sync_to_host,
    .sync_from_host = cuda_sync_from_host,
    .device_memory = cuda_device_memory,
    .destroy = cuda_destroy,
};

/* What takes device memory outside the plan's arena, made before the plan is
 * checked against what is free: the compute stream, cuBLAS's handle, and NCCL's
 * connections (made at init, NCCL_RUNTIME_CONNECT=0; a first collective makes any
 * that are still lazy). The comm's staging buffer is already allocated. Rank 0
 * logs the versions the run stands on. */
static int prepare_device(cuda_engine *c, char *err, size_t errlen) {
    gpu_error *ge = &c->ge;
    coll_comm *comm = c->pub.comm;
    if (gpu_check_cuda(ge, cudaStreamCreateWithFlags(&c->stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags") ||
        gpu_check_cublas(ge, cublasCreate(&c->blas), "cublasCreate") ||
        gpu_check_cublas(ge, cublasSetStream(c->blas, c->stream), "cublasSetStream")) {
        snprintf(err, errlen, "%s: %s", c->pub.device, ge->msg);
        return -1;
    }
    if (comm->barrier(comm) != 0) {
        snprintf(err, errlen, "%s: the first collective failed: %s", c->pub.device, coll_nccl_failure(comm));
        return -1;
    }
    if (comm->rank == 0) {
        gpu_versions v;
        char line[256];
        gpu_versions_get(&v);
        gpu_versions_describe(&v, line, sizeof line);
        log_msg(LOG_INFO, "GPU software: %s", line);
    }
    return 0;
}

/* Plans the memory and checks it against the device: 0, or -1 with the reason. */
static int plan_memory(cuda_engine *c, const engine_params *p, char *err, size_t errlen) {
    engine *e = &c->pub;
    size_t free_b = 0, total_b = 0;
    if (gpu_check_cuda(&c->ge, cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo") != 0) {
        snprintf(err, errlen, "%s", c->ge.msg);
        return -1;
    }
    const idx_dataset *d = p->test;
    const run_config *cfg = p->cfg;
    memory_plan_input in = {
        .shape = &e->shape,
        .max_rows = p->max_rows,
        .train = p->train != NULL,
        .n_opt_states = optimizer_state_count(cfg),
        .pixels = (size_t)d->rows * d->cols,
        .train_count = p->train ? p->train->count : 0,
        .test_count = d->count,
        .width = e->comm->width,
        .parts = e->comm->parts,
    };
    double fraction = cfg->distributed.gpu_memory_fraction;
    memory_plan_compute(&in, memory_plan_share(fraction, total_b), &c->plan);
    char why[512], line[512];
    if (memory_plan_check(&c->plan, fraction, total_b, free_b, why, sizeof why) != 0) {
        snprintf(err, errlen, "%s: %s", e->device, why);
        return -1;
    }
    memory_plan_describe(&c->plan, line, sizeof line);
    if (e->comm->rank == 0) log_msg(LOG_INFO, "%s", line);
    return 0;
}

/* Points every device buffer into the arena, as the plan laid it out. */
static void carve(cuda_engine *c) {
    memory_plan *pl = &c->plan;
    const model_shape *s = &c->pub.shape;
    c->d_params = region(c, pl->params);
    c->d_stats = region(c, pl->stats);
    c->d_spare_stats = region(c, pl->spare_stats);
    c->d_parts_scratch = region(c, pl->parts_scratch);
    c->d_part_losses = region(c, pl->part_losses);
    c->d_bn_points = region(c, pl->bn_shards);
    c->d_bn_stage = c->d_bn_points ? c->d_bn_points + (size_t)c->bn_points * c->bn_ld : NULL;
    c->d_row_keys = region(c, pl->row_keys);
    c->d_grads = region(c, pl->grads);
    c->d_state[0] = region(c, pl->opt_state[0]);
    c->d_state[1] = region(c, pl->opt_state[1]);
    c->d_scalars = region(c, pl->scalars);
    c->d_norm_partials = region(c, pl->norm_partials);
    c->d_indices = region(c, pl->batch_indices);
    c->d_labels = region(c, pl->batch_labels);
    c->d_train_images = region(c, pl->train_images);
    c->d_train_labels = region(c, pl->train_labels);
    c->d_test_images = region(c, pl->test_images);
    c->d_test_labels = region(c, pl->test_labels);
    c->d_stage = region(c, pl->stage_images);
    model_cuda *m = &c->net;
    for (int l = 0; l <= s->n_layers; l++) m->act[l] = region(c, pl->act[l]);
    for (int l = 0; l < s->n_layers; l++) {
        m->pre[l] = region(c, pl->pre[l]);
        m->mask[l] = region(c, pl->mask[l]);
        m->argmax[l] = region(c, pl->argmax[l]);
        m->bn_mean[l] = region(c, pl->bn_mean[l]);
        m->bn_invstd[l] = region(c, pl->bn_invstd[l]);
    }
    m->dz = region(c, pl->dz[0]);
    m->dz_next = region(c, pl->dz[1]);
    m->col = region(c, pl->im2col);
    m->bias_partials = region(c, pl->bias_partials);
    m->channel_partials = region(c, pl->channel_partials);
    m->bn_sums = region(c, pl->bn_sums);
    m->row_loss = region(c, pl->row_loss);
    m->row_hit = region(c, pl->row_hit);
}

/* The arena, cuBLAS's settings, events, pinned buffers, and the resident dataset. */
static int setup_device(cuda_engine *c, const engine_params *p) {
    gpu_error *ge = &c->ge;
    const run_config *cfg = p->cfg;
    size_t rows = (size_t)p->max_rows;
    CUDA_TRY(ge, cudaMalloc((void **)&c->arena, c->plan.arena_bytes));
    carve(c);
    /* Our own workspace (in the plan): no allocation by cuBLAS later, and GEMMs
     * that are deterministic on one stream. */
    CUBLAS_TRY(ge, cublasSetWorkspace(c->blas, region(c, c->plan.cublas_workspace), c->plan.cublas_workspace.bytes));
    CUBLAS_TRY(ge, cublasSetMathMode(c->blas, cfg->distributed.allow_tf32 ? CUBLAS_TF32_TENSOR_OP_MATH
                                                                          : CUBLAS_DEFAULT_MATH));
    cudaEvent_t *events[] = {&c->ev_staged,   &c->ev_loss_ready,  &c->ev_loss_copied, &c->ev_comm_done,
                             &c->ev_eval,     &c->ev_sync_ready,  &c->ev_sync_done};
    for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
        CUDA_TRY(ge, cudaEventCreateWithFlags(events[i], cudaEventDisableTiming));
    for (int k = 0; k < c->buckets.n_buckets; k++)
        CUDA_TRY(ge, cudaEventCreateWithFlags(&c->ev_bucket[k], cudaEventDisableTiming));
    CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_indices, sizeof(uint64_t) * rows));
    CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_scalars, sizeof(double) * MEMORY_PLAN_SCALARS));
    if (c->d_row_keys) CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_row_keys, sizeof(uint64_t) * rows));
    if (c->fixed)
        CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_part_losses, sizeof(double) * (size_t)p->comm->width));
    if (!c->plan.data_resident) {
        size_t pixels = (size_t)p->test->rows * p->test->cols;
        CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_images, pixels * rows));
        CUDA_TRY(ge, cudaMallocHost((void **)&c->pinned_labels, rows));
    }
    model_cuda *m = &c->net;
    m->shape = &c->pub.shape;
    m->max_rows = p->max_rows;
    m->stream = c->stream;
    m->blas = c->blas;
    m->ge = ge;

    CUDA_TRY(ge, cudaMemsetAsync(c->arena, 0, c->plan.arena_bytes, c->stream)); /* optimizer state starts at zero */
    if (c->plan.data_resident) {
        const idx_dataset *d = p->test;
        size_t pixels = (size_t)d->rows * d->cols;
        if (p->train) {
            CUDA_TRY(ge, cudaMemcpyAsync(c->d_train_images, p->train->images, p->train->count * pixels,
                                         cudaMemcpyHostToDevice, c->stream));
            CUDA_TRY(ge, cudaMemcpyAsync(c->d_train_labels, p->train->labels, p->train->count, cudaMemcpyHostToDevice,
                                         c->stream));
        }
        CUDA_TRY(ge, cudaMemcpyAsync(c->d_test_images, d->images, d->count * pixels, cudaMemcpyHostToDevice, c->stream));
        CUDA_TRY(ge, cudaMemcpyAsync(c->d_test_labels, d->labels, d->count, cudaMemcpyHostToDevice, c->stream));
    }
    return coll_nccl_wait_stream(p->comm, c->stream, "the upload of the dataset");
}

engine *engine_cuda_create(const engine_params *p, char *err, size_t errlen) {
    if (!coll_is_nccl(p->comm)) {
        snprintf(err, errlen, "the cuda engine needs the nccl collectives backend");
        return NULL;
    }
    const coll_comm *m = p->comm;
    if (m->parts < 1 || m->parts > COLL_MAX_PARTS || m->width < m->world_size ||
        (m->width > m->world_size && m->nodes > 1)) {
        snprintf(err, errlen, "the cuda engine cannot spread distributed.world_size %d batch shards over %d GPU%s%s: "
                 "run it on %d GPUs", m->width, m->world_size, m->world_size > 1 ? "s" : "",
                 m->nodes > 1 ? " across nodes" : "", m->width);
        return NULL;
    }
    cuda_engine *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    engine *e = &c->pub;
    e->ops = &cuda_ops;
    e->comm = p->comm;
    e->cfg = p->cfg;
    c->train = p->train;
    c->test = p->test;
    c->parts = p->comm->parts;
    c->fixed = p->comm->width > 1;
    int ordinal = 0;
    struct cudaDeviceProp prop;
    if (cudaGetDevice(&ordinal) == cudaSuccess && cudaGetDeviceProperties(&prop, ordinal) == cudaSuccess)
        snprintf(e->device, sizeof e->device, "cuda:%d %.100s", ordinal, prop.name);
    else
        snprintf(e->device, sizeof e->device, "cuda:%d", ordinal);
    const idx_dataset *d = p->test;
    if (model_shape_init(&e->shape, p->cfg, 1, d->rows, d->cols, d->num_classes, err, errlen) != 0) {
        free(c);
        return NULL;
    }
    c->bn_points = memory_plan_bn_points(&e->shape, &c->bn_ld);
    c->bn_rounds = e->shape.sync_bn && m->width > m->world_size; /* (every rank decides alike) */
    size_t n = e->shape.n_params;
    c->grad_stride = memory_plan_grad_stride(n); /* as the memory plan lays the shards' gradients out */
    e->params = malloc(sizeof(float) * n);
    e->stats = malloc(sizeof(float) * (e->shape.n_stats + 1));
    if (!e->params || !e->stats || optimizer_init(&e->opt, p->cfg, n) != 0) {
        snprintf(err, errlen, "out of memory for the host view of a model of %zu parameters", n);
        cuda_destroy(e);
        return NULL;
    }
    grad_buckets_init(&c->buckets, &e->shape, p->cfg->distributed.bucket_mb, bucket_ready, c);
    if (prepare_device(c, err, errlen) != 0 || plan_memory(c, p, err, errlen) != 0) {
        cuda_destroy(e);
        return NULL;
    }
    if (setup_device(c, p) != 0) {
        const char *why = c->ge.msg[0] ? c->ge.msg : coll_nccl_failure(p->comm);
        char size[32];
        memory_plan_format_bytes(c->plan.arena_bytes, size, sizeof size);
        snprintf(err, errlen, "cannot set up %s (planned %s): %s", e->device, size, why);
        cuda_destroy(e);
        return NULL;
    }
    return e;
}
