/* The cpu engine: the model (model.c) on the BLAS, and data parallelism over the shared-memory
 * collectives with the optimizer sharded over ranks (ZeRO stage 1), one copy of the
 * optimizer state for the whole group and a copy of the parameters per rank:
 *
 *   backward  as soon as a bucket of gradients is complete, it is reduce-scattered:
 *             each rank ends with the average over ranks of its own shard of the
 *             bucket (coll_share), read in place from the peers' shared buffers;
 *   update    each rank applies the optimizer to its shard only, piece by piece as
 *             the reduce-scatter hands the shard over, while it is hot in cache (or
 *             after the global norm when clipping), in its own copy of the
 *             parameters, then streams the new values into its peers' copies
 *             (mirror_f32: past the caches);
 *   settle    one barrier, before the parameters are next read (the next step's
 *             forward, evaluation, a checkpoint): every shard is updated.
 *
 * The optimizer state lives in the group's shared arena (alloc_shared), each rank
 * touching only its shards of it. The parameters are a copy per rank (alloc_mirrored):
 * with one shared copy, every line a rank updated had been read by its peers' forward
 * pass and had to be taken back from their caches first (2 ranks on the MLP: 0.20-0.24
 * ms of optimizer a step against 0.09 with a copy each; docs/cpu-performance.md). The
 * owner streams its updated shard into the peers' copies, so no all-gather copies them
 * back: a step moves each gradient and each parameter between cores once and
 * synchronises once per bucket plus once to settle. The step's loss travels in the last
 * bucket's reduce-scatter (its side sums) rather than in an all-reduce of its own. That
 * divides the optimizer's work (a quarter of a step on one rank) by the world size.
 * Every element is updated with the same arithmetic whichever rank owns it, so results
 * are bit-identical to an unsharded update. The gradients are each rank's own (its arena).
 *
 * Batch norm's running statistics are each rank's own (private memory). With
 * per_rank statistics, ranks normalise with their own batch and only rank 0's running
 * statistics count: they are broadcast before evaluation and checkpoints, as DDP's
 * broadcast_buffers does before each forward. With sync statistics, the batch sums
 * are all-reduced in forward and backward (model.c), so every rank's are the same.
 *
 * Each rank times its steps by phase (step_profile): the rank loop logs where the
 * time went once an epoch. See engine.h. */
#include "engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv_dnnl.h"
#include "cpu_kernels.h"
#include "grad_buckets.h"
#include "host_plan.h"
#include "log.h"
#include "monotonic.h"

#define PIXEL_SCALE (1.0f / 255.0f)

/* Where a rank's steps spend their time (nanoseconds, summed over steps). */
enum { PH_INPUTS, PH_COMPUTE, PH_WAIT, PH_REDUCE, PH_UPDATE, PH_NET, PH_OTHER, PH_COUNT };
static const char *const phase_names[PH_COUNT] = {"inputs", "forward+backward", "waiting for peers",
                                                  "reduce-scatter", "optimizer", "between nodes", "other"};

typedef struct {
    uint64_t ns[PH_COUNT];
    uint64_t steps, step_ns, syncs;
    uint64_t in_buckets_ns, bucket_wait_ns, update_ns; /* of the step in progress */
} step_timer;

typedef struct {
    engine pub;
    const idx_dataset *train, *test;
    int parts;          /* the batch shards this rank computes (comm->parts) */
    int fixed;          /* the backend sums shards in shard order (reduce_scatter_parts_f32_ex) */
    model_workspace ws[COLL_MAX_PARTS]; /* one per batch shard; ws[0] also evaluates */
    float *grads;       /* this rank's own: shard j's at grads + j * grad_stride */
    size_t grad_stride;
    uint8_t *labels;    /* shard j's at labels + j * label_stride */
    size_t label_stride;
    float *spare_stats; /* running statistics of shards past the first: never read (only shard 0's count) */
    double *totals;     /* width * (the longest sums) doubles: sums over shards, one row per shard */
    size_t totals_max;
    grad_buckets buckets;
    double lr;          /* of the step in progress */
    double loss_sum[COLL_MAX_PARTS]; /* of the step in progress: complete before the first bucket */
    int rows[COLL_MAX_PARTS];
    double loss_mean[COLL_MAX_PARTS]; /* each shard's batch loss (its mean), then their sum over shards */
    int defer_update;   /* clipping: update once the global norm is known */
    int unsettled;      /* shards were updated since the last settle barrier */
    const grad_bucket *updating; /* the bucket whose shard the consumer updates */
    step_timer timer;
} cpu_engine;

