/* Checking checkpoint.load against its config at submission: see ckpt_fit.h. */
#include "ckpt_fit.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ckpt_header.h"

#define FORMAT "ddpd-checkpoint-1"
#define AT "/checkpoint/load"

static const char *str_at(const json_t *config, const char *section, const char *key, const char *fallback) {
    const char *v = json_string_value(json_object_get(json_object_get(config, section), key));
    return v ? v : fallback;
}

/* An mlp's linear layers: layers.i.weight is [hidden[i], hidden[i-1]] (the input's
 * width comes from the data), and the output layer follows the last hidden one. */
static void check_mlp_widths(const json_t *config, const ckpt_header *h, const char *path, schema_errors *errs) {
    const json_t *hidden = json_object_get(json_object_get(config, "model"), "hidden");
    size_t n = json_array_size(hidden), layers = 0;
    char name[64];
    int64_t dims[4] = {0};
    for (;; layers++) {
        snprintf(name, sizeof name, "layers.%zu.weight", layers);
        if (ckpt_tensor_shape(h, name, dims) < 0) break;
    }
    if (layers != n + 1) {
        schema_errors_add(errs, AT, "%s was made for a model with %zu hidden layer%s, but model.hidden has %zu", path,
                          layers ? layers - 1 : 0, layers == 2 ? "" : "s", n);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(name, sizeof name, "layers.%zu.weight", i);
        json_int_t want = json_integer_value(json_array_get(hidden, i));
        if (ckpt_tensor_shape(h, name, dims) != 2 || dims[0] != want) {
            schema_errors_add(errs, AT, "%s does not fit model.hidden: its hidden layer %zu is %lld wide, the config's "
                              "is %lld", path, i, (long long)dims[0], (long long)want);
            return;
        }
    }
}

void ckpt_fit_check(const json_t *config, const char *runs_dir, const char *path, schema_errors *errs) {
    ckpt_header h;
    char err[1024];
    if (ckpt_header_read(runs_dir, path, &h, err, sizeof err) != 0) {
        schema_errors_add(errs, AT, "%s", err);
        return;
    }
    const char *kind = str_at(config, "model", "type", "mlp");
    const char *saved = h.model ? h.model : "mlp"; /* older checkpoints: mlp */
    const char *mode = json_string_value(json_object_get(config, "mode"));
    bool training = !mode || strcmp(mode, "train") == 0;
    if (!h.format || strcmp(h.format, FORMAT) != 0) {
        schema_errors_add(errs, AT, "%s is not a ddpd checkpoint (its metadata's format is %s, not " FORMAT ")", path,
                          h.format ? h.format : "missing");
    } else if (strcmp(saved, kind) != 0) {
        schema_errors_add(errs, AT, "%s holds a %s model but model.type is %s", path, saved, kind);
    } else {
        if (strcmp(kind, "mlp") == 0) check_mlp_widths(config, &h, path, errs);
        const char *opt = str_at(json_object_get(config, "train"), "optimizer", "type", "adam");
        if (training && (!h.optimizer || strcmp(h.optimizer, opt) != 0))
            schema_errors_add(errs, AT, "%s holds %s optimizer state but train.optimizer.type is %s: a train run continues "
                              "the checkpoint's optimizer (use its type, or mode eval to evaluate it)", path,
                              h.optimizer ? h.optimizer : "no", opt);
        json_int_t epochs = json_integer_value(json_object_get(json_object_get(config, "train"), "epochs"));
        if (training && h.next_epoch >= 0 && h.next_epoch >= epochs)
            schema_errors_add(errs, "/train/epochs", "is %lld but %s already holds %lld epochs: nothing is left to train "
                              "(ask for more than %lld)", (long long)epochs, path, (long long)h.next_epoch,
                              (long long)h.next_epoch);
    }
    ckpt_header_free(&h);
}
