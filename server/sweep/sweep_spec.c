/* Parsing, checking and expanding a sweep: see sweep_spec.h. */
#include "sweep_spec.h"

#include <ctype.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "command_run.h"
#include "run_config.h"
#include "sweep_schema.h"

/* The epoch table's columns: what a built-in trial can be judged by. */
static const char *const EPOCH_KEYS[] = {"test_loss", "test_acc", "train_loss", "lr", "seconds", "samples_per_s"};

static bool is_epoch_key(const char *k) {
    for (size_t i = 0; i < sizeof EPOCH_KEYS / sizeof *EPOCH_KEYS; i++)
        if (strcmp(k, EPOCH_KEYS[i]) == 0) return true;
    return false;
}

/* ---- values as text (an environment variable, a placeholder) ---- */

/* The shortest decimal that reads back as v: 0.1, not 0.10000000000000001. */
static void number_text(double v, char *out, size_t n) {
    for (int p = 1; p <= 17; p++) {
        snprintf(out, n, "%.*g", p, v);
        if (strtod(out, NULL) == v) return;
    }
}

static char *value_text(const json_t *v) {
    char buf[64];
    if (json_is_string(v)) return xstrdup(json_string_value(v));
    if (json_is_integer(v)) return xasprintf("%lld", (long long)json_integer_value(v));
    if (json_is_real(v)) {
        number_text(json_real_value(v), buf, sizeof buf);
        return xstrdup(buf);
    }
    if (json_is_boolean(v)) return xstrdup(json_is_true(v) ? "true" : "false");
    return json_dumps(v, JSON_FLAGS | JSON_ENCODE_ANY);
}

/* ---- JSON paths ---- */

/* The member or element `seg` of `at`, or NULL. */
static json_t *path_step(json_t *at, const char *seg) {
    if (json_is_object(at)) return json_object_get(at, seg);
    if (json_is_array(at) && *seg && strspn(seg, "0123456789") == strlen(seg))
        return json_array_get(at, strtoul(seg, NULL, 10));
    return NULL;
}

/* Sets the value at dotted `path` in `doc` (taking `v`); false when the path is not
 * there (its last step's parent must be). */
static bool path_set(json_t *doc, const char *path, json_t *v) {
    char *copy = xstrdup(path), *seg = copy, *dot;
    json_t *at = doc;
    while ((dot = strchr(seg, '.'))) {
        *dot = 0;
        at = path_step(at, seg);
        seg = dot + 1;
        if (!at) break;
    }
    bool ok = false;
    if (at && json_is_object(at) && json_object_get(at, seg)) ok = json_object_set(at, seg, v) == 0;
    else if (at && json_is_array(at) && path_step(at, seg)) ok = json_array_set(at, strtoul(seg, NULL, 10), v) == 0;
    json_decref(v);
    free(copy);
    return ok;
}

static bool path_exists(json_t *doc, const char *path) {
    char *copy = xstrdup(path), *seg = copy, *dot;
    json_t *at = doc;
    while (at && (dot = strchr(seg, '.'))) {
        *dot = 0;
        at = path_step(at, seg);
        seg = dot + 1;
    }
    bool ok = at && path_step(at, seg);
    free(copy);
    return ok;
}

/* ---- the parameters ---- */

static bool env_name_ok(const char *s) {
    if (!*s || !(isalpha((unsigned char)*s) || *s == '_')) return false;
    for (; *s; s++)
        if (!(isalnum((unsigned char)*s) || *s == '_')) return false;
    return true;
}

/* Whether "{name}" is in some element of the base's command. */
static bool command_has(const json_t *base, const char *placeholder) {
    const json_t *cmd = json_object_get(base, "command");
    for (size_t i = 0; i < json_array_size(cmd); i++) {
        const char *a = json_string_value(json_array_get(cmd, i));
        if (a && strstr(a, placeholder)) return true;
    }
    return false;
}

/* How many values a parameter has on a grid (its values, or an int range's
 * integers); 0 for a float range, which a grid cannot walk. */
static long grid_count(const sweep_param *p) {
    if (p->values) return (long)json_array_size(p->values);
    if (p->is_int) return (long)(floor(p->max) - ceil(p->min)) + 1;
    return 0;
}

/* /parameters/KEY (the key escaped as RFC 6901 says), then /MEMBER when given. */
static char *param_pointer(const char *key, const char *member) {
    buf_t b = {0};
    buf_printf(&b, "/parameters/");
    for (const char *c = key; *c; c++) {
        if (*c == '~') buf_printf(&b, "~0");
        else if (*c == '/') buf_printf(&b, "~1");
        else buf_append(&b, c, 1);
    }
    if (member) buf_printf(&b, "/%s", member);
    return b.data;
}

