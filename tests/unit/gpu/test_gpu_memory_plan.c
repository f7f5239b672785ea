/* The GPU memory plan (trainer/model_plan/memory_plan.c), on the CPU: its formula
 * against sizes worked out by hand (MLPs and a CNN), the layout (aligned, disjoint, inside the
 * arena), the resident-or-staged decision, sync batch norm over batch shards' buffers,
 * and the refusal message with both
 * numbers in it. */
#include <string.h>

#include "check.h"
#include "memory_plan.h"

#define GIB (1024.0 * 1024 * 1024)

static size_t al(size_t n) { return (n + 255) / 256 * 256; }

static memory_plan_input input(const model_shape *s, int max_rows, int train, int states) {
    return (memory_plan_input){.shape = s, .max_rows = max_rows, .train = train, .n_opt_states = states,
                               .pixels = 784, .train_count = 60000, .test_count = 10000};
}

/* Every region lies in the arena, starts on 256 bytes, and no two overlap. */
static void check_layout(const memory_plan *p, const char *what) {
    const memory_region *r = (const memory_region *)p;
    size_t n = offsetof(memory_plan, data_resident) / sizeof(memory_region);
    for (size_t i = 0; i < n; i++) {
        if (!r[i].bytes) continue;
        CHECK(r[i].offset % 256 == 0, "%s: region %zu at %zu is not aligned", what, i, r[i].offset);
        CHECK(r[i].offset + r[i].bytes <= p->arena_bytes, "%s: region %zu ends past the arena", what, i);
        for (size_t j = i + 1; j < n; j++) {
            if (!r[j].bytes) continue;
            int apart = r[i].offset + r[i].bytes <= r[j].offset || r[j].offset + r[j].bytes <= r[i].offset;
            CHECK(apart, "%s: regions %zu and %zu overlap", what, i, j);
        }
    }
}

static void test_formula_mlp_4096(void) {
    int hidden[] = {4096, 4096};
    model_shape s;
    model_shape_mlp(&s, 784, hidden, 2, 10, ACT_RELU);
    size_t tensors = 784 * 4096 + 4096 + 4096 * 4096 + 4096 + 4096 * 10 + 10;
    REQUIRE(s.n_params >= tensors && s.n_params - tensors < 6 * MODEL_PARAM_ALIGN,
            "n_params %zu: the tensors and their alignment", s.n_params);
    size_t P = s.n_params;
    memory_plan_input in = input(&s, 1024, 1, 2);
    memory_plan p;
    memory_plan_compute(&in, 0, &p);
    check_layout(&p, "784-4096-4096-10 adam");
    CHECK(p.data_resident, "resident when the share is not limited");
    CHECK(p.model_bytes == 2 * al(P * 4), "params + grads: %zu", p.model_bytes);
    CHECK(p.optimizer_bytes == 2 * al(P * 4), "adam keeps two states: %zu", p.optimizer_bytes);
    size_t act = al(1024 * 784 * 4) + 2 * al(1024 * 4096 * 4) + al(1024 * 10 * 4) + 2 * al(1024 * 4096 * 4);
    CHECK(p.activation_bytes == act, "activations %zu, expected %zu", p.activation_bytes, act);
    size_t data = al(1024 * 8) + al(1024) + al(60000 * 784) + al(60000) + al(10000 * 784) + al(10000);
    CHECK(p.data_bytes == data, "data %zu, expected %zu", p.data_bytes, data);
    size_t scratch = al(256 * 4096 * 4) + al(1024 * 4) + al(1024 * 4) + al(512 * 8) + al(8 * 8) + al(32u << 20);
    CHECK(p.scratch_bytes == scratch, "scratch %zu, expected %zu", p.scratch_bytes, scratch);
    CHECK(p.arena_bytes == p.model_bytes + p.optimizer_bytes + p.activation_bytes + p.data_bytes + p.scratch_bytes,
          "the arena is the sum of the kinds");
    CHECK(p.total_bytes == p.arena_bytes + (4u << 20) + (320u << 20), "total = arena + staging + reserve");
    char line[512];
    memory_plan_describe(&p, line, sizeof line);
    printf("  %s\n", line);
    CHECK(strstr(line, "whole dataset resident") != NULL, "describe: %s", line);

    memory_plan_input sgd = input(&s, 1024, 1, 0), eval = input(&s, 1024, 0, 2);
    memory_plan ps, pe;
    memory_plan_compute(&sgd, 0, &ps);
    memory_plan_compute(&eval, 0, &pe);
    CHECK(ps.optimizer_bytes == 0 && ps.opt_state[0].bytes == 0, "plain SGD has no state");
    CHECK(pe.grads.bytes == 0 && pe.optimizer_bytes == 0 && pe.dz[0].bytes == 0 && pe.bias_partials.bytes == 0,
          "eval mode needs no gradients, optimizer state or backward buffers");
    check_layout(&pe, "eval");
}