/* Time this rank spent in collectives not computing: waiting for peers on its host,
 * and (across nodes) in the calls between hosts. */
static uint64_t blocked_ns(const coll_comm *c) { return c->wait_ns + c->net_ns; }

size_t engine_cpu_arena_bytes(const model_shape *s) { return host_plan_arena_bytes(s); }

/* After ranks updated their shards: wait until all that share the copy have,
 * before anyone reads them (across nodes, each host settles its own copy). */
static int settle(cpu_engine *c) {
    if (!c->unsettled) return 0;
    c->unsettled = 0;
    return c->pub.comm->shard_barrier(c->pub.comm);
}

/* Shards of the shared state were written: a settle is due before it is read. */
static int sharded(const engine *e) { return e->comm->shard_world > 1; }

static int cpu_init_params(engine *e, uint64_t seed) {
    if (e->comm->rank == 0) model_init_params(&e->shape, e->params, e->stats, seed);
    if (e->shape.n_stats && e->comm->broadcast(e->comm, e->stats, sizeof(float) * e->shape.n_stats, 0) != 0) return -1;
    /* rank 0 wrote its copy of the parameters: every rank's from it */
    return e->comm->broadcast(e->comm, e->params, sizeof(float) * e->shape.n_params, 0);
}

/* model_pass.allreduce_sum for sync batch norm (backends without the fixed order). */
static int sum_over_ranks(void *arg, double *buf, size_t n) {
    coll_comm *comm = arg;
    return comm->allreduce_sum_f64(comm, buf, n);
}

/* totals[s * m + i] holds value i of shard s for this rank's shards, zeros for the
 * others' (the caller wrote them): out[i] <- the sum over every shard of the run in
 * shard order, ((v_0 + v_1) + v_2) + ..., the same bits whatever the number of ranks.
 * The sum over ranks adds each value to zeros only, which is exact but for the sign
 * of a zero; every value goes through a + 0.0 so that a zero's sign never depends
 * on whether a peer's zero was added to it. */
static int total_over_shards(cpu_engine *c, size_t m, double *out) {
    engine *e = &c->pub;
    coll_comm *comm = e->comm;
    size_t width = (size_t)comm->width;
    if (width == 1) {
        memcpy(out, c->totals, m * sizeof(double));
        return 0;
    }
    if (comm->world_size > 1 && comm->allreduce_sum_f64(comm, c->totals, width * m) != 0) return -1;
    for (size_t i = 0; i < m; i++) {
        double t = c->totals[i] + 0.0;
        for (size_t k = 1; k < width; k++) t += c->totals[k * m + i] + 0.0;
        out[i] = t;
    }
    return 0;
}

/* This rank's shards' rows of c->totals, others zero. */
static double *shard_row(cpu_engine *c, int j, size_t m) {
    return c->totals + (size_t)(c->pub.comm->first_part + j) * m;
}
static void clear_totals(cpu_engine *c, size_t m) { memset(c->totals, 0, (size_t)c->pub.comm->width * m * sizeof(double)); }

/* Per-rank batch norm: every rank takes rank 0's running statistics. */
static int share_rank0_stats(engine *e) {
    if (!e->shape.n_stats || e->shape.sync_bn || e->comm->world_size == 1) return 0;
    return e->comm->broadcast(e->comm, e->stats, sizeof(float) * e->shape.n_stats, 0);
}

/* Rows fetched ahead while converting: a shuffled batch reads its images from all
 * over the dataset, each a cache and TLB miss the prefetcher cannot guess. */
#define INPUT_PREFETCH_ROWS 4

