/* run_config.c - the run config: the schema embedded at build time (parsed once, shared
 * by every thread), the rules between fields that a schema cannot say, and the typed
 * struct the trainer reads. The server and the trainer validate with these same
 * functions, so a config the server accepts is one the trainer can run.
 *
 * Keep run-config.schema.json and `run_config` in step: tests/unit/schema/test_run_config.c walks
 * every leaf of the schema and fails when one is not read into the struct or when its
 * default differs from what the struct gets for {}. */
#include "run_config.h"

#include "command_run.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Generated from run-config.schema.json by cmake/embed.cmake. */
extern const char run_config_schema_json[];
extern const unsigned long run_config_schema_json_len;

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* The schema's enum strings, in the order of the C enums. */
static const char *const run_mode_names[] = {"train", "eval"};
static const char *const model_kind_names[] = {"mlp", "cnn"};
static const char *const activation_names[] = {"relu", "gelu", "tanh"};
static const char *const batch_norm_stats_names[] = {"per_rank", "sync"};
static const char *const optimizer_names[] = {"sgd", "adam", "adamw"};
static const char *const lr_schedule_names[] = {"constant", "step", "cosine"};
static const char *const backend_names[] = {"auto", "cpu", "nccl"};

static const char *name_or_unknown(const char *const *names, size_t count, int index) {
    return index >= 0 && (size_t)index < count ? names[index] : "unknown";
}

const char *run_mode_name(run_mode m) { return name_or_unknown(run_mode_names, COUNT(run_mode_names), m); }
const char *model_kind_name(model_kind m) { return name_or_unknown(model_kind_names, COUNT(model_kind_names), m); }
const char *activation_name(activation_kind a) { return name_or_unknown(activation_names, COUNT(activation_names), a); }
const char *batch_norm_stats_name(batch_norm_stats_kind s) {
    return name_or_unknown(batch_norm_stats_names, COUNT(batch_norm_stats_names), s);
}
const char *optimizer_name(optimizer_kind o) { return name_or_unknown(optimizer_names, COUNT(optimizer_names), o); }
const char *lr_schedule_name(lr_schedule_kind s) { return name_or_unknown(lr_schedule_names, COUNT(lr_schedule_names), s); }
const char *backend_name(backend_kind b) { return name_or_unknown(backend_names, COUNT(backend_names), b); }

/* ---------------------------------------------------------------------------------
 * The schema, parsed on first use. */

static pthread_once_t schema_once = PTHREAD_ONCE_INIT;
static json_t *schema_document;
static char schema_parse_error[256];

static void parse_embedded_schema(void) {
    json_error_t error;
    schema_document = json_loadb(run_config_schema_json, run_config_schema_json_len, JSON_REJECT_DUPLICATES, &error);
    if (!schema_document)
        snprintf(schema_parse_error, sizeof schema_parse_error, "line %d column %d: %s", error.line, error.column,
                 error.text);
}

const json_t *run_config_schema(void) {
    pthread_once(&schema_once, parse_embedded_schema);
    return schema_document;
}

const char *run_config_schema_text(void) { return run_config_schema_json; }

/* ---------------------------------------------------------------------------------
 * Reading values by JSON pointer. The pointers here are fixed and need no escaping. */

static json_t *value_at(json_t *doc, const char *pointer) {
    json_t *node = doc;
    const char *token = pointer;
    while (node && *token == '/') {
        token++;
        size_t len = strcspn(token, "/");
        char key[64];
        if (len >= sizeof key) return NULL;
        memcpy(key, token, len);
        key[len] = '\0';
        node = json_object_get(node, key);
        token += len;
    }
    return node;
}

static bool has_error_at(const schema_errors *errs, const char *pointer) {
    for (size_t i = 0; i < errs->count; i++)
        if (!strcmp(errs->items[i].pointer, pointer)) return true;
    return false;
}

/* For the cross-field rules: a value is usable when it is there, of the right type, and
 * the schema had nothing to say about it (a value it already rejected is not judged
 * again against another). */
static bool usable_integer(json_t *doc, const schema_errors *errs, const char *pointer, json_int_t *out) {
    json_t *value = value_at(doc, pointer);
    if (!json_is_integer(value) || has_error_at(errs, pointer)) return false;
    *out = json_integer_value(value);
    return true;
}

static bool usable_number(json_t *doc, const schema_errors *errs, const char *pointer, double *out) {
    json_t *value = value_at(doc, pointer);
    if (!json_is_number(value) || has_error_at(errs, pointer)) return false;
    *out = json_number_value(value);
    return true;
}

