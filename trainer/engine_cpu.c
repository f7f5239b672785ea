/* The cpu engine: the MLP on the BLAS, gradients averaged in buckets over the
 * shared-memory collectives while backward runs, optimizer on the host. See engine.h. */
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
    mlp_workspace ws;
    float *grads;
    uint8_t *labels;
    grad_buckets buckets;
} cpu_engine;

static int cpu_init_params(engine *e, uint64_t seed) {
    if (e->comm->rank == 0) mlp_init_params(&e->shape, e->params, seed);
    return e->comm->broadcast(e->comm, e->params, sizeof(float) * e->shape.n_params, 0);
}

static void gather_inputs(cpu_engine *c, const idx_dataset *d, const size_t *indices, size_t first, int rows) {
    size_t pixels = (size_t)d->rows * d->cols;
    for (int i = 0; i < rows; i++) {
        size_t k = indices ? indices[i] : first + (size_t)i;
        k_u8_to_f32(c->ws.act[0] + (size_t)i * pixels, d->images + k * pixels, pixels, PIXEL_SCALE);
        c->labels[i] = d->labels[k];
    }
}

static int cpu_step(engine *e, const size_t *indices, int rows, double lr, double *loss) {
    cpu_engine *c = (cpu_engine *)e;
    gather_inputs(c, c->train, indices, 0, rows);
    double loss_sum = 0;
    long correct = 0;
    grad_buckets_begin(&c->buckets);
    mlp_forward_backward(&c->ws, e->params, c->grads, c->labels, rows, &loss_sum, &correct,
                         grad_buckets_layer_ready, &c->buckets);
    if (c->buckets.failed) return -1;
    if (e->cfg->train.grad_clip_norm > 0) clip_grad_norm(c->grads, e->shape.n_params, e->cfg->train.grad_clip_norm);
    optimizer_step(&e->opt, e->params, c->grads, lr);
    *loss = loss_sum / rows;
    if (e->comm->world_size > 1) {
        if (e->comm->allreduce_sum_f64(e->comm, loss, 1) != 0) return -1;
        *loss /= e->comm->world_size;
    }
    return 0;
}

static int cpu_evaluate(engine *e, size_t begin, size_t end, double sums[2]) {
    cpu_engine *c = (cpu_engine *)e;
    for (size_t i = begin; i < end; i += (size_t)c->ws.max_rows) {
        int rows = (int)(end - i < (size_t)c->ws.max_rows ? end - i : (size_t)c->ws.max_rows);
        gather_inputs(c, c->test, NULL, i, rows);
        long correct = 0;
        mlp_evaluate(&c->ws, e->params, c->labels, rows, &sums[0], &correct);
        sums[1] += (double)correct;
    }
    return 0;
}

static int cpu_sync(engine *e) {
    (void)e; /* the host views are the state itself */
    return 0;
}

static void cpu_destroy(engine *e) {
    cpu_engine *c = (cpu_engine *)e;
    mlp_workspace_free(&c->ws);
    optimizer_free(&e->opt);
    free(e->params);
    free(c->labels);
    free(c); /* grads live in the group's shared arena */
}

static const engine_ops cpu_ops = {
    .init_params = cpu_init_params,
    .step = cpu_step,
    .evaluate = cpu_evaluate,
    .sync_to_host = cpu_sync,
    .sync_from_host = cpu_sync,
    .destroy = cpu_destroy,
};

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
    mlp_shape_init(&e->shape, d->rows * d->cols, p->cfg->model.hidden, p->cfg->model.n_hidden, d->num_classes,
                   p->cfg->model.activation);
    size_t n = e->shape.n_params;
    e->params = malloc(sizeof(float) * n);
    c->grads = p->comm->alloc(p->comm, sizeof(float) * n);
    c->labels = malloc((size_t)p->max_rows);
    if (!e->params || !c->grads || !c->labels || mlp_workspace_init(&c->ws, &e->shape, p->max_rows) != 0 ||
        optimizer_init(&e->opt, p->cfg, n) != 0) {
        snprintf(err, errlen, "out of memory for a model of %zu parameters and batches of %d", n, p->max_rows);
        cpu_destroy(e);
        return NULL;
    }
    grad_buckets_init(&c->buckets, &e->shape, p->cfg->distributed.bucket_mb, p->comm, c->grads);
    return e;
}
