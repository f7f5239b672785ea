/* What the launcher loads before any rank starts: the data sets (cached, shared by
 * the ranks), and the host-memory plan checked against this host. */
#include <stdio.h>

#include "launcher.h"
#include "launcher_state.h"
#include "host_plan.h"
#include "log.h"
#include "memory_plan.h"
#include "progress.h"

int launcher_load_data(launcher *L, char *reason, size_t n) {
    const run_config *c = &L->cfg;
    char err[768], note[640] = "", cache_buf[2048];
    const char *cache = idx_default_cache_dir(cache_buf, sizeof cache_buf);
    double t0 = now_seconds();
    if (c->mode == RUN_MODE_TRAIN) {
        if (idx_load_cached(&L->o->data_roots, c->data.train_images, c->data.train_labels, (size_t)c->data.limit, cache, &L->train, err,
                            sizeof err, note, sizeof note)) {
            snprintf(reason, n, "cannot load the training data: %s", err);
            return -1;
        }
        L->have_train = 1;
    }
    if (note[0]) log_msg(LOG_INFO, "training data %s", note);
    if (idx_load_cached(&L->o->data_roots, c->data.test_images, c->data.test_labels, (size_t)c->data.test_limit, cache, &L->test, err,
                        sizeof err, note, sizeof note)) {
        snprintf(reason, n, "cannot load the test data: %s", err);
        return -1;
    }
    L->have_test = 1;
    if (L->have_train) {
        if (L->train.rows != L->test.rows || L->train.cols != L->test.cols) {
            snprintf(reason, n, "the test images are %dx%d but the training images are %dx%d", L->test.rows,
                     L->test.cols, L->train.rows, L->train.cols);
            return -1;
        }
        int classes = L->train.num_classes > L->test.num_classes ? L->train.num_classes : L->test.num_classes;
        L->train.num_classes = L->test.num_classes = classes;
        if (L->train.count < (size_t)L->cfg.distributed.world_size) {
            snprintf(reason, n, "the training set has %zu examples, fewer than the %d batch shards (world_size)",
                     L->train.count, L->cfg.distributed.world_size);
            return -1;
        }
        log_msg(LOG_INFO, "loaded %zu training and %zu test examples (%dx%d, %d classes) in %.2f s", L->train.count,
                L->test.count, L->train.rows, L->train.cols, classes, now_seconds() - t0);
    }
    return 0;
}

/* The host-memory plan (host_plan.h) against the host and what is available now,
 * before the shared memory is made and the ranks allocate. The server checked the
 * run's share of its slots at submission by the same code. */
int launcher_check_host_memory(launcher *L, const model_shape *shape, char *why, size_t whylen) {
    host_plan_input in = {.shape = shape,
                          .world_size = L->local,
                          .local_batch = L->cfg.train.batch_size / L->cfg.distributed.world_size,
                          .n_opt_states = host_plan_optimizer_states(&L->cfg),
                          .threads_per_rank = L->cfg.distributed.threads_per_rank,
                          .pixels = (size_t)L->test.rows * L->test.cols,
                          .train_count = L->train.count,
                          .test_count = L->test.count};
    host_plan plan;
    host_plan_compute(&in, &plan);
    char need[32];
    memory_plan_format_bytes(plan.total_bytes, need, sizeof need);
    log_msg(LOG_INFO, "host memory plan: %s (%zu bytes) for %d rank%s", need, plan.total_bytes, L->local,
            L->local > 1 ? "s" : "");
    return host_plan_check(&plan, 1, 1, host_plan_host_total(), host_plan_host_available(), why, whylen);
}