static void test_gelu_keeps_pre_activations(void) {
    int hidden[] = {300, 100};
    model_shape s;
    model_shape_mlp(&s, 784, hidden, 2, 10, ACT_GELU);
    memory_plan_input in = input(&s, 512, 1, 1);
    memory_plan p;
    memory_plan_compute(&in, 0, &p);
    CHECK(p.pre[0].bytes == 512 * 300 * 4 && p.pre[1].bytes == 512 * 100 * 4, "gelu keeps hidden pre-activations");
    CHECK(p.pre[2].bytes == 0, "not for the logits");
    CHECK(p.dz[0].bytes == 512 * 784 * 4, "dz is as wide as the widest of input and layers");
    CHECK(p.optimizer_bytes == al(s.n_params * 4), "sgd momentum keeps one state");
    check_layout(&p, "gelu");
}

static void test_staged_when_the_dataset_does_not_fit(void) {
    int hidden[] = {512, 256};
    model_shape s;
    model_shape_mlp(&s, 784, hidden, 2, 10, ACT_RELU);
    memory_plan_input in = input(&s, 128, 1, 2);
    memory_plan resident, staged;
    memory_plan_compute(&in, 0, &resident);
    /* A share between the two sizes: the dataset (about 55 MB) must stay on the host. */
    size_t share = resident.total_bytes - 20u * 1024 * 1024;
    memory_plan_compute(&in, share, &staged);
    CHECK(!staged.data_resident, "staged when the resident plan exceeds the share");
    CHECK(staged.total_bytes <= share, "the staged plan fits: %zu > %zu", staged.total_bytes, share);
    CHECK(staged.stage_images.bytes == 128 * 784 && staged.train_images.bytes == 0, "a batch of images staged");
    check_layout(&staged, "staged");
    memory_plan same;
    memory_plan_compute(&in, resident.total_bytes, &same);
    CHECK(same.data_resident, "resident when it just fits");
}

/* The default CNN: its conv activations, max-pool indices, per-channel scratch and the
 * im2col chunk; bigger batches convolve in chunks of at most MEMORY_PLAN_IM2COL_BYTES. */
