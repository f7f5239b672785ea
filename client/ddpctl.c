/* ddpctl: ddpd's command-line client. Submits runs (and follows them to their end
 * with a progress bar), lists and shows them, prints their logs (following them),
 * cancels them, and prints a metric series as a table or CSV. One libcurl request
 * per command, except following, which reads the run's event stream. */
#include <errno.h>
#include <math.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "alloc.h"
#include "attempts_view.h"
#include "sizes_view.h"
#include "audit_cmd.h"
#include "client_http.h"
#include "ddpd_build_config.h"
#include "epoch_series.h"
#include "follow.h"
#include "format.h"
#include "roff.h"
#include "secret_file.h"
#include "sweep_cmd.h"
#include "nodes_cmd.h"
#include "usage_cmd.h"

static const char USAGE[] =
    "usage: ddpctl [--server URL] [--token TOKEN | --token-file PATH] COMMAND ...\n"
    "\n"
    "  submit FILE [--follow]       submit a run config (FILE, or - for stdin); --follow: show its\n"
    "                               progress until it ends (a progress bar on a terminal)\n"
    "  run [-n N] [--name X] [--workdir DIR] [--env K=V]... [--max-restarts N] [--priority P]\n"
    "      [--preemptible] [--hang-timeout SECONDS] [--follow] -- PROGRAM ARGS...\n"
    "                               a command run: PROGRAM once per rank (N ranks, 1 by default)\n"
    "                               with torchrun's environment; DIR: a directory inside one of the\n"
    "                               server's --work-root, absolute or relative to the root (default:\n"
    "                               the run's own, empty, directory: a relative script needs DIR);\n"
    "                               --max-restarts: distributed.max_restarts (torchrun's); --priority\n"
    "                               -100..100; --preemptible: may give its devices to a run of a\n"
    "                               higher priority; --hang-timeout: distributed.hang_timeout_s (a\n"
    "                               rank that reports no step for that long fails the run; 0: off);\n"
    "                               torchrun's --nproc-per-node N (or --nproc_per_node): the world\n"
    "                               size N, all ranks on one node (distributed.nodes 1)\n"
    "  list [--status S[,S]] [--owner U] [--name PREFIX] [--sweep ID] [--since TIME] [--until TIME]\n"
    "       [--limit N] [--before ID | --all] [--json]\n"
    "                               runs, newest first (STEP LOSS: the newest step's loss), a page of\n"
    "                               N (50 by default, at most 1000): those below ID with --before\n"
    "                               (the next page's, as the list says), every page with --all;\n"
    "                               filtered by status, owner, name prefix, sweep, and the time they\n"
    "                               were created (TIME: 2026-12-07, 2026-12-07T08:00:00Z, unix s)\n"
    "  show ID [--json]             a run: status, reason, owner, progress, epochs, devices\n"
    "  queue [--json]               the queued runs in the order they will start, each with what it\n"
    "                               waits for; each owner's decayed usage, devices in use and quota\n"
    "  logs ID [-f] [--tail N] [--rank R] [--attempt K]  the run's log (the last N lines, 1000 by\n"
    "                               default; a command run's rank R alone with --rank, its output\n"
    "                               in attempt K alone with --attempt, K from 0 as show and the\n"
    "                               rank logs' banners number them; --attempt alone: every rank's\n"
    "                               part of attempt K, one after another); -f: keep printing new\n"
    "                               lines until the run ends\n"
    "  cancel ID                    cancel a queued or running run\n"
    "  resume ID [--follow]         continue a failed or canceled run (same ID, its restart count\n"
    "                               going on): a built-in model from its newest checkpoint, a\n"
    "                               command run started again; --follow: until it ends\n"
    "  metrics ID [--key K] [--csv] [--max-points N]\n"
    "                               a series (loss, lr or samples_per_s; loss by default)\n"
    "  follow ID                    what submit --follow does, for a run submitted before\n"
    "  audit [--actor WHO] [--target T] [--since TIME] [--limit N] [--json]\n"
    "                               the audit log, oldest first: who submitted, cancelled, resumed,\n"
    "                               deleted, preempted or restarted what, and the users' changes; T:\n"
    "                               run/ID, sweep/ID or user/NAME; TIME: 2026-12-07, ISO 8601 in UTC,\n"
    "                               or unix seconds; a user sees what it did and what was done to it\n"
    "                               and its runs, an admin everything\n"
    "  usage [--by user|run|day] [--from TIME] [--to TIME] [--json]\n"
    "                               where the device time went: each user's (run's, day's) device\n"
    "                               time held and its phases (startup, productive, checkpoint, lost,\n"
    "                               idle, unknown), the time queued, goodput (productive / held);\n"
    "                               TIME as for audit: the UTC days from and to, both included\n"
    "  nodes [--json]               the nodes, their free slots and GPUs, and the marks failures left:\n"
    "                               suspect or excluded nodes and devices, the class, the failures\n"
    "                               and the evidence (another user's run's: <hidden>); an admin\n"
    "                               clears one with ddpd node clear NAME (docs/failures.md)\n"
    "  man                          this manual in roff (installed as man ddpctl)\n"
    "  sweep submit FILE | list | show ID | follow ID | cancel ID | pause ID | resume ID | extend ID N | rerun ID  [--json]\n"
    "                               sweeps (docs/sweeps.md): submit one (FILE: base config,\n"
    "                               parameters, method, metric, early stopping); list them; show\n"
    "                               one with its trials sorted by the metric, best first; cancel\n"
    "                               one and its trials; pause and resume one; raise its max_trials\n"
    "                               to N; submit its best trial's run config as a run\n"
    "\n"
    "  --server URL   ddpd's address (DDPD_URL; default http://127.0.0.1:8080)\n"
    "  --token TOKEN  sent as \"Authorization: Bearer TOKEN\" (DDPD_TOKEN): your user's token\n"
    "  --token-file PATH  the token from the file's first line (DDPD_TOKEN_FILE; mode 600):\n"
    "                 kept off the command line, where every local user can read it\n"
    "                 (ddpd user add), or the server's; needed to submit, cancel or resume when\n"
    "                 ddpd has users or was started with --token, and for everything once it\n"
    "                 has users (unless it was started with --open-reads)\n"
    "\n"
    "Exit status: 0 done (with --follow: the run succeeded), 1 the run failed, 2 usage,\n"
    "3 ddpd cannot be reached, 4 ddpd refused the request (the reason is printed),\n"
    "5 the run was canceled (or stopped by its sweep), 130 interrupted while following (the run goes on).\n";

