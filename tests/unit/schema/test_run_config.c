/* Tests of the run config (schema/run_config.c and run-config.schema.json): {} is valid
 * and gives the documented defaults; the schema and the struct agree leaf by leaf (each
 * leaf is read into its own field, and its default is the struct's value for {}); bad
 * configs are rejected at the right pointer with the right sentence; the rules between
 * fields; files that cannot be read or parsed; the schema parsed once across threads.
 *
 * JSON in this file is written with ' for " so that it reads; `json` swaps them. */
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "command_run.h"
#include "run_config.h"

static json_t *json(const char *text) {
    char *swapped = strdup(text);
    for (char *c = swapped; *c; c++)
        if (*c == '\'') *c = '"';
    json_error_t error;
    json_t *value = json_loads(swapped, JSON_DECODE_ANY, &error);
    REQUIRE(value, "test JSON does not parse: %s: %s", swapped, error.text);
    free(swapped);
    return value;
}

/* Equal as JSON values, numbers by value (the schema writes 0 where the struct holds 0.0). */
static bool same_value(const json_t *a, const json_t *b) {
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return false;
        const char *key;
        json_t *member;
        json_object_foreach((json_t *)a, key, member)
            if (!same_value(member, json_object_get(b, key))) return false;
        return true;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_value(json_array_get(a, i), json_array_get(b, i))) return false;
        return true;
    }
    return json_equal((json_t *)a, (json_t *)b);
}

static void print_errors(const schema_errors *errs) {
    char *text = schema_errors_format(errs);
    fprintf(stderr, "  errors were:\n%s\n", text);
    free(text);
}

/* --- {} ---------------------------------------------------------------------------------- */

static void test_empty_config_gives_the_defaults(void) {
    json_t *doc = json("{}");
    schema_errors errs = {0};
    run_config c;
    int violations = run_config_from_json(doc, &c, &errs);
    CHECK(violations == 0, "{} is valid");
    if (violations) print_errors(&errs);
    CHECK(!strcmp(c.name, "run") && c.mode == RUN_MODE_TRAIN && c.seed == 42, "top level");
    CHECK(c.model.type == MODEL_MLP && c.model.n_hidden == 2 && c.model.hidden[0] == 512 && c.model.hidden[1] == 256 &&
              c.model.activation == ACT_RELU,
          "model");
    /* The classic 2-conv network: 5x5 conv 32, pool, 5x5 conv 64, pool, fc 1024, fc (classes). */
    const conv_block_config *k = c.model.cnn.conv;
    CHECK(c.model.cnn.n_conv == 2 && k[0].channels == 32 && k[0].kernel == 5 && k[0].stride == 1 && k[0].padding == 2 &&
              k[0].pool == 2 && !k[0].batch_norm && k[0].dropout == 0 && k[1].channels == 64 && k[1].kernel == 5 &&
              k[1].stride == 1 && k[1].padding == 2 && k[1].pool == 2 && !k[1].batch_norm && k[1].dropout == 0,
          "cnn conv blocks");
    CHECK(c.model.cnn.n_fc == 1 && c.model.cnn.fc[0] == 1024 && c.model.cnn.dropout == 0 &&
              c.model.cnn.batch_norm_stats == BN_STATS_PER_RANK,
          "cnn fc, dropout, batch norm statistics");
    CHECK(!strcmp(c.data.train_images, "fashion-mnist/train-images-idx3-ubyte.gz") &&
              !strcmp(c.data.train_labels, "fashion-mnist/train-labels-idx1-ubyte.gz") &&
              !strcmp(c.data.test_images, "fashion-mnist/t10k-images-idx3-ubyte.gz") &&
              !strcmp(c.data.test_labels, "fashion-mnist/t10k-labels-idx1-ubyte.gz") && c.data.limit == 0 &&
              c.data.test_limit == 0,
          "data");
    CHECK(c.train.epochs == 10 && c.train.batch_size == 128 && !c.train.smoke_test && c.train.grad_clip_norm == 0, "train");
    CHECK(c.train.optimizer.type == OPT_ADAM && c.train.optimizer.lr == 0.001 && c.train.optimizer.momentum == 0 &&
              !c.train.optimizer.nesterov && c.train.optimizer.weight_decay == 0 && c.train.optimizer.beta1 == 0.9 &&
              c.train.optimizer.beta2 == 0.999 && c.train.optimizer.eps == 1e-8,
          "optimizer");
    CHECK(c.train.lr_schedule.type == LR_STEP && c.train.lr_schedule.step_epochs == 5 && c.train.lr_schedule.gamma == 0.3 &&
              c.train.lr_schedule.warmup_epochs == 0 && c.train.lr_schedule.min_lr == 0,
          "lr_schedule");
    CHECK(c.distributed.world_size == 1 && c.distributed.backend == BACKEND_AUTO && c.distributed.gpu_memory_fraction == 1.0 &&
              c.distributed.bucket_mb == 25 && c.distributed.threads_per_rank == 1 && !c.distributed.allow_tf32,
          "distributed");
    CHECK(c.checkpoint.every_epochs == 1 && c.checkpoint.keep == 2 && !strcmp(c.checkpoint.load, ""), "checkpoint");

    /* The document is filled in place, and the filled-in document is valid as it is. */
    CHECK(json_is_number(json_object_get(json_object_get(json_object_get(doc, "train"), "optimizer"), "beta2")),
          "nested defaults are filled into the document");
    json_t *again = json_deep_copy(doc);
    CHECK(run_config_validate(again, &errs) == 0 && json_equal(again, doc), "validating a filled-in config changes nothing");
    json_decref(again);
    schema_errors_free(&errs);
    json_decref(doc);
}

/* --- the schema and the struct, leaf by leaf ------------------------------------------------ */

typedef enum { NOT_STORED, TEXT, INT, LONG, U64, REAL, BOOL, ENUM, INT_LIST, CONV_LIST } field_kind;

typedef struct {
    const char *pointer;
    field_kind kind;
    size_t offset, size;           /* TEXT: the buffer; INT_LIST, CONV_LIST: the array */
    const char *(*enum_name)(int); /* ENUM */
    size_t count_offset;           /* INT_LIST, CONV_LIST: where the count is */
    const char *companions;        /* set along with the leaf, so the rules between fields hold */
} field;

static const char *mode_of(int v) { return run_mode_name((run_mode)v); }
static const char *model_of(int v) { return model_kind_name((model_kind)v); }
static const char *bn_stats_of(int v) { return batch_norm_stats_name((batch_norm_stats_kind)v); }
static const char *activation_of(int v) { return activation_name((activation_kind)v); }
static const char *optimizer_of(int v) { return optimizer_name((optimizer_kind)v); }
static const char *schedule_of(int v) { return lr_schedule_name((lr_schedule_kind)v); }
static const char *backend_of(int v) { return backend_name((backend_kind)v); }

#define AT(member) offsetof(run_config, member), sizeof(((run_config *)0)->member)
#define SGD "{'train': {'optimizer': {'type': 'sgd'}}}"
#define SGD_WITH_MOMENTUM "{'train': {'optimizer': {'type': 'sgd', 'momentum': 0.5}}}"

/* Every leaf of the schema, and where run_config_from_json puts it. NOT_STORED: a
 * single allowed value, which the struct does not need to hold. */
