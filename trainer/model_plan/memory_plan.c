/* The GPU memory plan: see memory_plan.h for the formula. */
#include "memory_plan.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

static size_t align_up(size_t n) { return (n + MEMORY_PLAN_ALIGN - 1) / MEMORY_PLAN_ALIGN * MEMORY_PLAN_ALIGN; }

/* Appends a region of `bytes` to the arena and counts it under `kind`. */
static void take(memory_plan *pl, memory_region *r, size_t bytes, size_t *kind) {
    r->offset = pl->arena_bytes;
    r->bytes = bytes;
    pl->arena_bytes += align_up(bytes);
    *kind += align_up(bytes);
}

int memory_plan_conv_chunk(const model_layer *L, int max_rows) {
    size_t per_example = sizeof(float) * (size_t)L->out_h * L->out_w * L->in_c * L->kernel * L->kernel;
    size_t chunk = per_example ? MEMORY_PLAN_IM2COL_BYTES / per_example : (size_t)max_rows;
    if (chunk < 1) chunk = 1;
    return chunk < (size_t)max_rows ? (int)chunk : max_rows;
}

size_t memory_plan_grad_stride(size_t n_params) { return (n_params + 15) / 16 * 16; }

size_t memory_plan_parts_scratch_floats(size_t n, int width, int parts) {
    if (width <= 1) return 0;
    size_t w = (size_t)width, per = ((n + w - 1) / w + 15) / 16 * 16; /* coll_share's, rounded to lines */
    size_t share = per * (size_t)(parts > 1 ? parts : 1);
    return w * (share < n ? share : n);
}

int memory_plan_bn_points(const model_shape *s, size_t *ld) {
    size_t widest = 0;
    int points = 0;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        if (L->kind != LAYER_BATCHNORM2D) continue;
        points += l > s->first_trained ? 2 : 1;
        if ((size_t)L->out_c > widest) widest = (size_t)L->out_c;
    }
    *ld = 2 * widest + 1;
    return points;
}

size_t memory_plan_bn_shards_doubles(const model_shape *s, int width) {
    size_t ld;
    int points = memory_plan_bn_points(s, &ld);
    if (!points || width <= 1) return 0;
    return ((size_t)points + (size_t)width) * ld;
}

