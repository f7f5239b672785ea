/* The cpu engine: the model (model.c) on the BLAS, and data parallelism over the shared-memory
 * collectives with the optimizer sharded over ranks (ZeRO stage 1):
 *
 *   backward  as soon as a bucket of gradients is complete, it is reduce-scattered:
 *             each rank ends with the average over ranks of its own shard of the
 *             bucket (coll_share), read in place from the peers' shared buffers;
 *   update    each rank applies the optimizer to its shard only (right away, while
 *             the shard is hot in cache, or after the global norm when clipping);
 *   gather    the updated parameter shards are all-gathered, bucket by bucket.
 *
 * That moves the same bytes as all-reducing the gradients, and divides the
 * optimizer's work (a quarter of a step on one rank) by the world size. Every
 * element is updated with the same arithmetic whichever rank owns it, so results
 * are bit-identical to an unsharded update. Parameters, gradients and optimizer
 * state live in the group's shared arena; the optimizer state is gathered only for
 * checkpoints (sync_to_host).
 *
 * Batch norm's running statistics are each rank's own (private memory). With
 * per_rank statistics, ranks normalise with their own batch and only rank 0's running
 * statistics count: they are broadcast before evaluation and checkpoints, as DDP's
 * broadcast_buffers does before each forward. With sync statistics, the batch sums
 * are all-reduced in forward and backward (model.c), so every rank's are the same.
 * See engine.h. */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "grad_buckets.h"

#define PIXEL_SCALE (1.0f / 255.0f)

typedef struct {
    engine pub;
    const idx_dataset *train, *test;
    model_workspace ws;
    float *grads;
    uint8_t *labels;
    grad_buckets buckets;
    double lr;          /* of the step in progress */
    int defer_update;   /* clipping: update once the global norm is known */
} cpu_engine;

size_t engine_cpu_arena_bytes(const model_shape *s) {
    return 4 * (s->n_params * sizeof(float) + 64); /* params, grads, two optimizer states */
}

static int cpu_init_params(engine *e, uint64_t seed) {
    if (e->comm->rank == 0) model_init_params(&e->shape, e->params, e->stats, seed);
    if (e->shape.n_stats && e->comm->broadcast(e->comm, e->stats, sizeof(float) * e->shape.n_stats, 0) != 0) return -1;
    return e->comm->broadcast(e->comm, e->params, sizeof(float) * e->shape.n_params, 0);
}

/* model_pass.allreduce_sum for sync batch norm. */
static int sum_over_ranks(void *arg, double *buf, size_t n) {
    coll_comm *comm = arg;
    return comm->allreduce_sum_f64(comm, buf, n);
}

/* Per-rank batch norm: every rank takes rank 0's running statistics. */
static int share_rank0_stats(engine *e) {
    if (!e->shape.n_stats || e->shape.sync_bn || e->comm->world_size == 1) return 0;
    return e->comm->broadcast(e->comm, e->stats, sizeof(float) * e->shape.n_stats, 0);
}

static void gather_inputs(cpu_engine *c, const idx_dataset *d, const size_t *indices, size_t first, int rows) {
    size_t pixels = (size_t)d->rows * d->cols;
    for (int i = 0; i < rows; i++) {
        size_t k = indices ? indices[i] : first + (size_t)i;
        k_u8_to_f32(c->ws.act[0] + (size_t)i * pixels, d->images + k * pixels, pixels, PIXEL_SCALE);
        c->labels[i] = d->labels[k];
    }
}

/* This rank's shard [lo, hi) of a bucket. */
static void shard_of(const engine *e, const grad_bucket *b, size_t *lo, size_t *hi) {
    coll_share(b->end - b->begin, e->comm->world_size, e->comm->rank, lo, hi);
    *lo += b->begin;
    *hi += b->begin;
}

/* bucket_ready_fn: reduce-scatter the bucket, then update this rank's shard. */
static int on_bucket_ready(void *arg, const grad_bucket *b) {
    cpu_engine *c = arg;
    engine *e = &c->pub;
    if (e->comm->reduce_scatter_avg_f32(e->comm, c->grads + b->begin, b->end - b->begin) != 0) return -1;
    if (!c->defer_update) {
        size_t lo, hi;
        shard_of(e, b, &lo, &hi);
        optimizer_update_range(&e->opt, e->params, c->grads, c->lr, lo, hi);
    }
    return 0;
}

/* Clipping by global norm over sharded gradients, then the deferred update. */
static int clip_and_update(cpu_engine *c) {
    engine *e = &c->pub;
    double sum = 0;
    for (int k = 0; k < c->buckets.n_buckets; k++) {
        size_t lo, hi;
        shard_of(e, &c->buckets.bucket[k], &lo, &hi);
        sum += grad_sum_squares(c->grads + lo, hi - lo);
    }
    if (e->comm->allreduce_sum_f64(e->comm, &sum, 1) != 0) return -1;
    float coef = clip_coefficient(sum, e->cfg->train.grad_clip_norm);
    for (int k = 0; k < c->buckets.n_buckets; k++) {
        size_t lo, hi;
        shard_of(e, &c->buckets.bucket[k], &lo, &hi);
        if (coef < 1.0f) scale_grads(c->grads + lo, hi - lo, coef);
        optimizer_update_range(&e->opt, e->params, c->grads, c->lr, lo, hi);
    }
    return 0;
}