static void gather_inputs(cpu_engine *c, int j, const idx_dataset *d, const size_t *indices, size_t first, int rows) {
    size_t pixels = (size_t)d->rows * d->cols;
    uint8_t *labels = c->labels + (size_t)j * c->label_stride;
    for (int i = 0; i < rows; i++) {
        size_t k = indices ? indices[i] : first + (size_t)i;
        if (indices && i + INPUT_PREFETCH_ROWS < rows) {
            const uint8_t *ahead = d->images + indices[i + INPUT_PREFETCH_ROWS] * pixels;
            for (size_t o = 0; o < pixels; o += 64) __builtin_prefetch(ahead + o);
        }
        k_u8_to_f32(c->ws[j].act[0] + (size_t)i * pixels, d->images + k * pixels, pixels, PIXEL_SCALE);
        labels[i] = d->labels[k];
    }
}

/* This rank's shard [lo, hi) of a bucket: the one its collective reduces. */
static void shard_of(const engine *e, const grad_bucket *b, size_t *lo, size_t *hi) {
    if (((const cpu_engine *)e)->fixed) coll_part_share(e->comm, b->end - b->begin, lo, hi);
    else coll_share(b->end - b->begin, e->comm->shard_world, e->comm->shard_rank, lo, hi);
    *lo += b->begin;
    *hi += b->begin;
}

/* The optimizer on [lo, hi) of this rank's shard, in its copy of the parameters,
 * then into its peers' copies. */
static void update_range(cpu_engine *c, size_t lo, size_t hi) {
    engine *e = &c->pub;
    uint64_t t0 = (uint64_t)mono_ns();
    optimizer_update_range(&e->opt, e->params, c->grads, c->lr, lo, hi);
    if (sharded(e)) e->comm->mirror_f32(e->comm, e->params, lo, hi);
    c->timer.update_ns += (uint64_t)mono_ns() - t0;
}

/* coll_consume_fn: a piece of this rank's shard of the bucket is reduced: update it. */
static void update_piece(void *arg, size_t lo, size_t hi) {
    cpu_engine *c = arg;
    update_range(c, c->updating->begin + lo, c->updating->begin + hi);
}

/* bucket_ready_fn: reduce-scatter the bucket and update this rank's shard as it comes
 * (unless clipping defers that); the last bucket carries the loss. */
static int on_bucket_ready(void *arg, const grad_bucket *b) {
    cpu_engine *c = arg;
    engine *e = &c->pub;
    coll_comm *comm = e->comm;
    uint64_t t0 = (uint64_t)mono_ns(), w0 = blocked_ns(comm);
    int last = b == &c->buckets.bucket[c->buckets.n_buckets - 1];
    if (last)
        for (int j = 0; j < c->parts; j++) c->loss_mean[j] = c->loss_sum[j] / c->rows[j];
    c->updating = b;
    coll_consume_fn consume = c->defer_update ? NULL : update_piece;
    int rc = c->fixed ? comm->reduce_scatter_parts_f32_ex(comm, c->grads + b->begin, c->grad_stride, b->end - b->begin,
                                                          c->loss_mean, last ? 1 : 0, consume, c)
                      : comm->reduce_scatter_avg_f32_ex(comm, c->grads + b->begin, b->end - b->begin, c->loss_mean,
                                                        last ? 1 : 0, consume, c);
    if (!c->defer_update) c->unsettled = sharded(e);
    c->timer.in_buckets_ns += (uint64_t)mono_ns() - t0;
    c->timer.bucket_wait_ns += blocked_ns(comm) - w0;
    return rc;
}