static const field fields[] = {
    {"/name", TEXT, AT(name), NULL, 0, NULL},
    {"/mode", ENUM, AT(mode), mode_of, 0, NULL},
    {"/seed", U64, AT(seed), NULL, 0, NULL},
    {"/priority", INT, AT(priority), NULL, 0, NULL},
    {"/preemptible", BOOL, AT(preemptible), NULL, 0, NULL},
    {"/max_duration_s", REAL, AT(max_duration_s), NULL, 0, NULL},
    {"/min_runtime_s", REAL, AT(min_runtime_s), NULL, 0, NULL},
    {"/resources/memory_gb", REAL, AT(resources.memory_gb), NULL, 0, NULL},
    {"/model/type", ENUM, AT(model.type), model_of, 0, NULL},
    {"/model/hidden", INT_LIST, AT(model.hidden), NULL, offsetof(run_config, model.n_hidden), NULL},
    {"/model/activation", ENUM, AT(model.activation), activation_of, 0, NULL},
    {"/model/cnn/conv", CONV_LIST, AT(model.cnn.conv), NULL, offsetof(run_config, model.cnn.n_conv), NULL},
    {"/model/cnn/fc", INT_LIST, AT(model.cnn.fc), NULL, offsetof(run_config, model.cnn.n_fc), NULL},
    {"/model/cnn/dropout", REAL, AT(model.cnn.dropout), NULL, 0, NULL},
    {"/model/cnn/batch_norm_stats", ENUM, AT(model.cnn.batch_norm_stats), bn_stats_of, 0, NULL},
    {"/data/format", NOT_STORED, 0, 0, NULL, 0, NULL},
    {"/data/train/images", TEXT, AT(data.train_images), NULL, 0, NULL},
    {"/data/train/labels", TEXT, AT(data.train_labels), NULL, 0, NULL},
    {"/data/test/images", TEXT, AT(data.test_images), NULL, 0, NULL},
    {"/data/test/labels", TEXT, AT(data.test_labels), NULL, 0, NULL},
    {"/data/limit", LONG, AT(data.limit), NULL, 0, NULL},
    {"/data/test_limit", LONG, AT(data.test_limit), NULL, 0, NULL},
    {"/train/epochs", INT, AT(train.epochs), NULL, 0, NULL},
    {"/train/stop_after_epochs", INT, AT(train.stop_after_epochs), NULL, 0, NULL},
    {"/train/batch_size", INT, AT(train.batch_size), NULL, 0, NULL},
    {"/train/smoke_test", BOOL, AT(train.smoke_test), NULL, 0, NULL},
    {"/train/grad_clip_norm", REAL, AT(train.grad_clip_norm), NULL, 0, NULL},
    {"/train/optimizer/type", ENUM, AT(train.optimizer.type), optimizer_of, 0, NULL},
    {"/train/optimizer/lr", REAL, AT(train.optimizer.lr), NULL, 0, NULL},
    {"/train/optimizer/momentum", REAL, AT(train.optimizer.momentum), NULL, 0, SGD},
    {"/train/optimizer/nesterov", BOOL, AT(train.optimizer.nesterov), NULL, 0, SGD_WITH_MOMENTUM},
    {"/train/optimizer/weight_decay", REAL, AT(train.optimizer.weight_decay), NULL, 0, NULL},
    {"/train/optimizer/beta1", REAL, AT(train.optimizer.beta1), NULL, 0, NULL},
    {"/train/optimizer/beta2", REAL, AT(train.optimizer.beta2), NULL, 0, NULL},
    {"/train/optimizer/eps", REAL, AT(train.optimizer.eps), NULL, 0, NULL},
    {"/train/lr_schedule/type", ENUM, AT(train.lr_schedule.type), schedule_of, 0, NULL},
    {"/train/lr_schedule/step_epochs", INT, AT(train.lr_schedule.step_epochs), NULL, 0, NULL},
    {"/train/lr_schedule/gamma", REAL, AT(train.lr_schedule.gamma), NULL, 0, NULL},
    {"/train/lr_schedule/warmup_epochs", REAL, AT(train.lr_schedule.warmup_epochs), NULL, 0, NULL},
    {"/train/lr_schedule/min_lr", REAL, AT(train.lr_schedule.min_lr), NULL, 0, NULL},
    {"/distributed/world_size", INT, AT(distributed.world_size), NULL, 0, NULL},
    {"/distributed/min_world_size", INT, AT(distributed.min_world_size), NULL, 0, "{'distributed': {'world_size': 64}}"},
    {"/distributed/nodes", INT, AT(distributed.nodes), NULL, 0, NULL},
    {"/distributed/backend", ENUM, AT(distributed.backend), backend_of, 0, NULL},
    {"/distributed/gpu_memory_fraction", REAL, AT(distributed.gpu_memory_fraction), NULL, 0, NULL},
    {"/distributed/bucket_mb", REAL, AT(distributed.bucket_mb), NULL, 0, NULL},
    {"/distributed/threads_per_rank", INT, AT(distributed.threads_per_rank), NULL, 0, NULL},
    {"/distributed/allow_tf32", BOOL, AT(distributed.allow_tf32), NULL, 0, NULL},
    {"/distributed/hang_timeout_s", REAL, AT(distributed.hang_timeout_s), NULL, 0, NULL},
    {"/distributed/collective_timeout_s", REAL, AT(distributed.collective_timeout_s), NULL, 0, NULL},
    {"/distributed/max_restarts", INT, AT(distributed.max_restarts), NULL, 0, NULL},
    {"/distributed/stop_grace_s", INT, AT(distributed.stop_grace_s), NULL, 0, NULL},
    {"/distributed/exit_timeout_s", INT, AT(distributed.exit_timeout_s), NULL, 0, NULL},
    {"/checkpoint/every_epochs", INT, AT(checkpoint.every_epochs), NULL, 0, NULL},
    {"/checkpoint/keep", INT, AT(checkpoint.keep), NULL, 0, NULL},
    {"/checkpoint/load", TEXT, AT(checkpoint.load), NULL, 0, NULL},
};
#define N_FIELDS (sizeof fields / sizeof fields[0])

static const field *field_for(const char *pointer) {
    for (size_t i = 0; i < N_FIELDS; i++)
        if (!strcmp(fields[i].pointer, pointer)) return &fields[i];
    return NULL;
}

/* The struct's value for a field, as JSON. */
static json_t *field_value(const run_config *c, const field *f) {
    const char *base = (const char *)c + f->offset;
    int i;
    long l;
    uint64_t u;
    double d;
    bool b;
    switch (f->kind) {
    case NOT_STORED: return json_null();
    case TEXT: return json_string(base);
    case INT: memcpy(&i, base, sizeof i); return json_integer(i);
    case LONG: memcpy(&l, base, sizeof l); return json_integer(l);
    case U64: memcpy(&u, base, sizeof u); return json_integer((json_int_t)u);
    case REAL: memcpy(&d, base, sizeof d); return json_real(d);
    case BOOL: memcpy(&b, base, sizeof b); return json_boolean(b);
    case ENUM: memcpy(&i, base, sizeof i); return json_string(f->enum_name(i));
    case INT_LIST: {
        int count;
        memcpy(&count, (const char *)c + f->count_offset, sizeof count);
        json_t *list = json_array();
        for (int k = 0; k < count && k < RUN_CONFIG_MAX_HIDDEN; k++) {
            memcpy(&i, base + k * sizeof(int), sizeof i);
            json_array_append_new(list, json_integer(i));
        }
        return list;
    }
    case CONV_LIST: {
        int count;
        memcpy(&count, (const char *)c + f->count_offset, sizeof count);
        json_t *list = json_array();
        for (int k = 0; k < count && k < RUN_CONFIG_MAX_CONV; k++) {
            conv_block_config b;
            memcpy(&b, base + k * sizeof b, sizeof b);
            json_array_append_new(list, json_pack("{s:i, s:i, s:i, s:i, s:i, s:b, s:f}", "channels", b.channels, "kernel",
                                                  b.kernel, "stride", b.stride, "padding", b.padding, "pool", b.pool,
                                                  "batch_norm", b.batch_norm, "dropout", b.dropout));
        }
        return list;
    }
    }
    return json_null();
}

/* The schema node a JSON pointer names, walking "properties". */
static const json_t *schema_leaf(const char *pointer) {
    const json_t *node = run_config_schema();
    char *copy = strdup(pointer), *save = NULL;
    for (char *token = strtok_r(copy, "/", &save); token && node; token = strtok_r(NULL, "/", &save))
        node = json_object_get(json_object_get(node, "properties"), token);
    free(copy);
    return node;
}

/* A keyword of a property, looking through its $ref. */
static const json_t *keyword(const json_t *property, const char *name) {
    const json_t *value = json_object_get(property, name);
    const json_t *ref = json_object_get(property, "$ref");
    if (value || !json_is_string(ref)) return value;
    const char *prefix = "#/$defs/";
    REQUIRE(!strncmp(json_string_value(ref), prefix, strlen(prefix)), "local $defs refs only");
    const json_t *defs = json_object_get(run_config_schema(), "$defs");
    return json_object_get(json_object_get(defs, json_string_value(ref) + strlen(prefix)), name);
}

static void collect_leaves(const json_t *node, const char *pointer, json_t *leaves) {
    const json_t *properties = json_object_get(node, "properties");
    if (!properties) {
        json_array_append_new(leaves, json_string(pointer));
        return;
    }
    const char *name;
    json_t *child;
    json_object_foreach((json_t *)properties, name, child) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", pointer, name);
        collect_leaves(child, path, leaves);
    }
}

static bool within_bounds(const json_t *property, double x) {
    const json_t *b;
    if ((b = keyword(property, "minimum")) && x < json_number_value(b)) return false;
    if ((b = keyword(property, "maximum")) && x > json_number_value(b)) return false;
    if ((b = keyword(property, "exclusiveMinimum")) && x <= json_number_value(b)) return false;
    if ((b = keyword(property, "exclusiveMaximum")) && x >= json_number_value(b)) return false;
    return true;
}