static void test_cnn(void) {
    run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.model.type = MODEL_CNN;
    cfg.model.activation = ACT_RELU;
    cfg.model.cnn.conv[0] = (conv_block_config){32, 5, 1, 2, 2, false, 0};
    cfg.model.cnn.conv[1] = (conv_block_config){64, 5, 1, 2, 2, true, 0.25};
    cfg.model.cnn.n_conv = 2;
    cfg.model.cnn.fc[0] = 1024;
    cfg.model.cnn.n_fc = 1;
    model_shape s;
    char err[256];
    REQUIRE(model_shape_init(&s, &cfg, 1, 28, 28, 10, err, sizeof err) == 0, "%s", err);
    /* conv 0, pool 1, conv 2, bn 3, act 4, pool 5, dropout 6, flatten 7, fc 8, fc 9 */
    REQUIRE(s.n_layers == 10 && s.layer[3].kind == LAYER_BATCHNORM2D && s.layer[6].kind == LAYER_DROPOUT, "layers");
    size_t rows = 256;
    memory_plan_input in = input(&s, (int)rows, 1, 2);
    memory_plan p;
    memory_plan_compute(&in, 0, &p);
    check_layout(&p, "cnn adam");
    CHECK(p.act[1].bytes == rows * 32 * 28 * 28 * 4 && p.act[2].bytes == rows * 32 * 14 * 14 * 4,
          "conv and pool outputs: %zu, %zu", p.act[1].bytes, p.act[2].bytes);
    CHECK(p.argmax[1].bytes == rows * 32 * 14 * 14 * 4 && p.argmax[5].bytes == rows * 64 * 7 * 7 * 4,
          "max-pool indices for training");
    CHECK(p.mask[6].bytes == rows * 64 * 7 * 7 && p.row_keys.bytes == rows * 8, "dropout: a byte mask and row keys");
    CHECK(p.bn_mean[3].bytes == 64 * 4 && p.stats.bytes == 2 * 64 * 4 && p.bn_sums.bytes == (2 * 64 + 1) * 8,
          "batch norm: batch statistics, running statistics, sums");
    CHECK(p.channel_partials.bytes == 2 * 64 * 64 * 8, "per-channel partials: %zu", p.channel_partials.bytes);
    size_t col = rows * 14 * 14 * 32 * 25 * 4; /* conv 2's patches for the whole batch: 160 MiB */
    CHECK(p.im2col.bytes == col, "im2col: the whole batch when it fits: %zu vs %zu", p.im2col.bytes, col);
    CHECK(p.dz[0].bytes == rows * 32 * 28 * 28 * 4, "dz as wide as the widest layer");
    CHECK(p.model_bytes == 2 * al(s.n_params * 4) + al(2 * 64 * 4), "parameters, gradients, running statistics");

    memory_plan_input big = input(&s, 2048, 1, 2), eval = input(&s, 2048, 0, 2);
    memory_plan pb, pe;
    memory_plan_compute(&big, 0, &pb);
    memory_plan_compute(&eval, 0, &pe);
    int chunk = memory_plan_conv_chunk(&s.layer[2], 2048);
    CHECK(chunk == (int)(MEMORY_PLAN_IM2COL_BYTES / (14 * 14 * 32 * 25 * 4)) && chunk < 2048,
          "batch 2048: conv 2 in chunks of %d examples", chunk);
    CHECK(pb.im2col.bytes <= MEMORY_PLAN_IM2COL_BYTES && pb.im2col.bytes >= MEMORY_PLAN_IM2COL_BYTES / 2,
          "the chunk is capped: %zu", pb.im2col.bytes);
    CHECK(pe.argmax[1].bytes == 0 && pe.mask[6].bytes == 0 && pe.row_keys.bytes == 0 && pe.dz[0].bytes == 0,
          "evaluation keeps no indices, masks or gradients");
    CHECK(pe.stats.bytes == 2 * 64 * 4, "but the running statistics");
    check_layout(&pb, "cnn batch 2048");
    check_layout(&pe, "cnn eval");
    char line[512];
    memory_plan_describe(&pb, line, sizeof line);
    printf("  %s\n", line);

    /* sync batch norm over 4 batch shards, all on this GPU: the batch norm's 2 sync
     * points' totals (its forward and backward) and the 4 shards' sums gathered for one,
     * each 2 C + 1 doubles; a spare for the running statistics the gathering passes
     * write; none of it with per-shard statistics */
    memory_plan_input shards = input(&s, 64, 1, 2);
    shards.width = shards.parts = 4;
    memory_plan ps, pr;
    memory_plan_compute(&shards, 0, &pr);
    s.sync_bn = 1;
    memory_plan_compute(&shards, 0, &ps);
    size_t ld = 0;
    CHECK(memory_plan_bn_points(&s, &ld) == 2 && ld == 2 * 64 + 1, "two sync points of 129 doubles: %zu", ld);
    CHECK(ps.bn_shards.bytes == (2 + 4) * (2 * 64 + 1) * 8 && ps.spare_stats.bytes == 2 * 64 * 4,
          "sync batch norm, width 4: the points' totals and the shards' sums: %zu bytes", ps.bn_shards.bytes);
    CHECK(pr.bn_shards.bytes == 0, "per-shard statistics: none (%zu)", pr.bn_shards.bytes);
    shards.width = 4, shards.parts = 1; /* one shard on this GPU: the spare is still written */
    memory_plan_compute(&shards, 0, &pr);
    CHECK(pr.spare_stats.bytes == 2 * 64 * 4 && pr.bn_shards.bytes == ps.bn_shards.bytes,
          "one shard of 4 here: the same: %zu, %zu", pr.spare_stats.bytes, pr.bn_shards.bytes);
    check_layout(&ps, "cnn sync batch norm, width 4");
    s.sync_bn = 0;
}

