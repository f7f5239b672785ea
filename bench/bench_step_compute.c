/* Times one rank's training step with nothing around it: forward, backward and the
 * optimizer of the config's model on the config's training images (consecutive
 * batches, converted to floats beforehand), in one process on one thread (as each
 * rank runs), no collectives, no reporting. That is
 * the most a rank could do; ddp-trainer's samples/s is held against it (bench/cnn.sh
 * runs two of these side by side, a half batch each, for the two-rank ceiling).
 * usage: bench_step_compute CONFIG.json BATCH [SECONDS]
 * prints {"batch": B, "step_ms": mean, "step_ms_best": best, "samples_per_s": B / mean} */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "conv_dnnl.h"
#include "idx.h"
#include "model.h"
#include "optim.h"
#include "run_config.h"

#define BATCHES 16 /* distinct batches cycled through */
#define WARMUP_STEPS 2

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: bench_step_compute CONFIG.json BATCH [SECONDS]\n");
        return 2;
    }
    run_config cfg;
    schema_errors errs = {0};
    if (run_config_load_file(argv[1], &cfg, NULL, &errs) != 0) {
        fprintf(stderr, "bench_step_compute: %s is not a valid run config\n", argv[1]);
        return 2;
    }
    int rows = atoi(argv[2]);
    double seconds = argc > 3 ? atof(argv[3]) : 3.0;
    openblas_set_num_threads(1);
    conv_dnnl_set_threads(1);
    idx_dataset d;
    char err[768], note[640], cache[2048];
    if (idx_load_cached(NULL, cfg.data.train_images, cfg.data.train_labels, 0, idx_default_cache_dir(cache, sizeof cache), &d,
                        err, sizeof err, note, sizeof note) != 0) {
        fprintf(stderr, "bench_step_compute: %s\n", err);
        return 2;
    }
    model_shape s;
    model_workspace w;
    if (rows < 1 || (size_t)rows * BATCHES > d.count ||
        model_shape_init(&s, &cfg, 1, d.rows, d.cols, d.num_classes, err, sizeof err) != 0 ||
        model_workspace_init(&w, &s, rows) != 0) {
        fprintf(stderr, "bench_step_compute: cannot set up the model: %s\n", rows < 1 ? "bad BATCH" : err);
        return 2;
    }
    if (s.kind == MODEL_CNN && conv_dnnl_wanted() && model_workspace_use_onednn(&w, err, sizeof err) != 0)
        fprintf(stderr, "bench_step_compute: convolutions through im2col: %s\n", err);
    float *params = malloc(sizeof(float) * s.n_params), *grads = malloc(sizeof(float) * s.n_params);
    float *stats = calloc(s.n_stats + 1, sizeof(float));
    size_t n = (size_t)rows * BATCHES;
    size_t *ids = malloc(sizeof(size_t) * n);
    float *images = malloc(sizeof(float) * n * s.in_dim);
    optimizer opt;
    if (!params || !grads || !stats || !ids || !images || optimizer_init(&opt, &cfg, s.n_params) != 0) {
        fprintf(stderr, "bench_step_compute: out of memory\n");
        return 1;
    }
    model_init_params(&s, params, stats, cfg.seed);
    for (size_t i = 0; i < n * s.in_dim; i++) images[i] = (float)d.images[i] * (1.0f / 255.0f);
    for (size_t i = 0; i < n; i++) ids[i] = i;
    int steps = -WARMUP_STEPS; /* the first steps fault in buffers and build primitives: not timed */
    double t0 = 0, best = 1e9;
    while (steps <= 0 || now() - t0 < seconds || steps < 5) {
        if (steps == 0) t0 = now();
        double st = now();
        size_t first = (size_t)((steps + WARMUP_STEPS) % BATCHES) * rows;
        memcpy(w.act[0], images + first * s.in_dim, sizeof(float) * (size_t)rows * s.in_dim);
        model_pass pass = {.train = 1, .seed = cfg.seed, .global_step = steps + WARMUP_STEPS, .example_ids = ids + first};
        double loss = 0;
        long correct = 0;
        model_forward_backward(&w, params, stats, grads, d.labels + first, rows, &pass, &loss, &correct, NULL, NULL);
        optimizer_step(&opt, params, grads, cfg.train.optimizer.lr);
        double dt = now() - st;
        if (steps >= 0 && dt < best) best = dt;
        steps++;
    }
    double mean = (now() - t0) / steps;
    printf("{\"batch\": %d, \"steps\": %d, \"step_ms\": %.4f, \"step_ms_best\": %.4f, \"samples_per_s\": %.1f}\n", rows,
           steps, mean * 1e3, best * 1e3, rows / mean);
    return 0;
}