/* Clipping by global norm over sharded gradients, then the deferred update. */
static int clip_and_update(cpu_engine *c) {
    engine *e = &c->pub;
    double sum = 0;
    if (c->fixed) { /* per batch shard's share of each bucket, totalled in shard order */
        clear_totals(c, 1);
        for (int j = 0; j < c->parts; j++) {
            double part = 0;
            for (int k = 0; k < c->buckets.n_buckets; k++) {
                const grad_bucket *b = &c->buckets.bucket[k];
                size_t lo, hi;
                coll_share(b->end - b->begin, e->comm->width, e->comm->first_part + j, &lo, &hi);
                part += grad_sum_squares(c->grads + b->begin + lo, hi - lo);
            }
            *shard_row(c, j, 1) = part;
        }
        if (total_over_shards(c, 1, &sum) != 0) return -1;
    } else {
        for (int k = 0; k < c->buckets.n_buckets; k++) {
            size_t lo, hi;
            shard_of(e, &c->buckets.bucket[k], &lo, &hi);
            sum += grad_sum_squares(c->grads + lo, hi - lo);
        }
        if (e->comm->shard_sum_f64(e->comm, &sum, 1) != 0) return -1; /* one copy's shards: the whole gradient */
    }
    float coef = clip_coefficient(sum, e->cfg->train.grad_clip_norm);
    for (int k = 0; k < c->buckets.n_buckets; k++) {
        size_t lo, hi;
        shard_of(e, &c->buckets.bucket[k], &lo, &hi);
        if (coef < 1.0f) scale_grads(c->grads + lo, hi - lo, coef);
        update_range(c, lo, hi);
    }
    c->unsettled = sharded(e);
    return 0;
}

/* Adds one step's phases to the timer. Waiting (and, across nodes, the calls between
 * them: `net`, part of `waited`) is what the collectives counted; the
 * reduce-scatters' own work is the time in their calls beyond those and updates;
 * forward+backward is the rest of the pass, less any collectives inside it (sync
 * batch norm's); other is what is left (clipping's norm, the step's bookkeeping). */
static void account_step(step_timer *t, uint64_t start, uint64_t inputs_end, uint64_t fb_ns, uint64_t fb_waited,
                         uint64_t end, uint64_t waited, uint64_t net, uint64_t syncs) {
    uint64_t outside = t->in_buckets_ns + (fb_waited - t->bucket_wait_ns);
    uint64_t ph[PH_COUNT] = {0};
    ph[PH_INPUTS] = inputs_end - start;
    ph[PH_COMPUTE] = fb_ns > outside ? fb_ns - outside : 0;
    ph[PH_WAIT] = waited - net;
    ph[PH_NET] = net;
    ph[PH_UPDATE] = t->update_ns;
    uint64_t in_calls = t->bucket_wait_ns + t->update_ns;
    ph[PH_REDUCE] = t->in_buckets_ns > in_calls ? t->in_buckets_ns - in_calls : 0;
    uint64_t total = end - start, known = 0;
    for (int p = 0; p < PH_OTHER; p++) known += ph[p];
    ph[PH_OTHER] = total > known ? total - known : 0;
    for (int p = 0; p < PH_COUNT; p++) t->ns[p] += ph[p];
    t->step_ns += total;
    t->syncs += syncs;
    t->steps++;
}

/* Forward and backward of this rank's batch shards, each on its own: one after the
 * other, or, with sync batch norm, layer by layer up to each batch norm, whose sums
 * are then totalled over every shard of the run in shard order. Only the last
 * shard's backward hands buckets over (the others' gradients are complete by then). */
static int run_shards(cpu_engine *c, const model_pass *passes, long *correct) {
    engine *e = &c->pub;
    model_cursor cur[COLL_MAX_PARTS];
    for (int j = 0; j < c->parts; j++) model_cursor_start(&cur[j]);
    for (;;) {
        int held = 0;
        size_t m = 0;
        for (int j = 0; j < c->parts; j++) {
            int last = j == c->parts - 1;
            if (model_fb_advance(&c->ws[j], e->params, j ? c->spare_stats : e->stats, c->grads + (size_t)j * c->grad_stride,
                                 c->labels + (size_t)j * c->label_stride, c->rows[j], &passes[j], &c->loss_sum[j],
                                 correct, last ? grad_buckets_layer_ready : NULL, &c->buckets, &cur[j], &m) == 1)
                held++;
            if (c->buckets.failed) return -1;
        }
        if (!held) return 0;
        if (held != c->parts || m > c->totals_max) return -1; /* every shard holds at the same layer */
        clear_totals(c, m);
        for (int j = 0; j < c->parts; j++) memcpy(shard_row(c, j, m), c->ws[j].bn_sums, m * sizeof(double));
        if (total_over_shards(c, m, c->ws[0].bn_sums) != 0) return -1;
        for (int j = 1; j < c->parts; j++) memcpy(c->ws[j].bn_sums, c->ws[0].bn_sums, m * sizeof(double));
    }
}