/* A valid value other than the default, for a leaf; NULL when there is none. */
static json_t *other_value(const json_t *property) {
    const json_t *def = keyword(property, "default");
    const json_t *choices = keyword(property, "enum");
    const char *type = json_string_value(keyword(property, "type"));
    if (choices) {
        for (size_t i = 0; i < json_array_size(choices); i++)
            if (!json_equal(json_array_get(choices, i), (json_t *)def)) return json_deep_copy(json_array_get(choices, i));
        return NULL;
    }
    if (!type) return NULL;
    if (!strcmp(type, "boolean")) return json_boolean(!json_is_true(def));
    if (!strcmp(type, "integer")) {
        json_int_t d = json_integer_value(def);
        return json_integer(within_bounds(property, (double)(d + 1)) ? d + 1 : d - 1);
    }
    if (!strcmp(type, "number")) {
        double d = json_number_value(def);
        double candidates[] = {d * 2, d / 2, 0.5};
        for (int i = 0; i < 3; i++)
            if (candidates[i] != d && within_bounds(property, candidates[i])) return json_real(candidates[i]);
        return NULL;
    }
    if (!strcmp(type, "string")) {
        char s[256];
        snprintf(s, sizeof s, "%sx", json_string_value(def));
        return json_string(s);
    }
    if (!strcmp(type, "array") && !strcmp(json_string_value(keyword(keyword(property, "items"), "type")), "object")) {
        /* Objects: every item one wider, and one more item. */
        json_t *list = json_deep_copy(def);
        json_array_append_new(list, json_deep_copy(json_array_get(def, 0)));
        size_t i;
        json_t *item;
        json_array_foreach(list, i, item)
            json_object_set_new(item, "channels", json_integer(json_integer_value(json_object_get(item, "channels")) + 1));
        return list;
    }
    if (!strcmp(type, "array")) {
        json_t *list = json_array();
        for (size_t i = 0; i < json_array_size(def); i++)
            json_array_append_new(list, json_integer(json_integer_value(json_array_get(def, i)) + 1));
        json_array_append_new(list, json_integer(7));
        return list;
    }
    return NULL;
}

/* Sets `value` (stolen) at a pointer, making the objects on the way. */
static void set_at(json_t *doc, const char *pointer, json_t *value) {
    char *copy = strdup(pointer), *save = NULL;
    json_t *node = doc;
    char *token = strtok_r(copy, "/", &save);
    for (char *next; (next = strtok_r(NULL, "/", &save)); token = next) {
        json_t *child = json_object_get(node, token);
        if (!child) json_object_set_new(node, token, child = json_object());
        node = child;
    }
    json_object_set_new(node, token, value);
    free(copy);
}

static bool config_from(json_t *doc, run_config *c, const char *what) {
    schema_errors errs = {0};
    int violations = run_config_from_json(doc, c, &errs);
    CHECK(violations == 0, "%s: should be valid", what);
    if (violations) print_errors(&errs);
    schema_errors_free(&errs);
    return violations == 0;
}

/* A command run's fields: ddp-run reads them from the JSON, ddp-trainer (and its
 * struct) never sees them (it refuses a command run); and their absence is what
 * makes a run a built-in one, so they have no default. */
static const char *const COMMAND_RUN_FIELDS[] = {"/command", "/working_dir", "/env", "/distributed/isolate_devices"};

static bool command_run_field(const char *pointer) {
    for (size_t i = 0; i < sizeof COMMAND_RUN_FIELDS / sizeof *COMMAND_RUN_FIELDS; i++)
        if (!strcmp(pointer, COMMAND_RUN_FIELDS[i])) return true;
    return false;
}

/* warm_start: a command run's, read by the server when it starts a sweep's trial
 * (server/exec/executor_local.c), not into run_config; its imports are the user's to
 * name, so neither it nor they have a default (a {} would be refused). */
static bool warm_start_field(const char *pointer) { return !strncmp(pointer, "/warm_start", strlen("/warm_start")); }

/* distributed.restart_policy (and warm_start, above): read from the config by the launchers' attempts
 * (base/restart_policy.c), not into run_config; its absence has a meaning
 * (torchrun's count: docs/failures.md), so neither it nor its fields have a default. */
static bool restart_policy_field(const char *pointer) {
    return !strncmp(pointer, "/distributed/restart_policy", strlen("/distributed/restart_policy")) ||
           warm_start_field(pointer);
}

static void test_every_schema_leaf_has_a_field(void) {
    json_t *leaves = json_array();
    collect_leaves(run_config_schema(), "", leaves);
    for (size_t k = json_array_size(leaves); k-- > 0;)
        if (command_run_field(json_string_value(json_array_get(leaves, k))) ||
            restart_policy_field(json_string_value(json_array_get(leaves, k))))
            json_array_remove(leaves, k);
    size_t i;
    json_t *leaf;
    json_array_foreach(leaves, i, leaf)
        CHECK(field_for(json_string_value(leaf)), "schema leaf %s is not read into run_config (add it to run_config.h, "
              "run_config.c and this test's table)", json_string_value(leaf));
    for (size_t f = 0; f < N_FIELDS; f++) {
        bool found = false;
        json_array_foreach(leaves, i, leaf) found = found || !strcmp(json_string_value(leaf), fields[f].pointer);
        CHECK(found, "%s is in this test's table but not a leaf of the schema", fields[f].pointer);
    }
    CHECK(json_array_size(leaves) == N_FIELDS, "%zu leaves, %zu fields", json_array_size(leaves), (size_t)N_FIELDS);
    json_decref(leaves);
}

static void test_schema_defaults_are_the_struct_defaults(void) {
    json_t *doc = json("{}");
    run_config c;
    if (!config_from(doc, &c, "{}")) return;
    for (size_t f = 0; f < N_FIELDS; f++) {
        const json_t *def = keyword(schema_leaf(fields[f].pointer), "default");
        CHECK(def, "%s has a default in the schema", fields[f].pointer);
        if (fields[f].kind == NOT_STORED) continue;
        json_t *got = field_value(&c, &fields[f]);
        CHECK(def && same_value(got, def), "%s: the struct holds a value other than the schema's default", fields[f].pointer);
        json_decref(got);
    }
    json_decref(doc);
}

/* Setting one leaf to a value other than its default changes its own field to that
 * value and no other field. */
static void test_every_leaf_lands_in_its_own_field(void) {
    for (size_t f = 0; f < N_FIELDS; f++) {
        const field *target = &fields[f];
        const json_t *property = schema_leaf(target->pointer);
        json_t *value = other_value(property);
        if (target->kind == NOT_STORED) {
            CHECK(!value, "%s has more than one allowed value now: run_config needs a field for it", target->pointer);
            json_decref(value);
            continue;
        }
        REQUIRE(value, "%s: no value other than the default to try", target->pointer);
        json_t *base_doc = json(target->companions ? target->companions : "{}");
        json_t *changed_doc = json_deep_copy(base_doc);
        set_at(changed_doc, target->pointer, json_deep_copy(value));
        run_config base, changed;
        if (config_from(base_doc, &base, target->pointer) && config_from(changed_doc, &changed, target->pointer)) {
            for (size_t g = 0; g < N_FIELDS; g++) {
                json_t *before = field_value(&base, &fields[g]), *after = field_value(&changed, &fields[g]);
                if (g == f)
                    CHECK(same_value(after, value), "setting %s does not reach its field", target->pointer);
                else
                    CHECK(same_value(after, before), "setting %s changed %s", target->pointer, fields[g].pointer);
                json_decref(before);
                json_decref(after);
            }
        }
        json_decref(value);
        json_decref(base_doc);
        json_decref(changed_doc);
    }
}