static const char *usable_string(json_t *doc, const schema_errors *errs, const char *pointer) {
    json_t *value = value_at(doc, pointer);
    return json_is_string(value) && !has_error_at(errs, pointer) ? json_string_value(value) : NULL;
}

/* ---------------------------------------------------------------------------------
 * The rules between fields. */

/* Each rank takes batch_size / world_size examples per step. */
static void check_batch_divides_among_ranks(json_t *doc, schema_errors *errs) {
    json_int_t batch_size, world_size;
    if (!usable_integer(doc, errs, "/train/batch_size", &batch_size)) return;
    if (!usable_integer(doc, errs, "/distributed/world_size", &world_size) || world_size < 1) return;
    if (batch_size % world_size != 0)
        schema_errors_add(errs, "/train/batch_size", "must be a multiple of /distributed/world_size (%" JSON_INTEGER_FORMAT ")",
                          world_size);
}

/* Every node of a run across nodes runs as many ranks. */
static void check_nodes_divide_ranks(json_t *doc, schema_errors *errs) {
    json_int_t nodes, world_size;
    if (!usable_integer(doc, errs, "/distributed/nodes", &nodes) || nodes < 1) return;
    if (!usable_integer(doc, errs, "/distributed/world_size", &world_size) || world_size < 1) return;
    if (world_size % nodes != 0)
        schema_errors_add(errs, "/distributed/nodes", "must divide /distributed/world_size (%" JSON_INTEGER_FORMAT
                          "): every node runs as many ranks", world_size);
}

/* An elastic range runs from min_world_size up to world_size. */
static void check_min_world_size(json_t *doc, schema_errors *errs) {
    json_int_t least, world_size;
    if (!usable_integer(doc, errs, "/distributed/min_world_size", &least)) return;
    if (!usable_integer(doc, errs, "/distributed/world_size", &world_size)) return;
    if (least > world_size)
        schema_errors_add(errs, "/distributed/min_world_size",
                          "must not exceed /distributed/world_size (%" JSON_INTEGER_FORMAT
                          "): lower it, or widen the run", world_size);
}

/* Momentum and Nesterov belong to SGD; Adam's momentum is beta1. */
static void check_sgd_only_options(json_t *doc, schema_errors *errs) {
    const char *type = usable_string(doc, errs, "/train/optimizer/type");
    double momentum = 0;
    bool have_momentum = usable_number(doc, errs, "/train/optimizer/momentum", &momentum);
    json_t *nesterov_value = value_at(doc, "/train/optimizer/nesterov");
    bool nesterov = json_is_true(nesterov_value) && !has_error_at(errs, "/train/optimizer/nesterov");
    if (!type) return;
    if (strcmp(type, "sgd") != 0) {
        if (have_momentum && momentum != 0)
            schema_errors_add(errs, "/train/optimizer/momentum",
                              "applies only to the sgd optimizer (this run uses %s; its momentum is beta1)", type);
        if (nesterov)
            schema_errors_add(errs, "/train/optimizer/nesterov", "applies only to the sgd optimizer (this run uses %s)",
                              type);
    } else if (nesterov && have_momentum && momentum <= 0) {
        schema_errors_add(errs, "/train/optimizer/nesterov",
                          "requires /train/optimizer/momentum to be greater than 0 (it is 0)");
    }
}

/* Cosine decays from lr to min_lr; every schedule's warm-up ends within the run
 * (a longer one would never reach optimizer.lr). */
static void check_lr_schedule(json_t *doc, schema_errors *errs) {
    const char *type = usable_string(doc, errs, "/train/lr_schedule/type");
    int cosine = type && strcmp(type, "cosine") == 0;
    double min_lr, lr, warmup_epochs;
    if (cosine && usable_number(doc, errs, "/train/lr_schedule/min_lr", &min_lr) &&
        usable_number(doc, errs, "/train/optimizer/lr", &lr) && min_lr >= lr)
        schema_errors_add(errs, "/train/lr_schedule/min_lr",
                          "must be less than /train/optimizer/lr (%g) for the cosine schedule", lr);
    /* An evaluation trains no epochs: its schedule is never used. */
    const char *mode = usable_string(doc, errs, "/mode");
    if (mode && !strcmp(mode, "eval")) return;
    json_int_t epochs;
    if (usable_number(doc, errs, "/train/lr_schedule/warmup_epochs", &warmup_epochs) && warmup_epochs > 0 &&
        usable_integer(doc, errs, "/train/epochs", &epochs) && warmup_epochs >= (double)epochs)
        schema_errors_add(errs, "/train/lr_schedule/warmup_epochs",
                          "must be less than /train/epochs (%" JSON_INTEGER_FORMAT
                          "): the warm-up must end within the run, or the LR never reaches /train/optimizer/lr",
                          epochs);
}