static void man_page(FILE *out) {
    roff_header(out, "ddpctl", "ddpd " DDPD_VERSION, "ddpd manual");
    roff_section(out, "NAME");
    fputs("ddpctl \\- the command-line client of ddpd, the data-parallel training service\n", out);
    roff_section(out, "SYNOPSIS");
    roff_usage(out, USAGE, "COMMANDS AND OPTIONS");
    roff_section(out, "SEE ALSO");
    roff_paragraph(out, "ddpd(1); the documentation in the repository: README.md, then docs/using.md, docs/sweeps.md "
                        "and docs/training.md (using ddpd).");
}

typedef struct {
    const char *positional[4];
    int n_positional;
    bool follow, csv, json;
    const char *key, *status, *limit, *tail, *max_points, *rank, *attempt;
    const char *nproc, *name, *workdir, *max_restarts, *priority, *hang_timeout; /* run */
    const char *actor, *target, *since; /* audit; since: list too */
    const char *owner, *sweep, *until, *before; /* list */
    bool all;                                   /* list: every page */
    const char *by, *from, *to;         /* usage */
    bool preemptible;
    bool one_node; /* torchrun's --nproc-per-node: every rank on one node */
    const char *env[64];
    int n_env;
    char **command; /* run: what follows -- */
    int n_command;
} args;

static int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "ddpctl: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (ddpctl --help)\n");
    return EXIT_USAGE;
}

static const char *str_or(const char *s, const char *otherwise) { return s ? s : otherwise; }

/* A run id argument: a positive integer. */
static bool parse_id(const char *s, long long *id) {
    char *end;
    errno = 0;
    *id = strtoll(s, &end, 10);
    return *s && !*end && !errno && *id > 0;
}

/* ---- submit ---- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 65536, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    if (f != stdin) fclose(f);
    if (buf) buf[n < cap ? n : cap - 1] = '\0';
    *len = n;
    return buf;
}

/* POSTs a run config (`what` names it in a refusal), says what became of it, and
 * follows it when asked. Takes `body`. */
static int post_run(char *body, size_t len, const char *what, bool follow) {
    const char *file = what;
    http_reply r;
    char err[1024];
    if (http_call("POST", "/runs", body, len, &r, err, sizeof err) != 0) {
        fprintf(stderr, "ddpctl: %s\n", err);
        free(body);
        return EXIT_UNREACHABLE;
    }
    free(body);
    if (r.status != 201) {
        char context[1100];
        snprintf(context, sizeof context, "%s", file);
        int rc = print_refusal(&r, context);
        http_reply_free(&r);
        return rc;
    }
    json_t *run = json_loadb(r.body, r.len, 0, NULL);
    http_reply_free(&r);
    long long id = json_integer_value(json_object_get(run, "id"));
    const char *status = json_string_value(json_object_get(run, "status"));
    json_int_t pos = json_integer_value(json_object_get(run, "queue_position"));
    printf("run %lld submitted (%s): %s%s", id, str_or(json_string_value(json_object_get(run, "name")), ""),
           status ? status : "?", pos > 0 ? "" : "\n");
    if (pos > 0) printf(", position %lld in the queue\n", (long long)pos);
    fflush(stdout);
    json_decref(run);
    if (!follow) return EXIT_OK;
    return follow_run(id, isatty(STDOUT_FILENO));
}

static int cmd_submit(const args *a) {
    if (a->n_positional != 1) return usage_error("%s", "submit takes one FILE (a run config; - reads stdin)");
    const char *file = a->positional[0];
    size_t len;
    char *body = read_file(file, &len);
    if (!body) {
        fprintf(stderr, "ddpctl: cannot read %s: %s\n", file, strerror(errno));
        return EXIT_USAGE;
    }
    return post_run(body, len, file, a->follow);
}