/* One full config, read back field by field: the way a person writes one. */
static void test_a_full_config(void) {
    json_t *doc = json("{'name': 'fmnist-sgd.2', 'mode': 'eval', 'seed': 7,"
                       " 'model': {'type': 'cnn', 'hidden': [1024, 512, 128], 'activation': 'tanh',"
                       "           'cnn': {'conv': [{'channels': 8, 'kernel': 3, 'stride': 2, 'padding': 1, 'pool': 3,"
                       "                             'batch_norm': true, 'dropout': 0.25}, {'channels': 16}],"
                       "                   'fc': [], 'dropout': 0.5, 'batch_norm_stats': 'sync'}},"
                       " 'data': {'format': 'idx', 'train': {'images': 'a/ti.gz', 'labels': 'a/tl.gz'},"
                       "          'test': {'images': 'a/vi', 'labels': 'a/vl'}, 'limit': 6000, 'test_limit': 1000},"
                       " 'train': {'epochs': 30, 'batch_size': 256, 'smoke_test': true, 'grad_clip_norm': 1.5,"
                       "           'optimizer': {'type': 'sgd', 'lr': 0.1, 'momentum': 0.9, 'nesterov': true,"
                       "                         'weight_decay': 5e-4, 'beta1': 0.8, 'beta2': 0.99, 'eps': 1e-6},"
                       "           'lr_schedule': {'type': 'cosine', 'step_epochs': 3, 'gamma': 0.5,"
                       "                           'warmup_epochs': 2.5, 'min_lr': 0.001}},"
                       " 'distributed': {'world_size': 4, 'backend': 'cpu', 'gpu_memory_fraction': 0.5,"
                       "                 'bucket_mb': 1, 'threads_per_rank': 2, 'allow_tf32': true},"
                       " 'checkpoint': {'every_epochs': 0, 'keep': 5, 'load': 'runs/x/epoch-3.safetensors'}}");
    run_config c;
    if (config_from(doc, &c, "full config")) {
        CHECK(!strcmp(c.name, "fmnist-sgd.2") && c.mode == RUN_MODE_EVAL && c.seed == 7, "top level");
        CHECK(c.model.type == MODEL_CNN && c.model.n_hidden == 3 && c.model.hidden[0] == 1024 && c.model.hidden[2] == 128 &&
                  c.model.activation == ACT_TANH,
              "model");
        const conv_block_config *k = c.model.cnn.conv;
        CHECK(c.model.cnn.n_conv == 2 && k[0].channels == 8 && k[0].kernel == 3 && k[0].stride == 2 && k[0].padding == 1 &&
                  k[0].pool == 3 && k[0].batch_norm && k[0].dropout == 0.25,
              "cnn: the first block as written");
        CHECK(k[1].channels == 16 && k[1].kernel == 5 && k[1].stride == 1 && k[1].padding == 0 && k[1].pool == 1 &&
                  !k[1].batch_norm && k[1].dropout == 0,
              "cnn: the second block's unwritten fields take their defaults");
        CHECK(c.model.cnn.n_fc == 0 && c.model.cnn.dropout == 0.5 && c.model.cnn.batch_norm_stats == BN_STATS_SYNC,
              "cnn: no hidden fc, dropout, sync statistics");
        CHECK(!strcmp(c.data.train_images, "a/ti.gz") && !strcmp(c.data.train_labels, "a/tl.gz") &&
                  !strcmp(c.data.test_images, "a/vi") && !strcmp(c.data.test_labels, "a/vl") && c.data.limit == 6000 &&
                  c.data.test_limit == 1000,
              "data");
        CHECK(c.train.epochs == 30 && c.train.batch_size == 256 && c.train.smoke_test && c.train.grad_clip_norm == 1.5, "train");
        CHECK(c.train.optimizer.type == OPT_SGD && c.train.optimizer.lr == 0.1 && c.train.optimizer.momentum == 0.9 &&
                  c.train.optimizer.nesterov && c.train.optimizer.weight_decay == 5e-4 && c.train.optimizer.beta1 == 0.8 &&
                  c.train.optimizer.beta2 == 0.99 && c.train.optimizer.eps == 1e-6,
              "optimizer");
        CHECK(c.train.lr_schedule.type == LR_COSINE && c.train.lr_schedule.step_epochs == 3 && c.train.lr_schedule.gamma == 0.5 &&
                  c.train.lr_schedule.warmup_epochs == 2.5 && c.train.lr_schedule.min_lr == 0.001,
              "lr_schedule");
        CHECK(c.distributed.world_size == 4 && c.distributed.backend == BACKEND_CPU &&
                  c.distributed.gpu_memory_fraction == 0.5 && c.distributed.bucket_mb == 1 &&
                  c.distributed.threads_per_rank == 2 && c.distributed.allow_tf32,
              "distributed");
        CHECK(c.checkpoint.every_epochs == 0 && c.checkpoint.keep == 5 &&
                  !strcmp(c.checkpoint.load, "runs/x/epoch-3.safetensors"),
              "checkpoint");
    }
    json_decref(doc);
    /* Integral reals are integers. */
    doc = json("{'train': {'epochs': 3.0, 'batch_size': 64.0}, 'model': {'hidden': [32.0]}}");
    if (config_from(doc, &c, "integral reals")) {
        CHECK(c.train.epochs == 3 && c.train.batch_size == 64 && c.model.hidden[0] == 32, "3.0 reads as 3");
        CHECK(json_is_integer(json_object_get(json_object_get(doc, "train"), "epochs")), "and is stored as an integer");
    }
    json_decref(doc);
}

/* --- bad configs ------------------------------------------------------------------------------- */

typedef struct {
    const char *config, *pointer, *message;
} bad_config;

