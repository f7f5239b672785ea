/* ddpd's settings: the table of every `serve`/`check` setting, and what is computed
 * beyond it (the defaults that depend on this host, the token, the checks that span
 * settings). See settings.h. */
#include "settings.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base.h"
#include "beside_self.h"
#include "byte_size.h"
#include "secret_file.h"
#include "slurm_cli.h"

#define AT(field) offsetof(settings, field)
#define STR(f, m, e, name) .flag = f, .meta = m, .env = e, .kind = OPT_STRING, .field = AT(name)
#define BOOL(f, e, name) .flag = f, .env = e, .kind = OPT_BOOL, .field = AT(name)
#define INT(f, m, e, name, lo, hi) .flag = f, .meta = m, .env = e, .kind = OPT_INT, .field = AT(name), .min = lo, .max = hi
#define PATHS(f, m, e, name) .flag = f, .meta = m, .env = e, .kind = OPT_PATHS, .field = AT(name)
#define WORDS(f, m, e, name) .flag = f, .meta = m, .env = e, .kind = OPT_WORDS, .field = AT(name)

/* One row a setting (opt_table.h says each field), in the order the usage lists them. */
static const opt_row ROWS[] = {
    {STR("--listen", "HOST:PORT", "DDPD_LISTEN", listen), .dflt = "127.0.0.1:8080", .help = "where to serve HTTP",
     .note = "port 0 picks a free port, printed on start-up"},
    {STR("--state-dir", "DIR", "DDPD_STATE_DIR", state_dir), .help = "database, event socket and run directories",
     .dflt_says = "default $XDG_STATE_HOME/ddpd, else ~/.local/state/ddpd"},
    {STR("--runs-dir", "DIR", "DDPD_RUNS_DIR", runs_dir),
     .help = "the runs' directories (configs, logs, journals, checkpoints, what command runs write) here instead, e.g. "
             "on a filesystem apart from the database's, so that runs filling their disk never stop the database. "
             "One server's alone",
     .dflt_says = "default <state-dir>/runs"},
    {PATHS("--data-root", "DIR", "DDPD_DATA_ROOT", data_roots), .help = "where run configs may read data from",
     .dflt_says = "default /usr/share/datasets and, if it exists, <state-dir>/datasets"},
    {INT("--slots", "N", "DDPD_SLOTS", slots, 0, 4096), .help = "CPU slots for CPU runs, one rank each",
     .dflt_says = "default: the number of cores"},
    {STR("--gpus", "LIST", "DDPD_GPUS", gpus), .help = "GPUs to manage, e.g. 0,1 or none",
     .dflt_says = "default: all detected"},
    {STR("--trainer", "PATH", "DDPD_TRAINER", trainer), .help = "the ddp-trainer executable",
     .dflt_says = "default: the one beside ddpd"},
    {BOOL("--rebuild-from-runs", NULL, rebuild_from_runs),
     .help =
         "serve: a database that is missing, empty (0 bytes) or damaged beside run directories is moved aside "
         "(renamed, never deleted) and the history is rebuilt from each run directory's config.json and events.jsonl"},
    {BOOL("--keep-journals", "DDPD_KEEP_JOURNALS", keep_journals),
     .help = "keep each finished run's whole journal (events.jsonl), every step, beside the database",
     .dflt_says = "default: once a run is finished, its journal keeps only what the database does not hold"},
    {BOOL("--show-paths", "DDPD_SHOW_PATHS", show_paths), .help = "answers show this server's absolute paths",
     .dflt_says = "default: they are named by their roots: <state-dir>/runs/3/..., <data-root>/..."},
    {BOOL("--allow-commands", "DDPD_ALLOW_COMMANDS", allow_commands),
     .help =
         "accept command runs: configs with \"command\", the user's own program run once per rank, as the user's "
         "account (--unix-user), else --run-user, else the server's own user (refused where the server has users or "
         "is root)",
     .dflt_says = "default: refuse"},
    {STR("--run-user", "ACCOUNT", "DDPD_RUN_USER", run_user),
     .help = "every run of a user without a Unix account of its own (ddpd user add NAME --unix-user), and of a server "
             "without users, runs as this unprivileged account of the host, never as the server. Needs root or "
             "CAP_SETUID and CAP_SETGID",
     .dflt_says = "default: none"},
    {BOOL("--unsafe-commands-as-server", "DDPD_UNSAFE_COMMANDS_AS_SERVER", unsafe_commands_as_server),
     .help = "UNSAFE: command runs that have no account to run as (no --unix-user, no --run-user) run as the "
             "server's own user, which can read and change its database and every run, even where the server has "
             "users or runs as root",
     .dflt_says = "default: such runs are refused at submission"},
    {PATHS("--work-root", "DIR", "DDPD_WORK_ROOT", work_roots), .help = "where a command run's working_dir may lie",
     .dflt_says = "default: none, so command runs work in their run directory"},
    {STR("--port-range", "LO-HI", "DDPD_PORT_RANGE", port_range), .dflt = "29600-29999",
     .help = "MASTER_PORTs leased to command runs"},
    {STR("--runner", "PATH", "DDPD_RUNNER", runner), .help = "the ddp-run executable that starts command runs",
     .dflt_says = "default: the one beside ddpd"},
    {STR("--token-file", "PATH", "DDPD_TOKEN_FILE", token_file),
     .help = "require \"Authorization: Bearer TOKEN\" on every request that changes something (POST, DELETE), TOKEN "
             "being the file's one line; reading stays open until there are users (then it needs a token too: "
             "theirs or this one). The file must be readable by its owner only (chmod 600)",
     .dflt_says = "or the token itself in DDPD_TOKEN; default: none", .flags = OPT_ENV_BY_HAND},
    {STR("--token", "TOKEN", NULL, token), .help = "the same with the token on the command line, where every local "
                                                   "user can read it (ps): prefer --token-file or DDPD_TOKEN"},
    {BOOL("--open-reads", "DDPD_OPEN_READS", open_reads),
     .help = "with users, let anybody read without a token (the runs, their configs but a command run's env values "
             "and arguments, logs, metrics, events, /queue, /users, /metrics), as before users",
     .dflt_says = "default: once there are users, every request but /healthz and the dashboard's files needs a token"},
    {BOOL("--insecure", "DDPD_INSECURE", insecure),
     .help = "without a token, listen on a non-loopback address all the same", .dflt_says = "default: refuse"},
    {STR("--advertise", "ADDR", "DDPD_ADVERTISE", advertise),
     .help = "the address `ddpd agent` nodes reach this host's ranks at: with it, this host takes part in runs across "
             "nodes",
     .dflt_says = "default: none, so runs across nodes use agent nodes only"},
    {STR("--node-name", "NAME", "DDPD_NODE_NAME", node_name), .help = "this host's name among the nodes",
     .dflt_says = "default: its hostname"},
    {INT("--node-timeout", "SECONDS", "DDPD_NODE_TIMEOUT", node_timeout, 2, 3600), .dflt = "10",
     .help = "an agent node not heard from this long is lost, and its runs fail naming it"},
    {STR("--executor", "local|slurm", "DDPD_EXECUTOR", executor), .dflt = "local",
     .help =
         "where runs execute: local, this host and its agents; or slurm, every run one Slurm job, submitted at once",
     .after = ". Slurm's commands (sbatch, squeue, scancel, scontrol) are taken from PATH, with the environment's "
              "SLURM_CONF; the nodes reach this server at --advertise"},
    {STR("--slurm-partition", "P", "DDPD_SLURM_PARTITION", slurm_partition), .help = "the partition jobs go to",
     .dflt_says = "default: Slurm's"},
    {STR("--slurm-account", "A", "DDPD_SLURM_ACCOUNT", slurm_account), .help = "the account jobs are charged to",
     .dflt_says = "default: Slurm's"},
    {WORDS("--slurm-user-account", "USER=ACCOUNT", "DDPD_SLURM_USER_ACCOUNTS", slurm_user_accounts),
     .help = "USER's runs go under Slurm account ACCOUNT (others' under --slurm-account)"},
    {BOOL("--slurm-allow-priority", "DDPD_SLURM_ALLOW_PRIORITY", slurm_allow_priority),
     .help = "the site lets ddpd's Slurm user raise a job's priority (an operator's right). A run's priority P is its "
             "job's sbatch --nice=-100P: a negative P always lowers it, a positive one raises it only with this flag",
     .dflt_says = "default: priorities only lower jobs"},
    {STR("--slurm-preemptible-qos", "NAME", "DDPD_SLURM_PREEMPTIBLE_QOS", slurm_preemptible_qos),
     .help = "preemptible runs are submitted with --qos NAME, a QOS the site lets other jobs preempt",
     .dflt_says = "default: none",
     .after = ". Slurm's queue is the queue: ddpd's own quotas, fair share and preemption do not apply"},
    {WORDS("--slurm-option", "OPT", "DDPD_SLURM_OPTIONS", slurm_options),
     .help = "one more sbatch option for every job, e.g. --slurm-option=--time=2:00:00",
     .after = "; the site's win over ddpd's"},
    {STR("--slurm-work-dir", "DIR", "DDPD_SLURM_WORK_DIR", slurm_work_dir),
     .help = "on the nodes: where each node's part keeps its run directory, DIR/ID/part-K (checkpoints, logs, "
             "journal); a filesystem the nodes share keeps a requeued job's checkpoints",
     .dflt_says = "default /tmp/ddpd-slurm-UID"},
    {STR("--slurm-ddpd", "PATH", "DDPD_SLURM_DDPD", slurm_ddpd), .help = "the ddpd binary on the nodes",
     .dflt_says = "default: this one's path"},
    {BOOL("--slurm-gpus", "DDPD_SLURM_GPUS", slurm_gpus),
     .help = "the Slurm nodes have GPUs: a run whose backend is \"auto\" asks for one per rank",
     .dflt_says = "default: \"auto\" runs on CPUs"},
    {STR("--web-dir", "DIR", "DDPD_WEB_DIR", web_dir), .help = "the dashboard's files, served at /",
     .dflt_says = "default: installed beside ddpd, else the source tree it was built from"},
    {INT("--http-threads", "N", "DDPD_HTTP_THREADS", http_threads, 1, 256), .help = "HTTP worker threads",
     .dflt_says = "default: cores, at least 2"},
    {INT("--cancel-grace", "SECONDS", "DDPD_CANCEL_GRACE", cancel_grace, 0, 3600), .dflt = "10",
     .help = "SIGTERM to a canceled run, SIGKILL this much later"},
    {INT("--backfill-window", "SECONDS", "DDPD_BACKFILL_WINDOW", backfill_window, 0, 30 * 24 * 3600), .dflt = "600",
     .help = "a run that fits may start ahead of a larger one of its pool that waits, while that one has waited less "
             "than this; 0: strict first come first served"},
    {INT("--fairshare-half-life", "SECONDS", "DDPD_FAIRSHARE_HALF_LIFE", fairshare_half_life, 1, 365 * 24 * 3600),
     .dflt = "3600", .help = "fair share: a user's past device-seconds weigh half as much this much later"},
    {INT("--preempt-grace", "SECONDS", "DDPD_PREEMPT_GRACE", preempt_grace, 1, 3600), .dflt = "60",
     .help = "a preempted run has this long to write its checkpoint and stop before it is killed"},
    {INT("--min-runtime", "SECONDS", "DDPD_MIN_RUNTIME", min_runtime, 0, 30 * 24 * 3600), .dflt = "0",
     .help = "a run is not preempted before it has run this long in its current attempt, unless its config says "
             "otherwise (min_runtime_s); 0: it may be preempted at once"},
    {INT("--elastic-grow-interval", "SECONDS", "DDPD_ELASTIC_GROW_INTERVAL", elastic_grow_interval, 0, 30 * 24 * 3600),
     .dflt = "60", .help = "an elastic run shrunk for a more urgent run grows back on idle devices at most this long "
                           "after its last change of size; 0: as soon as they are idle"},
    {INT("--time-slice", "SECONDS", "DDPD_TIME_SLICE", time_slice, 0, 30 * 24 * 3600), .dflt = "0",
     .help = "while a run of another user of the same priority waits, a preemptible run that has held its devices "
             "this long in its current attempt yields them at its next checkpoint and is queued again (reason "
             "time_slice), so that equal runs take turns; the run that takes the turn pays for the work lost, as a "
             "preemptor does; 0: no time slices"},
    {INT("--suspect-after", "N", "DDPD_SUSPECT_AFTER", suspect_after, 1, 1000), .dflt = "2",
     .help = "a node (or one device of it) where this many attempts failed (class infra, collective, hang or crash) "
             "within --exclude-node-window is suspect: no run goes there while another place fits, until an admin "
             "clears it (docs/failures.md)"},
    {INT("--exclude-node-after", "N", "DDPD_EXCLUDE_NODE_AFTER", exclude_node_after, 0, 1000), .dflt = "3",
     .help = "a node where this many runs failed (class infra, collective, hang or crash) within --exclude-node-window "
             "gets no run until an admin clears it (ddpd node clear NAME); 0: never excluded (docs/failures.md)"},
    {INT("--exclude-node-window", "SECONDS", "DDPD_EXCLUDE_NODE_WINDOW", exclude_node_window, 1, 30 * 24 * 3600),
     .dflt = "3600", .help = "the window of --suspect-after and --exclude-node-after"},
    {INT("--max-stop-grace", "SECONDS", "DDPD_MAX_STOP_GRACE", max_stop_grace, 0, 86400), .dflt = "300",
     .help = "the longest grace a command run may ask for (distributed.stop_grace_s) when it is canceled or preempted"},
    {INT("--max-connections", "N", "DDPD_MAX_CONNECTIONS", max_connections, 1, 1000000),
     .help = "HTTP connections open at once, every client together",
     .dflt_says = "default: from the file descriptor limit, at most 4096"},
    {INT("--reserved-connections", "N", "DDPD_RESERVED_CONNECTIONS", reserved_connections, 0, 65536),
     .help = "more connections that only this host (loopback) may use once the others are taken, for /healthz and an "
             "operator",
     .dflt_says = "default 16"},
    {INT("--max-connections-per-address", "N", "DDPD_MAX_CONNECTIONS_PER_ADDRESS", max_connections_per_address, 1,
         1000000),
     .dflt = "64", .help = "HTTP connections of one client address", .note = "a proxy in front is one address"},
    {INT("--header-timeout", "SECONDS", "DDPD_HEADER_TIMEOUT", header_timeout, 1, 3600), .dflt = "10",
     .help = "a connection that has not sent a request's headers this long after it opened (or after its previous "
             "answer) is closed"},
    {INT("--idle-timeout", "SECONDS", "DDPD_IDLE_TIMEOUT", idle_timeout, 1, 86400), .dflt = "30",
     .help = "a connection that sends and reads nothing this long is closed"},
    {INT("--max-streams", "N", "DDPD_MAX_STREAMS", max_streams, 1, 1000000),
     .help = "event streams (GET /events, /runs/{id}/events) open at once",
     .dflt_says = "default: from the file descriptor limit, at most 1024"},
    {INT("--max-streams-per-address", "N", "DDPD_MAX_STREAMS_PER_ADDRESS", max_streams_per_address, 1, 1000000),
     .help = "event streams of one client address", .dflt_says = "default 16"},
    {STR("--run-memory-per-slot", "GB", "DDPD_RUN_MEMORY_PER_SLOT", run_memory_per_slot),
     .help = "the memory (GiB) a run's processes may use together, per device it holds, when its config asks for none "
             "(resources.memory_gb); never more than its owner's --max-memory-gb (ddpd user). Enforced by the run's "
             "cgroup (memory and swap): a run past it has a process killed, and fails saying so; others are untouched. 0: "
             "no limit unless asked",
     .dflt_says = "default: this host's memory divided among its devices (its CPU slots for a CPU run, its GPUs for a "
                  "GPU run)"},
    {INT("--max-run-processes", "N", "DDPD_MAX_RUN_PROCESSES", max_run_processes, 0, 4194304),
     .help = "the processes and threads a run may hold at once on this host (its cgroup's pids.max), so that a fork "
             "loop stops there instead of taking the host's. A PyTorch rank with DataLoader workers holds hundreds of "
             "threads: it is counted per device. 0: no limit",
     .dflt_says = "default 1024 per device the run holds here, at least 4096"},
    {INT("--max-points-per-run", "N", "DDPD_MAX_POINTS_PER_RUN", max_points_per_run, 1, 2000000000),
     .dflt = "10000000",
     .help = "the points a run may store (its steps, epochs and series values: ddpd.log_step); a run that reports "
             "more is a runaway flood: its points past it are not stored and it fails, saying so"},
    {STR("--max-log-bytes-per-run", "SIZE", "DDPD_MAX_LOG_BYTES_PER_RUN", max_log_bytes_per_run), .dflt = "1G",
     .help = "the size each log of a run may reach (trainer.log, each ranks/rank-N.log), as ddpd's own launchers write "
             "them: past it their lines are dropped and one line says so; 0: no cap"},
    {STR("--log-level", "LEVEL", "DDPD_LOG_LEVEL", log_level), .help = "debug, info, warn or error",
     .dflt_says = "default info: a line per request"},
    {STR("--log-file", "PATH", "DDPD_LOG_FILE", log_file),
     .help = "log there instead of stderr, rotated daily to PATH.YYYY-MM-DD and by size to PATH.YYYY-MM-DD.N"},
    {STR("--log-max-bytes", "SIZE", "DDPD_LOG_MAX_BYTES", log_max_bytes),
     .help = "rotate before the file passes SIZE, e.g. 100M; 0: no limit", .dflt_says = "default 100M"},
    {STR("--log-keep", "N", "DDPD_LOG_KEEP", log_keep), .help = "rotated files to keep; 0: all",
     .dflt_says = "default 14"},
};