/* A restart's pause doubles from backoff.initial_s up to backoff.max_s (docs/failures.md). */
static void check_restart_backoff(json_t *doc, schema_errors *errs) {
    double initial, max;
    if (usable_number(doc, errs, "/distributed/restart_policy/backoff/initial_s", &initial) &&
        usable_number(doc, errs, "/distributed/restart_policy/backoff/max_s", &max) && max < initial)
        schema_errors_add(errs, "/distributed/restart_policy/backoff/max_s",
                          "must be at least /distributed/restart_policy/backoff/initial_s (%g): the pause doubles "
                          "from it up to max_s", initial);
}

int run_config_validate(json_t *doc, schema_errors *errs) {
    size_t before = schema_errors_total(errs);
    const json_t *schema = run_config_schema();
    if (!schema) {
        schema_errors_add(errs, "", "cannot be checked: the built-in run config schema is broken (%s)",
                          schema_parse_error);
        return 1;
    }
    command_run_check_given(doc, errs); /* before the defaults hide what was given */
    command_run_fill_own_defaults(doc);
    schema_validate(schema, doc, errs);
    if (json_is_object(doc)) {
        check_nodes_divide_ranks(doc, errs);
        check_restart_backoff(doc, errs);
        check_min_world_size(doc, errs);
    }
    if (json_is_object(doc) && !command_run_is(doc)) {
        check_batch_divides_among_ranks(doc, errs);
        check_sgd_only_options(doc, errs);
        check_lr_schedule(doc, errs);
    }
    command_run_drop_foreign_defaults(doc);
    return (int)(schema_errors_total(errs) - before);
}

/* ---------------------------------------------------------------------------------
 * Filling the struct from a valid document: every value is there (defaults are filled)
 * and of its type. */

static json_int_t integer_at(json_t *doc, const char *pointer) { return json_integer_value(value_at(doc, pointer)); }
static double number_at(json_t *doc, const char *pointer) { return json_number_value(value_at(doc, pointer)); }
static bool bool_at(json_t *doc, const char *pointer) { return json_is_true(value_at(doc, pointer)); }

static void copy_string_at(json_t *doc, const char *pointer, char *out, size_t size) {
    snprintf(out, size, "%s", json_string_value(value_at(doc, pointer)));
}

static int enum_at(json_t *doc, const char *pointer, const char *const *names, size_t count) {
    const char *s = json_string_value(value_at(doc, pointer));
    for (size_t i = 0; s && i < count; i++)
        if (!strcmp(s, names[i])) return (int)i;
    return 0;
}

/* An array of integers into out[0..max), its length into *n. */
static void read_int_list(json_t *doc, const char *pointer, int *out, int *n, int max) {
    size_t i;
    json_t *value;
    *n = 0;
    json_array_foreach(value_at(doc, pointer), i, value) {
        if (i >= (size_t)max) break;
        out[i] = (int)json_integer_value(value);
        *n = (int)i + 1;
    }
}

static void read_conv_blocks(json_t *doc, run_config *c) {
    size_t i;
    json_t *block;
    c->model.cnn.n_conv = 0;
    json_array_foreach(value_at(doc, "/model/cnn/conv"), i, block) {
        if (i >= RUN_CONFIG_MAX_CONV) break;
        conv_block_config *b = &c->model.cnn.conv[i];
        b->channels = (int)json_integer_value(json_object_get(block, "channels"));
        b->kernel = (int)json_integer_value(json_object_get(block, "kernel"));
        b->stride = (int)json_integer_value(json_object_get(block, "stride"));
        b->padding = (int)json_integer_value(json_object_get(block, "padding"));
        b->pool = (int)json_integer_value(json_object_get(block, "pool"));
        b->batch_norm = json_is_true(json_object_get(block, "batch_norm"));
        b->dropout = json_number_value(json_object_get(block, "dropout"));
        c->model.cnn.n_conv = (int)i + 1;
    }
}

static void read_model(json_t *doc, run_config *c) {
    c->model.type = enum_at(doc, "/model/type", model_kind_names, COUNT(model_kind_names));
    read_int_list(doc, "/model/hidden", c->model.hidden, &c->model.n_hidden, RUN_CONFIG_MAX_HIDDEN);
    c->model.activation = enum_at(doc, "/model/activation", activation_names, COUNT(activation_names));
    read_conv_blocks(doc, c);
    read_int_list(doc, "/model/cnn/fc", c->model.cnn.fc, &c->model.cnn.n_fc, RUN_CONFIG_MAX_HIDDEN);
    c->model.cnn.dropout = number_at(doc, "/model/cnn/dropout");
    c->model.cnn.batch_norm_stats =
        enum_at(doc, "/model/cnn/batch_norm_stats", batch_norm_stats_names, COUNT(batch_norm_stats_names));
}