static const bad_config bad_configs[] = {
    {"[]", "", "must be an object (got an array)"},
    {"{'command': []}", "/command", "must have at least 1 item (got 0)"},
    {"{'command': ['']}", "/command/0", "must be at least 1 character long (got 0)"},
    {"{'command': ['python3', 5]}", "/command/1", "must be a string (got number 5)"},
    {"{'command': 'python3 train.py'}", "/command", "must be an array (got string \"python3 train.py\")"},
    {"{'command': ['python3'], 'model': {'hidden': [8]}}", "", "/model belongs to the built-in models: a command run (with /command) cannot have it"},
    {"{'command': ['python3'], 'distributed': {'bucket_mb': 4}}", "/distributed", "bucket_mb applies to the built-in models only, not to a command run"},
    {"{'command': ['python3'], 'env': {'RANK': '3'}}", "/env", "cannot set RANK: ddpd sets it for every rank (see the schema's env)"},
    {"{'command': ['python3'], 'env': {'DDPD_RUN_SECRET': 'x'}}", "/env", "cannot set DDPD_RUN_SECRET: ddpd sets it for every rank (see the schema's env)"},
    {"{'command': ['python3'], 'env': {'1X': 'y'}}", "/env", "\"1X\" is not a variable name (letters, digits and '_', not starting with a digit)"},
    {"{'command': ['python3'], 'env': {'X': 1}}", "/env/X", "must be a string (got number 1)"},
    {"{'working_dir': 'p'}", "", "/working_dir applies to command runs only (a config with /command)"},
    {"{'distributed': {'isolate_devices': true}}", "/distributed", "isolate_devices applies to command runs only (a config with /command)"},
    {"{'command': ['python3', 'train.py']}", "/command", "is a command run: ddp-trainer trains the built-in models; a command run is started by ddpd (ddp-run)"},
    {"{'epochs': 5}", "/epochs", "unknown field (allowed here: name, mode, seed, priority, preemptible, max_duration_s, min_runtime_s, resources, command, warm_start, working_dir, env, model, data, train, distributed, checkpoint)"},
    {"{'priority': 101}", "/priority", "must be at most 100 (got 101)"},
    {"{'priority': -101}", "/priority", "must be at least -100 (got -101)"},
    {"{'priority': 'high'}", "/priority", "must be an integer (got string \"high\")"},
    {"{'preemptible': 1}", "/preemptible", "must be a boolean (got number 1)"},
    {"{'name': ''}", "/name", "must be at least 1 character long (got 0)"},
    {"{'name': 'my run'}", "/name", "must match the pattern ^[A-Za-z0-9._-]*$ (got \"my run\")"},
    {"{'name': 5}", "/name", "must be a string (got number 5)"},
    {"{'mode': 'predict'}", "/mode", "must be one of: train, eval (got \"predict\")"},
    {"{'seed': -1}", "/seed", "must be at least 0 (got -1)"},
    {"{'seed': 1.5}", "/seed", "must be an integer (got number 1.5)"},
    {"{'model': 'mlp'}", "/model", "must be an object (got string \"mlp\")"},
    {"{'model': {'type': 'resnet'}}", "/model/type", "must be one of: mlp, cnn (got \"resnet\")"},
    {"{'model': {'hidden': []}}", "/model/hidden", "must have at least 1 item (got 0)"},
    {"{'model': {'hidden': [8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8,8]}}", "/model/hidden", "must have at most 16 items (got 17)"},
    {"{'model': {'hidden': [512, 0]}}", "/model/hidden/1", "must be at least 1 (got 0)"},
    {"{'model': {'hidden': [70000]}}", "/model/hidden/0", "must be at most 65536 (got 70000)"},
    {"{'model': {'hidden': 512}}", "/model/hidden", "must be an array (got number 512)"},
    {"{'model': {'activation': 'sigmoid'}}", "/model/activation", "must be one of: relu, gelu, tanh (got \"sigmoid\")"},
    {"{'model': {'layers': 3}}", "/model/layers", "unknown field (allowed here: type, hidden, activation, cnn)"},
    {"{'model': {'cnn': {'conv': []}}}", "/model/cnn/conv", "must have at least 1 item (got 0)"},
    {"{'model': {'cnn': {'conv': [{'kernel': 3}]}}}", "/model/cnn/conv/0/channels", "is required"},
    {"{'model': {'cnn': {'conv': [{'channels': 0}]}}}", "/model/cnn/conv/0/channels", "must be at least 1 (got 0)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8}, {'channels': 8, 'kernel': 16}]}}}", "/model/cnn/conv/1/kernel",
     "must be at most 15 (got 16)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'stride': 0}]}}}", "/model/cnn/conv/0/stride",
     "must be at least 1 (got 0)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'padding': -1}]}}}", "/model/cnn/conv/0/padding",
     "must be at least 0 (got -1)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'pool': 0}]}}}", "/model/cnn/conv/0/pool", "must be at least 1 (got 0)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'dropout': 1}]}}}", "/model/cnn/conv/0/dropout",
     "must be less than 1 (got 1)"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'batch_norm': 'yes'}]}}}", "/model/cnn/conv/0/batch_norm",
     "must be a boolean (got string \"yes\")"},
    {"{'model': {'cnn': {'conv': [{'channels': 8, 'groups': 2}]}}}", "/model/cnn/conv/0/groups",
     "unknown field (allowed here: channels, kernel, stride, padding, pool, batch_norm, dropout)"},
    {"{'model': {'cnn': {'fc': [0]}}}", "/model/cnn/fc/0", "must be at least 1 (got 0)"},
    {"{'model': {'cnn': {'dropout': -0.1}}}", "/model/cnn/dropout", "must be at least 0 (got -0.1)"},
    {"{'model': {'cnn': {'batch_norm_stats': 'global'}}}", "/model/cnn/batch_norm_stats",
     "must be one of: per_rank, sync (got \"global\")"},
    {"{'model': {'cnn': {'kernel': 3}}}", "/model/cnn/kernel",
     "unknown field (allowed here: conv, fc, dropout, batch_norm_stats)"},
    {"{'data': {'format': 'csv'}}", "/data/format", "must be one of: idx (got \"csv\")"},
    {"{'data': {'limit': -5}}", "/data/limit", "must be at least 0 (got -5)"},
    {"{'data': {'test_limit': 'all'}}", "/data/test_limit", "must be an integer (got string \"all\")"},
    {"{'data': {'train': {'images': ''}}}", "/data/train/images", "must be at least 1 character long (got 0)"},
    {"{'data': {'test': {'labels': 'x', 'label': 'y'}}}", "/data/test/label", "unknown field (allowed here: images, labels)"},
    {"{'train': 5}", "/train", "must be an object (got number 5)"},
    {"{'train': {'epochs': 0}}", "/train/epochs", "must be at least 1 (got 0)"},
    {"{'train': {'epochs': 10001}}", "/train/epochs", "must be at most 10000 (got 10001)"},
    {"{'train': {'batch_size': 'x'}}", "/train/batch_size", "must be an integer (got string \"x\")"},
    {"{'train': {'batch_size': 0}}", "/train/batch_size", "must be at least 1 (got 0)"},
    {"{'train': {'batch_size': 100}, 'distributed': {'world_size': 3}}", "/train/batch_size",
     "must be a multiple of /distributed/world_size (3)"},
    {"{'train': {'batch_size': 1}, 'distributed': {'world_size': 2}}", "/train/batch_size",
     "must be a multiple of /distributed/world_size (2)"},
    {"{'train': {'smoke_test': 'yes'}}", "/train/smoke_test", "must be a boolean (got string \"yes\")"},
    {"{'train': {'grad_clip_norm': -1}}", "/train/grad_clip_norm", "must be at least 0 (got -1)"},
    {"{'train': {'optimizer': {'lr': 0}}}", "/train/optimizer/lr", "must be greater than 0 (got 0)"},
    {"{'train': {'optimizer': {'lr': 11}}}", "/train/optimizer/lr", "must be at most 10 (got 11)"},
    {"{'train': {'optimizer': {'type': 'rmsprop'}}}", "/train/optimizer/type",
     "must be one of: sgd, adam, adamw (got \"rmsprop\")"},
    {"{'train': {'optimizer': {'type': 'sgd', 'momentum': 1}}}", "/train/optimizer/momentum", "must be less than 1 (got 1)"},
    {"{'train': {'optimizer': {'betas': [0.9, 0.99]}}}", "/train/optimizer/betas",
     "unknown field (allowed here: type, lr, momentum, nesterov, weight_decay, beta1, beta2, eps)"},
    {"{'train': {'optimizer': {'eps': 0}}}", "/train/optimizer/eps", "must be greater than 0 (got 0)"},
    {"{'train': {'optimizer': {'beta2': 1.0}}}", "/train/optimizer/beta2", "must be less than 1 (got 1)"},
    {"{'train': {'optimizer': {'weight_decay': -0.1}}}", "/train/optimizer/weight_decay", "must be at least 0 (got -0.1)"},
    {"{'train': {'optimizer': {'type': 'adam', 'momentum': 0.9}}}", "/train/optimizer/momentum",
     "applies only to the sgd optimizer (this run uses adam; its momentum is beta1)"},
    {"{'train': {'optimizer': {'type': 'sgd', 'nesterov': true}}}", "/train/optimizer/nesterov",
     "requires /train/optimizer/momentum to be greater than 0 (it is 0)"},
    {"{'train': {'optimizer': {'type': 'adamw', 'nesterov': true}}}", "/train/optimizer/nesterov",
     "applies only to the sgd optimizer (this run uses adamw)"},
    {"{'train': {'lr_schedule': {'type': 'linear'}}}", "/train/lr_schedule/type",
     "must be one of: constant, step, cosine (got \"linear\")"},
    {"{'train': {'lr_schedule': {'gamma': 1.5}}}", "/train/lr_schedule/gamma", "must be at most 1 (got 1.5)"},
    {"{'train': {'lr_schedule': {'step_epochs': 0}}}", "/train/lr_schedule/step_epochs", "must be at least 1 (got 0)"},
    {"{'train': {'lr_schedule': {'warmup_epochs': -1}}}", "/train/lr_schedule/warmup_epochs", "must be at least 0 (got -1)"},
    {"{'train': {'lr_schedule': {'type': 'cosine', 'min_lr': 0.01}}}", "/train/lr_schedule/min_lr",
     "must be less than /train/optimizer/lr (0.001) for the cosine schedule"},
    {"{'train': {'epochs': 3, 'lr_schedule': {'type': 'cosine', 'warmup_epochs': 3}}}", "/train/lr_schedule/warmup_epochs",
     "must be less than /train/epochs (3): the warm-up must end within the run, or the LR never reaches /train/optimizer/lr"},
    /* step and constant apply their warm-up too (it used to be ignored), by the same rule */
    {"{'train': {'epochs': 2, 'lr_schedule': {'type': 'step', 'warmup_epochs': 5}}}", "/train/lr_schedule/warmup_epochs",
     "must be less than /train/epochs (2): the warm-up must end within the run, or the LR never reaches /train/optimizer/lr"},
    {"{'distributed': {'collective_timeout_s': 0}}", "/distributed/collective_timeout_s", "must be at least 1 (got 0)"},
    {"{'distributed': {'world_size': 65}}", "/distributed/world_size", "must be at most 64 (got 65)"},
    {"{'distributed': {'world_size': 0}}", "/distributed/world_size", "must be at least 1 (got 0)"},
    {"{'distributed': {'backend': 'gloo'}}", "/distributed/backend", "must be one of: auto, cpu, nccl (got \"gloo\")"},
    {"{'distributed': {'gpu_memory_fraction': 0}}", "/distributed/gpu_memory_fraction", "must be greater than 0 (got 0)"},
    {"{'distributed': {'gpu_memory_fraction': 1.5}}", "/distributed/gpu_memory_fraction", "must be at most 1 (got 1.5)"},
    {"{'distributed': {'bucket_mb': 2048}}", "/distributed/bucket_mb", "must be at most 1024 (got 2048)"},
    {"{'distributed': {'threads_per_rank': 0}}", "/distributed/threads_per_rank", "must be at least 1 (got 0)"},
    {"{'distributed': {'allow_tf32': 1}}", "/distributed/allow_tf32", "must be a boolean (got number 1)"},
    {"{'distributed': {'ranks': 2}}", "/distributed/ranks",
     "unknown field (allowed here: world_size, min_world_size, nodes, backend, gpu_memory_fraction, bucket_mb, threads_per_rank, allow_tf32, hang_timeout_s, collective_timeout_s, max_restarts, restart_policy, stop_grace_s, exit_timeout_s, isolate_devices)"},
    {"{'distributed': {'nodes': -1}}", "/distributed/nodes", "must be at least 0 (got -1)"},
    {"{'distributed': {'max_restarts': 101}}", "/distributed/max_restarts", "must be at most 100 (got 101)"},
    {"{'distributed': {'max_restarts': -1}}", "/distributed/max_restarts", "must be at least 0 (got -1)"},
    {"{'distributed': {'max_restarts': 1.5}}", "/distributed/max_restarts", "must be an integer (got number 1.5)"},
    {"{'command': ['python3'], 'distributed': {'max_restarts': 500}}", "/distributed/max_restarts", "must be at most 100 (got 500)"},
    {"{'distributed': {'world_size': 4, 'nodes': 3}}", "/distributed/nodes", "must divide /distributed/world_size (4): every node runs as many ranks"},
    {"{'distributed': {'world_size': 2, 'min_world_size': 3}}", "/distributed/min_world_size",
     "must not exceed /distributed/world_size (2): lower it, or widen the run"},
    {"{'command': ['python3', 'train.py'], 'distributed': {'world_size': 4, 'nodes': 3}}", "/distributed/nodes",
     "must divide /distributed/world_size (4): every node runs as many ranks"},
    {"{'checkpoint': {'keep': 0}}", "/checkpoint/keep", "must be at least 1 (got 0)"},
    {"{'checkpoint': {'every_epochs': -1}}", "/checkpoint/every_epochs", "must be at least 0 (got -1)"},
    {"{'checkpoint': {'path': 'x'}}", "/checkpoint/path", "unknown field (allowed here: every_epochs, keep, load)"},
    {"{'checkpoint': {'load': null}}", "/checkpoint/load", "must be a string (got null)"},
};