static void layout(const memory_plan_input *in, int resident, memory_plan *pl) {
    const model_shape *s = in->shape;
    size_t rows = (size_t)in->max_rows, f = sizeof(float), n = s->n_params;
    memset(pl, 0, sizeof *pl);
    pl->data_resident = resident;

    take(pl, &pl->params, n * f, &pl->model_bytes);
    int parts = in->parts > 1 ? in->parts : 1, width = in->width > 1 ? in->width : 1;
    take(pl, &pl->grads, in->train ? (memory_plan_grad_stride(n) * (size_t)(parts - 1) + n) * f : 0, &pl->model_bytes);
    int states = in->train ? in->n_opt_states : 0;
    for (int k = 0; k < 2; k++) take(pl, &pl->opt_state[k], k < states ? n * f : 0, &pl->optimizer_bytes);
    take(pl, &pl->stats, s->n_stats * f, &pl->model_bytes);
    /* (sync batch norm over shards: its passes that gather the shards' sums write there too) */
    take(pl, &pl->spare_stats, in->train && (parts > 1 || (s->sync_bn && width > 1)) ? s->n_stats * f : 0,
         &pl->model_bytes);

    size_t widest = (size_t)s->in_dim, widest_out = 1, widest_c = 0, col = 0;
    take(pl, &pl->act[0], rows * (size_t)s->in_dim * f, &pl->activation_bytes);
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        size_t out = model_layer_out_size(s, l);
        if (out > widest) widest = out;
        if (L->kind == LAYER_LINEAR && out > widest_out) widest_out = out;
        take(pl, &pl->act[l + 1], rows * out * f, &pl->activation_bytes);
        int keeps_pre = (L->kind == LAYER_LINEAR || L->kind == LAYER_CONV2D) && L->act == ACT_GELU;
        take(pl, &pl->pre[l], keeps_pre ? rows * out * f : 0, &pl->activation_bytes);
        take(pl, &pl->mask[l], in->train && L->kind == LAYER_DROPOUT ? rows * out : 0, &pl->activation_bytes);
        take(pl, &pl->argmax[l], in->train && L->kind == LAYER_MAXPOOL2D ? rows * out * sizeof(int32_t) : 0,
             &pl->activation_bytes);
        size_t bn = L->kind == LAYER_BATCHNORM2D ? (size_t)L->out_c * f : 0;
        take(pl, &pl->bn_mean[l], bn, &pl->activation_bytes);
        take(pl, &pl->bn_invstd[l], bn, &pl->activation_bytes);
        if (L->kind == LAYER_BATCHNORM2D || L->kind == LAYER_CONV2D)
            if ((size_t)L->out_c > widest_c) widest_c = (size_t)L->out_c;
        if (L->kind == LAYER_CONV2D) {
            size_t chunk = (size_t)memory_plan_conv_chunk(L, in->max_rows) * L->out_h * L->out_w * L->in_c *
                           L->kernel * L->kernel * f;
            if (chunk > col) col = chunk;
        }
    }
    for (int k = 0; k < 2; k++) take(pl, &pl->dz[k], in->train ? rows * widest * f : 0, &pl->activation_bytes);

    take(pl, &pl->im2col, col, &pl->scratch_bytes);
    take(pl, &pl->bias_partials, in->train ? (size_t)MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS * widest_out * f : 0,
         &pl->scratch_bytes);
    take(pl, &pl->channel_partials, 2 * (size_t)MEMORY_PLAN_CHANNEL_CHUNKS * widest_c * sizeof(double),
         &pl->scratch_bytes);
    take(pl, &pl->bn_sums, s->n_stats ? (2 * widest_c + 1) * sizeof(double) : 0, &pl->scratch_bytes);
    take(pl, &pl->row_keys, in->train && s->has_dropout ? rows * sizeof(uint64_t) : 0, &pl->data_bytes);
    take(pl, &pl->row_loss, rows * sizeof(float), &pl->scratch_bytes);
    take(pl, &pl->row_hit, rows * sizeof(int), &pl->scratch_bytes);
    take(pl, &pl->norm_partials, (size_t)MEMORY_PLAN_NORM_BLOCKS * sizeof(double), &pl->scratch_bytes);
    take(pl, &pl->scalars, (size_t)MEMORY_PLAN_SCALARS * sizeof(double), &pl->scratch_bytes);
    take(pl, &pl->parts_scratch, in->train ? memory_plan_parts_scratch_floats(n, width, parts) * f : 0,
         &pl->scratch_bytes);
    take(pl, &pl->part_losses, in->train && width > 1 ? (size_t)width * sizeof(double) : 0, &pl->scratch_bytes);
    take(pl, &pl->bn_shards, in->train && s->sync_bn ? memory_plan_bn_shards_doubles(s, width) * sizeof(double) : 0,
         &pl->scratch_bytes);
    take(pl, &pl->batch_indices, rows * sizeof(uint64_t), &pl->data_bytes);
    take(pl, &pl->batch_labels, rows, &pl->data_bytes);
    if (resident) {
        take(pl, &pl->train_images, in->train_count * in->pixels, &pl->data_bytes);
        take(pl, &pl->train_labels, in->train_count, &pl->data_bytes);
        take(pl, &pl->test_images, in->test_count * in->pixels, &pl->data_bytes);
        take(pl, &pl->test_labels, in->test_count, &pl->data_bytes);
    } else {
        take(pl, &pl->stage_images, rows * in->pixels, &pl->data_bytes);
    }
    take(pl, &pl->cublas_workspace, MEMORY_PLAN_CUBLAS_WORKSPACE, &pl->scratch_bytes);

    pl->coll_staging_bytes = MEMORY_PLAN_COLL_STAGING;
    pl->runtime_reserve_bytes = MEMORY_PLAN_RUNTIME_RESERVE;
    pl->total_bytes = pl->arena_bytes + pl->coll_staging_bytes + pl->runtime_reserve_bytes;
}

void memory_plan_compute(const memory_plan_input *in, size_t share_bytes, memory_plan *plan) {
    layout(in, 1, plan);
    if (share_bytes == 0 || plan->total_bytes <= share_bytes) return;
    memory_plan staged;
    layout(in, 0, &staged);
    if (staged.total_bytes < plan->total_bytes) *plan = staged;
}

size_t memory_plan_share(double gpu_memory_fraction, size_t device_total) {
    double share = gpu_memory_fraction * (double)device_total;
    if (share <= 0) return 0;
    if (share >= (double)device_total) return device_total;
    return (size_t)share;
}