/* A whole number within [lo, hi] from a flag's text. */
static bool parse_int_in(const char *s, long lo, long hi, long *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* Is `prog` an interpreter whose first argument is the script (python3, bash, ...)? */
static bool is_interpreter(const char *prog) {
    const char *base = strrchr(prog, '/');
    base = base ? base + 1 : prog;
    static const char *const names[] = {"python", "bash", "sh", "perl", "ruby", "node", "Rscript", "julia"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (strncmp(base, names[i], strlen(names[i])) == 0) return true;
    return false;
}

/* Without --workdir the ranks start in the run's own, empty, directory: a script
 * named by a relative path cannot be found there. The script's name, or NULL. */
static const char *relative_script(const args *a) {
    const char *prog = a->command[0];
    if (prog[0] != '/' && strchr(prog, '/')) return prog; /* ./train.sh */
    if (!is_interpreter(prog)) return NULL;
    for (int i = 1; i < a->n_command; i++) {
        const char *s = a->command[i];
        if (s[0] == '-') {
            if (!strcmp(s, "-m") || !strcmp(s, "-c")) return NULL; /* a module or inline code */
            continue;
        }
        return s[0] != '/' ? s : NULL;
    }
    return NULL;
}

/* ddpctl run [-n N] [--name X] [--workdir DIR] [--env K=V]... [-f] -- PROGRAM ARGS...:
 * a command run, as torchrun's command line says it. */
static int cmd_run(const args *a) {
    if (a->n_command == 0) return usage_error("%s", "run takes its program after --: ddpctl run -n 2 -- python3 train.py");
    if (a->n_positional) return usage_error("unexpected \"%s\" before -- (the program goes after it)", a->positional[0]);
    const char *script = a->workdir ? NULL : relative_script(a);
    if (script) {
        fprintf(stderr,
                "ddpctl: %s is a relative path, and without --workdir the ranks start in the run's own, empty, "
                "directory: pass --workdir DIR (the directory that holds it, inside one of the server's --work-root; "
                "absolute or relative to that root), or name the script by its absolute path\n",
                script);
        return EXIT_USAGE;
    }
    long n = 1, max_restarts = -1, priority = 0, hang = -1;
    if (a->nproc && !parse_int_in(a->nproc, 1, 100000, &n))
        return usage_error("-n/--nproc-per-node wants a number of ranks, at least 1 (got \"%s\")", a->nproc);
    if (a->max_restarts && !parse_int_in(a->max_restarts, 0, 100, &max_restarts))
        return usage_error("--max-restarts wants a number of restarts, 0 to 100 (got \"%s\")", a->max_restarts);
    if (a->priority && !parse_int_in(a->priority, -100, 100, &priority))
        return usage_error("--priority wants a whole number from -100 to 100 (got \"%s\")", a->priority);
    if (a->hang_timeout && !parse_int_in(a->hang_timeout, 0, 604800, &hang))
        return usage_error("--hang-timeout wants whole seconds, 0 (off) to 604800 (got \"%s\")", a->hang_timeout);
    json_t *cfg = json_object(), *argv = json_array(), *env = json_object();
    for (int i = 0; i < a->n_command; i++) json_array_append_new(argv, json_string(a->command[i]));
    json_object_set_new(cfg, "command", argv);
    if (a->name) json_object_set_new(cfg, "name", json_string(a->name));
    if (a->workdir) json_object_set_new(cfg, "working_dir", json_string(a->workdir));
    if (a->priority) json_object_set_new(cfg, "priority", json_integer(priority));
    if (a->preemptible) json_object_set_new(cfg, "preemptible", json_true());
    for (int i = 0; i < a->n_env; i++) {
        const char *eq = strchr(a->env[i], '=');
        if (!eq || eq == a->env[i]) {
            json_decref(cfg);
            json_decref(env);
            return usage_error("--env wants NAME=VALUE (got \"%s\")", a->env[i]);
        }
        char name[256];
        snprintf(name, sizeof name, "%.*s", (int)(eq - a->env[i]), a->env[i]);
        json_object_set_new(env, name, json_string(eq + 1));
    }
    if (json_object_size(env)) json_object_set(cfg, "env", env);
    json_decref(env);
    json_t *dist = json_pack("{s:i}", "world_size", (int)n);
    if (max_restarts >= 0) json_object_set_new(dist, "max_restarts", json_integer(max_restarts));
    if (hang >= 0) json_object_set_new(dist, "hang_timeout_s", json_integer(hang));
    if (a->one_node) json_object_set_new(dist, "nodes", json_integer(1));
    json_object_set_new(cfg, "distributed", dist);
    char *body = json_dumps(cfg, JSON_COMPACT);
    json_decref(cfg);
    return post_run(body, strlen(body), "the command run", a->follow);
}

static int cmd_follow(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "follow takes a run ID");
    return follow_run(id, isatty(STDOUT_FILENO));
}

/* ---- list, show ---- */

static void progress_cell(const json_t *run, char *out, size_t n) {
    const json_t *p = json_object_get(run, "progress");
    json_t *fr = json_object_get(p, "fraction");
    json_int_t epochs = json_integer_value(json_object_get(p, "epochs"));
    json_int_t epoch = json_integer_value(json_object_get(p, "epoch"));
    if (!json_is_number(fr)) {
        snprintf(out, n, "-");
        return;
    }
    int percent = (int)lround(json_number_value(fr) * 100);
    if (epochs > 0) {
        char ep[64];
        fmt_epoch(epoch, epochs, ep, sizeof ep);
        snprintf(out, n, "%s %3d%%", ep, percent);
    } else {
        snprintf(out, n, "%d%%", percent);
    }
}

static void devices_cell(const json_t *run, char *out, size_t n) {
    json_t *d = json_object_get(run, "devices");
    out[0] = '\0';
    size_t i;
    json_t *v;
    json_array_foreach(d, i, v) {
        size_t used = strlen(out);
        snprintf(out + used, n - used, "%s%s", i ? "," : "", json_string_value(v));
    }
    if (!out[0])
        snprintf(out, n, "%lld %s", (long long)json_integer_value(json_object_get(run, "world_size")),
                 str_or(json_string_value(json_object_get(run, "device_kind")), ""));
}

static double run_seconds(const json_t *run) {
    const char *s = json_string_value(json_object_get(run, "started_at"));
    if (!s) return NAN;
    return iso_diff_s(s, json_string_value(json_object_get(run, "finished_at")));
}

/* GET /runs with the filters given, from the cursor `before` ("": the newest). */
static json_t *list_page(const args *a, const char *before, int *ec) {
    char q[1900] = "", path[2048];
    query_add(q, sizeof q, "limit", a->limit ? a->limit : a->all ? "1000" : "50"); /* --all: the fewest pages */
    query_add(q, sizeof q, "status", a->status);
    query_add(q, sizeof q, "owner", a->owner);
    query_add(q, sizeof q, "name", a->name);
    query_add(q, sizeof q, "sweep_id", a->sweep);
    query_add(q, sizeof q, "since", a->since);
    query_add(q, sizeof q, "until", a->until);
    query_add(q, sizeof q, "before", before);
    snprintf(path, sizeof path, "/runs%s", q);
    return get_json(path, ec);
}

static int cmd_list(const args *a) {
    if (a->n_positional) return usage_error("list takes no argument (got \"%s\")", a->positional[0]);
    if (a->all && a->before) return usage_error("%s", "give --all (every page) or --before ID (one page), not both");
    int ec = 0;
    json_t *page = list_page(a, a->before, &ec);
    if (!page) return ec;
    json_t *runs = json_object_get(page, "runs");
    /* --all: the pages one after another, each from the cursor of the one before */
    char cursor[32];
    while (a->all && json_is_string(json_object_get(page, "next"))) {
        json_t *last = json_array_get(runs, json_array_size(runs) - 1);
        snprintf(cursor, sizeof cursor, "%lld", (long long)json_integer_value(json_object_get(last, "id")));
        json_t *more = list_page(a, cursor, &ec);
        if (!more) {
            json_decref(page);
            return ec;
        }
        json_array_extend(runs, json_object_get(more, "runs"));
        json_object_set(page, "next", json_object_get(more, "next"));
        json_decref(more);
    }
    if (a->json) {
        json_dumpf(page, stdout, JSON_INDENT(2));
        putchar('\n');
    } else if (json_array_size(runs) == 0) {
        bool filtered = a->status || a->owner || a->name || a->sweep || a->since || a->until || a->before;
        printf(filtered ? "no runs that pass these filters\n" : "no runs yet (submit one: ddpctl submit run.json)\n");
    } else {
        table t;
        table_init(&t, 9);
        /* STEP LOSS: the newest step's as rank 0 reported it; show ID has each epoch's mean */
        const char *head[9] = {"ID", "NAME", "OWNER", "STATUS", "PROGRESS", "STEP LOSS", "DEVICES", "STARTED", "DURATION"};
        table_row(&t, head);
        size_t i;
        json_t *run;
        json_array_foreach(runs, i, run) {
            char id[24], prog[128], loss[32], dev[256], started[32], dur[32];
            snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(run, "id")));
            progress_cell(run, prog, sizeof prog);
            fmt_num(json_object_get(json_object_get(run, "progress"), "loss"), loss, sizeof loss);
            devices_cell(run, dev, sizeof dev);
            fmt_time(json_string_value(json_object_get(run, "started_at")), started, sizeof started);
            fmt_duration(run_seconds(run), dur, sizeof dur);
            const char *row[9] = {id, json_string_value(json_object_get(run, "name")),
                                  str_or(json_string_value(json_object_get(run, "owner")), "-"),
                                  json_string_value(json_object_get(run, "status")), prog, loss, dev, started, dur};
            table_row(&t, row);
        }
        table_print(&t, stdout);
        table_free(&t);
        if (json_is_string(json_object_get(page, "next"))) {
            json_t *last = json_array_get(runs, json_array_size(runs) - 1);
            printf("(more: the next page is --before %lld with the same filters; --all lists every page)\n",
                   (long long)json_integer_value(json_object_get(last, "id")));
        }
    }
    json_decref(page);
    return EXIT_OK;
}