static int cpu_step(engine *e, const size_t *const *indices, const int *rows, double lr, long global_step,
                    double *loss) {
    cpu_engine *c = (cpu_engine *)e;
    coll_comm *comm = e->comm;
    step_timer *t = &c->timer;
    uint64_t start = (uint64_t)mono_ns(), w0 = blocked_ns(comm), n0 = comm->net_ns, s0 = comm->syncs;
    t->in_buckets_ns = t->bucket_wait_ns = t->update_ns = 0;
    for (int j = 0; j < c->parts; j++) gather_inputs(c, j, c->train, indices[j], 0, rows[j]);
    uint64_t inputs_end = (uint64_t)mono_ns();
    if (settle(c) != 0) return -1; /* the last step's updates (ranks were gathering inputs meanwhile) */
    long correct = 0;
    c->lr = lr;
    model_pass passes[COLL_MAX_PARTS];
    for (int j = 0; j < c->parts; j++) {
        c->loss_sum[j] = 0;
        c->rows[j] = rows[j];
        passes[j] = (model_pass){.train = 1, .seed = e->cfg->seed, .global_step = global_step, .example_ids = indices[j]};
        if (!c->fixed && e->shape.sync_bn && comm->world_size > 1) {
            passes[j].allreduce_sum = sum_over_ranks;
            passes[j].allreduce_arg = comm;
        }
    }
    grad_buckets_begin(&c->buckets);
    uint64_t fb_start = (uint64_t)mono_ns(), fb_w0 = blocked_ns(comm);
    int rc = c->fixed ? run_shards(c, passes, &correct)
                      : model_forward_backward(&c->ws[0], e->params, e->stats, c->grads, c->labels, rows[0], &passes[0],
                                               &c->loss_sum[0], &correct, grad_buckets_layer_ready, &c->buckets);
    if (rc != 0) return -1;
    uint64_t fb_ns = (uint64_t)mono_ns() - fb_start, fb_waited = blocked_ns(comm) - fb_w0;
    if (c->buckets.failed) return -1;
    if (c->defer_update && clip_and_update(c) != 0) return -1;
    optimizer_step_done(&e->opt);
    *loss = c->loss_mean[0]; /* the sum over shards of their batch means, from the last bucket */
    if (comm->width > 1) *loss /= comm->width;
    account_step(t, start, inputs_end, fb_ns, fb_waited, (uint64_t)mono_ns(), blocked_ns(comm) - w0, comm->net_ns - n0,
                 comm->syncs - s0);
    return 0;
}

static int cpu_evaluate(engine *e, int ranges, const size_t *begin, const size_t *end, double *sums) {
    cpu_engine *c = (cpu_engine *)e;
    if (settle(c) != 0 || share_rank0_stats(e) != 0) return -1;
    for (int j = 0; j < ranges; j++)
        for (size_t i = begin[j]; i < end[j]; i += (size_t)c->ws[0].max_rows) {
            int rows = (int)(end[j] - i < (size_t)c->ws[0].max_rows ? end[j] - i : (size_t)c->ws[0].max_rows);
            gather_inputs(c, 0, c->test, NULL, i, rows);
            long correct = 0;
            model_evaluate(&c->ws[0], e->params, e->stats, c->labels, rows, &sums[2 * j], &correct);
            sums[2 * j + 1] += (double)correct;
        }
    return 0;
}

/* The host views are the shared state itself: complete once settled. */
static int cpu_sync_to_host(engine *e) {
    if (settle((cpu_engine *)e) != 0) return -1;
    return share_rank0_stats(e);
}

/* Every rank of a host loaded the same checkpoint into the shared state (the same
 * bytes): nobody may read it, or update a shard of it, before all have finished.
 * Across nodes only rank 0's host loaded it (it holds the run's checkpoints): every
 * other host's copy, and the ranks' own statistics and step count, come from rank 0. */
