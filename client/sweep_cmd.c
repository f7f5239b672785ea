/* ddpctl sweep: see sweep_cmd.h. */
#include "sweep_cmd.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client_http.h"
#include "format.h"
#include "sweep_follow.h"

static int usage(const char *what) {
    fprintf(stderr, "ddpctl: %s (ddpctl --help)\n", what);
    return EXIT_USAGE;
}

static bool sweep_id(const char *s, long long *id) {
    char *end;
    errno = 0;
    *id = strtoll(s, &end, 10);
    return *s && !*end && !errno && *id > 0;
}

static const char *str_or(const char *s, const char *otherwise) { return s ? s : otherwise; }

static void print_json(json_t *o) {
    json_dumpf(o, stdout, JSON_INDENT(2));
    putchar('\n');
}

static int submit(const char *file, bool json) {
    json_error_t je;
    json_t *body = strcmp(file, "-") == 0 ? json_loadf(stdin, 0, &je) : json_load_file(file, 0, &je);
    if (!body) {
        fprintf(stderr, "ddpctl: %s: %s (line %d)\n", file, je.text, je.line);
        return EXIT_USAGE;
    }
    char *text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    http_reply r;
    char err[1024];
    int rc = http_call("POST", "/sweeps", text, strlen(text), &r, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        return EXIT_UNREACHABLE;
    }
    if (r.status != 201) {
        rc = print_refusal(&r, file);
        http_reply_free(&r);
        return rc;
    }
    json_t *s = json_loadb(r.body, r.len, 0, NULL);
    if (json) print_json(s);
    else
        printf("sweep %lld submitted: %lld trials (ddpctl sweep show %lld)\n",
               (long long)json_integer_value(json_object_get(s, "id")),
               (long long)json_integer_value(json_object_get(s, "n_trials")),
               (long long)json_integer_value(json_object_get(s, "id")));
    json_decref(s);
    http_reply_free(&r);
    return EXIT_OK;
}

/* "test_loss 0.4123" of a sweep's or trial's metric. */
static void metric_cell(const json_t *v, char *out, size_t n) { fmt_num(v, out, n); }

static int list(bool json) {
    int ec = 0;
    json_t *page = get_json("/sweeps", &ec);
    if (!page) return ec;
    json_t *sweeps = json_object_get(page, "sweeps");
    if (json) {
        print_json(page);
    } else if (!json_array_size(sweeps)) {
        printf("no sweeps yet (submit one: ddpctl sweep submit sweep.json)\n");
    } else {
        table t;
        table_init(&t, 8);
        const char *head[8] = {"ID", "NAME", "OWNER", "STATUS", "TRIALS", "METRIC", "BEST", "CREATED"};
        table_row(&t, head);
        size_t i;
        json_t *s;
        json_array_foreach(sweeps, i, s) {
            char id[24], trials[64], best[64], created[32], metric[96];
            snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(s, "id")));
            json_t *c = json_object_get(s, "trial_counts");
            long long done = json_integer_value(json_object_get(c, "succeeded")) +
                             json_integer_value(json_object_get(c, "stopped")) +
                             json_integer_value(json_object_get(c, "failed")) +
                             json_integer_value(json_object_get(c, "canceled"));
            snprintf(trials, sizeof trials, "%lld of %lld ended", done,
                     (long long)json_integer_value(json_object_get(s, "n_trials")));
            json_t *m = json_object_get(s, "metric");
            snprintf(metric, sizeof metric, "%s (%s)", str_or(json_string_value(json_object_get(m, "key")), "?"),
                     str_or(json_string_value(json_object_get(m, "goal")), "?"));
            json_t *b = json_object_get(s, "best");
            char v[32];
            metric_cell(json_object_get(b, "metric"), v, sizeof v);
            if (json_is_object(b))
                snprintf(best, sizeof best, "trial %lld: %s", (long long)json_integer_value(json_object_get(b, "trial")), v);
            else snprintf(best, sizeof best, "-");
            fmt_time(json_string_value(json_object_get(s, "created_at")), created, sizeof created);
            const char *row[8] = {id, json_string_value(json_object_get(s, "name")),
                                  str_or(json_string_value(json_object_get(s, "owner")), "-"),
                                  json_string_value(json_object_get(s, "status")), trials, metric, best, created};
            table_row(&t, row);
        }
        table_print(&t, stdout);
        table_free(&t);
    }
    json_decref(page);
    return EXIT_OK;
}

static bool MAXIMIZE;