static int gather_buckets(engine *e, float *buf) {
    cpu_engine *c = (cpu_engine *)e;
    for (int k = 0; k < c->buckets.n_buckets; k++) {
        const grad_bucket *b = &c->buckets.bucket[k];
        if (e->comm->allgather_f32(e->comm, buf + b->begin, b->end - b->begin) != 0) return -1;
    }
    return 0;
}

static int cpu_step(engine *e, const size_t *indices, int rows, double lr, long global_step, double *loss) {
    cpu_engine *c = (cpu_engine *)e;
    gather_inputs(c, c->train, indices, 0, rows);
    double loss_sum = 0;
    long correct = 0;
    c->lr = lr;
    model_pass pass = {.train = 1, .seed = e->cfg->seed, .global_step = global_step, .example_ids = indices};
    if (e->shape.sync_bn && e->comm->world_size > 1) {
        pass.allreduce_sum = sum_over_ranks;
        pass.allreduce_arg = e->comm;
    }
    grad_buckets_begin(&c->buckets);
    if (model_forward_backward(&c->ws, e->params, e->stats, c->grads, c->labels, rows, &pass, &loss_sum, &correct,
                               grad_buckets_layer_ready, &c->buckets) != 0)
        return -1;
    if (c->buckets.failed) return -1;
    if (c->defer_update && clip_and_update(c) != 0) return -1;
    optimizer_step_done(&e->opt);
    if (gather_buckets(e, e->params) != 0) return -1;
    *loss = loss_sum / rows;
    if (e->comm->world_size > 1) {
        if (e->comm->allreduce_sum_f64(e->comm, loss, 1) != 0) return -1;
        *loss /= e->comm->world_size;
    }
    return 0;
}

static int cpu_evaluate(engine *e, size_t begin, size_t end, double sums[2]) {
    cpu_engine *c = (cpu_engine *)e;
    if (share_rank0_stats(e) != 0) return -1;
    for (size_t i = begin; i < end; i += (size_t)c->ws.max_rows) {
        int rows = (int)(end - i < (size_t)c->ws.max_rows ? end - i : (size_t)c->ws.max_rows);
        gather_inputs(c, c->test, NULL, i, rows);
        long correct = 0;
        model_evaluate(&c->ws, e->params, e->stats, c->labels, rows, &sums[0], &correct);
        sums[1] += (double)correct;
    }
    return 0;
}

/* Parameters are whole on every rank after each step; the optimizer state is
 * current only on each rank's shards until gathered. */
static int cpu_sync_to_host(engine *e) {
    if (share_rank0_stats(e) != 0) return -1;
    if (e->opt.state1 && gather_buckets(e, e->opt.state1) != 0) return -1;
    if (e->opt.state2 && gather_buckets(e, e->opt.state2) != 0) return -1;
    return 0;
}

static int cpu_sync_from_host(engine *e) {
    (void)e; /* every rank loaded the whole state into its own views */
    return 0;
}

static void cpu_destroy(engine *e) {
    cpu_engine *c = (cpu_engine *)e;
    model_workspace_free(&c->ws);
    free(c->labels);
    free(e->stats);
    free(c); /* parameters, gradients and optimizer state live in the shared arena */
}

static const engine_ops cpu_ops = {
    .init_params = cpu_init_params,
    .step = cpu_step,
    .evaluate = cpu_evaluate,
    .sync_to_host = cpu_sync_to_host,
    .sync_from_host = cpu_sync_from_host,
    .destroy = cpu_destroy,
};

/* Zeroed float buffer of n elements in the shared arena. */
static float *arena_floats(coll_comm *comm, size_t n) {
    float *p = comm->alloc(comm, sizeof(float) * (n ? n : 1));
    if (p) memset(p, 0, sizeof(float) * n);
    return p;
}

engine *engine_cpu_create(const engine_params *p, char *err, size_t errlen) {
    cpu_engine *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    engine *e = &c->pub;
    e->ops = &cpu_ops;
    e->comm = p->comm;
    e->cfg = p->cfg;
    snprintf(e->device, sizeof e->device, "cpu");
    c->train = p->train;
    c->test = p->test;
    const idx_dataset *d = p->test;
    if (model_shape_init(&e->shape, p->cfg, 1, d->rows, d->cols, d->num_classes, err, errlen) != 0) {
        free(c);
        return NULL;
    }
    size_t n = e->shape.n_params;
    int states = optimizer_state_count(p->cfg);
    float *state1 = NULL, *state2 = NULL;
    int ok = (e->params = arena_floats(p->comm, n)) && (c->grads = arena_floats(p->comm, n)) &&
             (states < 1 || (state1 = arena_floats(p->comm, n))) && (states < 2 || (state2 = arena_floats(p->comm, n)));
    optimizer_init_external(&e->opt, p->cfg, n, state1, state2);
    c->labels = malloc((size_t)p->max_rows);
    if (e->shape.n_stats) ok &= (e->stats = calloc(e->shape.n_stats, sizeof(float))) != NULL;
    if (!ok || !c->labels || model_workspace_init(&c->ws, &e->shape, p->max_rows) != 0) {
        snprintf(err, errlen, "out of memory for a model of %zu parameters and batches of %d", n, p->max_rows);
        cpu_destroy(e);
        return NULL;
    }
    c->defer_update = p->cfg->train.grad_clip_norm > 0;
    grad_buckets_init(&c->buckets, &e->shape, p->cfg->distributed.bucket_mb, on_bucket_ready, c);
    return e;
}