static int cpu_sync_from_host(engine *e) {
    cpu_engine *c = (cpu_engine *)e;
    coll_comm *m = e->comm;
    if (m->nodes > 1) {
        size_t bytes = sizeof(float) * e->shape.n_params;
        float *states[2] = {e->opt.state1, e->opt.state2};
        if (m->broadcast(m, e->params, bytes, 0) != 0) return -1;
        for (int k = 0; k < 2; k++)
            if (states[k] && m->broadcast_shared(m, states[k], bytes, 0) != 0) return -1;
        if (e->shape.n_stats && m->broadcast(m, e->stats, sizeof(float) * e->shape.n_stats, 0) != 0) return -1;
        return m->broadcast(m, &e->opt.step, sizeof e->opt.step, 0);
    }
    c->unsettled = sharded(e);
    return settle(c);
}

static void cpu_step_profile(engine *e, char *out, size_t n) {
    cpu_engine *c = (cpu_engine *)e;
    step_timer *t = &c->timer;
    out[0] = '\0';
    if (t->steps) {
        double per = 1e-6 / (double)t->steps;
        size_t k = (size_t)snprintf(out, n, "%.3f ms/step over %llu steps, %.2f synchronisations/step:",
                                    (double)t->step_ns * per, (unsigned long long)t->steps,
                                    (double)t->syncs / (double)t->steps);
        for (int p = 0; p < PH_COUNT && k < n; p++)
            if (p != PH_NET || e->comm->nodes > 1) /* one host: no such phase */
                k += (size_t)snprintf(out + k, n - k, "%s %s %.3f", p ? "," : "", phase_names[p], (double)t->ns[p] * per);
    }
    memset(t, 0, sizeof *t);
}

static void cpu_destroy(engine *e) {
    cpu_engine *c = (cpu_engine *)e;
    for (int j = 0; j < COLL_MAX_PARTS; j++) model_workspace_free(&c->ws[j]);
    free(c->labels);
    free(c->spare_stats);
    free(c->totals);
    free(e->stats);
    free(c); /* parameters, gradients and optimizer state live in the group's arenas */
}

static const engine_ops cpu_ops = {
    .init_params = cpu_init_params,
    .step = cpu_step,
    .evaluate = cpu_evaluate,
    .sync_to_host = cpu_sync_to_host,
    .sync_from_host = cpu_sync_from_host,
    .step_profile = cpu_step_profile,
    .destroy = cpu_destroy,
};

/* Zeroed float buffer of n elements in this rank's arena. */
static float *arena_floats(coll_comm *comm, size_t n) {
    float *p = comm->alloc(comm, sizeof(float) * (n ? n : 1));
    if (p) memset(p, 0, sizeof(float) * n);
    return p;
}

/* Float buffer of n elements in the shared arena (zero: the group's memory is fresh). */
static float *shared_floats(coll_comm *comm, size_t n) {
    return comm->alloc_shared(comm, sizeof(float) * (n ? n : 1));
}

/* This rank's copy of n floats that its peers mirror their shares into. */
static float *mirrored_floats(coll_comm *comm, size_t n) {
    return comm->alloc_mirrored(comm, sizeof(float) * (n ? n : 1));
}

/* The convolutions' forward on oneDNN where this build has it and DDPD_CPU_CONV (the
 * environment: "onednn", the default, or "im2col", the reference) does not ask for
 * im2col; where oneDNN cannot take a layer, im2col runs it, said once. */
static void use_onednn(cpu_engine *c, const run_config *cfg) {
    engine *e = &c->pub;
    const char *asked = getenv("DDPD_CPU_CONV");
    if (e->shape.kind != MODEL_CNN) return;
    if (asked && strcmp(asked, "im2col") != 0 && strcmp(asked, "onednn") != 0 && e->comm->rank == 0)
        log_msg(LOG_WARN, "DDPD_CPU_CONV=%s is neither \"onednn\" nor \"im2col\": taken as onednn", asked);
    if (!conv_dnnl_wanted()) {
        if (e->comm->rank == 0) log_msg(LOG_INFO, "convolutions through im2col + GEMM (DDPD_CPU_CONV=im2col)");
        return;
    }
    char why[256];
    conv_dnnl_set_threads(cfg->distributed.threads_per_rank);
    int rc = 0;
    for (int j = 0; j < c->parts; j++) rc |= model_workspace_use_onednn(&c->ws[j], why, sizeof why);
    if (e->comm->rank != 0) return;
    if (rc != 0) log_msg(LOG_WARN, "convolutions through im2col + GEMM: %s", why);
    else log_msg(LOG_INFO, "convolutions on oneDNN (%s)", model_workspace_conv_impl(&c->ws[0]));
}