/* A command run validates as one: the built-in sections the defaults would add are
 * dropped, its own fields kept; a built-in run gets no command-run default. */
static void test_command_run_shape(void) {
    json_t *doc = json("{'name': 'mine', 'command': ['python3', 'train.py', ''], 'working_dir': 'p',"
                       " 'env': {'MY_FLAG': '1'}, 'distributed': {'world_size': 2, 'isolate_devices': true}}");
    schema_errors errs = {0};
    CHECK(run_config_validate(doc, &errs) == 0, "a command run is valid");
    print_errors(&errs);
    CHECK(command_run_is(doc), "and is one");
    const char *gone[] = {"mode", "seed", "model", "data", "train", "checkpoint"};
    for (size_t i = 0; i < sizeof gone / sizeof *gone; i++)
        CHECK(!json_object_get(doc, gone[i]), "no /%s default in a command run", gone[i]);
    json_t *dist = json_object_get(doc, "distributed");
    CHECK(json_integer_value(json_object_get(dist, "threads_per_rank")) == 1 &&
              json_is_string(json_object_get(dist, "backend")) && json_is_true(json_object_get(dist, "isolate_devices")) &&
              !json_object_get(dist, "bucket_mb") && !json_object_get(dist, "collective_timeout_s") &&
              json_integer_value(json_object_get(dist, "hang_timeout_s")) == 0 &&
              json_is_integer(json_object_get(dist, "hang_timeout_s")),
          "its distributed section: world_size, backend, threads_per_rank, isolate_devices, hang_timeout_s 0 (off)");
    CHECK(json_integer_value(json_object_get(dist, "max_restarts")) == 0 && json_is_integer(json_object_get(dist, "max_restarts")),
          "and max_restarts, 0 unless set (a command run restarts as torchrun --max-restarts does)");
    CHECK(json_array_size(json_object_get(doc, "command")) == 3 &&
              !strcmp(json_string_value(json_object_get(json_object_get(doc, "env"), "MY_FLAG")), "1"),
          "command and env as given");
    schema_errors_free(&errs);
    json_decref(doc);
    doc = json("{'command': ['python3', 'train.py'], 'distributed': {'world_size': 2, 'max_restarts': 100}}");
    CHECK(run_config_validate(doc, &errs) == 0 &&
              json_integer_value(json_object_get(json_object_get(doc, "distributed"), "max_restarts")) == 100,
          "a command run takes max_restarts up to 100, kept as given");
    print_errors(&errs);
    schema_errors_free(&errs);
    json_decref(doc);
    doc = json("{}");
    CHECK(run_config_validate(doc, &errs) == 0 && !json_object_get(doc, "command") && !json_object_get(doc, "env") &&
              !json_object_get(doc, "working_dir") &&
              !json_object_get(json_object_get(doc, "distributed"), "isolate_devices"),
          "a built-in run gets no command-run field");
    schema_errors_free(&errs);
    json_decref(doc);
    CHECK(command_run_owns_variable("MASTER_PORT") && command_run_owns_variable("TORCHELASTIC_ERROR_FILE") &&
              command_run_owns_variable("DDPD_X") && !command_run_owns_variable("MY_FLAG") &&
              !command_run_owns_variable("RANKS"),
          "the variables ddpd owns");
}

static void test_bad_configs(void) {
    size_t n = sizeof bad_configs / sizeof bad_configs[0];
    CHECK(n >= 20, "at least 20 bad configs");
    for (size_t i = 0; i < n; i++) {
        const bad_config *bad = &bad_configs[i];
        json_t *doc = json(bad->config);
        schema_errors errs = {0};
        run_config c;
        memset(&c, 0x5a, sizeof c);
        int violations = run_config_from_json(doc, &c, &errs);
        bool exact = violations == 1 && errs.count == 1 && !strcmp(errs.items[0].pointer, bad->pointer) &&
                     !strcmp(errs.items[0].message, bad->message);
        CHECK(exact, "%s: expected exactly \"%s: %s\"", bad->config, bad->pointer, bad->message);
        if (!exact) print_errors(&errs);
        CHECK(c.train.epochs == 0x5a5a5a5a, "%s: an invalid config leaves the struct alone", bad->config);
        schema_errors_free(&errs);
        json_decref(doc);
    }
}

/* maxLength counts characters, as JSON Schema does, and the struct holds whatever the
 * schema allows: 1023 four-byte characters in a path are read whole. */
static void test_string_lengths_are_characters(void) {
    char long_path[1100 * 4 + 64];
    struct {
        const char *pointer, *message;
        const char *unit;
        int count;
    } cases[] = {
        {"/data/train/images", "must be at most 1023 characters long (got 1100)", "a", 1100},
        {"/data/test/labels", "must be at most 1023 characters long (got 1024)", "\xc3\xa9", 1024},       /* 'é' */
        {"/checkpoint/load", "must be at most 1023 characters long (got 1024)", "\xf0\x9f\x98\x80", 1024}, /* an emoji */
        {"/name", "must be at most 127 characters long (got 128)", "n", 128},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        long_path[0] = '\0';
        for (int i = 0; i < cases[k].count; i++) strcat(long_path, cases[k].unit);
        json_t *doc = json("{}");
        set_at(doc, cases[k].pointer, json_string(long_path));
        schema_errors errs = {0};
        run_config c;
        int violations = run_config_from_json(doc, &c, &errs);
        bool exact = violations == 1 && !strcmp(errs.items[0].pointer, cases[k].pointer) &&
                     !strcmp(errs.items[0].message, cases[k].message);
        CHECK(exact, "%s: expected \"%s\"", cases[k].pointer, cases[k].message);
        if (!exact) print_errors(&errs);
        schema_errors_free(&errs);
        json_decref(doc);
    }
    /* The longest the schema allows fits, in characters of every width. */
    const char *units[] = {"p", "\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"}; /* p, é, €, an emoji */
    const char *pointers[] = {"/data/train/images", "/data/train/labels", "/data/test/images", "/data/test/labels",
                              "/checkpoint/load"};
    for (size_t u = 0; u < sizeof units / sizeof units[0]; u++) {
        long_path[0] = '\0';
        for (int i = 0; i < 1023; i++) strcat(long_path, units[u]);
        json_t *doc = json("{}");
        for (size_t p = 0; p < sizeof pointers / sizeof pointers[0]; p++) set_at(doc, pointers[p], json_string(long_path));
        char what[64];
        snprintf(what, sizeof what, "1023 characters of %zu bytes", strlen(units[u]));
        run_config c;
        if (config_from(doc, &c, what)) {
            CHECK(!strcmp(c.data.train_images, long_path) && !strcmp(c.data.train_labels, long_path) &&
                      !strcmp(c.data.test_images, long_path) && !strcmp(c.data.test_labels, long_path) &&
                      !strcmp(c.checkpoint.load, long_path),
                  "%s: every path is read whole", what);
        }
        json_decref(doc);
    }
    memset(long_path, 'n', 127);
    long_path[127] = '\0';
    json_t *doc = json("{}");
    set_at(doc, "/name", json_string(long_path));
    run_config c;
    if (config_from(doc, &c, "a 127-character name")) CHECK(strlen(c.name) == 127, "the name is read whole");
    json_decref(doc);
}

/* Every integer and every number has both bounds, and what lies beyond them is refused
 * at its field, however it is written: 1e20, an integer beyond 64 bits, 1e300. */
static void check_bounded(const json_t *node, const char *pointer) {
    const char *type = json_string_value(json_object_get(node, "type"));
    if (type && (!strcmp(type, "integer") || !strcmp(type, "number"))) {
        CHECK(json_object_get(node, "maximum") || json_object_get(node, "exclusiveMaximum"), "%s has a maximum", pointer);
        CHECK(json_object_get(node, "minimum") || json_object_get(node, "exclusiveMinimum"), "%s has a minimum", pointer);
    }
    const char *key;
    json_t *child;
    json_object_foreach((json_t *)node, key, child) {
        if (!json_is_object(child) && !json_is_array(child)) continue;
        char path[256];
        if (json_is_array(child)) {
            for (size_t i = 0; i < json_array_size(child); i++) {
                snprintf(path, sizeof path, "%s/%s/%zu", pointer, key, i);
                if (json_is_object(json_array_get(child, i))) check_bounded(json_array_get(child, i), path);
            }
        } else {
            snprintf(path, sizeof path, "%s/%s", pointer, key);
            check_bounded(child, path);
        }
    }
}