static void read_data(json_t *doc, run_config *c) {
    copy_string_at(doc, "/data/train/images", c->data.train_images, sizeof c->data.train_images);
    copy_string_at(doc, "/data/train/labels", c->data.train_labels, sizeof c->data.train_labels);
    copy_string_at(doc, "/data/test/images", c->data.test_images, sizeof c->data.test_images);
    copy_string_at(doc, "/data/test/labels", c->data.test_labels, sizeof c->data.test_labels);
    c->data.limit = (long)integer_at(doc, "/data/limit");
    c->data.test_limit = (long)integer_at(doc, "/data/test_limit");
}

static void read_train(json_t *doc, run_config *c) {
    c->train.epochs = (int)integer_at(doc, "/train/epochs");
    c->train.stop_after_epochs = (int)integer_at(doc, "/train/stop_after_epochs");
    c->train.batch_size = (int)integer_at(doc, "/train/batch_size");
    c->train.smoke_test = bool_at(doc, "/train/smoke_test");
    c->train.grad_clip_norm = number_at(doc, "/train/grad_clip_norm");

    c->train.optimizer.type = enum_at(doc, "/train/optimizer/type", optimizer_names, COUNT(optimizer_names));
    c->train.optimizer.lr = number_at(doc, "/train/optimizer/lr");
    c->train.optimizer.momentum = number_at(doc, "/train/optimizer/momentum");
    c->train.optimizer.nesterov = bool_at(doc, "/train/optimizer/nesterov");
    c->train.optimizer.weight_decay = number_at(doc, "/train/optimizer/weight_decay");
    c->train.optimizer.beta1 = number_at(doc, "/train/optimizer/beta1");
    c->train.optimizer.beta2 = number_at(doc, "/train/optimizer/beta2");
    c->train.optimizer.eps = number_at(doc, "/train/optimizer/eps");

    c->train.lr_schedule.type = enum_at(doc, "/train/lr_schedule/type", lr_schedule_names, COUNT(lr_schedule_names));
    c->train.lr_schedule.step_epochs = (int)integer_at(doc, "/train/lr_schedule/step_epochs");
    c->train.lr_schedule.gamma = number_at(doc, "/train/lr_schedule/gamma");
    c->train.lr_schedule.warmup_epochs = number_at(doc, "/train/lr_schedule/warmup_epochs");
    c->train.lr_schedule.min_lr = number_at(doc, "/train/lr_schedule/min_lr");
}

static void read_distributed(json_t *doc, run_config *c) {
    c->distributed.world_size = (int)integer_at(doc, "/distributed/world_size");
    c->distributed.nodes = (int)integer_at(doc, "/distributed/nodes");
    c->distributed.min_world_size = (int)integer_at(doc, "/distributed/min_world_size");
    c->distributed.backend = enum_at(doc, "/distributed/backend", backend_names, COUNT(backend_names));
    c->distributed.gpu_memory_fraction = number_at(doc, "/distributed/gpu_memory_fraction");
    c->distributed.bucket_mb = number_at(doc, "/distributed/bucket_mb");
    c->distributed.threads_per_rank = (int)integer_at(doc, "/distributed/threads_per_rank");
    c->distributed.allow_tf32 = bool_at(doc, "/distributed/allow_tf32");
    c->distributed.hang_timeout_s = number_at(doc, "/distributed/hang_timeout_s");
    c->distributed.collective_timeout_s = number_at(doc, "/distributed/collective_timeout_s");
    c->distributed.max_restarts = (int)integer_at(doc, "/distributed/max_restarts");
    c->distributed.stop_grace_s = (int)integer_at(doc, "/distributed/stop_grace_s");
    c->distributed.exit_timeout_s = (int)integer_at(doc, "/distributed/exit_timeout_s");
}

static void read_checkpoint(json_t *doc, run_config *c) {
    c->checkpoint.every_epochs = (int)integer_at(doc, "/checkpoint/every_epochs");
    c->checkpoint.keep = (int)integer_at(doc, "/checkpoint/keep");
    copy_string_at(doc, "/checkpoint/load", c->checkpoint.load, sizeof c->checkpoint.load);
}