/* Best first by the metric; trials without one last, in their order. */
static int by_metric(const void *a, const void *b) {
    const json_t *x = *(json_t *const *)a, *y = *(json_t *const *)b;
    const json_t *mx = json_object_get(x, "metric"), *my = json_object_get(y, "metric");
    bool hx = json_is_number(mx), hy = json_is_number(my);
    if (hx != hy) return hx ? -1 : 1;
    if (hx) {
        double vx = json_number_value(mx), vy = json_number_value(my);
        if (vx != vy) return (MAXIMIZE ? vx > vy : vx < vy) ? -1 : 1;
    }
    return (int)(json_integer_value(json_object_get(x, "trial")) - json_integer_value(json_object_get(y, "trial")));
}

static int show(long long id, bool json) {
    char path[64];
    snprintf(path, sizeof path, "/sweeps/%lld", id);
    int ec = 0;
    json_t *s = get_json(path, &ec);
    if (!s) return ec;
    if (json) {
        print_json(s);
        json_decref(s);
        return EXIT_OK;
    }
    json_t *m = json_object_get(s, "metric");
    const char *key = str_or(json_string_value(json_object_get(m, "key")), "metric");
    MAXIMIZE = json_string_value(json_object_get(m, "goal")) && !strcmp(json_string_value(json_object_get(m, "goal")), "maximize");
    const char *reason = json_string_value(json_object_get(s, "reason"));
    printf("sweep %lld  %s  %s%s%s\n", id, json_string_value(json_object_get(s, "name")),
           json_string_value(json_object_get(s, "status")), reason ? ": " : "", reason ? reason : "");
    printf("owner: %s; %lld trials; judged by %s (%s)\n", str_or(json_string_value(json_object_get(s, "owner")), "-"),
           (long long)json_integer_value(json_object_get(s, "n_trials")), key, MAXIMIZE ? "maximize" : "minimize");
    json_t *warm = json_object_get(s, "warm_start");
    if (json_is_object(warm)) {
        const char *why = json_string_value(json_object_get(warm, "reason"));
        printf("warm start: %s%s%s\n", str_or(json_string_value(json_object_get(warm, "status")), "?"), why ? ": " : "",
               why ? why : "");
    }
    json_t *best = json_object_get(s, "best");
    if (json_is_object(best)) {
        char v[32], *p = json_dumps(json_object_get(best, "params"), JSON_COMPACT | JSON_REAL_PRECISION(15));
        metric_cell(json_object_get(best, "metric"), v, sizeof v);
        printf("best: trial %lld (run %lld), %s %s, %s\n", (long long)json_integer_value(json_object_get(best, "trial")),
               (long long)json_integer_value(json_object_get(best, "run_id")), key, v, p);
        if (json_is_true(json_object_get(best, "last_reported")))
            printf("      (its last reported value: the trial %s before it finished)\n",
                   str_or(json_string_value(json_object_get(best, "status")), "ended"));
        free(p);
    } else {
        printf("best: none yet\n");
    }
    json_t *trials = json_object_get(s, "trials");
    size_t n = json_array_size(trials);
    if (n) {
        json_t **sorted = malloc(n * sizeof *sorted);
        for (size_t i = 0; i < n; i++) sorted[i] = json_array_get(trials, i);
        qsort(sorted, n, sizeof *sorted, by_metric);
        putchar('\n');
        table t;
        table_init(&t, 7);
        char upper[80];
        snprintf(upper, sizeof upper, "%s", key);
        for (char *c = upper; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        const char *head[7] = {"TRIAL", "RUN", "PARAMS", "STATUS", "EPOCH", upper, "REASON"};
        table_row(&t, head);
        for (size_t i = 0; i < n; i++) {
            json_t *tr = sorted[i];
            char trial[16], run[24], epoch[16], v[32];
            snprintf(trial, sizeof trial, "%lld", (long long)json_integer_value(json_object_get(tr, "trial")));
            json_t *rid = json_object_get(tr, "run_id"), *ep = json_object_get(tr, "metric_epoch");
            snprintf(run, sizeof run, json_is_integer(rid) ? "%lld" : "-", (long long)json_integer_value(rid));
            snprintf(epoch, sizeof epoch, json_is_integer(ep) ? "%lld" : "-", (long long)json_integer_value(ep));
            metric_cell(json_object_get(tr, "metric"), v, sizeof v);
            char *p = json_dumps(json_object_get(tr, "params"), JSON_COMPACT | JSON_REAL_PRECISION(15));
            const char *row[7] = {trial, run, p, json_string_value(json_object_get(tr, "status")), epoch, v,
                                  str_or(json_string_value(json_object_get(tr, "reason")), "-")};
            table_row(&t, row);
            free(p);
        }
        table_print(&t, stdout);
        table_free(&t);
        free(sorted);
    }
    json_decref(s);
    return EXIT_OK;
}

static int cancel(long long id) {
    char path[64];
    snprintf(path, sizeof path, "/sweeps/%lld/cancel", id);
    http_reply r;
    int rc = post_action(path, 202, &r);
    if (rc != EXIT_OK) return rc;
    printf("sweep %lld: canceled, and its trials\n", id);
    http_reply_free(&r);
    return EXIT_OK;
}

/* POST /sweeps/ID/VERB (pause, resume, extend with a body), answered 202. */
static int change(long long id, const char *verb, const char *body, const char *done) {
    char path[64];
    snprintf(path, sizeof path, "/sweeps/%lld/%s", id, verb);
    http_reply r;
    char err[1024];
    if (http_call("POST", path, body, body ? strlen(body) : 0, &r, err, sizeof err) != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        return EXIT_UNREACHABLE;
    }
    if (r.status != 202) {
        int rc = print_refusal(&r, path);
        http_reply_free(&r);
        return rc;
    }
    printf("sweep %lld: %s\n", id, done);
    http_reply_free(&r);
    return EXIT_OK;
}

/* Its best trial's run config (best.config), submitted as a run of the caller's. */
static int rerun(long long id, bool json) {
    char path[64];
    snprintf(path, sizeof path, "/sweeps/%lld", id);
    int ec;
    json_t *s = get_json(path, &ec);
    if (!s) return ec;
    json_t *best = json_object_get(s, "best"), *cfg = json_object_get(best, "config");
    if (!json_is_object(cfg)) {
        fprintf(stderr, "ddpctl: sweep %lld has no best trial with a config yet (ddpctl sweep show %lld)\n", id, id);
        json_decref(s);
        return EXIT_REFUSED;
    }
    char *text = json_dumps(cfg, JSON_COMPACT);
    long long trial = (long long)json_integer_value(json_object_get(best, "trial"));
    json_decref(s);
    http_reply r;
    char err[1024];
    int rc = http_call("POST", "/runs", text, strlen(text), &r, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        return EXIT_UNREACHABLE;
    }
    if (r.status != 201) {
        rc = print_refusal(&r, "the best trial's config");
        http_reply_free(&r);
        return rc;
    }
    json_t *run = json_loadb(r.body, r.len, 0, NULL);
    if (json) print_json(run);
    else
        printf("run %lld submitted: sweep %lld's best trial %lld again (ddpctl show %lld)\n",
               (long long)json_integer_value(json_object_get(run, "id")), id, trial,
               (long long)json_integer_value(json_object_get(run, "id")));
    json_decref(run);
    http_reply_free(&r);
    return EXIT_OK;
}

#define SWEEP_VERBS "submit FILE, list, show ID, follow ID, cancel ID, pause ID, resume ID, extend ID MAX_TRIALS or rerun ID"

int sweep_command(const char *const *args, int n, bool json) {
    if (n < 1) return usage("sweep takes " SWEEP_VERBS);
    const char *verb = args[0];
    long long id;
    if (!strcmp(verb, "submit")) return n == 2 ? submit(args[1], json) : usage("sweep submit takes a FILE (- for stdin)");
    if (!strcmp(verb, "list")) return n == 1 ? list(json) : usage("sweep list takes no argument");
    if (!strcmp(verb, "show"))
        return n == 2 && sweep_id(args[1], &id) ? show(id, json) : usage("sweep show takes a sweep ID");
    if (!strcmp(verb, "follow"))
        return n == 2 && sweep_id(args[1], &id) ? sweep_follow(id) : usage("sweep follow takes a sweep ID");
    if (!strcmp(verb, "cancel"))
        return n == 2 && sweep_id(args[1], &id) ? cancel(id) : usage("sweep cancel takes a sweep ID");
    if (!strcmp(verb, "pause"))
        return n == 2 && sweep_id(args[1], &id) ? change(id, "pause", NULL, "paused (ddpctl sweep resume to go on)")
                                                : usage("sweep pause takes a sweep ID");
    if (!strcmp(verb, "resume"))
        return n == 2 && sweep_id(args[1], &id) ? change(id, "resume", NULL, "resumed") : usage("sweep resume takes a sweep ID");
    if (!strcmp(verb, "rerun"))
        return n == 2 && sweep_id(args[1], &id) ? rerun(id, json) : usage("sweep rerun takes a sweep ID");
    if (!strcmp(verb, "extend")) {
        long long max;
        if (n != 3 || !sweep_id(args[1], &id) || !sweep_id(args[2], &max))
            return usage("sweep extend takes a sweep ID and its new MAX_TRIALS");
        char body[64], done[96];
        snprintf(body, sizeof body, "{\"max_trials\": %lld}", max);
        snprintf(done, sizeof done, "max_trials %lld: its next trials are made", max);
        return change(id, "extend", body, done);
    }
    return usage("sweep takes " SWEEP_VERBS);
}