/* A violation of parameter `key` (at its member `member`, or the parameter itself). */
static void param_error(schema_errors *errs, const char *key, const char *member, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void param_error(schema_errors *errs, const char *key, const char *member, const char *fmt, ...) {
    char message[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    char *ptr = param_pointer(key, member);
    schema_errors_add(errs, ptr, "%s", message);
    free(ptr);
}

/* ---- conditional parameters ("when") ---- */

static int param_index(const sweep_spec *s, const char *key) {
    for (int i = 0; i < s->n_params; i++)
        if (strcmp(s->params[i].key, key) == 0) return i;
    return -1;
}

static bool in_values(const json_t *values, const json_t *v) {
    for (size_t j = 0; v && j < json_array_size(values); j++)
        if (json_equal(v, json_array_get(values, j))) return true;
    return false;
}

/* Whether parameter i applies to the values `vals` ({"key": value}): each of its
 * conditions' parameters applies and has one of the condition's values. The
 * conditions have no loop (parse_conditions refused one); depth guards anyway. */
static bool applies_at(const sweep_spec *s, int i, const json_t *vals, int depth) {
    if (depth > s->n_params) return false;
    const sweep_param *p = &s->params[i];
    for (int c = 0; c < p->n_when; c++) {
        const sweep_cond *w = &p->when[c];
        if (!applies_at(s, w->param, vals, depth + 1)) return false;
        if (!in_values(w->values, json_object_get(vals, s->params[w->param].key))) return false;
    }
    return true;
}

/* `vals` with only the parameters that apply, in the parameters' order (new reference). */
static json_t *applying(const sweep_spec *s, const json_t *vals) {
    json_t *out = json_object();
    for (int i = 0; i < s->n_params; i++) {
        json_t *v = json_object_get(vals, s->params[i].key);
        if (v && applies_at(s, i, vals, 0)) json_object_set(out, s->params[i].key, v);
    }
    return out;
}

/* "when/KEY" with the key escaped as RFC 6901 says: a member of /parameters/PARAM. */
static char *when_member(const char *key) {
    char *ptr = param_pointer(key, NULL); /* "/parameters/<escaped>" */
    char *m = xasprintf("when/%s", ptr + strlen("/parameters/"));
    free(ptr);
    return m;
}

/* The path of a loop through the conditions from parameter `from`, "a -> b -> a"
 * (malloc'd), or NULL when none. */
static char *condition_loop(const sweep_spec *s, int from, int at, int *trail, int depth) {
    trail[depth] = at;
    const sweep_param *p = &s->params[at];
    for (int c = 0; c < p->n_when; c++) {
        int next = p->when[c].param;
        if (next == from) {
            buf_t b = {0};
            for (int k = 0; k <= depth; k++) buf_printf(&b, "%s -> ", s->params[trail[k]].key);
            buf_printf(&b, "%s", s->params[from].key);
            return b.data;
        }
        bool seen = false;
        for (int k = 0; k <= depth; k++) seen = seen || trail[k] == next;
        if (seen || depth + 1 >= s->n_params) continue;
        char *loop = condition_loop(s, from, next, trail, depth + 1);
        if (loop) return loop;
    }
    return NULL;
}

/* Each parameter's `when`, once every parameter is parsed: each condition on another
 * parameter of the sweep that has values, each value one of them, and no loop. */
static void parse_conditions(sweep_spec *s, const json_t *params, schema_errors *errs) {
    for (int i = 0; i < s->n_params; i++) {
        sweep_param *p = &s->params[i];
        const json_t *when = json_object_get(json_object_get(params, p->key), "when");
        if (!json_is_object(when)) continue;
        p->when = xcalloc(json_object_size(when), sizeof *p->when);
        const char *ck;
        const json_t *vals;
        json_object_foreach((json_t *)when, ck, vals) {
            int j = param_index(s, ck);
            char *member = when_member(ck);
            if (j < 0) {
                param_error(errs, p->key, member, "parameter %s is conditional on %s, which is no parameter of the sweep: "
                            "name another of its parameters (with values), e.g. \"when\": {\"train.optimizer.name\": "
                            "[\"sgd\"]}", p->key, ck);
            } else if (j == i) {
                param_error(errs, p->key, member, "parameter %s is conditional on itself: a condition names another "
                            "parameter", p->key);
            } else if (!s->params[j].values) {
                param_error(errs, p->key, member, "parameter %s is conditional on %s, a range: a condition names a "
                            "parameter with values: [...]", p->key, ck);
            } else {
                for (size_t k = 0; k < json_array_size(vals); k++)
                    if (!in_values(s->params[j].values, json_array_get(vals, k))) {
                        char *v = json_dumps(json_array_get(vals, k), JSON_FLAGS | JSON_ENCODE_ANY);
                        char *list = json_dumps(s->params[j].values, JSON_FLAGS);
                        param_error(errs, p->key, member, "%s is not one of %s's values %s: the condition could never "
                                    "hold", v, ck, list);
                        free(v);
                        free(list);
                        break;
                    }
                p->when[p->n_when++] = (sweep_cond){.param = j, .values = json_deep_copy(vals)};
            }
            free(member);
        }
        s->conditional = s->conditional || p->n_when > 0;
    }
    int *trail = xmalloc((size_t)(s->n_params > 0 ? s->n_params : 1) * sizeof *trail);
    for (int i = 0; i < s->n_params; i++) {
        char *loop = condition_loop(s, i, i, trail, 0);
        if (!loop) continue;
        param_error(errs, s->params[i].key, "when", "the conditions loop (%s): a parameter cannot depend, through "
                    "others, on itself; remove one of these conditions", loop);
        free(loop);
        break; /* the loop once, at its first parameter */
    }
    free(trail);
}

/* A parameter the schema passed ({"values": [...]} or a range): where it goes, and its
 * range's sense. */
static bool parse_param(sweep_spec *s, const char *key, const json_t *o, json_t *filled, sweep_param *p,
                        schema_errors *errs) {
    memset(p, 0, sizeof *p);
    p->key = xstrdup(key);
    size_t klen = strlen(key);
    if (klen > 2 && key[0] == '{' && key[klen - 1] == '}') {
        p->target = PARAM_PLACEHOLDER;
        if (!s->command) {
            param_error(errs, key, NULL, "parameter %s is a placeholder of a command run's `command`, but the base is a "
                        "built-in run", key);
            return false;
        }
        if (!command_has(s->base, key)) {
            param_error(errs, key, NULL, "parameter %s: the base's `command` has no %s placeholder: put it in an "
                        "argument, e.g. \"--lr={lr}\"", key, key);
            return false;
        }
    } else if (strncmp(key, "env.", 4) == 0) {
        p->target = PARAM_ENV;
        if (!s->command) {
            param_error(errs, key, NULL, "parameter %s sets an environment variable, which only a command run's "
                        "program reads; the base is a built-in run", key);
            return false;
        }
        if (!env_name_ok(key + 4)) {
            param_error(errs, key, NULL, "parameter %s: %s is not an environment variable's name (letters, digits and "
                        "_, not starting with a digit)", key, key + 4);
            return false;
        }
    } else {
        p->target = PARAM_PATH;
        if (!path_exists(filled, key)) {
            param_error(errs, key, NULL, "parameter %s is not a path in the base config: name a field that is there "
                        "(defaults count), dotted, e.g. train.optimizer.lr or model.hidden.0", key);
            return false;
        }
    }
    const json_t *values = json_object_get(o, "values");
    if (values) {
        p->values = json_deep_copy(values);
        return true;
    }
    const json_t *mn = json_object_get(o, "min"), *mx = json_object_get(o, "max");
    const char *hidden = !json_is_number(mn) ? "min" : !json_is_number(mx) ? "max" : NULL;
    if (hidden) { /* the schema's other form: what an answer shows in place of a hidden value */
        param_error(errs, key, hidden, "parameter %s: %s is \"%s\", which is how an answer shows a value hidden from "
                    "its reader: give the number itself", key, hidden, COMMAND_RUN_HIDDEN);
        return false;
    }
    p->min = json_number_value(mn);
    p->max = json_number_value(mx);
    p->log = json_is_true(json_object_get(o, "log"));
    const char *type = json_string_value(json_object_get(o, "type"));
    p->is_int = type ? strcmp(type, "int") == 0 : json_is_integer(mn) && json_is_integer(mx);
    if (p->min > p->max || (p->is_int && ceil(p->min) > floor(p->max))) {
        param_error(errs, key, NULL, "parameter %s: the range is empty (min %g, max %g): min must be at most max", key,
                    p->min, p->max);
        return false;
    }
    if (p->log && p->min <= 0) {
        param_error(errs, key, NULL, "parameter %s: a log range needs min > 0 (got %g)", key, p->min);
        return false;
    }
    return true;
}

/* The value parameter p takes for u in [0, 1) (random search). */
static json_t *sample(const sweep_param *p, double u) {
    if (p->values) {
        size_t n = json_array_size(p->values), i = (size_t)(u * (double)n);
        return json_incref(json_array_get(p->values, i < n ? i : n - 1));
    }
    if (p->is_int) {
        double lo = ceil(p->min), hi = floor(p->max), v;
        if (p->log) v = round(exp(log(lo) + u * (log(hi) - log(lo))));
        else v = floor(lo + u * (hi - lo + 1));
        return json_integer((json_int_t)fmin(fmax(v, lo), hi));
    }
    double v = p->log ? exp(log(p->min) + u * (log(p->max) - log(p->min))) : p->min + u * (p->max - p->min);
    return json_real(fmin(fmax(v, p->min), p->max));
}

/* The grid's i-th value of p. */
static json_t *grid_value(const sweep_param *p, long i) {
    if (p->values) return json_incref(json_array_get(p->values, (size_t)i));
    return json_integer((json_int_t)(ceil(p->min) + (double)i));
}

/* SplitMix64: a stream of its own for every (seed, trial, parameter), so a trial's
 * values do not depend on which trials were made before it. */
static double uniform(uint64_t seed, int trial, int param) {
    uint64_t z = seed + 0x9E3779B97F4A7C15ULL * ((uint64_t)trial * 1000003ULL + (uint64_t)param + 1);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

json_t *sweep_trial_params(const sweep_spec *s, int trial) {
    if (s->grid) return json_deep_copy(json_array_get(s->grid, (size_t)trial));
    json_t *out = json_object();
    long rest = trial;
    for (int i = s->n_params - 1; i >= 0; i--) { /* the grid: the last parameter varies fastest */
        const sweep_param *p = &s->params[i];
        json_t *v;
        if (s->method == METHOD_GRID) {
            long n = grid_count(p);
            v = grid_value(p, rest % n);
            rest /= n;
        } else {
            v = sample(p, uniform(s->seed, trial, i));
        }
        json_object_set_new(out, p->key, v);
    }
    /* in the parameters' order, for a person */
    json_t *ordered = json_object();
    for (int i = 0; i < s->n_params; i++) json_object_set(ordered, s->params[i].key, json_object_get(out, s->params[i].key));
    json_decref(out);
    if (!s->conditional) return ordered;
    json_t *applied = applying(s, ordered); /* each drawn, so a trial's values do not depend on the others' */
    json_decref(ordered);
    return applied;
}

static char *replace_all(const char *text, const char *what, const char *with) {
    buf_t b = {0};
    size_t wl = strlen(what);
    const char *at;
    while ((at = strstr(text, what))) {
        buf_append(&b, text, (size_t)(at - text));
        buf_append(&b, with, strlen(with));
        text = at + wl;
    }
    buf_append(&b, text, strlen(text) + 1);
    return b.data;
}

json_t *sweep_trial_config(const sweep_spec *s, const json_t *params, const char *run_name) {
    json_t *cfg = json_deep_copy(s->base);
    if (run_name) json_object_set_new(cfg, "name", json_string(run_name));
    if (s->preemptible) json_object_set_new(cfg, "preemptible", json_true());
    for (int i = 0; i < s->n_params; i++) {
        const sweep_param *p = &s->params[i];
        json_t *v = json_object_get(params, p->key);
        if (!v) continue;
        if (p->target == PARAM_PATH) {
            if (!path_set(cfg, p->key, json_incref(v))) { /* a default the base leaves out: fill them first */
                run_config_validate(cfg, &(schema_errors){0});
                path_set(cfg, p->key, json_incref(v));
            }
        } else if (p->target == PARAM_ENV) {
            json_t *env = json_object_get(cfg, "env");
            if (!json_is_object(env)) {
                env = json_object();
                json_object_set_new(cfg, "env", env);
            }
            char *t = value_text(v);
            json_object_set_new(env, p->key + 4, json_string(t));
            free(t);
        } else {
            json_t *cmd = json_object_get(cfg, "command");
            char *t = value_text(v);
            for (size_t j = 0; j < json_array_size(cmd); j++) {
                const char *a = json_string_value(json_array_get(cmd, j));
                if (!a || !strstr(a, p->key)) continue;
                char *r = replace_all(a, p->key, t);
                json_array_set_new(cmd, j, json_string(r));
                free(r);
            }
            free(t);
        }
    }
    return cfg;
}

/* Validates the base with `params` applied; the first violation, named with the
 * parameters, into errs. */
static void check_valid(const sweep_spec *s, const json_t *params, schema_errors *errs) {
    json_t *cfg = sweep_trial_config(s, params, NULL);
    schema_errors e = {0};
    run_config_validate(cfg, &e);
    if (e.count) {
        char *ptext = json_dumps(params, JSON_FLAGS);
        schema_errors_add(errs, "/parameters", "the parameters %s make an invalid run config: %s %s", ptext,
                          e.items[0].pointer, e.items[0].message);
        free(ptext);
    }
    schema_errors_free(&e);
    json_decref(cfg);
}

/* The base's own violations as a run config (defaults filled into it), under /base. */
static void check_base(json_t *filled, schema_errors *errs) {
    schema_errors be = {0};
    run_config_validate(filled, &be);
    for (size_t i = 0; i < be.count; i++) {
        char *ptr = xasprintf("/base%s", be.items[i].pointer);
        schema_errors_add(errs, ptr, "%s", be.items[i].message);
        free(ptr);
    }
    errs->dropped += be.dropped;
    schema_errors_free(&be);
}

/* The most points of the full product a conditional grid walks to find its own. */
#define GRID_WALK_MAX 100000

static uint64_t text_hash(const char *t) {
    uint64_t h = 1469598103934665603ULL;
    for (; *t; t++) h = (h ^ (unsigned char)*t) * 1099511628211ULL;
    return h;
}

/* A conditional grid (s->grid): the product's points in order with the parameters that
 * do not apply left out, each distinct one once. How many (stops past SWEEP_MAX_TRIALS). */
static double conditional_grid(sweep_spec *s) {
    long total = 1;
    for (int i = 0; i < s->n_params; i++) total *= grid_count(&s->params[i]);
    enum { SLOTS = 4096 }; /* over twice SWEEP_MAX_TRIALS + 1: never full */
    char **seen = xcalloc(SLOTS, sizeof *seen);
    json_t *grid = json_array(); /* s->grid once made: sweep_trial_params walks the product until then */
    for (long g = 0; g < total && json_array_size(grid) <= SWEEP_MAX_TRIALS; g++) {
        json_t *pt = sweep_trial_params(s, (int)g);
        char *text = json_dumps(pt, JSON_FLAGS);
        size_t h = (size_t)(text_hash(text) % SLOTS);
        while (seen[h] && strcmp(seen[h], text) != 0) h = (h + 1) % SLOTS;
        if (!seen[h]) {
            seen[h] = text;
            json_array_append(grid, pt);
        } else {
            free(text);
        }
        json_decref(pt);
    }
    for (int i = 0; i < SLOTS; i++) free(seen[i]);
    free(seen);
    s->grid = grid;
    return (double)json_array_size(grid);
}

static int int_member(const json_t *o, const char *k) { return (int)json_integer_value(json_object_get(o, k)); }

sweep_spec *sweep_spec_parse(const json_t *body, schema_errors *errs) {
    size_t before = schema_errors_total(errs);
    /* the schema first (every violation, defaults filled), and the base as a run config */
    json_t *doc = body ? json_deep_copy(body) : NULL;
    schema_validate(sweep_schema(), doc, errs);
    const json_t *base = json_object_get(doc, "base");
    json_t *filled = json_is_object(base) ? json_deep_copy(base) : NULL;
    if (filled) check_base(filled, errs);
    if (schema_errors_total(errs) != before) {
        json_decref(filled);
        json_decref(doc);
        return NULL;
    }

    /* then what a schema cannot say, on a body of the schema's shape */
    sweep_spec *s = xcalloc(1, sizeof *s);
    s->name = xstrdup(json_string_value(json_object_get(doc, "name")));
    s->base = json_deep_copy(base);
    s->command = command_run_is(base);
    s->epochs = int_member(json_object_get(filled, "train"), "epochs");
    int every = int_member(json_object_get(filled, "checkpoint"), "every_epochs");
    const char *method = json_string_value(json_object_get(doc, "method"));
    s->method = !strcmp(method, "random") ? METHOD_RANDOM : !strcmp(method, "tpe") ? METHOD_TPE : METHOD_GRID;
    s->tpe = TPE_DEFAULTS;
    const json_t *tpe = json_object_get(doc, "tpe");
    if (json_is_object(tpe)) {
        s->tpe.n_startup = int_member(tpe, "n_startup_trials");
        s->tpe.n_candidates = int_member(tpe, "n_candidates");
        s->tpe.gamma = json_number_value(json_object_get(tpe, "gamma"));
    }
    if (json_is_object(tpe) && s->method != METHOD_TPE)
        schema_errors_add(errs, "/tpe", "is method tpe's settings, but the method is %s: leave tpe out, or use "
                          "method \"tpe\"", method);
    s->seed = (uint64_t)json_integer_value(json_object_get(doc, "seed"));
    s->parallel = int_member(doc, "parallel");
    s->preemptible = json_is_true(json_object_get(doc, "preemptible"));

    const json_t *params = json_object_get(doc, "parameters");
    s->params = xcalloc(json_object_size(params), sizeof *s->params);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)params, key, v) {
        if (parse_param(s, key, v, filled, &s->params[s->n_params], errs)) s->n_params++;
        else {
            free(s->params[s->n_params].key);
            json_decref(s->params[s->n_params].values);
        }
    }
    json_decref(filled);
    if (schema_errors_total(errs) == before) parse_conditions(s, params, errs);

    /* how many trials */
    const json_t *mt = json_object_get(doc, "max_trials");
    s->max_trials = mt ? (int)json_integer_value(mt) : 0;
    if (s->method == METHOD_GRID && schema_errors_total(errs) == before) {
        double size = 1;
        for (int i = 0; i < s->n_params; i++) {
            long n = grid_count(&s->params[i]);
            if (n == 0)
                param_error(errs, s->params[i].key, NULL, "parameter %s is a float range, which a grid cannot walk: "
                            "give values: [...], or use method \"random\"", s->params[i].key);
            size *= (double)n;
        }
        if (schema_errors_total(errs) == before && s->conditional && size <= GRID_WALK_MAX)
            size = conditional_grid(s); /* each combination of the parameters that apply, once */
        if (schema_errors_total(errs) == before) {
            if (size > SWEEP_MAX_TRIALS)
                schema_errors_add(errs, "/parameters", "the grid has %.0f trials, more than a sweep may make (%d): "
                                  "give fewer values, or use method \"random\" with max_trials", size, SWEEP_MAX_TRIALS);
            else if (mt && size > s->max_trials)
                schema_errors_add(errs, "/max_trials", "the grid has %.0f trials but max_trials is %d: raise "
                                  "max_trials, or give fewer values", size, s->max_trials);
            s->n_trials = (int)size;
        }
    } else if (s->method != METHOD_GRID) {
        if (!mt) schema_errors_add(errs, "/max_trials", "a %s search needs max_trials (how many trials to make)",
                                   method);
        s->n_trials = s->max_trials;
    }
    if (!s->max_trials) s->max_trials = s->n_trials;

    /* the metric */
    const json_t *metric = json_object_get(doc, "metric");
    snprintf(s->metric, sizeof s->metric, "%s", json_string_value(json_object_get(metric, "key")));
    if (!s->command && !is_epoch_key(s->metric))
        schema_errors_add(errs, "/metric/key", "a built-in run reports test_loss, test_acc, train_loss, lr, "
                          "seconds and samples_per_s per epoch; \"%s\" is none of them", s->metric);
    s->rules.maximize = strcmp(json_string_value(json_object_get(metric, "goal")), "maximize") == 0;
    s->rules.epochs = s->command ? 0 : s->epochs;

    /* early stopping */
    const json_t *es = json_object_get(doc, "early_stopping");
    if (json_is_object(es)) {
        s->stop = strcmp(json_string_value(json_object_get(es, "type")), "asha") == 0 ? STOP_ASHA : STOP_MEDIAN;
        s->rules.min_resource = int_member(es, "min_resource");
        s->rules.reduction_factor = int_member(es, "reduction_factor");
        s->rules.min_trials = int_member(es, "min_trials");
        s->rules.max_resource = int_member(es, "max_resource"); /* 0: not given */
        if (s->rules.max_resource && s->rules.max_resource <= s->rules.min_resource)
            schema_errors_add(errs, "/early_stopping/max_resource", "is %d epochs, not above min_resource (%d): no "
                              "rung would be left; give a max_resource above min_resource, or leave it out",
                              s->rules.max_resource, s->rules.min_resource);
        if (s->rules.max_resource && s->stop != STOP_ASHA)
            schema_errors_add(errs, "/early_stopping/max_resource", "is ASHA's (the epochs of a trial's full "
                              "length): the median rule has no rungs; leave it out");
        if (!s->command && s->rules.min_resource >= s->epochs)
            schema_errors_add(errs, "/early_stopping/min_resource", "is %d epochs but the base trains %d: a trial "
                              "would finish before it is judged; use a min_resource below train.epochs",
                              s->rules.min_resource, s->epochs);
        if (s->stop == STOP_ASHA && !s->command && every < 1)
            schema_errors_add(errs, "/base/checkpoint/every_epochs", "is 0, but ASHA pauses a trial at a rung and "
                              "continues it from its checkpoint: give checkpoint.every_epochs 1");
        if (s->stop == STOP_ASHA && !s->command && every > 1)
            schema_errors_add(errs, "/base/checkpoint/every_epochs", "is %d, but a trial paused at a rung continues "
                              "from its newest checkpoint: give checkpoint.every_epochs 1", every);
    }

    /* every trial a valid run config: each grid point, or a random search's values and ends */
    if (schema_errors_total(errs) == before) {
        int n = sweep_check_points(s);
        for (int i = 0; i < n && schema_errors_total(errs) == before; i++) {
            json_t *p = sweep_check_point(s, i);
            check_valid(s, p, errs);
            json_decref(p);
        }
    }
    if (schema_errors_total(errs) != before) {
        json_decref(doc);
        sweep_spec_free(s);
        return NULL;
    }
    /* what GET /sweeps/{id} shows: the body with its defaults, and how many trials at most */
    json_object_set_new(doc, "max_trials", json_integer(s->max_trials));
    s->spec = doc;
    return s;
}

/* How many values parameter p takes in a random search's checks. */
static long random_check_count(const sweep_param *p) {
    if (p->values) return (long)json_array_size(p->values);
    long n = p->is_int ? grid_count(p) : 2;
    return n <= SWEEP_MAX_TRIALS ? n : 2;
}

/* A conditional parameter's conditions made to hold in `one` (each condition's first
 * value, and its own conditions'), so that it is checked as a trial would have it. */
static void with_conditions(const sweep_spec *s, int j, json_t *one, int depth) {
    const sweep_param *p = &s->params[j];
    for (int c = 0; c < p->n_when && depth <= s->n_params; c++) {
        const char *k = s->params[p->when[c].param].key;
        if (json_object_get(one, k)) continue;
        json_object_set(one, k, json_array_get(p->when[c].values, 0));
        with_conditions(s, p->when[c].param, one, depth + 1);
    }
}

int sweep_check_points(const sweep_spec *s) {
    if (s->method == METHOD_GRID) return s->n_trials;
    long n = 1; /* the base alone */
    for (int i = 0; i < s->n_params; i++) n += random_check_count(&s->params[i]);
    return (int)n;
}

json_t *sweep_check_point(const sweep_spec *s, int i) {
    if (s->method == METHOD_GRID) return sweep_trial_params(s, i);
    json_t *one = json_object();
    long k = i - 1;
    for (int j = 0; j < s->n_params && k >= 0; j++) {
        const sweep_param *p = &s->params[j];
        long n = random_check_count(p);
        if (k >= n) {
            k -= n;
            continue;
        }
        json_t *v;
        if (p->values) v = json_incref(json_array_get(p->values, (size_t)k));
        else if (p->is_int && k >= 2) v = grid_value(p, k - 1); /* the ends first, then the integers between */
        else if (p->is_int) v = json_integer((json_int_t)(k ? floor(p->max) : ceil(p->min)));
        else v = json_real(k ? p->max : p->min);
        json_object_set_new(one, p->key, v);
        with_conditions(s, j, one, 0);
        break;
    }
    return one;
}

json_t *sweep_params_given(const sweep_spec *s, const json_t *given, schema_errors *errs) {
    size_t before = schema_errors_total(errs);
    if (!json_is_object(given)) {
        schema_errors_add(errs, "/params", "must be an object: {\"PARAMETER\": value, ...}, one value for each of the "
                          "sweep's parameters");
        return NULL;
    }
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)given, key, v) {
        bool known = false;
        for (int i = 0; i < s->n_params; i++) known = known || strcmp(s->params[i].key, key) == 0;
        if (!known) {
            char *ptr = xasprintf("/params/%s", key);
            schema_errors_add(errs, ptr, "is not one of the sweep's parameters (its parameters are in GET "
                              "/sweeps/{id}'s spec)");
            free(ptr);
        }
    }
    json_t *out = json_object();
    for (int i = 0; i < s->n_params; i++) {
        const sweep_param *p = &s->params[i];
        json_t *value = json_object_get(given, p->key);
        char *ptr = xasprintf("/params/%s", p->key);
        if (!applies_at(s, i, given, 0)) { /* a conditional parameter whose condition does not hold */
            if (value) {
                buf_t b = {0};
                for (int c = 0; c < p->n_when; c++) {
                    char *list = json_dumps(p->when[c].values, JSON_FLAGS);
                    buf_printf(&b, "%s%s is one of %s", c ? " and " : "", s->params[p->when[c].param].key, list);
                    free(list);
                }
                schema_errors_add(errs, ptr, "does not apply to these values: it applies only when %s; leave it out",
                                  b.data ? b.data : "its conditions hold");
                free(b.data);
            }
            free(ptr);
            continue;
        }
        if (!value) {
            schema_errors_add(errs, ptr, "is missing: give a value for each of the sweep's parameters that applies");
        } else if (p->values) {
            bool in = false;
            for (size_t j = 0; j < json_array_size(p->values); j++) in = in || json_equal(value, json_array_get(p->values, j));
            char *list = json_dumps(p->values, JSON_FLAGS);
            if (!in) schema_errors_add(errs, ptr, "is not one of the parameter's values %s", list);
            free(list);
        } else if (!json_is_number(value) || (p->is_int && !json_is_integer(value))) {
            schema_errors_add(errs, ptr, "must be %s between %g and %g", p->is_int ? "an integer" : "a number", p->min,
                              p->max);
        } else if (json_number_value(value) < p->min || json_number_value(value) > p->max) {
            schema_errors_add(errs, ptr, "is %g, outside the parameter's range %g..%g", json_number_value(value),
                              p->min, p->max);
        }
        free(ptr);
        if (value) json_object_set(out, p->key, value);
    }
    if (schema_errors_total(errs) == before) check_valid(s, out, errs);
    if (schema_errors_total(errs) != before) {
        json_decref(out);
        return NULL;
    }
    return out;
}

