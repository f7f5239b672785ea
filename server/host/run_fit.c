/* A built-in run's model and host-memory plan at submission: see run_fit.h. */
#include "run_fit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host_plan.h"
#include "idx_header.h"
#include "model_shape.h"
#include "run_config.h"

/* model_shape_init's message starts with the JSON pointer of the layer at fault. */
static void add_shape_error(schema_errors *errs, const char *msg) {
    const char *colon = strstr(msg, ": ");
    if (msg[0] == '/' && colon) {
        char at[128];
        snprintf(at, sizeof at, "%.*s", (int)(colon - msg), msg);
        schema_errors_add(errs, at, "%s", colon + 2);
    } else {
        schema_errors_add(errs, "/model", "%s", msg);
    }
}

void run_fit_check(const json_t *resolved, bool cpu, int slots, schema_errors *errs) {
    json_t *doc = json_deep_copy(resolved);
    schema_errors parse = {0};
    run_config *cfg = calloc(1, sizeof *cfg);
    model_shape *shape = malloc(sizeof *shape);
    char err[512];
    if (!doc || !cfg || !shape || run_config_from_json(doc, cfg, &parse) != 0) goto done; /* the schema said why */
    size_t train_n = 0, test_n = 0, labels_n = 0;
    int rows = 0, cols = 0, trows = 0, tcols = 0, classes = 0;
    /* a file that is not IDX is left to the trainer, which fails the run naming it */
    if (idx_header_images(cfg->data.train_images, &train_n, &rows, &cols, err, sizeof err) != 0 ||
        idx_header_images(cfg->data.test_images, &test_n, &trows, &tcols, err, sizeof err) != 0 ||
        idx_header_labels(cfg->data.test_labels, (size_t)cfg->data.test_limit, &labels_n, &classes, err,
                          sizeof err) != 0)
        goto done;
    if (classes < 1) classes = 1;
    if (model_shape_init(shape, cfg, 1, trows, tcols, classes, err, sizeof err) != 0) {
        add_shape_error(errs, err);
        goto done;
    }
    if (!cpu) goto done; /* GPU runs: the trainer's GPU memory plan, against the device it gets */
    if (cfg->data.limit > 0 && (size_t)cfg->data.limit < train_n) train_n = (size_t)cfg->data.limit;
    if (cfg->data.test_limit > 0 && (size_t)cfg->data.test_limit < test_n) test_n = (size_t)cfg->data.test_limit;
    host_plan_input in = {.shape = shape,
                          .world_size = cfg->distributed.world_size,
                          .local_batch = cfg->train.batch_size / cfg->distributed.world_size,
                          .n_opt_states = host_plan_optimizer_states(cfg),
                          .threads_per_rank = cfg->distributed.threads_per_rank,
                          .pixels = (size_t)trows * tcols,
                          .train_count = cfg->mode == RUN_MODE_TRAIN ? train_n : 0,
                          .test_count = test_n};
    host_plan plan;
    host_plan_compute(&in, &plan);
    if (host_plan_check(&plan, in.world_size, slots, host_plan_host_total(), 0, err, sizeof err) != 0)
        schema_errors_add(errs, "/model", "%s", err);
done:
    schema_errors_free(&parse);
    json_decref(doc);
    free(cfg);
    free(shape);
}