void memory_plan_format_bytes(size_t bytes, char *out, size_t outlen) {
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024) snprintf(out, outlen, "%.1f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024) snprintf(out, outlen, "%.0f MiB", b / (1024.0 * 1024));
    else if (b >= 1024.0) snprintf(out, outlen, "%.0f KiB", b / 1024.0);
    else snprintf(out, outlen, "%zu bytes", bytes);
}

/* Formats two sizes that are compared in one sentence: when one decimal would make
 * them read the same ("2.0 GiB" and "2.0 GiB"), both get three. */
static void format_pair(size_t a, size_t b, char *fa, char *fb, size_t n) {
    memory_plan_format_bytes(a, fa, n);
    memory_plan_format_bytes(b, fb, n);
    if (strcmp(fa, fb) == 0 && a != b) {
        snprintf(fa, n, "%.3f GiB", (double)a / (1024.0 * 1024 * 1024));
        snprintf(fb, n, "%.3f GiB", (double)b / (1024.0 * 1024 * 1024));
    }
}

int memory_plan_check(const memory_plan *plan, double gpu_memory_fraction, size_t device_total, size_t device_free,
                      char *why, size_t whylen) {
    char need[32], share_s[32], total_s[32], free_s[32];
    size_t share = memory_plan_share(gpu_memory_fraction, device_total);
    memory_plan_format_bytes(device_total, total_s, sizeof total_s);
    if (plan->total_bytes > share) {
        format_pair(plan->total_bytes, share, need, share_s, sizeof need);
        snprintf(why, whylen,
                 "needs %s of GPU memory, its share is %s (gpu_memory_fraction %g of %s); "
                 "lower train.batch_size or the model's size, or raise distributed.gpu_memory_fraction",
                 need, share_s, gpu_memory_fraction, total_s);
        return -1;
    }
    /* What is free was measured with the runtime's memory and the staging buffer
     * already taken: what must still be free is the arena, and a margin. */
    size_t to_allocate = plan->arena_bytes + MEMORY_PLAN_FREE_MARGIN;
    if (device_free > 0 && to_allocate > device_free) {
        char arena_s[32], margin_s[32];
        format_pair(to_allocate, device_free, need, free_s, sizeof need);
        memory_plan_format_bytes(share, share_s, sizeof share_s);
        memory_plan_format_bytes(plan->arena_bytes, arena_s, sizeof arena_s);
        memory_plan_format_bytes(MEMORY_PLAN_FREE_MARGIN, margin_s, sizeof margin_s);
        snprintf(why, whylen,
                 "needs %s of GPU memory (%s for the run and a margin of %s for what CUDA and cuBLAS load on first "
                 "use), within its share of %s (gpu_memory_fraction %g of %s), but only %s is free on the device once "
                 "the CUDA context, cuBLAS and NCCL hold theirs: other processes hold the rest, or lower "
                 "train.batch_size",
                 need, arena_s, margin_s, share_s, gpu_memory_fraction, total_s, free_s);
        return -1;
    }
    if (whylen) why[0] = '\0';
    return 0;
}

void memory_plan_describe(const memory_plan *plan, char *out, size_t outlen) {
    char total[32], model[32], opt[32], act[32], data[32], scratch[32], reserve[32];
    memory_plan_format_bytes(plan->total_bytes, total, sizeof total);
    memory_plan_format_bytes(plan->model_bytes, model, sizeof model);
    memory_plan_format_bytes(plan->optimizer_bytes, opt, sizeof opt);
    memory_plan_format_bytes(plan->activation_bytes, act, sizeof act);
    memory_plan_format_bytes(plan->data_bytes, data, sizeof data);
    memory_plan_format_bytes(plan->scratch_bytes + plan->coll_staging_bytes, scratch, sizeof scratch);
    memory_plan_format_bytes(plan->runtime_reserve_bytes, reserve, sizeof reserve);
    snprintf(out, outlen,
             "GPU memory plan: %s (parameters and gradients %s, optimizer state %s, activations %s, "
             "data %s (%s), workspaces %s, CUDA/cuBLAS/NCCL reserve %s)",
             total, model, opt, act, data, plan->data_resident ? "whole dataset resident" : "staged per batch",
             scratch, reserve);
}
