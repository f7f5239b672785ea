/* Hiding a sweep's env values, arguments and the parameter values that reach them
 * from those who are not its owner or an admin: see sweep_mask.h. */
#include "sweep_mask.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "run_mask.h"
#include "sweep_spec.h"

/* `prefix` and `key` as a JSON pointer ("~" and "/" in the key escaped). */
static json_t *pointer_to(const char *prefix, const char *key) {
    buf_t b = {0};
    buf_append(&b, prefix, strlen(prefix));
    buf_append(&b, "/", 1);
    for (const char *c = key; *c; c++) {
        if (*c == '~') buf_append(&b, "~0", 2);
        else if (*c == '/') buf_append(&b, "~1", 2);
        else buf_append(&b, c, 1);
    }
    buf_append(&b, "", 1);
    json_t *p = json_string(b.data);
    free(b.data);
    return p;
}

/* A parameter's spec ({"values": [...]} or {"min", "max", ...}) with its values hidden. */
static void hide_param_spec(json_t *p) {
    json_t *values = json_object_get(p, "values");
    for (size_t i = 0; json_is_array(values) && i < json_array_size(values); i++)
        json_array_set_new(values, i, json_string(RUN_MASK_HIDDEN));
    static const char *const ends[] = {"min", "max"};
    for (size_t i = 0; i < 2; i++)
        if (json_object_get(p, ends[i])) json_object_set_new(p, ends[i], json_string(RUN_MASK_HIDDEN));
}

/* A conditional parameter's `when` on a secret parameter (its values a secret one's):
 * those values hidden, each such condition's pointer in `hidden`. */
static void hide_conditions(json_t *p, const char *key, json_t *hidden) {
    const char *ck;
    json_t *values;
    json_object_foreach(json_object_get(p, "when"), ck, values) {
        if (!sweep_param_secret(ck)) continue;
        for (size_t i = 0; json_is_array(values) && i < json_array_size(values); i++)
            json_array_set_new(values, i, json_string(RUN_MASK_HIDDEN));
        json_t *at = pointer_to("/spec/parameters", key);
        json_t *full = pointer_to(json_string_value(at), "when");
        json_array_append_new(hidden, pointer_to(json_string_value(full), ck));
        json_decref(full);
        json_decref(at);
    }
}

/* A trial's params with the secret ones' values hidden; true when it had any. */
static bool hide_params(json_t *params) {
    bool any = false;
    const char *key;
    json_t *v;
    json_object_foreach(params, key, v) {
        if (!sweep_param_secret(key)) continue;
        json_object_set_new(params, key, json_string(RUN_MASK_HIDDEN));
        any = true;
    }
    return any;
}

bool sweep_mask_for(json_t *sweep, const caller *who) {
    if (run_mask_sees_all(who, json_string_value(json_object_get(sweep, "owner")))) return false;
    json_t *hidden = json_array();
    json_t *spec = json_object_get(sweep, "spec");
    run_mask_config(json_object_get(spec, "base"), hidden, "/spec/base");
    const char *key;
    json_t *p;
    json_object_foreach(json_object_get(spec, "parameters"), key, p) {
        hide_conditions(p, key, hidden);
        if (!sweep_param_secret(key)) continue;
        hide_param_spec(p);
        json_array_append_new(hidden, pointer_to("/spec/parameters", key));
    }
    json_t *trials = json_object_get(sweep, "trials");
    for (size_t i = 0; i < json_array_size(trials); i++) hide_params(json_object_get(json_array_get(trials, i), "params"));
    json_t *best_params = json_object_get(json_object_get(sweep, "best"), "params");
    if (!spec) /* GET /sweeps: the best trial's params are all there is */
        json_object_foreach(best_params, key, p) if (sweep_param_secret(key))
            json_array_append_new(hidden, pointer_to("/best/params", key));
    hide_params(best_params);
    /* the best trial's run config (GET /sweeps/{id}): as its run's is masked */
    run_mask_config(json_object_get(json_object_get(sweep, "best"), "config"), hidden, "/best/config");
    /* its zygote's last line may name the owner's files */
    json_t *warm = json_object_get(sweep, "warm_start");
    if (json_is_string(json_object_get(warm, "reason"))) {
        json_object_set_new(warm, "reason", json_string(RUN_MASK_HIDDEN));
        json_array_append_new(hidden, json_string("/warm_start/reason"));
    }
    bool any = json_array_size(hidden) > 0;
    if (any) json_object_set_new(sweep, "hidden", hidden);
    else json_decref(hidden);
    return any;
}