static int cmd_show(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "show takes a run ID");
    char path[64];
    snprintf(path, sizeof path, "/runs/%lld", id);
    int ec = 0;
    json_t *run = get_json(path, &ec);
    if (!run) return ec;
    if (a->json) {
        json_dumpf(run, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(run);
        return EXIT_OK;
    }
    const json_t *p = json_object_get(run, "progress");
    const char *status = json_string_value(json_object_get(run, "status"));
    const char *reason = json_string_value(json_object_get(run, "reason"));
    char dev[256], t1[32], t2[32], t3[32], dur[96], prog[128], loss[32], lr[32], sps[32], eta[32];
    devices_cell(run, dev, sizeof dev);
    fmt_time(json_string_value(json_object_get(run, "created_at")), t1, sizeof t1);
    fmt_time(json_string_value(json_object_get(run, "started_at")), t2, sizeof t2);
    fmt_time(json_string_value(json_object_get(run, "finished_at")), t3, sizeof t3);
    attempts_took(run, dur, sizeof dur);
    progress_cell(run, prog, sizeof prog);
    fmt_num(json_object_get(p, "loss"), loss, sizeof loss);
    fmt_sci(json_object_get(p, "lr"), lr, sizeof lr);
    fmt_thousands(json_object_get(p, "samples_per_s"), sps, sizeof sps);
    fmt_duration(json_is_number(json_object_get(p, "eta_s")) ? json_number_value(json_object_get(p, "eta_s")) : NAN,
                 eta, sizeof eta);
    printf("run %lld (%s): %s\n", id, str_or(json_string_value(json_object_get(run, "name")), ""), status ? status : "?");
    if (reason) printf("  reason:    %s\n", reason);
    const char *waiting = json_string_value(json_object_get(run, "waiting_for"));
    if (waiting) printf("  waits for: %s\n", waiting);
    printf("  owner:     %s   priority: %lld%s\n", str_or(json_string_value(json_object_get(run, "owner")), "- (none)"),
           (long long)json_integer_value(json_object_get(run, "priority")),
           json_is_true(json_object_get(run, "preemptible")) ? ", preemptible" : "");
    json_int_t preemptions = json_integer_value(json_object_get(run, "preemptions"));
    if (preemptions > 0) {
        char when[32];
        fmt_time(json_string_value(json_object_get(run, "preempted_at")), when, sizeof when);
        printf("  preempted: %lld time%s, last by run %lld at %s\n", (long long)preemptions, preemptions == 1 ? "" : "s",
               (long long)json_integer_value(json_object_get(run, "preempted_by")), when);
    }
    printf("  devices:   %s\n", dev);
    sizes_print(run, stdout);
    printf("  submitted: %s   started: %s   finished: %s   (%s)\n", t1, t2, t3, dur);
    /* a command run's total is unknown (0): no "of 0" */
    long long total = json_integer_value(json_object_get(p, "total_steps"));
    char of_total[40] = "";
    if (total > 0) snprintf(of_total, sizeof of_total, " of %lld", total);
    printf("  progress:  %s, step %lld%s, ETA %s\n", prog,
           (long long)json_integer_value(json_object_get(p, "global_step")), of_total, eta);
    printf("  latest:    step loss %s, lr %s, %s samples/s\n", loss, lr, sps);
    attempts_print(run, stdout);
    snprintf(path, sizeof path, "/runs/%lld/epochs", id);
    json_t *ep = get_json(path, &ec);
    json_t *epochs = json_object_get(ep, "epochs");
    if (json_array_size(epochs)) {
        printf("  epochs:\n");
        /* the epoch table's columns, then each per-epoch series the script reported */
        json_t *series = epoch_series_get(id);
        int n_extra = (int)json_object_size(series), cols = 7 + n_extra;
        const char **head = xcalloc((size_t)cols, sizeof *head), **row = xcalloc((size_t)cols, sizeof *row);
        char(*cell)[32] = xcalloc((size_t)(n_extra > 0 ? n_extra : 1), sizeof *cell);
        table t;
        table_init(&t, cols);
        /* numbered from 0, as everywhere; TRAIN LOSS is the epoch's mean over its steps */
        const char *fixed[7] = {"    EPOCH", "LR", "TRAIN LOSS", "TEST LOSS", "TEST ACC", "SECONDS", "SAMPLES/S"};
        memcpy(head, fixed, sizeof fixed);
        const char *name;
        json_t *sv;
        int c = 7;
        json_object_foreach(series, name, sv) head[c++] = name;
        table_row(&t, head);
        size_t i;
        json_t *e;
        json_array_foreach(epochs, i, e) {
            char n[24], l[32], tl[32], vl[32], acc[32] = "-", s[32], sp[32];
            long long epoch = (long long)json_integer_value(json_object_get(e, "epoch"));
            snprintf(n, sizeof n, "    %lld", epoch);
            fmt_sci(json_object_get(e, "lr"), l, sizeof l);
            fmt_num(json_object_get(e, "train_loss"), tl, sizeof tl);
            fmt_num(json_object_get(e, "test_loss"), vl, sizeof vl);
            if (json_is_number(json_object_get(e, "test_acc")))
                snprintf(acc, sizeof acc, "%.1f%%", json_number_value(json_object_get(e, "test_acc")) * 100);
            fmt_num(json_object_get(e, "seconds"), s, sizeof s);
            fmt_thousands(json_object_get(e, "samples_per_s"), sp, sizeof sp);
            const char *fixed_row[7] = {n, l, tl, vl, acc, s, sp};
            memcpy(row, fixed_row, sizeof fixed_row);
            c = 7;
            json_object_foreach(series, name, sv) {
                epoch_series_cell(series, name, epoch, cell[c - 7], sizeof cell[c - 7]);
                row[c] = cell[c - 7];
                c++;
            }
            table_row(&t, row);
        }
        table_print(&t, stdout);
        table_free(&t);
        free(head);
        free(row);
        free(cell);
        json_decref(series);
    }
    json_t *ckpts = json_object_get(run, "checkpoints");
    if (json_array_size(ckpts))
        printf("  checkpoints: %zu, newest %s\n", json_array_size(ckpts),
               str_or(json_string_value(json_object_get(json_array_get(ckpts, json_array_size(ckpts) - 1), "path")), "?"));
    json_decref(ep);
    json_decref(run);
    return EXIT_OK;
}

