/* Reading a command run's config: see command_config.h. */
#include "command_config.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "rank_env.h"
#include "run_config.h"

#define MAX_WORLD_SIZE 1024
#define MAX_THREADS_PER_RANK 1024

typedef struct {
    const char *path;
    FILE *out;
    int problems;
} report;

__attribute__((format(printf, 3, 4))) static void problem(report *r, const char *pointer, const char *fmt, ...) {
    if (r->problems++ == 0) fprintf(r->out, "ddp-run: %s is not a valid command run config:\n", r->path);
    fprintf(r->out, "  %s: ", pointer);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(r->out, fmt, ap);
    va_end(ap);
    fputc('\n', r->out);
}

/* A JSON string without NUL bytes (they cannot reach an argv or an environment). */
static const char *plain_string(json_t *v) {
    if (!json_is_string(v)) return NULL;
    const char *s = json_string_value(v);
    return strlen(s) == json_string_length(v) ? s : NULL;
}

static void load_command(report *r, json_t *doc, command_config *c) {
    json_t *cmd = json_object_get(doc, "command");
    if (!cmd) {
        problem(r, "/command", "%s", "is required: the program and its arguments, e.g. [\"python3\", \"train.py\"]");
        return;
    }
    if (!json_is_array(cmd) || json_array_size(cmd) == 0)
        {
        problem(r, "/command", "%s", "must be a non-empty array of strings (the argv; no shell)");
        return;
    }
    c->argc = (int)json_array_size(cmd);
    c->argv = calloc((size_t)c->argc + 1, sizeof *c->argv);
    for (int i = 0; i < c->argc; i++) {
        const char *s = plain_string(json_array_get(cmd, (size_t)i));
        char pointer[32];
        snprintf(pointer, sizeof pointer, "/command/%d", i);
        if (!s) problem(r, pointer, "%s", "must be a string without NUL bytes");
        else if (i == 0 && !s[0]) problem(r, pointer, "%s", "the program must not be empty");
        else c->argv[i] = strdup(s);
    }
}

static void load_working_dir(report *r, json_t *doc, command_config *c) {
    json_t *v = json_object_get(doc, "working_dir");
    if (!v || json_is_null(v)) return;
    const char *s = plain_string(v);
    if (!s) {
        problem(r, "/working_dir", "%s", "must be a string (a directory)");
        return;
    }
    if (!s[0]) return;
    if (s[0] != '/') {
        problem(r, "/working_dir", "must be an absolute path (ddpd resolves it), not \"%s\"", s);
        return;
    }
    c->working_dir = strdup(s);
}

static int valid_name(const char *n) {
    if (!n[0] || (n[0] >= '0' && n[0] <= '9')) return 0;
    for (const char *p = n; *p; p++)
        if (!(*p == '_' || (*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9'))) return 0;
    return 1;
}

static void load_env(report *r, json_t *doc, command_config *c) {
    json_t *env = json_object_get(doc, "env");
    c->env = calloc(json_is_object(env) ? json_object_size(env) + 1 : 1, sizeof *c->env);
    if (!env || json_is_null(env)) return;
    if (!json_is_object(env)) {
        problem(r, "/env", "%s", "must be an object of string values");
        return;
    }
    const char *name;
    json_t *v;
    size_t k = 0;
    json_object_foreach(env, name, v) {
        char pointer[300];
        snprintf(pointer, sizeof pointer, "/env/%.280s", name);
        const char *s = plain_string(v);
        if (!valid_name(name))
            problem(r, pointer, "%s", "is not a variable name (letters, digits and _, not starting with a digit)");
        else if (rank_env_reserved(name))
            problem(r, pointer, "ddpd sets %s for every rank itself; it cannot be overridden", name);
        else if (!s)
            problem(r, pointer, "%s", "must be a string");
        else {
            size_t len = strlen(name) + strlen(s) + 2;
            c->env[k] = malloc(len);
            snprintf(c->env[k++], len, "%s=%s", name, s);
        }
    }
}

/* An optional integer field of `distributed` in [lo, hi]. */
static int int_field(report *r, json_t *dist, const char *key, int dflt, int lo, int hi) {
    json_t *v = json_object_get(dist, key);
    if (!v) return dflt;
    char pointer[64], range[64];
    snprintf(pointer, sizeof pointer, "/distributed/%s", key);
    snprintf(range, sizeof range, "%d to %d", lo, hi);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        problem(r, pointer, "must be an integer from %s", range);
        return dflt;
    }
    return (int)json_integer_value(v);
}

static void load_distributed(report *r, json_t *doc, command_config *c) {
    json_t *dist = json_object_get(doc, "distributed");
    c->world_size = 1;
    c->threads_per_rank = 1;
    if (!dist) {
        problem(r, "/distributed/world_size", "%s", "is required (the number of ranks)");
        return;
    }
    if (!json_is_object(dist)) {
        problem(r, "/distributed", "%s", "must be an object");
        return;
    }
    if (!json_object_get(dist, "world_size"))
        problem(r, "/distributed/world_size", "%s", "is required (the number of ranks)");
    c->world_size = int_field(r, dist, "world_size", 1, 1, MAX_WORLD_SIZE);
    c->min_world_size = int_field(r, dist, "min_world_size", 0, 0, MAX_WORLD_SIZE);
    if (c->min_world_size > c->world_size)
        problem(r, "/distributed/min_world_size", "must not exceed /distributed/world_size (%d): lower it, or widen the run",
                c->world_size);
    if (c->min_world_size == 0) c->min_world_size = c->world_size;
    c->threads_per_rank = int_field(r, dist, "threads_per_rank", 1, 1, MAX_THREADS_PER_RANK);
    c->max_restarts = int_field(r, dist, "max_restarts", 0, 0, RUN_CONFIG_MAX_RESTARTS);
    c->exit_timeout_s = int_field(r, dist, "exit_timeout_s", RUN_CONFIG_EXIT_TIMEOUT_S, 0, 86400);
    json_t *iso = json_object_get(dist, "isolate_devices");
    if (iso && !json_is_boolean(iso)) problem(r, "/distributed/isolate_devices", "%s", "must be true or false");
    c->isolate_devices = json_is_true(iso);
}

int command_config_load(const char *path, command_config *c, FILE *errors) {
    memset(c, 0, sizeof *c);
    report r = {.path = path, .out = errors};
    json_error_t jerr;
    json_t *doc = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        fprintf(errors, "ddp-run: cannot read the config %s: line %d: %s\n", path, jerr.line, jerr.text);
        return -1;
    }
    if (!json_is_object(doc)) {
        problem(&r, "(the document)", "%s", "must be a JSON object");
    } else {
        load_command(&r, doc, c);
        load_working_dir(&r, doc, c);
        load_env(&r, doc, c);
        load_distributed(&r, doc, c);
    }
    json_decref(doc);
    if (r.problems) {
        command_config_free(c);
        return -1;
    }
    return 0;
}

static void free_list(char **list) {
    for (size_t i = 0; list && list[i]; i++) free(list[i]);
    free(list);
}

void command_config_free(command_config *c) {
    if (c->argv) /* argv may have holes where an entry was refused */
        for (int i = 0; i < c->argc; i++) free(c->argv[i]);
    free(c->argv);
    free(c->working_dir);
    free_list(c->env);
    memset(c, 0, sizeof *c);
}
