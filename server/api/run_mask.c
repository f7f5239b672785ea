/* Hiding a command run's env values and arguments from those who are not its owner
 * or an admin: see run_mask.h. */
#include "run_mask.h"

#include <jansson.h>
#include <string.h>

#include "base.h"

/* The config's env (an object with members) and command (an array past its program). */
static bool has_secrets(const json_t *config) {
    const json_t *env = json_object_get(config, "env"), *command = json_object_get(config, "command");
    return (json_is_object(env) && json_object_size(env) > 0) || (json_is_array(command) && json_array_size(command) > 1);
}

bool run_mask_needed(const char *body, size_t len) {
    /* cheap first: a built-in model's run has neither member */
    if (!memmem(body, len, "\"env\"", 5) && !memmem(body, len, "\"command\"", 9)) return false;
    json_t *run = json_loadb(body, len, 0, NULL);
    bool needed = has_secrets(json_object_get(run, "config"));
    json_decref(run);
    return needed;
}

bool run_mask_sees_all(const caller *who, const char *owner) {
    return who->admin || (who->kind == CALLER_USER && owner && *owner && strcmp(owner, who->name) == 0);
}

bool run_mask_config(json_t *config, json_t *hidden, const char *at) {
    bool any = false;
    json_t *env = json_object_get(config, "env");
    if (json_is_object(env) && json_object_size(env) > 0) {
        const char *name;
        json_t *value;
        json_object_foreach(env, name, value) json_object_set_new(env, name, json_string(RUN_MASK_HIDDEN));
        json_array_append_new(hidden, json_sprintf("%s/env", at));
        any = true;
    }
    json_t *command = json_object_get(config, "command");
    if (json_is_array(command) && json_array_size(command) > 1) {
        for (size_t i = 1; i < json_array_size(command); i++)
            json_array_set_new(command, i, json_string(RUN_MASK_HIDDEN));
        json_array_append_new(hidden, json_sprintf("%s/command", at));
        any = true;
    }
    return any;
}

bool run_mask_apply(char **body, size_t *len) {
    json_t *run = json_loadb(*body, *len, 0, NULL);
    json_t *config = json_object_get(run, "config");
    if (!run || !json_is_object(config)) {
        json_decref(run);
        return false;
    }
    json_t *hidden = json_array();
    run_mask_config(config, hidden, "/config");
    json_object_set_new(run, "hidden", hidden);
    size_t n = json_dumpb(run, NULL, 0, JSON_FLAGS);
    char *s = xmalloc(n + 1);
    json_dumpb(run, s, n, JSON_FLAGS);
    s[n] = '\n';
    json_decref(run);
    free(*body);
    *body = s;
    *len = n + 1;
    return true;
}