/* ---- sweep ---- */

static int cmd_sweep(const args *a) { return sweep_command(a->positional, a->n_positional, a->json); }

/* ---- usage ---- */

static int cmd_usage(const args *a) {
    if (a->n_positional) return usage_error("usage takes no argument (got \"%s\")", a->positional[0]);
    if (a->by && strcmp(a->by, "user") && strcmp(a->by, "run") && strcmp(a->by, "day"))
        return usage_error("--by is user, run or day (got \"%s\")", a->by);
    return usage_command(a->by, a->from, a->to, a->json);
}

/* ---- nodes ---- */

static int cmd_nodes(const args *a) {
    if (a->n_positional) return usage_error("nodes takes no argument (got \"%s\")", a->positional[0]);
    return nodes_command(a->json);
}

/* ---- audit ---- */

static int cmd_audit(const args *a) {
    if (a->n_positional) return usage_error("audit takes no argument (got \"%s\")", a->positional[0]);
    return audit_command(a->actor, a->target, a->since, a->limit, a->json);
}

/* ---- queue ---- */

static int cmd_queue(const args *a) {
    if (a->n_positional) return usage_error("queue takes no argument (got \"%s\")", a->positional[0]);
    int ec = 0;
    json_t *q = get_json("/queue", &ec);
    if (!q) return ec;
    if (a->json) {
        json_dumpf(q, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(q);
        return EXIT_OK;
    }
    json_t *runs = json_object_get(q, "runs");
    if (!json_array_size(runs)) printf("nothing is queued\n");
    table t;
    table_init(&t, 7);
    const char *head[7] = {"#", "ID", "OWNER", "PRIORITY", "NEEDS", "QUEUED", "WAITING FOR"};
    table_row(&t, head);
    size_t i;
    json_t *r;
    json_array_foreach(runs, i, r) {
        char pos[16], id[24], prio[16], needs[48], queued[32];
        snprintf(pos, sizeof pos, "%lld", (long long)json_integer_value(json_object_get(r, "position")));
        snprintf(id, sizeof id, "%lld", (long long)json_integer_value(json_object_get(r, "id")));
        snprintf(prio, sizeof prio, "%lld", (long long)json_integer_value(json_object_get(r, "priority")));
        snprintf(needs, sizeof needs, "%lld %s%s", (long long)json_integer_value(json_object_get(r, "world_size")),
                 str_or(json_string_value(json_object_get(r, "device_kind")), "?"),
                 json_is_true(json_object_get(r, "preemptible")) ? " (preemptible)" : "");
        fmt_time(json_string_value(json_object_get(r, "queued_at")), queued, sizeof queued);
        const char *decision = json_string_value(json_object_get(r, "decision"));
        const char *waiting = json_string_value(json_object_get(r, "waiting_for"));
        const char *row[7] = {pos, id, str_or(json_string_value(json_object_get(r, "owner")), "-"), prio, needs, queued,
                              waiting ? waiting : decision && strcmp(decision, "start") == 0 ? "(starting now)" : "-"};
        if (json_array_size(runs)) table_row(&t, row);
    }
    if (json_array_size(runs)) table_print(&t, stdout);
    table_free(&t);
    json_t *owners = json_object_get(q, "owners");
    if (json_array_size(owners)) {
        printf("\nowners (fair share: usage halves every %.0f s):\n",
               json_number_value(json_object_get(q, "fair_share_half_life_s")));
        table o;
        table_init(&o, 4);
        const char *ohead[4] = {"  OWNER", "USAGE (device-s)", "IN USE", "QUOTA"};
        table_row(&o, ohead);
        json_t *w;
        json_array_foreach(owners, i, w) {
            char name[80], usage[32], used[16], quota[16] = "none";
            snprintf(name, sizeof name, "  %s", str_or(json_string_value(json_object_get(w, "name")), "-"));
            snprintf(usage, sizeof usage, "%.0f", json_number_value(json_object_get(w, "usage_device_seconds")));
            snprintf(used, sizeof used, "%lld", (long long)json_integer_value(json_object_get(w, "devices_in_use")));
            if (json_is_integer(json_object_get(w, "max_devices")))
                snprintf(quota, sizeof quota, "%lld", (long long)json_integer_value(json_object_get(w, "max_devices")));
            const char *row[4] = {name, usage, used, quota};
            table_row(&o, row);
        }
        table_print(&o, stdout);
        table_free(&o);
    }
    json_decref(q);
    return EXIT_OK;
}

/* ---- logs ---- */

/* ddpctl logs ID --attempt K: every rank's part of attempt K, one after another,
 * each under a line naming its rank. */
static int print_attempt_logs(long long id, long attempt, long tail) {
    char path[160];
    snprintf(path, sizeof path, "/runs/%lld", id);
    int rc = EXIT_OK;
    json_t *run = get_json(path, &rc);
    if (!run) return rc;
    long long ranks = json_integer_value(json_object_get(run, "world_size"));
    json_decref(run);
    for (long long r = 0; r < ranks && rc == EXIT_OK; r++) {
        snprintf(path, sizeof path, "/runs/%lld/logs?tail=%ld&rank=%lld&attempt=%ld", id, tail, r, attempt);
        http_reply reply;
        char err[1024];
        if (http_call("GET", path, NULL, 0, &reply, err, sizeof err) != 0) {
            fprintf(stderr, "ddpctl: %s\n", err);
            return EXIT_UNREACHABLE;
        }
        if (reply.status != 200) {
            rc = print_refusal(&reply, NULL);
        } else {
            printf("%s==> rank %lld, attempt %ld <==\n", r ? "\n" : "", r, attempt);
            fwrite(reply.body, 1, reply.len, stdout);
            if (reply.len && reply.body[reply.len - 1] != '\n') putchar('\n');
        }
        http_reply_free(&reply);
    }
    fflush(stdout);
    return rc;
}

static int cmd_logs(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "logs takes a run ID");
    long tail = a->tail ? atol(a->tail) : 1000;
    if (tail < 1) return usage_error("--tail wants a positive number of lines (got \"%s\")", a->tail);
    long rank = -1;
    if (a->rank && (rank = atol(a->rank)) < 0) return usage_error("--rank wants a rank number (got \"%s\")", a->rank);
    long attempt = -1;
    if (a->attempt && (attempt = atol(a->attempt)) < 0)
        return usage_error("--attempt wants an attempt's number, from 0 (got \"%s\")", a->attempt);
    if (attempt >= 0 && rank < 0) {
        if (a->follow)
            return usage_error("%s", "-f follows one rank's log: give --rank with --attempt (without -f, --attempt "
                                     "alone prints every rank's part of that attempt)");
        return print_attempt_logs(id, attempt, tail);
    }
    char rank_q[64] = "";
    if (rank >= 0) snprintf(rank_q, sizeof rank_q, "&rank=%ld", rank);
    if (attempt >= 0) snprintf(rank_q + strlen(rank_q), sizeof rank_q - strlen(rank_q), "&attempt=%ld", attempt);
    int rc = EXIT_OK;
    bool ended = false;
    long long next = -1;
    for (;;) {
        char path[128];
        /* the last lines first; then, following, the bytes after them (the server
         * says where the next read starts: nothing is missed or printed twice) */
        if (next < 0) snprintf(path, sizeof path, "/runs/%lld/logs?tail=%ld%s", id, tail, rank_q);
        else snprintf(path, sizeof path, "/runs/%lld/logs?offset=%lld%s", id, next, rank_q);
        http_reply r;
        char err[1024];
        if (http_call("GET", path, NULL, 0, &r, err, sizeof err) != 0) {
            fprintf(stderr, "ddpctl: %s\n", err);
            rc = client_interrupted() ? EXIT_INTERRUPTED : EXIT_UNREACHABLE;
            break;
        }
        if (r.status != 200) {
            rc = print_refusal(&r, NULL);
            http_reply_free(&r);
            break;
        }
        fwrite(r.body, 1, r.len, stdout);
        if (r.len && r.body[r.len - 1] != '\n' && next < 0) putchar('\n');
        fflush(stdout);
        long long was = next;
        next = r.next_offset >= 0 ? r.next_offset : (next < 0 ? 0 : next) + (long long)r.len;
        bool more = next > was && was >= 0 && r.len >= (1 << 20) / 2; /* a big backlog: read on at once */
        http_reply_free(&r);
        if (!a->follow || (ended && !more)) break;
        if (more) continue;
        /* Until the run has ended; then one more read, for its last lines. */
        snprintf(path, sizeof path, "/runs/%lld", id);
        json_t *run = get_json(path, &rc);
        if (!run) break;
        const char *st = json_string_value(json_object_get(run, "status"));
        ended = st && (!strcmp(st, "succeeded") || !strcmp(st, "failed") || !strcmp(st, "canceled") ||
                       !strcmp(st, "stopped") || !strcmp(st, "timeout"));
        json_decref(run);
        for (int i = 0; i < 10 && !ended && !client_interrupted(); i++) usleep(100000);
        if (client_interrupted()) {
            rc = EXIT_INTERRUPTED;
            break;
        }
    }
    return rc;
}