int run_config_from_json(json_t *doc, run_config *out, schema_errors *errs) {
    int violations = run_config_validate(doc, errs);
    if (violations) return violations;
    if (command_run_is(doc)) {
        schema_errors_add(errs, "/command",
                          "is a command run: ddp-trainer trains the built-in models; a command run is started by ddpd (ddp-run)");
        return 1;
    }
    memset(out, 0, sizeof *out);
    copy_string_at(doc, "/name", out->name, sizeof out->name);
    out->mode = enum_at(doc, "/mode", run_mode_names, COUNT(run_mode_names));
    out->seed = (uint64_t)integer_at(doc, "/seed");
    out->priority = (int)integer_at(doc, "/priority");
    out->preemptible = bool_at(doc, "/preemptible");
    out->max_duration_s = number_at(doc, "/max_duration_s");
    out->min_runtime_s = number_at(doc, "/min_runtime_s");
    out->resources.memory_gb = number_at(doc, "/resources/memory_gb");
    read_model(doc, out);
    read_data(doc, out);
    read_train(doc, out);
    read_distributed(doc, out);
    read_checkpoint(doc, out);
    return 0;
}

/* ---------------------------------------------------------------------------------
 * Parsing. Jansson refuses a few documents for reasons of its own that JSON allows:
 * a top-level string or number (without JSON_DECODE_ANY), "\u0000" in a string
 * (without JSON_ALLOW_NUL), an integer beyond 64 bits. Those are parsed anyway, so
 * that the schema judges them and the message names the field ("/seed: must be at
 * most ..."), not the document. */

/* Whether validating `doc` leaves an error: for the fallback parse below. */
static int violations_of(json_t *doc) {
    schema_errors errs = {0};
    json_t *copy = json_deep_copy(doc);
    int n = run_config_validate(copy, &errs);
    json_decref(copy);
    schema_errors_free(&errs);
    return n;
}

json_t *run_config_parse(const char *bytes, size_t len, size_t flags, const char *source, schema_errors *errs) {
    json_error_t error;
    flags |= JSON_DECODE_ANY | JSON_ALLOW_NUL;
    json_t *doc = json_loadb(bytes, len, flags, &error);
    if (!doc && json_error_code(&error) == json_error_numeric_overflow) {
        /* An integer too big for 64 bits: read every integer as a real (those the
         * schema wants as integers are rewritten as integers when they fit), and let
         * the schema's bounds name it. A document that passes anyway (no bound
         * catches the big one) keeps the parse error. */
        json_error_t again;
        doc = json_loadb(bytes, len, flags | JSON_DECODE_INT_AS_REAL, &again);
        if (doc && violations_of(doc) == 0) {
            json_decref(doc);
            doc = NULL;
        }
    }
    if (!doc) {
        if (source)
            schema_errors_add(errs, "", "%s is not valid JSON: %s at line %d, column %d", source, error.text,
                              error.line, error.column);
        else
            schema_errors_add(errs, "", "not valid JSON: %s at line %d, column %d", error.text, error.line,
                              error.column);
    }
    return doc;
}

/* ---------------------------------------------------------------------------------
 * Files. */

static void report_unreadable(const char *path, int error_number, schema_errors *errs) {
    char buf[256];
    schema_errors_add(errs, "", "cannot read %s: %s", path, strerror_r(error_number, buf, sizeof buf));
}

/* The whole file into a malloc'd buffer (not NUL-terminated), or NULL, reported. */
static char *read_whole_file(const char *path, size_t *len, schema_errors *errs) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        report_unreadable(path, errno, errs);
        return NULL;
    }
    size_t cap = 4096, used = 0;
    char *buf = malloc(cap);
    while (buf) {
        used += fread(buf + used, 1, cap - used, f);
        if (used < cap) break;
        char *bigger = realloc(buf, cap *= 2);
        if (!bigger) free(buf);
        buf = bigger;
    }
    int read_error = ferror(f) ? errno : (buf ? 0 : ENOMEM);
    fclose(f);
    if (read_error) {
        free(buf);
        report_unreadable(path, read_error, errs);
        return NULL;
    }
    *len = used;
    return buf;
}

/* Sets *doc_out (when asked) to the parsed document, defaults filled in, whenever the
 * file parses, valid or not; the caller owns it. */
int run_config_load_file(const char *path, run_config *out, json_t **doc_out, schema_errors *errs) {
    if (doc_out) *doc_out = NULL;
    size_t len = 0;
    char *bytes = read_whole_file(path, &len, errs);
    if (!bytes) return 1;
    json_t *doc = run_config_parse(bytes, len, JSON_REJECT_DUPLICATES, path, errs);
    free(bytes);
    if (!doc) return 1;
    int violations = run_config_from_json(doc, out, errs);
    if (doc_out) *doc_out = doc;
    else json_decref(doc);
    return violations;
}