/* One error, exactly this one, from parsing and validating `text`. */
static void expect_parsed_error(const char *text, const char *pointer, const char *message) {
    schema_errors errs = {0};
    json_t *doc = run_config_parse(text, strlen(text), 0, NULL, &errs);
    if (doc) run_config_validate(doc, &errs);
    bool exact = errs.count == 1 && !strcmp(errs.items[0].pointer, pointer) && !strcmp(errs.items[0].message, message);
    CHECK(exact, "%s: expected exactly \"%s: %s\"", text, pointer, message);
    if (!exact) print_errors(&errs);
    for (size_t i = 0; i < errs.count; i++)
        CHECK(!strstr(errs.items[i].message, "JSON_"), "%s: no message names a Jansson flag: %s", text, errs.items[i].message);
    schema_errors_free(&errs);
    json_decref(doc);
}

static void test_numbers_beyond_the_bounds(void) {
    check_bounded(run_config_schema(), "");
    static const struct {
        const char *field, *max_message;
    } integers[] = {
        {"{'seed': %s}", "/seed: must be at most 9007199254740991"},
        {"{'data': {'limit': %s}}", "/data/limit: must be at most 4294967295"},
        {"{'data': {'test_limit': %s}}", "/data/test_limit: must be at most 4294967295"},
        {"{'train': {'lr_schedule': {'step_epochs': %s}}}", "/train/lr_schedule/step_epochs: must be at most 10000"},
        {"{'checkpoint': {'every_epochs': %s}}", "/checkpoint/every_epochs: must be at most 10000"},
        {"{'checkpoint': {'keep': %s}}", "/checkpoint/keep: must be at most 10000"},
    };
    static const struct {
        const char *written, *shown;
    } huge[] = {{"1e20", "1e+20"}, {"18446744073709551616", "1.8446744073709552e+19"}, {"99999999999999999999999", "1e+23"}};
    for (size_t i = 0; i < sizeof integers / sizeof integers[0]; i++) {
        for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
            char tmpl[128], text[256], pointer[128], message[160];
            snprintf(tmpl, sizeof tmpl, "%s", integers[i].field);
            for (char *c = tmpl; *c; c++)
                if (*c == '\'') *c = '"';
            snprintf(text, sizeof text, tmpl, huge[k].written);
            const char *colon = strchr(integers[i].max_message, ':');
            snprintf(pointer, sizeof pointer, "%.*s", (int)(colon - integers[i].max_message), integers[i].max_message);
            snprintf(message, sizeof message, "%s (got %s)", colon + 2, huge[k].shown);
            expect_parsed_error(text, pointer, message);
        }
    }
    /* The largest allowed values are read exactly. */
    json_t *doc = json("{'seed': 9007199254740991, 'data': {'limit': 4294967295, 'test_limit': 4294967295},"
                       " 'checkpoint': {'every_epochs': 10000, 'keep': 10000}}");
    run_config c;
    if (config_from(doc, &c, "the largest integers"))
        CHECK(c.seed == 9007199254740991ULL && c.data.limit == 4294967295L && c.checkpoint.keep == 10000,
              "read exactly: seed %llu, limit %ld", (unsigned long long)c.seed, c.data.limit);
    json_decref(doc);
    /* Floats that had no upper bound. */
    expect_parsed_error("{\"train\": {\"grad_clip_norm\": 1e300}}", "/train/grad_clip_norm", "must be at most 1000000 (got 1e+300)");
    expect_parsed_error("{\"train\": {\"optimizer\": {\"weight_decay\": 1e300}}}", "/train/optimizer/weight_decay",
                        "must be at most 1 (got 1e+300)");
    expect_parsed_error("{\"train\": {\"optimizer\": {\"eps\": 1e300}}}", "/train/optimizer/eps", "must be at most 1 (got 1e+300)");
    expect_parsed_error("{\"train\": {\"lr_schedule\": {\"warmup_epochs\": 1e300}}}", "/train/lr_schedule/warmup_epochs",
                        "must be at most 10000 (got 1e+300)");
    expect_parsed_error("{\"train\": {\"lr_schedule\": {\"min_lr\": 1e300}}}", "/train/lr_schedule/min_lr",
                        "must be at most 10 (got 1e+300)");
    /* A big integer where a number is wanted is named too. */
    expect_parsed_error("{\"train\": {\"optimizer\": {\"lr\": 100000000000000000000000}}}", "/train/optimizer/lr",
                        "must be at most 10 (got 1e+23)");
    /* One big integer among ordinary ones: the others are still integers to the schema. */
    expect_parsed_error("{\"seed\": 18446744073709551616, \"train\": {\"epochs\": 3, \"batch_size\": 64}}", "/seed",
                        "must be at most 9007199254740991 (got 1.8446744073709552e+19)");
}

/* What Jansson refuses on its own terms is named as the schema would name it. */
static void test_parse_messages(void) {
    expect_parsed_error("{\"name\": \"a\\u0000b\"}", "/name", "must not contain the character \\u0000 (NUL; at character 2)");
    expect_parsed_error("{\"data\": {\"train\": {\"images\": \"x\\u0000\"}}}", "/data/train/images",
                        "must not contain the character \\u0000 (NUL; at character 2)");
    expect_parsed_error("\"a run\"", "", "must be an object (got string \"a run\")");
    expect_parsed_error("42", "", "must be an object (got number 42)");
    expect_parsed_error("null", "", "must be an object (got null)");
    expect_parsed_error("[1]", "", "must be an object (got an array)");
    expect_parsed_error("{\"seed\": }", "", "not valid JSON: unexpected token near '}' at line 1, column 10");
    schema_errors errs = {0};
    json_t *doc = run_config_parse("{}", 2, 0, NULL, &errs);
    CHECK(doc && json_is_object(doc) && errs.count == 0, "{} parses");
    json_decref(doc);
}

static void test_all_violations_at_once(void) {
    json_t *doc = json("{'train': {'epochs': 0, 'batch_size': 6, 'optimizer': {'type': 'adam', 'momentum': 0.5}},"
                       " 'distributed': {'world_size': 4}, 'model': {'activation': 'x'}, 'foo': 1}");
    schema_errors errs = {0};
    run_config c;
    int violations = run_config_from_json(doc, &c, &errs);
    const char *pointers[] = {"/train/epochs", "/train/batch_size", "/train/optimizer/momentum", "/model/activation", "/foo"};
    CHECK(violations == 5, "five violations, got %d", violations);
    for (size_t i = 0; i < 5; i++) {
        bool found = false;
        for (size_t e = 0; e < errs.count; e++) found = found || !strcmp(errs.items[e].pointer, pointers[i]);
        CHECK(found, "a violation at %s", pointers[i]);
    }
    if (violations != 5) print_errors(&errs);
    schema_errors_free(&errs);
    json_decref(doc);

    /* A value the schema rejected is not judged again by a rule between fields. */
    doc = json("{'train': {'batch_size': 'x'}, 'distributed': {'world_size': 'y'}}");
    violations = run_config_validate(doc, &errs);
    CHECK(violations == 2, "two type errors and no divisibility error, got %d", violations);
    schema_errors_free(&errs);
    json_decref(doc);
}

static void test_rules_between_fields_that_hold(void) {
    const char *good[] = {
        "{'train': {'batch_size': 96}, 'distributed': {'world_size': 3}}",
        "{'distributed': {'world_size': 4, 'min_world_size': 4}}",
        "{'distributed': {'world_size': 4, 'min_world_size': 1}}",
        "{'train': {'optimizer': {'type': 'sgd', 'momentum': 0.9, 'nesterov': true}}}",
        "{'train': {'optimizer': {'type': 'adamw', 'weight_decay': 0.01}}}",
        "{'train': {'epochs': 5, 'lr_schedule': {'type': 'cosine', 'warmup_epochs': 4.5, 'min_lr': 0.0001}}}",
        "{'train': {'epochs': 6, 'lr_schedule': {'type': 'step', 'warmup_epochs': 5.5, 'min_lr': 1}}}",
        "{'train': {'epochs': 2, 'lr_schedule': {'type': 'constant', 'warmup_epochs': 0.25}}}",
        /* An evaluation trains no epochs, so warmup does not have to fit in them. */
        "{'mode': 'eval', 'train': {'epochs': 1, 'lr_schedule': {'type': 'cosine', 'warmup_epochs': 5}}}",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        json_t *doc = json(good[i]);
        run_config c;
        config_from(doc, &c, good[i]);
        json_decref(doc);
    }
}

/* --- files ------------------------------------------------------------------------------------ */