/* ---- cancel ---- */

static int cmd_cancel(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "cancel takes a run ID");
    char path[64];
    snprintf(path, sizeof path, "/runs/%lld/cancel", id);
    http_reply r;
    int rc = post_action(path, 202, &r);
    if (rc != EXIT_OK) return rc;
    json_t *run = json_loadb(r.body, r.len, 0, NULL);
    printf("run %lld: %s\n", id, str_or(json_string_value(json_object_get(run, "status")), "canceling"));
    json_decref(run);
    http_reply_free(&r);
    return EXIT_OK;
}

/* ---- resume ---- */

static int cmd_resume(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "resume takes a run ID");
    char path[64];
    snprintf(path, sizeof path, "/runs/%lld/resume", id);
    http_reply r;
    int rc = post_action(path, 202, &r);
    if (rc != EXIT_OK) return rc;
    json_t *run = json_loadb(r.body, r.len, 0, NULL);
    http_reply_free(&r);
    json_t *resumes = json_object_get(run, "resumes");
    json_t *last = json_array_get(resumes, json_array_size(resumes) ? json_array_size(resumes) - 1 : 0);
    const char *from = json_string_value(json_object_get(last, "from_checkpoint"));
    long long attempt = json_integer_value(json_object_get(last, "attempt"));
    if (from) /* a built-in model: from its checkpoint */
        printf("run %lld resumed from %s (after epoch %lld, step %lld), at attempt %lld: %s\n", id, from,
               (long long)json_integer_value(json_object_get(last, "from_epoch")),
               (long long)json_integer_value(json_object_get(last, "from_global_step")), attempt,
               str_or(json_string_value(json_object_get(run, "status")), "queued"));
    else /* a command run: started again; its script's own snapshot does the rest */
        printf("run %lld resumed: its command starts again at attempt %lld (TORCHELASTIC_RESTART_COUNT=%lld): %s\n",
               id, attempt, attempt, str_or(json_string_value(json_object_get(run, "status")), "queued"));
    fflush(stdout);
    json_decref(run);
    return a->follow ? follow_run(id, isatty(STDOUT_FILENO)) : EXIT_OK;
}

/* ---- metrics ---- */