json_t *sweep_tpe_params(const sweep_spec *s, int trial, int attempt, const char *const *params, const double *metric,
                         int n) {
    tpe_dim *dims = xcalloc((size_t)(s->n_params > 0 ? s->n_params : 1), sizeof *dims);
    for (int i = 0; i < s->n_params; i++) {
        const sweep_param *p = &s->params[i];
        if (p->values) dims[i] = (tpe_dim){.kind = TPE_CATEGORICAL, .n_choices = (int)json_array_size(p->values)};
        else dims[i] = (tpe_dim){.kind = p->is_int ? TPE_INT : TPE_FLOAT, .lo = p->is_int ? ceil(p->min) : p->min,
                                 .hi = p->is_int ? floor(p->max) : p->max, .log = p->log};
    }
    /* the trials as points: a categorical's value its index, a number its value */
    double *xs = xmalloc((size_t)(n > 0 ? n : 1) * (size_t)(s->n_params > 0 ? s->n_params : 1) * sizeof *xs);
    tpe_obs *obs = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *obs);
    for (int t = 0; t < n; t++) {
        double *x = &xs[(size_t)t * (size_t)s->n_params];
        json_t *pj = json_loads(params[t], 0, NULL);
        for (int i = 0; i < s->n_params; i++) {
            const sweep_param *p = &s->params[i];
            json_t *v = json_object_get(pj, p->key);
            x[i] = NAN;
            if (p->values) {
                for (size_t j = 0; j < json_array_size(p->values); j++)
                    if (v && json_equal(v, json_array_get(p->values, j))) x[i] = (double)j;
            } else if (json_is_number(v)) {
                double d = json_number_value(v);
                if (d >= dims[i].lo && d <= dims[i].hi) x[i] = d;
            }
        }
        json_decref(pj);
        obs[t] = (tpe_obs){.x = x, .y = isnan(metric[t]) ? NAN : s->rules.maximize ? -metric[t] : metric[t]};
    }
    double *x = xmalloc((size_t)(s->n_params > 0 ? s->n_params : 1) * sizeof *x);
    tpe_suggest(dims, s->n_params, obs, n, s->seed + (uint64_t)attempt * 0x632BE59BD9B4E019ULL, trial, &s->tpe, x);
    json_t *out = json_object();
    for (int i = 0; i < s->n_params; i++) {
        const sweep_param *p = &s->params[i];
        json_t *v;
        if (p->values) v = json_incref(json_array_get(p->values, (size_t)x[i]));
        else if (p->is_int) v = json_integer((json_int_t)x[i]);
        else v = json_real(x[i]);
        json_object_set_new(out, p->key, v);
    }
    if (s->conditional) { /* those that apply to the values chosen */
        json_t *applied = applying(s, out);
        json_decref(out);
        out = applied;
    }
    free(x);
    free(obs);
    free(xs);
    free(dims);
    return out;
}