static char temp_dir[512];

static char *write_temp_file(const char *name, const char *contents) {
    static char path[600];
    snprintf(path, sizeof path, "%s/%s", temp_dir, name);
    FILE *f = fopen(path, "w");
    REQUIRE(f, "cannot write %s", path);
    fputs(contents, f);
    fclose(f);
    return path;
}

static void expect_load_error(const char *path, const char *expected_message) {
    schema_errors errs = {0};
    run_config c;
    json_t *doc = (json_t *)1;
    int violations = run_config_load_file(path, &c, &doc, &errs);
    bool exact = violations == 1 && errs.count == 1 && !strcmp(errs.items[0].pointer, "") &&
                 !strcmp(errs.items[0].message, expected_message);
    CHECK(exact, "loading %s: expected \"%s\"", path, expected_message);
    if (!exact) print_errors(&errs);
    CHECK(doc == NULL, "no document when the file does not parse");
    schema_errors_free(&errs);
}

static void test_load_file(void) {
    const char *tmp = getenv("TMPDIR");
    snprintf(temp_dir, sizeof temp_dir, "%s/ddpd-test-run-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    REQUIRE(mkdtemp(temp_dir), "cannot make a temporary directory");
    char expected[1400], missing[600];

    snprintf(missing, sizeof missing, "%s/missing.json", temp_dir);
    snprintf(expected, sizeof expected, "cannot read %s: No such file or directory", missing);
    expect_load_error(missing, expected);

    snprintf(expected, sizeof expected, "cannot read %s: Is a directory", temp_dir);
    expect_load_error(temp_dir, expected);

    char *path = write_temp_file("broken.json", "{\n  \"name\": \"a\",\n  \"seed\": \n}\n");
    snprintf(expected, sizeof expected, "%s is not valid JSON: unexpected token near '}' at line 4, column 1", path);
    expect_load_error(path, expected);

    path = write_temp_file("empty.json", "");
    snprintf(expected, sizeof expected, "%s is not valid JSON: unexpected token near end of file at line 1, column 0", path);
    expect_load_error(path, expected);

    path = write_temp_file("twice.json", "{\"seed\": 1, \"seed\": 2}");
    snprintf(expected, sizeof expected, "%s is not valid JSON: duplicate object key near '\"seed\"' at line 1, column 18", path);
    expect_load_error(path, expected);

    /* A file that parses but is invalid: the violations, and the document for the caller. */
    path = write_temp_file("invalid.json", "{\"train\": {\"epochs\": 0}}");
    schema_errors errs = {0};
    run_config c;
    json_t *doc = NULL;
    CHECK(run_config_load_file(path, &c, &doc, &errs) == 1 && !strcmp(errs.items[0].pointer, "/train/epochs"),
          "an invalid file reports its violations");
    CHECK(doc != NULL, "and hands back the document");
    json_decref(doc);
    schema_errors_free(&errs);

    path = write_temp_file("good.json", "{\"name\": \"from-file\", \"distributed\": {\"world_size\": 2}}");
    doc = NULL;
    int violations = run_config_load_file(path, &c, &doc, &errs);
    CHECK(violations == 0 && !strcmp(c.name, "from-file") && c.distributed.world_size == 2 && c.train.batch_size == 128,
          "a good file loads");
    CHECK(json_object_get(doc, "checkpoint") != NULL, "its document comes back with defaults filled");
    json_decref(doc);
    CHECK(run_config_load_file(path, &c, NULL, &errs) == 0, "the document is optional");
    schema_errors_free(&errs);

    const char *names[] = {"broken.json", "empty.json", "twice.json", "invalid.json", "good.json"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char file[600];
        snprintf(file, sizeof file, "%s/%s", temp_dir, names[i]);
        unlink(file);
    }
    rmdir(temp_dir);
}

/* --- the schema itself ------------------------------------------------------------------------- */

static void check_enum_names(const char *pointer, const char *(*name)(int)) {
    const json_t *choices = keyword(schema_leaf(pointer), "enum");
    REQUIRE(choices, "%s has an enum", pointer);
    size_t n = json_array_size(choices);
    for (size_t i = 0; i < n; i++)
        CHECK(!strcmp(name((int)i), json_string_value(json_array_get(choices, i))), "%s: value %zu is %s in the schema, %s in C",
              pointer, i, json_string_value(json_array_get(choices, i)), name((int)i));
    CHECK(!strcmp(name((int)n), "unknown"), "%s: C knows more values than the schema", pointer);
}

static void test_enum_names_match_the_schema(void) {
    check_enum_names("/mode", mode_of);
    check_enum_names("/model/type", model_of);
    check_enum_names("/model/activation", activation_of);
    check_enum_names("/model/cnn/batch_norm_stats", bn_stats_of);
    check_enum_names("/train/optimizer/type", optimizer_of);
    check_enum_names("/train/lr_schedule/type", schedule_of);
    check_enum_names("/distributed/backend", backend_of);
}

/* Every property is described and typed; every object is closed and defaults to {}. */
static void lint_schema_node(const json_t *node, const char *pointer) {
    if (pointer[0]) {
        CHECK(json_is_string(json_object_get(node, "description")), "%s has a description", pointer);
        CHECK(keyword(node, "type"), "%s has a type", pointer);
        CHECK(keyword(node, "default") || restart_policy_field(pointer) ||
                  (command_run_field(pointer) && strcmp(pointer, "/distributed/isolate_devices")),
              "%s has a default", pointer);
    }
    const json_t *properties = json_object_get(node, "properties");
    if (!properties) return;
    CHECK(json_is_false(json_object_get(node, "additionalProperties")), "%s forbids unknown fields", pointer);
    const json_t *def = json_object_get(node, "default");
    if (pointer[0] && !restart_policy_field(pointer))
        CHECK(json_is_object(def) && json_object_size(def) == 0, "%s defaults to {}", pointer);
    const char *name;
    json_t *child;
    json_object_foreach((json_t *)properties, name, child) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", pointer, name);
        lint_schema_node(child, path);
    }
}

static void test_schema_document(void) {
    const json_t *schema = run_config_schema();
    REQUIRE(schema, "the embedded schema parses");
    const char *dialect = json_string_value(json_object_get(schema, "$schema"));
    CHECK(dialect && !strcmp(dialect, "https://json-schema.org/draft/2020-12/schema"), "declares 2020-12");
    CHECK(json_is_string(json_object_get(schema, "$id")) && json_is_string(json_object_get(schema, "title")) &&
              json_is_string(json_object_get(schema, "description")),
          "$id, title and description");
    lint_schema_node(schema, "");
    json_t *reparsed = json_loads(run_config_schema_text(), 0, NULL);
    CHECK(reparsed && json_equal(reparsed, (json_t *)schema), "run_config_schema_text is the parsed schema's text");
    const json_t *most = keyword(schema_leaf("/distributed/max_restarts"), "maximum");
    CHECK(json_integer_value(most) == RUN_CONFIG_MAX_RESTARTS,
          "RUN_CONFIG_MAX_RESTARTS (ddp-run's own check) is the schema's maximum of max_restarts (%lld)",
          (long long)json_integer_value(most));
    json_decref(reparsed);
}

static void *validate_in_a_thread(void *arg) {
    (void)arg;
    const json_t *schema = run_config_schema();
    int failures = 0;
    for (int i = 0; i < 50; i++) {
        json_t *doc = json_pack("{s:{s:i}, s:{s:i}}", "train", "batch_size", 64, "distributed", "world_size", 1 + i % 2);
        schema_errors errs = {0};
        run_config c;
        failures += run_config_from_json(doc, &c, &errs) != 0 || c.train.batch_size != 64;
        schema_errors_free(&errs);
        json_decref(doc);
    }
    return failures == 0 ? (void *)schema : NULL;
}

static void test_schema_is_shared_across_threads(void) {
    pthread_t threads[8];
    for (int i = 0; i < 8; i++) pthread_create(&threads[i], NULL, validate_in_a_thread, NULL);
    for (int i = 0; i < 8; i++) {
        void *seen;
        pthread_join(threads[i], &seen);
        CHECK(seen != NULL && seen == (void *)run_config_schema(), "thread %d validated with the one schema", i);
    }
}

int main(void) {
    test_schema_is_shared_across_threads(); /* first, so that the threads race to parse it */
    test_schema_document();
    test_empty_config_gives_the_defaults();
    test_every_schema_leaf_has_a_field();
    test_schema_defaults_are_the_struct_defaults();
    test_every_leaf_lands_in_its_own_field();
    test_a_full_config();
    test_bad_configs();
    test_command_run_shape();
    test_string_lengths_are_characters();
    test_numbers_beyond_the_bounds();
    test_parse_messages();
    test_all_violations_at_once();
    test_rules_between_fields_that_hold();
    test_enum_names_match_the_schema();
    test_load_file();
    return test_done("test_run_config");
}