static int cmd_metrics(const args *a) {
    long long id;
    if (a->n_positional != 1 || !parse_id(a->positional[0], &id)) return usage_error("%s", "metrics takes a run ID");
    const char *key = a->key ? a->key : "loss";
    char path[256];
    snprintf(path, sizeof path, "/runs/%lld/metrics?key=%s%s%s", id, key, a->max_points ? "&max_points=" : "&limit=",
             a->max_points ? a->max_points : "100000");
    int ec = 0;
    json_t *m = get_json(path, &ec);
    if (!m) return ec;
    json_t *points = json_object_get(m, "points");
    /* without --max-points, every point: the server answers a page at a time */
    for (json_t *next = json_object_get(m, "next_after"); json_is_integer(next);) {
        char more[320];
        snprintf(more, sizeof more, "%s&after=%lld", path, (long long)json_integer_value(next));
        json_t *page = get_json(more, &ec);
        if (!page) {
            json_decref(m);
            return ec;
        }
        json_array_extend(points, json_object_get(page, "points"));
        json_object_set(m, "next_after", json_object_get(page, "next_after"));
        json_decref(page);
        next = json_object_get(m, "next_after");
    }
    size_t i;
    json_t *pt;
    if (a->csv) {
        printf("step,%s,time\n", key);
        json_array_foreach(points, i, pt) {
            json_t *v = json_array_get(pt, 1);
            long long ms = json_integer_value(json_array_get(pt, 2));
            time_t s = (time_t)(ms / 1000);
            struct tm tm;
            gmtime_r(&s, &tm);
            char when[40];
            strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
            printf("%lld,", (long long)json_integer_value(json_array_get(pt, 0)));
            if (json_is_number(v)) { /* the shortest text that reads back as the same double */
                char num[40];
                for (int prec = 15; prec <= 17; prec++) {
                    snprintf(num, sizeof num, "%.*g", prec, json_number_value(v));
                    if (strtod(num, NULL) == json_number_value(v)) break;
                }
                fputs(num, stdout);
            }
            printf(",%s.%03lldZ\n", when, ms % 1000);
        }
    } else {
        table t;
        table_init(&t, 3);
        char upper[32];
        snprintf(upper, sizeof upper, "%s", key);
        for (char *c = upper; *c; c++) *c = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        const char *head[3] = {"STEP", upper, "TIME"};
        table_row(&t, head);
        json_array_foreach(points, i, pt) {
            char s[24], v[32], when[48];
            snprintf(s, sizeof s, "%lld", (long long)json_integer_value(json_array_get(pt, 0)));
            json_t *val = json_array_get(pt, 1);
            if (json_is_number(val)) snprintf(v, sizeof v, "%.6g", json_number_value(val));
            else snprintf(v, sizeof v, "-");
            long long ms = json_integer_value(json_array_get(pt, 2));
            time_t sec = (time_t)(ms / 1000);
            struct tm tm;
            gmtime_r(&sec, &tm);
            strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", &tm);
            const char *row[3] = {s, v, when};
            table_row(&t, row);
        }
        table_print(&t, stdout);
        table_free(&t);
        if (json_is_true(json_object_get(m, "downsampled")))
            fprintf(stderr, "(%zu of %lld points: downsampled to --max-points)\n", json_array_size(points),
                    (long long)json_integer_value(json_object_get(m, "count")));
        else if (!json_array_size(points))
            fprintf(stderr, "(no points yet)\n");
    }
    json_decref(m);
    return EXIT_OK;
}

/* ---- arguments ---- */

