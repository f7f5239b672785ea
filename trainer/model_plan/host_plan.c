/* The host-memory plan of a CPU run: see host_plan.h. */
#include "host_plan.h"

#include <stdio.h>
#include <string.h>

#include "memory_plan.h"

#define PAGE 4096u

static size_t round_page(size_t n) { return (n + PAGE - 1) / PAGE * PAGE; }

int host_plan_optimizer_states(const run_config *cfg) {
    if (cfg->train.optimizer.type != OPT_SGD) return 2;
    return cfg->train.optimizer.momentum != 0.0 ? 1 : 0;
}

size_t host_plan_arena_bytes(const model_shape *s) {
    /* a rank's arena: its gradients and its copy of the parameters (alloc_mirrored);
     * the shared one: two optimizer states (one size serves both) */
    return 2 * (s->n_params * sizeof(float) + 64);
}

/* Mirrors model_workspace_init, buffer by buffer. */
size_t host_plan_workspace_bytes(const model_shape *s, int max_rows) {
    size_t rows = (size_t)max_rows, bytes = sizeof(float) * rows * s->in_dim;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        size_t n = rows * model_layer_out_size(s, l);
        bytes += sizeof(float) * n;
        if ((L->kind == LAYER_LINEAR || L->kind == LAYER_CONV2D) && L->act == ACT_GELU) bytes += sizeof(float) * n;
        if (L->kind == LAYER_DROPOUT) bytes += n;
        if (L->kind == LAYER_MAXPOOL2D) bytes += sizeof(int32_t) * n;
        if (L->kind == LAYER_BATCHNORM2D) bytes += 2 * sizeof(float) * L->out_c;
    }
    model_scratch k;
    model_scratch_of(s, &k);
    bytes += 2 * sizeof(float) * rows * k.widest + sizeof(double) * (2 * (size_t)k.widest_c + 1) + sizeof(uint64_t) * rows;
    if (k.col) bytes += sizeof(float) * (k.col + MODEL_IM2COL_SLACK + k.pad);
    if (k.winners) bytes += sizeof(int32_t) * (k.positions + 3 * k.winners) + 2 * sizeof(float) * k.winners +
                            sizeof(float) * (k.patch + k.pad);
    return bytes;
}

void host_plan_compute(const host_plan_input *in, host_plan *plan) {
    const model_shape *s = in->shape;
    size_t w = (size_t)in->world_size;
    size_t floats = round_page(s->n_params * sizeof(float) + 64);
    memset(plan, 0, sizeof *plan);
    plan->shared_bytes = ((size_t)in->n_opt_states + 2 * w) * floats + (2 * w + 2) * HOST_PLAN_COLL_CHUNK + 2 * PAGE;
    int max_rows = in->local_batch > HOST_PLAN_EVAL_ROWS ? in->local_batch : HOST_PLAN_EVAL_ROWS;
    plan->rank_bytes = host_plan_workspace_bytes(s, max_rows) + sizeof(float) * s->n_stats + (size_t)max_rows +
                       (size_t)(in->threads_per_rank > 0 ? in->threads_per_rank : 1) * HOST_PLAN_THREAD_BYTES +
                       HOST_PLAN_PROCESS_BASE;
    plan->data_bytes = (in->train_count + in->test_count) * (in->pixels + 1);
    plan->total_bytes = plan->shared_bytes + w * plan->rank_bytes + (w + 1) * plan->data_bytes + HOST_PLAN_PROCESS_BASE;
}

size_t host_plan_share(int world_size, int slots, size_t host_total) {
    if (slots < 1 || world_size >= slots) return host_total;
    return (size_t)((double)host_total * world_size / slots);
}

int host_plan_check(const host_plan *plan, int world_size, int slots, size_t host_total, size_t available,
                    char *why, size_t whylen) {
    char need[32], share_s[32], total_s[32], avail_s[32];
    size_t share = host_plan_share(world_size, slots, host_total);
    memory_plan_format_bytes(plan->total_bytes, need, sizeof need);
    memory_plan_format_bytes(share, share_s, sizeof share_s);
    memory_plan_format_bytes(host_total, total_s, sizeof total_s);
    if (host_total && plan->total_bytes > share) {
        snprintf(why, whylen,
                 "needs %s of host memory, its share is %s (%d of %d CPU slots of %s): use a smaller model, "
                 "batch_size or dataset limit, or fewer threads_per_rank",
                 need, share_s, world_size, slots, total_s);
        return -1;
    }
    if (available && plan->total_bytes > available) {
        memory_plan_format_bytes(available, avail_s, sizeof avail_s);
        snprintf(why, whylen, "needs %s of host memory and %s is available now (of %s): use a smaller model, "
                 "batch_size or dataset limit, or free memory on the host", need, avail_s, total_s);
        return -1;
    }
    return 0;
}

static size_t meminfo(const char *key) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    size_t n = strlen(key), kib = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            unsigned long long v = 0;
            if (sscanf(line + n + 1, "%llu", &v) == 1) kib = (size_t)v;
            break;
        }
    fclose(f);
    return kib * 1024;
}

size_t host_plan_host_total(void) { return meminfo("MemTotal"); }
size_t host_plan_host_available(void) { return meminfo("MemAvailable"); }