static const char USAGE_HEAD[] =
    "usage: ddpd serve [options]\n"
    "       ddpd check [options]     is this host ready to serve? one verdict per part, nothing changed\n"
    "       ddpd user add|list|token|remove ...   the users of a shared server (ddpd user --help)\n"
    "       ddpd --version\n"
    "       ddpd man                 this manual in roff (installed as man ddpd; ddpd man | man -l -)\n"
    "\n"
    "Serves the ddpd API: submit data-parallel training runs as JSON, follow them, cancel them.\n"
    "Every option can also be set with the environment variable shown (the flag wins).\n"
    "\n";

const opt_table SETTINGS_TABLE = {ROWS, sizeof ROWS / sizeof *ROWS, "ddpd", USAGE_HEAD, false};

void settings_usage(FILE *out) { opt_usage(&SETTINGS_TABLE, out); }

static char *default_state_dir(void) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) return xasprintf("%s/ddpd", xdg);
    if (home && *home) return xasprintf("%s/.local/state/ddpd", home);
    return xstrdup("ddpd-state");
}

char *settings_state_dir(const char *flag) {
    const char *sd = flag ? flag : getenv("DDPD_STATE_DIR");
    return sd && *sd ? xstrdup(sd) : default_state_dir();
}

/* The first problem is the one said. */
static void problem(settings *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(settings *s, const char *fmt, ...) {
    if (s->problem[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->problem, sizeof s->problem, fmt, ap);
    va_end(ap);
}

static const char *from_of(const opt_origins *o, size_t field) {
    for (size_t i = 0; i < SETTINGS_TABLE.n; i++)
        if (ROWS[i].field == field) return o->from[i];
    return NULL;
}

/* The token: --token or --token-file (not both), else DDPD_TOKEN_FILE or DDPD_TOKEN
 * (not both); a file is read here, so that serve and check judge the same one. */
static void read_token(settings *s) {
    s->token_on_command_line = s->token != NULL;
    if (s->token && s->token_file) {
        problem(s, "give --token or --token-file, not both");
        s->token = NULL;
        return;
    }
    if (!s->token && !s->token_file) {
        const char *file = getenv("DDPD_TOKEN_FILE"), *token = getenv("DDPD_TOKEN");
        if (file && *file && token && *token) {
            problem(s, "DDPD_TOKEN and DDPD_TOKEN_FILE are both set: unset one (the file is the safer place)");
            return;
        }
        s->token_file = file && *file ? file : NULL;
        s->token = token;
    }
    if (s->token_file) {
        char *token, err[sizeof s->problem];
        if (secret_read_file(s->token_file, &token, err, sizeof err) != 0) {
            problem(s, "%s", err);
            return;
        }
        s->token = opt_keep_add(&s->keep, token);
    }
    if (s->token && !*s->token) s->token = NULL;
}

/* The runs' sharing settings in Slurm's: each USER=ACCOUNT well formed and a user
 * once; a QOS name without spaces (an empty DDPD_SLURM_PREEMPTIBLE_QOS is none). */
static void check_slurm_sharing(settings *s, const opt_origins *o) {
    const char *from = from_of(o, AT(slurm_user_accounts));
    const opt_list *ua = &s->slurm_user_accounts;
    for (int i = 0; i < ua->n; i++) {
        const char *spec = ua->v[i];
        char err[256];
        if (!slurm_user_account_ok(spec, err, sizeof err)) {
            problem(s, "%s %s", from, err);
            return;
        }
        size_t len = (size_t)(strchr(spec, '=') - spec);
        for (int k = 0; k < i; k++)
            if (strncmp(ua->v[k], spec, len + 1) == 0) {
                problem(s, "%s: user %.*s is given twice (\"%s\" and \"%s\"): one Slurm account per user", from,
                        (int)len, spec, ua->v[k], spec);
                return;
            }
    }
    const char *qos = s->slurm_preemptible_qos, *qos_from = from_of(o, AT(slurm_preemptible_qos));
    if (qos && !*qos && qos_from && strcmp(qos_from, "DDPD_SLURM_PREEMPTIBLE_QOS") == 0) s->slurm_preemptible_qos = NULL;
    else if (qos && (!*qos || strpbrk(qos, " \t\n")))
        problem(s, "%s \"%s\": a QOS name is needed (no spaces)", qos_from, qos);
}

/* GiB as given: a number from 0, else -1. */
static double parse_gb(const char *v) {
    char *end;
    double gb = v && *v ? strtod(v, &end) : -1;
    return v && *v && !*end && gb >= 0 && gb <= 1e9 ? gb : -1;
}

/* Each run's bounds: the memory per device and the log cap well formed. */
static void check_bounds(settings *s, const opt_origins *o) {
    if (s->run_memory_per_slot && parse_gb(s->run_memory_per_slot) < 0)
        problem(s, "%s \"%s\": a number of GiB is needed (e.g. 4 or 0.5; 0: no limit unless a run asks for one)",
                from_of(o, AT(run_memory_per_slot)), s->run_memory_per_slot);
    s->max_log_bytes = 0;
    const char *cap = s->max_log_bytes_per_run;
    if (cap && byte_size_parse(cap, &s->max_log_bytes) != 0)
        problem(s, "%s \"%s\": a size is needed (e.g. 1G, 500M; 0: no cap)", from_of(o, AT(max_log_bytes_per_run)), cap);
    else if (s->max_log_bytes && s->max_log_bytes < 4096)
        problem(s, "%s %s: a cap of at least 4096 bytes is needed (the line that says a log reached it takes some)",
                from_of(o, AT(max_log_bytes_per_run)), cap);
}

void settings_memory_per_device(const settings *s, int n_gpus, int64_t out[2], char *says, size_t sayslen) {
    char a[32], b[32], host[32];
    double gb = parse_gb(s->run_memory_per_slot);
    if (gb >= 0) {
        out[0] = out[1] = (int64_t)(gb * 1073741824.0);
        if (!out[0]) snprintf(says, sayslen, "none unless a run asks for it (--run-memory-per-slot 0)");
        else snprintf(says, sayslen, "%s per device (--run-memory-per-slot)", byte_size_format((uint64_t)out[0], a, sizeof a));
        return;
    }
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    int64_t mem = pages > 0 && page > 0 ? (int64_t)pages * page : 0;
    out[0] = s->slots > 0 ? mem / s->slots : 0;
    out[1] = n_gpus > 0 ? mem / n_gpus : 0;
    byte_size_format((uint64_t)mem, host, sizeof host);
    int n = snprintf(says, sayslen, "%s a CPU slot (this host's %s over %d slot%s)",
                     byte_size_format((uint64_t)out[0], a, sizeof a), host, s->slots, s->slots == 1 ? "" : "s");
    if (n_gpus > 0 && n > 0 && (size_t)n < sayslen)
        snprintf(says + n, sayslen - (size_t)n, ", %s a GPU (over %d GPU%s)", byte_size_format((uint64_t)out[1], b, sizeof b),
                 n_gpus, n_gpus == 1 ? "" : "s");
}

/* The defaults that depend on this host, and what spans settings. */
static void computed_defaults(settings *s) {
    s->state_dir = opt_keep_add(&s->keep, settings_state_dir(s->state_dir));
    s->runs_dir = opt_keep_add(&s->keep, s->runs_dir && *s->runs_dir ? xstrdup(s->runs_dir)
                                                                     : xasprintf("%s/runs", s->state_dir));
    if (s->run_memory_per_slot && !*s->run_memory_per_slot) s->run_memory_per_slot = NULL; /* "": the default */
    s->trainer = opt_keep_add(&s->keep, s->trainer && *s->trainer ? xstrdup(s->trainer) : beside_self("ddp-trainer"));
    s->runner = opt_keep_add(&s->keep, s->runner && *s->runner ? xstrdup(s->runner) : beside_self("ddp-run"));
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (s->slots == OPT_UNSET) s->slots = (int)cores;
    if (s->http_threads == OPT_UNSET) s->http_threads = (int)(cores < 2 ? 2 : cores > 16 ? 16 : cores);
    if (!s->node_name) {
        char host[64] = "local";
        gethostname(host, sizeof host - 1);
        s->node_name = opt_keep_add(&s->keep, xstrdup(host));
    }
    s->slurm_work_dir = opt_keep_add(&s->keep, s->slurm_work_dir && *s->slurm_work_dir
                                                   ? xstrdup(s->slurm_work_dir)
                                                   : xasprintf("/tmp/ddpd-slurm-%d", (int)getuid()));
    s->slurm_ddpd = opt_keep_add(&s->keep, s->slurm_ddpd && *s->slurm_ddpd ? xstrdup(s->slurm_ddpd) : beside_self("ddpd"));
    /* data roots: given (flags, else DDPD_DATA_ROOT), else the defaults */
    s->data_roots_given = s->data_roots.n > 0;
    if (!s->data_roots_given) {
        s->data_roots.v[s->data_roots.n++] = "/usr/share/datasets";
        char *beside = opt_keep_add(&s->keep, xasprintf("%s/datasets", s->state_dir));
        if (access(beside, F_OK) == 0) s->data_roots.v[s->data_roots.n++] = beside;
    }
}

void settings_read(int argc, char **argv, settings *s) {
    memset(s, 0, sizeof *s);
    opt_origins origins;
    opt_read(&SETTINGS_TABLE, 2, argc, argv, s, &origins, &s->keep, s->problem, sizeof s->problem);
    computed_defaults(s);
    read_token(s);
    check_slurm_sharing(s, &origins);
    if (strcmp(s->executor, "local") != 0 && strcmp(s->executor, "slurm") != 0)
        problem(s, "--executor %s: local (this host and its agents) or slurm (every run a Slurm job)", s->executor);
    if (s->slurm_work_dir[0] != '/')
        problem(s, "--slurm-work-dir %s: an absolute path is needed (it is a path on the nodes)", s->slurm_work_dir);
    check_bounds(s, &origins);
}

void settings_free(settings *s) {
    opt_keep_free(&s->keep);
    memset(s, 0, sizeof *s);
}