int main(int argc, char **argv) {
    const char *env_url = getenv("DDPD_URL"), *env_token = getenv("DDPD_TOKEN");
    const char *token_file = getenv("DDPD_TOKEN_FILE"), *flag_token = NULL, *flag_token_file = NULL;
    if (env_url && *env_url) CLIENT.base = env_url;
    if (env_token && *env_token) CLIENT.token = env_token;
    args a = {0};
    const char *command = NULL;
    const char *torchrun_nproc = NULL; /* the torchrun spelling of -n, when given */
    static char flag_name[64];
    for (int i = 1; i < argc; i++) {
        const char *s = argv[i];
        const char *inline_value = NULL; /* --flag=value, as torchrun's flags are often written */
        const char *eq = strncmp(s, "--", 2) == 0 && s[2] ? strchr(s, '=') : NULL;
        if (eq && (size_t)(eq - s) < sizeof flag_name) {
            snprintf(flag_name, sizeof flag_name, "%.*s", (int)(eq - s), s);
            inline_value = eq + 1;
            s = flag_name;
        }
        if (!strcmp(s, "-h") || !strcmp(s, "--help") || !strcmp(s, "help")) {
            fputs(USAGE, stdout);
            return EXIT_OK;
        }
        if (!strcmp(s, "--version") || !strcmp(s, "version")) {
            printf("ddpctl %s\n", DDPD_VERSION);
            return EXIT_OK;
        }
        if (!strcmp(s, "man")) { /* ddpctl(1), from this very usage (roff.h) */
            man_page(stdout);
            return EXIT_OK;
        }
        const char **value = NULL;
        if (!strcmp(s, "--server")) value = &CLIENT.base;
        else if (!strcmp(s, "--token")) value = &flag_token;
        else if (!strcmp(s, "--token-file")) value = &flag_token_file;
        else if (!strcmp(s, "--key")) value = &a.key;
        else if (!strcmp(s, "--status")) value = &a.status;
        else if (!strcmp(s, "--limit")) value = &a.limit;
        else if (!strcmp(s, "--tail")) value = &a.tail;
        else if (!strcmp(s, "--rank")) value = &a.rank;
        else if (!strcmp(s, "--attempt")) value = &a.attempt;
        else if (!strcmp(s, "-n") || !strcmp(s, "--nproc")) value = &a.nproc;
        else if (!strcmp(s, "--nproc-per-node") || !strcmp(s, "--nproc_per_node")) {
            value = &a.nproc;
            torchrun_nproc = strchr(s, '_') ? "--nproc_per_node" : "--nproc-per-node";
            a.one_node = true;
        }
        else if (!strcmp(s, "--max-restarts") || !strcmp(s, "--max_restarts")) value = &a.max_restarts;
        else if (!strcmp(s, "--priority")) value = &a.priority;
        else if (!strcmp(s, "--hang-timeout")) value = &a.hang_timeout;
        else if (!strcmp(s, "--preemptible")) { a.preemptible = true; continue; }
        else if (!strcmp(s, "--name")) value = &a.name;
        else if (!strcmp(s, "--actor")) value = &a.actor;
        else if (!strcmp(s, "--target")) value = &a.target;
        else if (!strcmp(s, "--since")) value = &a.since;
        else if (!strcmp(s, "--until")) value = &a.until;
        else if (!strcmp(s, "--owner")) value = &a.owner;
        else if (!strcmp(s, "--sweep")) value = &a.sweep;
        else if (!strcmp(s, "--before")) value = &a.before;
        else if (!strcmp(s, "--all")) { a.all = true; continue; }
        else if (!strcmp(s, "--by")) value = &a.by;
        else if (!strcmp(s, "--from")) value = &a.from;
        else if (!strcmp(s, "--to")) value = &a.to;
        else if (!strcmp(s, "--workdir")) value = &a.workdir;
        else if (!strcmp(s, "--env")) {
            if (!inline_value && i + 1 >= argc) return usage_error("%s needs a value", s);
            if (a.n_env == 64) return usage_error("%s", "at most 64 --env");
            a.env[a.n_env++] = inline_value ? inline_value : argv[++i];
            continue;
        } else if (!strcmp(s, "--")) { /* the rest is the program and its arguments (ddpctl run) */
            a.command = argv + i + 1;
            a.n_command = argc - i - 1;
            break;
        }
        else if (!strcmp(s, "--max-points")) value = &a.max_points;
        else if (!strcmp(s, "--follow") || !strcmp(s, "-f")) { a.follow = true; continue; }
        else if (!strcmp(s, "--csv")) { a.csv = true; continue; }
        else if (!strcmp(s, "--json")) { a.json = true; continue; }
        else if (s[0] == '-' && s[1]) return usage_error("unknown option %s", s);
        if (value) {
            if (inline_value) *value = inline_value;
            else if (i + 1 >= argc) return usage_error("%s needs a value", s);
            else *value = argv[++i];
            continue;
        }
        if (inline_value) return usage_error("%s takes no value", s);
        if (!command) command = s;
        else if (a.n_positional < 4) a.positional[a.n_positional++] = s;
        else return usage_error("too many arguments (\"%s\")", s);
    }
    if (!command) {
        fputs(USAGE, stderr);
        return EXIT_USAGE;
    }
    /* the token: a flag, else the environment; a file's beats the variable beside it */
    if (flag_token && flag_token_file) return usage_error("%s", "give --token or --token-file, not both");
    if (flag_token) CLIENT.token = flag_token;
    else if (flag_token_file || (token_file && *token_file)) {
        char err[512];
        char *t = NULL;
        if (secret_read_file(flag_token_file ? flag_token_file : token_file, &t, err, sizeof err) != 0) {
            fprintf(stderr, "ddpctl: %s\n", err);
            return EXIT_USAGE;
        }
        CLIENT.token = t; /* kept for the life of the process */
    }
    if (torchrun_nproc && !strcmp(command, "run"))
        fprintf(stderr, "ddpctl: note: %s %s is the run's world size, all ranks on one node (distributed.world_size %s, "
                "distributed.nodes 1)\n", torchrun_nproc, a.nproc, a.nproc);
    /* "http://host:port/" -> "http://host:port"; a bare "host:port" gets http:// */
    static char base[1024];
    snprintf(base, sizeof base, "%s%s", strstr(CLIENT.base, "://") ? "" : "http://", CLIENT.base);
    size_t bl = strlen(base);
    while (bl && base[bl - 1] == '/') base[--bl] = '\0';
    CLIENT.base = base;
    client_init();
    static const struct {
        const char *name;
        int (*fn)(const args *);
        const char *flags; /* which of f c j k s l t m r a n N w e R p P H A T S B F U O W V b x it takes */
    } commands[] = {
        {"submit", cmd_submit, "f"}, {"list", cmd_list, "jslNSOWVbx"}, {"show", cmd_show, "j"}, {"queue", cmd_queue, "j"},
        {"logs", cmd_logs, "ftra"},   {"cancel", cmd_cancel, ""}, {"resume", cmd_resume, "f"}, {"metrics", cmd_metrics, "ckm"},
        {"follow", cmd_follow, ""},   {"run", cmd_run, "fnNweRpPH"}, {"sweep", cmd_sweep, "j"},
        {"audit", cmd_audit, "jlATS"}, {"usage", cmd_usage, "jBFU"}, {"nodes", cmd_nodes, "j"},
    };
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++) {
        if (strcmp(command, commands[i].name) != 0) continue;
        const char *f = commands[i].flags;
        struct { bool set; char flag; const char *name; } given[] = {
            {a.follow, 'f', "--follow/-f"}, {a.csv, 'c', "--csv"}, {a.json, 'j', "--json"}, {a.key != NULL, 'k', "--key"},
            {a.status != NULL, 's', "--status"}, {a.limit != NULL, 'l', "--limit"}, {a.tail != NULL, 't', "--tail"},
            {a.max_points != NULL, 'm', "--max-points"}, {a.rank != NULL, 'r', "--rank"},
            {a.attempt != NULL, 'a', "--attempt"},
            {a.nproc != NULL, 'n', "-n/--nproc"}, {a.name != NULL, 'N', "--name"}, {a.workdir != NULL, 'w', "--workdir"},
            {a.n_env > 0, 'e', "--env"}, {a.max_restarts != NULL, 'R', "--max-restarts"},
            {a.priority != NULL, 'p', "--priority"}, {a.preemptible, 'P', "--preemptible"},
            {a.hang_timeout != NULL, 'H', "--hang-timeout"}, {a.actor != NULL, 'A', "--actor"},
            {a.target != NULL, 'T', "--target"}, {a.since != NULL, 'S', "--since"}, {a.by != NULL, 'B', "--by"},
            {a.from != NULL, 'F', "--from"}, {a.to != NULL, 'U', "--to"}, {a.owner != NULL, 'O', "--owner"},
            {a.sweep != NULL, 'W', "--sweep"}, {a.until != NULL, 'V', "--until"}, {a.before != NULL, 'b', "--before"},
            {a.all, 'x', "--all"}, {a.n_command > 0 && strcmp(command, "run") != 0, '-', "-- PROGRAM"},
        };
        for (size_t g = 0; g < sizeof given / sizeof *given; g++) {
            if (given[g].set && !strchr(f, given[g].flag)) {
                fprintf(stderr, "ddpctl: %s does not take %s (ddpctl --help)\n", command, given[g].name);
                return EXIT_USAGE;
            }
        }
        return commands[i].fn(&a);
    }
    return usage_error("unknown command \"%s\"", command);
}