long sweep_sequence_length(const sweep_spec *s) {
    if (s->method != METHOD_GRID) return -1;
    if (s->grid) return (long)json_array_size(s->grid);
    long size = 1;
    for (int i = 0; i < s->n_params; i++) size *= grid_count(&s->params[i]);
    return size;
}

bool sweep_param_secret(const char *key) {
    size_t n = strlen(key);
    if (n > 2 && key[0] == '{' && key[n - 1] == '}') return true;
    static const char *const roots[] = {"env", "command"};
    for (size_t i = 0; i < sizeof roots / sizeof *roots; i++) {
        size_t r = strlen(roots[i]);
        if (strncmp(key, roots[i], r) == 0 && (key[r] == '\0' || key[r] == '.')) return true;
    }
    return false;
}

sweep_spec *sweep_spec_load(const char *spec_json) {
    json_t *body = json_loads(spec_json, 0, NULL);
    schema_errors e = {0};
    sweep_spec *s = body ? sweep_spec_parse(body, &e) : NULL;
    schema_errors_free(&e);
    json_decref(body);
    return s;
}

void sweep_spec_free(sweep_spec *s) {
    if (!s) return;
    for (int i = 0; i < s->n_params; i++) {
        free(s->params[i].key);
        json_decref(s->params[i].values);
        for (int c = 0; c < s->params[i].n_when; c++) json_decref(s->params[i].when[c].values);
        free(s->params[i].when);
    }
    free(s->params);
    json_decref(s->grid);
    free(s->name);
    json_decref(s->spec);
    json_decref(s->base);
    free(s);
}