engine *engine_cpu_create(const engine_params *p, char *err, size_t errlen) {
    if (!p->comm->alloc_shared || !p->comm->alloc_mirrored || !p->comm->reduce_scatter_avg_f32_ex ||
        !p->comm->broadcast_shared || !p->comm->shard_sum_f64 || !p->comm->shard_barrier) {
        snprintf(err, errlen, "the cpu engine needs the cpu collectives (shared memory), not %s", p->comm->backend);
        return NULL;
    }
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
    c->parts = p->comm->parts;
    c->fixed = p->comm->reduce_scatter_parts_f32_ex != NULL;
    if (c->parts < 1 || c->parts > COLL_MAX_PARTS || (c->parts > 1 && !c->fixed)) {
        snprintf(err, errlen, "%d batch shards on one rank of the %s collectives: they sum one shard per rank",
                 c->parts, p->comm->backend);
        free(c);
        return NULL;
    }
    /* DDPD_CPU_REDUCE=ranks (benchmarks: bench/shards.sh): one shard per rank summed the
     * way it was before batch shards, by the rank-order reduce-scatter; the same bits */
    const char *reduce = getenv("DDPD_CPU_REDUCE");
    if (reduce && !strcmp(reduce, "ranks") && c->parts == 1) c->fixed = 0;
    const idx_dataset *d = p->test;
    if (model_shape_init(&e->shape, p->cfg, 1, d->rows, d->cols, d->num_classes, err, errlen) != 0) {
        free(c);
        return NULL;
    }
    size_t n = e->shape.n_params;
    int states = optimizer_state_count(p->cfg);
    float *state1 = NULL, *state2 = NULL;
    c->grad_stride = (n + 15) / 16 * 16; /* each shard's gradients start on a cache line */
    int ok = (e->params = mirrored_floats(p->comm, n)) &&
             (c->grads = arena_floats(p->comm, c->grad_stride * (size_t)(c->parts - 1) + n)) &&
             (states < 1 || (state1 = shared_floats(p->comm, n))) && (states < 2 || (state2 = shared_floats(p->comm, n)));
    optimizer_init_external(&e->opt, p->cfg, n, state1, state2);
    c->label_stride = (size_t)p->max_rows;
    c->labels = malloc(c->label_stride * (size_t)c->parts);
    /* the longest sums a step totals over shards: a batch norm's (2 C + 1), or 1 */
    c->totals_max = 1;
    for (int l = 0; l < e->shape.n_layers; l++)
        if (e->shape.layer[l].kind == LAYER_BATCHNORM2D && 2 * (size_t)e->shape.layer[l].out_c + 1 > c->totals_max)
            c->totals_max = 2 * (size_t)e->shape.layer[l].out_c + 1;
    ok &= (c->totals = calloc(c->totals_max * (size_t)p->comm->width, sizeof(double))) != NULL;
    if (e->shape.n_stats) {
        ok &= (e->stats = calloc(e->shape.n_stats, sizeof(float))) != NULL;
        ok &= (c->spare_stats = calloc(e->shape.n_stats, sizeof(float))) != NULL;
    }
    /* every shard's workspace as large as the first's (which also evaluates): a
     * convolution's oneDNN primitive is then made alike for every shard */
    for (int j = 0; j < c->parts && ok; j++) ok = model_workspace_init(&c->ws[j], &e->shape, p->max_rows) == 0;
    if (!ok || !c->labels) {
        snprintf(err, errlen, "out of memory for a model of %zu parameters and batches of %d", n, p->max_rows);
        cpu_destroy(e);
        return NULL;
    }
    use_onednn(c, p->cfg);
    c->defer_update = p->cfg->train.grad_clip_norm > 0;
    grad_buckets_init(&c->buckets, &e->shape, p->cfg->distributed.bucket_mb, on_bucket_ready, c);
    return e;
}