static void test_refusal_message(void) {
    memory_plan p;
    memset(&p, 0, sizeof p);
    p.total_bytes = (size_t)(3.1 * GIB);
    p.arena_bytes = p.total_bytes - (324u << 20);
    p.coll_staging_bytes = 4u << 20;
    p.runtime_reserve_bytes = 320u << 20;
    char why[512];
    size_t eight = (size_t)(8 * GIB);
    int rc = memory_plan_check(&p, 0.25, eight, eight, why, sizeof why);
    CHECK(rc == -1, "3.1 GiB does not fit a quarter of 8 GiB");
    const char *want = "needs 3.1 GiB of GPU memory, its share is 2.0 GiB (gpu_memory_fraction 0.25 of 8.0 GiB)";
    CHECK(strncmp(why, want, strlen(want)) == 0, "got: %s", why);
    CHECK(strstr(why, "gpu_memory_fraction") && strstr(why, "batch_size"), "says what to change: %s", why);
    printf("  refusal: %s\n", why);

    CHECK(memory_plan_check(&p, 0.5, eight, eight, why, sizeof why) == 0, "fits half of 8 GiB: %s", why);
    rc = memory_plan_check(&p, 1.0, eight, (size_t)(1.5 * GIB), why, sizeof why);
    CHECK(rc == -1 && strstr(why, "is free on the device"), "too little free memory: %s", why);
    printf("  refusal: %s\n", why);

    /* What is free is measured with the staging buffer (and the CUDA context,
     * cuBLAS and NCCL) already allocated: the arena and the stated margin must fit,
     * and the staging buffer is not counted a second time. */
    size_t exact = p.arena_bytes + MEMORY_PLAN_FREE_MARGIN;
    CHECK(memory_plan_check(&p, 1.0, eight, exact, why, sizeof why) == 0,
          "the arena and the margin fit exactly what is free (the staging buffer is not counted again): %s", why);
    rc = memory_plan_check(&p, 1.0, eight, exact - 1, why, sizeof why);
    CHECK(rc == -1 && strstr(why, "margin of 256 MiB") && strstr(why, "is free on the device"),
          "a byte less than the arena and the margin is refused, the margin stated: %s", why);

    /* Sizes that round alike get more digits rather than "needs 2.0 GiB, share 2.0 GiB". */
    p.total_bytes = (size_t)(2.02 * GIB);
    rc = memory_plan_check(&p, 0.25, eight, 0, why, sizeof why);
    CHECK(rc == -1 && strstr(why, "needs 2.020 GiB") && strstr(why, "share is 2.000 GiB"), "got: %s", why);
}

static void test_format_bytes(void) {
    char b[32];
    memory_plan_format_bytes((size_t)(3.14 * GIB), b, sizeof b);
    CHECK(strcmp(b, "3.1 GiB") == 0, "%s", b);
    memory_plan_format_bytes(412u << 20, b, sizeof b);
    CHECK(strcmp(b, "412 MiB") == 0, "%s", b);
    memory_plan_format_bytes(96u << 10, b, sizeof b);
    CHECK(strcmp(b, "96 KiB") == 0, "%s", b);
    CHECK(memory_plan_share(0.25, (size_t)(8 * GIB)) == (size_t)(2 * GIB), "share");
    CHECK(memory_plan_share(1.0, 12345) == 12345, "a share of 1 is the whole device");
}

int main(void) {
    test_formula_mlp_4096();
    test_gelu_keeps_pre_activations();
    test_staged_when_the_dataset_does_not_fit();
    test_cnn();
    test_refusal_message();
    test_format_bytes();
    return test_done("test_gpu_memory_plan");
}
