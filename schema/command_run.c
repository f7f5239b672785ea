/* Command runs' rules beside the schema: see command_run.h. */
#include "command_run.h"

#include <ctype.h>
#include <string.h>

/* The built-in models' top-level sections, and the distributed fields only they use. */
static const char *const BUILTIN_SECTIONS[] = {"mode", "seed", "model", "data", "train", "checkpoint"};
static const char *const BUILTIN_DISTRIBUTED[] = {"gpu_memory_fraction", "bucket_mb", "allow_tf32",
                                                     "collective_timeout_s"};
static const char *const COMMAND_FIELDS[] = {"working_dir", "env", "warm_start"};

/* What every rank of a command run is given (the torchrun contract and ddpd's own;
 * ddp-run keeps the same list, runner/rank_env.c). PYTHONPATH is not among them: a
 * config's goes after the reporter's directory. */
static const char *const OWNED[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK",
    "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
    "PYTHONUNBUFFERED", "TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"};
static const char *const OWNED_PREFIXES[] = {"TORCHELASTIC_", "DDPD_"};

#define COUNT(a) (sizeof(a) / sizeof *(a))

bool command_run_is(const json_t *doc) { return json_is_object(doc) && json_object_get(doc, "command") != NULL; }

bool command_run_owns_variable(const char *name) {
    for (size_t i = 0; i < COUNT(OWNED); i++)
        if (strcmp(name, OWNED[i]) == 0) return true;
    for (size_t i = 0; i < COUNT(OWNED_PREFIXES); i++)
        if (strncmp(name, OWNED_PREFIXES[i], strlen(OWNED_PREFIXES[i])) == 0) return true;
    return false;
}

static bool is_variable_name(const char *s) {
    if (!*s || isdigit((unsigned char)*s)) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_') return false;
    return true;
}

static void check_env_names(const json_t *env, schema_errors *errs) {
    const char *name;
    json_t *value;
    json_object_foreach((json_t *)env, name, value) {
        (void)value;
        if (!is_variable_name(name))
            schema_errors_add(errs, "/env", "\"%.128s\" is not a variable name (letters, digits and '_', not starting with a digit)",
                              name);
        else if (command_run_owns_variable(name))
            schema_errors_add(errs, "/env", "cannot set %s: ddpd sets it for every rank (see the schema's env)", name);
    }
}

void command_run_check_given(const json_t *doc, schema_errors *errs) {
    if (!json_is_object(doc)) return;
    const json_t *dist = json_object_get(doc, "distributed");
    if (command_run_is(doc)) {
        for (size_t i = 0; i < COUNT(BUILTIN_SECTIONS); i++)
            if (json_object_get(doc, BUILTIN_SECTIONS[i]))
                schema_errors_add(errs, "", "/%s belongs to the built-in models: a command run (with /command) cannot have it",
                                  BUILTIN_SECTIONS[i]);
        for (size_t i = 0; json_is_object(dist) && i < COUNT(BUILTIN_DISTRIBUTED); i++)
            if (json_object_get(dist, BUILTIN_DISTRIBUTED[i]))
                schema_errors_add(errs, "/distributed", "%s applies to the built-in models only, not to a command run",
                                  BUILTIN_DISTRIBUTED[i]);
        const json_t *env = json_object_get(doc, "env");
        if (json_is_object(env)) check_env_names(env, errs);
    } else {
        for (size_t i = 0; i < COUNT(COMMAND_FIELDS); i++)
            if (json_object_get(doc, COMMAND_FIELDS[i]))
                schema_errors_add(errs, "", "/%s applies to command runs only (a config with /command)", COMMAND_FIELDS[i]);
        /* (false is the default, and what a form filled from the schema's defaults sends) */
        if (json_is_object(dist) && json_is_true(json_object_get(dist, "isolate_devices")))
            schema_errors_add(errs, "/distributed", "isolate_devices applies to command runs only (a config with /command)");
    }
}

void command_run_fill_own_defaults(json_t *doc) {
    if (!command_run_is(doc)) return;
    json_t *dist = json_object_get(doc, "distributed");
    if (!dist) json_object_set_new(doc, "distributed", dist = json_object());
    /* A script's steps may be far apart and it may report none: no hang watch unless asked */
    if (json_is_object(dist) && !json_object_get(dist, "hang_timeout_s"))
        json_object_set_new(dist, "hang_timeout_s", json_integer(0));
}

void command_run_drop_foreign_defaults(json_t *doc) {
    if (!json_is_object(doc)) return;
    json_t *dist = json_object_get(doc, "distributed");
    if (!command_run_is(doc)) {
        if (json_is_object(dist)) json_object_del(dist, "isolate_devices");
        return;
    }
    for (size_t i = 0; i < COUNT(BUILTIN_SECTIONS); i++) json_object_del(doc, BUILTIN_SECTIONS[i]);
    for (size_t i = 0; json_is_object(dist) && i < COUNT(BUILTIN_DISTRIBUTED); i++)
        json_object_del(dist, BUILTIN_DISTRIBUTED[i]);
}
