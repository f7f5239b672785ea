/* Reading ddpd's settings: see settings.h. */
#include "settings.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "base.h"
#include "beside_self.h"
#include "die.h"
#include "secret.h"
#include "slurm_cli.h"

const char SETTINGS_USAGE[] =
    "usage: ddpd serve [options]\n"
    "       ddpd check [options]     is this host ready to serve? one verdict per part, nothing changed\n"
    "       ddpd user add|list|token|remove ...   the users of a shared server (ddpd user --help)\n"
    "       ddpd --version\n"
    "\n"
    "Serves the ddpd API: submit data-parallel training runs as JSON, follow them, cancel them.\n"
    "Every option can also be set with the environment variable shown (the flag wins).\n"
    "\n"
    "  --listen HOST:PORT     where to serve HTTP (DDPD_LISTEN; default 127.0.0.1:8080;\n"
    "                         port 0 picks a free port, printed on start-up)\n"
    "  --state-dir DIR        database, event socket and run directories (DDPD_STATE_DIR;\n"
    "                         default $XDG_STATE_HOME/ddpd, else ~/.local/state/ddpd)\n"
    "  --data-root DIR        where run configs may read data from; repeatable (DDPD_DATA_ROOT,\n"
    "                         colon-separated; default /usr/share/datasets and, if it exists,\n"
    "                         <state-dir>/datasets)\n"
    "  --slots N              CPU slots for CPU runs, one rank each (DDPD_SLOTS; default: the\n"
    "                         number of cores)\n"
    "  --gpus LIST            GPUs to manage, e.g. 0,1 or none (DDPD_GPUS; default: all detected)\n"
    "  --trainer PATH         the ddp-trainer executable (DDPD_TRAINER; default: the one beside ddpd)\n"
    "  --rebuild-from-runs    serve: a database that is missing, empty (0 bytes) or damaged beside run\n"
    "                         directories is moved aside (renamed, never deleted) and the history is\n"
    "                         rebuilt from each run directory's config.json and events.jsonl\n"
    "  --show-paths           answers show this server's absolute paths (DDPD_SHOW_PATHS=1; default:\n"
    "                         they are named by their roots: <state-dir>/runs/3/..., <data-root>/...)\n"
    "  --allow-commands       accept command runs: configs with \"command\", the user's own program run\n"
    "                         once per rank AS THE SERVER'S USER (DDPD_ALLOW_COMMANDS=1; default: refuse)\n"
    "  --work-root DIR        where a command run's working_dir may lie; repeatable (DDPD_WORK_ROOT,\n"
    "                         colon-separated; default: none, so command runs work in their run directory)\n"
    "  --port-range LO-HI     MASTER_PORTs leased to command runs (DDPD_PORT_RANGE; default 29600-29999)\n"
    "  --runner PATH          the ddp-run executable that starts command runs (DDPD_RUNNER; default:\n"
    "                         the one beside ddpd)\n"
    "  --token-file PATH      require \"Authorization: Bearer TOKEN\" on every request that changes\n"
    "                         something (POST, DELETE), TOKEN being the file's one line; reading stays\n"
    "                         open. The file must be readable by its owner only (chmod 600)\n"
    "                         (DDPD_TOKEN_FILE; or the token itself in DDPD_TOKEN; default: none)\n"
    "  --token TOKEN          the same with the token on the command line, where every local user\n"
    "                         can read it (ps): prefer --token-file or DDPD_TOKEN\n"
    "  --insecure             without a token, listen on a non-loopback address all the same\n"
    "                         (DDPD_INSECURE=1; default: refuse)\n"
    "  --advertise ADDR       the address `ddpd agent` nodes reach this host's ranks at: with it, this\n"
    "                         host takes part in runs across nodes (DDPD_ADVERTISE; default: none,\n"
    "                         so runs across nodes use agent nodes only)\n"
    "  --node-name NAME       this host's name among the nodes (DDPD_NODE_NAME; default: its hostname)\n"
    "  --node-timeout SECONDS an agent node not heard from this long is lost, and its runs fail naming\n"
    "                         it (DDPD_NODE_TIMEOUT; default 10)\n"
    "  --executor local|slurm where runs execute: local, this host and its agents; or slurm, every run\n"
    "                         one Slurm job, submitted at once (DDPD_EXECUTOR; default local). Slurm's\n"
    "                         commands (sbatch, squeue, scancel, scontrol) are taken from PATH, with\n"
    "                         the environment's SLURM_CONF; the nodes reach this server at --advertise\n"
    "  --slurm-partition P    the partition jobs go to (DDPD_SLURM_PARTITION; default: Slurm's)\n"
    "  --slurm-account A      the account jobs are charged to (DDPD_SLURM_ACCOUNT; default: Slurm's)\n"
    "  --slurm-user-account USER=ACCOUNT  USER's runs go under Slurm account ACCOUNT (others' under\n"
    "                         --slurm-account); repeatable (DDPD_SLURM_USER_ACCOUNTS, space-separated)\n"
    "  --slurm-allow-priority the site lets ddpd's Slurm user raise a job's priority (an operator's\n"
    "                         right). A run's priority P is its job's sbatch --nice=-100P: a negative P\n"
    "                         always lowers it, a positive one raises it only with this flag\n"
    "                         (DDPD_SLURM_ALLOW_PRIORITY=1; default: priorities only lower jobs)\n"
    "  --slurm-preemptible-qos NAME  preemptible runs are submitted with --qos NAME, a QOS the site\n"
    "                         lets other jobs preempt (DDPD_SLURM_PREEMPTIBLE_QOS; default: none). Slurm's\n"
    "                         queue is the queue: ddpd's own quotas, fair share and preemption do not apply\n"
    "  --slurm-option OPT     one more sbatch option for every job, e.g. --slurm-option=--time=2:00:00;\n"
    "                         repeatable (DDPD_SLURM_OPTIONS, space-separated); the site's win over ddpd's\n"
    "  --slurm-work-dir DIR   on the nodes: where each node's part keeps its run directory, DIR/ID/part-K\n"
    "                         (checkpoints, logs, journal); a filesystem the nodes share keeps a requeued\n"
    "                         job's checkpoints (DDPD_SLURM_WORK_DIR; default /tmp/ddpd-slurm-UID)\n"
    "  --slurm-ddpd PATH      the ddpd binary on the nodes (DDPD_SLURM_DDPD; default: this one's path)\n"
    "  --slurm-gpus           the Slurm nodes have GPUs: a run whose backend is \"auto\" asks for one\n"
    "                         per rank (DDPD_SLURM_GPUS=1; default: \"auto\" runs on CPUs)\n"
    "  --web-dir DIR          the dashboard's files, served at / (DDPD_WEB_DIR; default: installed\n"
    "                         beside ddpd, else the source tree it was built from)\n"
    "  --http-threads N       HTTP worker threads (DDPD_HTTP_THREADS; default: cores, at least 2)\n"
    "  --cancel-grace SECONDS SIGTERM to a canceled run, SIGKILL this much later (DDPD_CANCEL_GRACE;\n"
    "                         default 10)\n"
    "  --backfill-window SECONDS  a run that fits may start ahead of a larger one of its pool that\n"
    "                         waits, while that one has waited less than this; 0: strict first come\n"
    "                         first served (DDPD_BACKFILL_WINDOW; default 600)\n"
    "  --fairshare-half-life SECONDS  fair share: a user's past device-seconds weigh half as much\n"
    "                         this much later (DDPD_FAIRSHARE_HALF_LIFE; default 3600)\n"
    "  --preempt-grace SECONDS  a preempted run has this long to write its checkpoint and stop\n"
    "                         before it is killed (DDPD_PREEMPT_GRACE; default 60)\n"
    "  --max-stop-grace SECONDS  the longest grace a command run may ask for (distributed.stop_grace_s)\n"
    "                         when it is canceled or preempted (DDPD_MAX_STOP_GRACE; default 300)\n"
    "  --max-connections N    HTTP connections open at once, every client together\n"
    "                         (DDPD_MAX_CONNECTIONS; default: from the file descriptor limit, at most 4096)\n"
    "  --reserved-connections N  more connections that only this host (loopback) may use once the\n"
    "                         others are taken, for /healthz and an operator (DDPD_RESERVED_CONNECTIONS;\n"
    "                         default 16)\n"
    "  --max-connections-per-address N  HTTP connections of one client address\n"
    "                         (DDPD_MAX_CONNECTIONS_PER_ADDRESS; default 64; a proxy in front is one address)\n"
    "  --header-timeout SECONDS  a connection that has not sent a request's headers this long after\n"
    "                         it opened (or after its previous answer) is closed (DDPD_HEADER_TIMEOUT;\n"
    "                         default 10)\n"
    "  --idle-timeout SECONDS a connection that sends and reads nothing this long is closed\n"
    "                         (DDPD_IDLE_TIMEOUT; default 30)\n"
    "  --max-streams N        event streams (GET /events, /runs/{id}/events) open at once\n"
    "                         (DDPD_MAX_STREAMS; default: from the file descriptor limit, at most 1024)\n"
    "  --max-streams-per-address N  event streams of one client address\n"
    "                         (DDPD_MAX_STREAMS_PER_ADDRESS; default 16)\n"
    "  --log-level LEVEL      debug, info, warn or error (DDPD_LOG_LEVEL; default info: a line per request)\n"
    "  --log-file PATH        log there instead of stderr, rotated daily to PATH.YYYY-MM-DD and by size\n"
    "                         to PATH.YYYY-MM-DD.N (DDPD_LOG_FILE)\n"
    "  --log-max-bytes SIZE   rotate before the file passes SIZE, e.g. 100M; 0: no limit\n"
    "                         (DDPD_LOG_MAX_BYTES; default 100M)\n"
    "  --log-keep N           rotated files to keep; 0: all (DDPD_LOG_KEEP; default 14)\n";

static void parse_flags(int argc, char **argv, settings *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(SETTINGS_USAGE, stdout);
            exit(0);
        }
        if (strcmp(a, "--insecure") == 0) { /* the flags without a value */
            o->insecure = true;
            continue;
        }
        if (strcmp(a, "--rebuild-from-runs") == 0) {
            o->rebuild_from_runs = true;
            continue;
        }
        if (strcmp(a, "--allow-commands") == 0) {
            o->allow_commands = true;
            continue;
        }
        if (strcmp(a, "--show-paths") == 0) {
            o->show_paths = true;
            continue;
        }
        if (strcmp(a, "--slurm-gpus") == 0) {
            o->slurm_gpus = true;
            continue;
        }
        if (strcmp(a, "--slurm-allow-priority") == 0) {
            o->slurm_allow_priority = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) die("unexpected argument \"%s\" (see ddpd --help)", a);
        char name[64];
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n >= sizeof name) die("unknown option %s (see ddpd --help)", a);
        memcpy(name, a, n);
        name[n] = '\0';
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else die("%s needs a value (see ddpd --help)", name);
        if (strcmp(name, "--listen") == 0) o->listen = v;
        else if (strcmp(name, "--state-dir") == 0) o->state_dir = v;
        else if (strcmp(name, "--trainer") == 0) o->trainer = v;
        else if (strcmp(name, "--token") == 0) o->token = v, o->token_on_command_line = true;
        else if (strcmp(name, "--token-file") == 0) o->token_file = v;
        else if (strcmp(name, "--gpus") == 0) o->gpus = v;
        else if (strcmp(name, "--slots") == 0) o->slots = v;
        else if (strcmp(name, "--http-threads") == 0) o->http_threads = v;
        else if (strcmp(name, "--cancel-grace") == 0) o->cancel_grace = v;
        else if (strcmp(name, "--web-dir") == 0) o->web_dir = v;
        else if (strcmp(name, "--log-level") == 0) o->log_level = v;
        else if (strcmp(name, "--log-file") == 0) o->log_file = v;
        else if (strcmp(name, "--log-max-bytes") == 0) o->log_max_bytes = v;
        else if (strcmp(name, "--log-keep") == 0) o->log_keep = v;
        else if (strcmp(name, "--port-range") == 0) o->port_range = v;
        else if (strcmp(name, "--max-connections") == 0) o->max_connections = v;
        else if (strcmp(name, "--max-connections-per-address") == 0) o->max_connections_per_address = v;
        else if (strcmp(name, "--reserved-connections") == 0) o->reserved_connections = v;
        else if (strcmp(name, "--header-timeout") == 0) o->header_timeout = v;
        else if (strcmp(name, "--idle-timeout") == 0) o->idle_timeout = v;
        else if (strcmp(name, "--max-streams") == 0) o->max_streams = v;
        else if (strcmp(name, "--max-streams-per-address") == 0) o->max_streams_per_address = v;
        else if (strcmp(name, "--runner") == 0) o->runner = v;
        else if (strcmp(name, "--advertise") == 0) o->advertise = v;
        else if (strcmp(name, "--node-name") == 0) o->node_name = v;
        else if (strcmp(name, "--node-timeout") == 0) o->node_timeout = v;
        else if (strcmp(name, "--backfill-window") == 0) o->backfill_window = v;
        else if (strcmp(name, "--fairshare-half-life") == 0) o->fairshare_half_life = v;
        else if (strcmp(name, "--preempt-grace") == 0) o->preempt_grace = v;
        else if (strcmp(name, "--max-stop-grace") == 0) o->max_stop_grace = v;
        else if (strcmp(name, "--executor") == 0) o->executor = v;
        else if (strcmp(name, "--slurm-partition") == 0) o->slurm_partition = v;
        else if (strcmp(name, "--slurm-account") == 0) o->slurm_account = v;
        else if (strcmp(name, "--slurm-work-dir") == 0) o->slurm_work_dir = v;
        else if (strcmp(name, "--slurm-ddpd") == 0) o->slurm_ddpd = v;
        else if (strcmp(name, "--slurm-preemptible-qos") == 0) {
            if (!*v || strpbrk(v, " \t\n")) die("--slurm-preemptible-qos \"%s\": a QOS name is needed (no spaces)", v);
            o->slurm_preemptible_qos = v;
        } else if (strcmp(name, "--slurm-user-account") == 0) {
            if (o->n_slurm_user_accounts == SETTINGS_MAX_ROOTS)
                die("at most %d --slurm-user-account", SETTINGS_MAX_ROOTS);
            o->slurm_user_accounts[o->n_slurm_user_accounts++] = v;
        } else if (strcmp(name, "--slurm-option") == 0) {
            if (o->n_slurm_options == SETTINGS_MAX_ROOTS) die("at most %d --slurm-option", SETTINGS_MAX_ROOTS);
            o->slurm_options[o->n_slurm_options++] = v;
        }
        else if (strcmp(name, "--data-root") == 0) {
            if (o->n_data_roots == SETTINGS_MAX_ROOTS) die("at most %d --data-root", SETTINGS_MAX_ROOTS);
            o->data_roots[o->n_data_roots++] = v;
        } else if (strcmp(name, "--work-root") == 0) {
            if (o->n_work_roots == SETTINGS_MAX_ROOTS) die("at most %d --work-root", SETTINGS_MAX_ROOTS);
            o->work_roots[o->n_work_roots++] = v;
        } else die("unknown option %s (see ddpd --help)", name);
    }
}

static const char *env_or(const char *flag, const char *env) { return flag ? flag : getenv(env); }

static char *default_state_dir(void) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) return xasprintf("%s/ddpd", xdg);
    if (home && *home) return xasprintf("%s/.local/state/ddpd", home);
    return xstrdup("ddpd-state");
}

char *settings_state_dir(const char *flag) {
    const char *sd = env_or(flag, "DDPD_STATE_DIR");
    return sd && *sd ? xstrdup(sd) : default_state_dir();
}


/* A colon-separated list into `dirs` (its storage kept in *storage). */
static void split_roots(const char *list, char **storage, const char **dirs, int *n) {
    *storage = xstrdup(list);
    char *save = NULL;
    for (char *d = strtok_r(*storage, ":", &save); d && *n < SETTINGS_MAX_ROOTS; d = strtok_r(NULL, ":", &save))
        dirs[(*n)++] = d;
}

static bool truthy(const char *e) {
    return e && (strcmp(e, "1") == 0 || strcasecmp(e, "true") == 0 || strcasecmp(e, "yes") == 0);
}

/* The token: --token or --token-file (not both), else DDPD_TOKEN_FILE or DDPD_TOKEN
 * (not both); a file is read here, so that serve and check judge the same one. */
static void read_token(settings *s) {
    if (s->token && s->token_file) {
        snprintf(s->token_error, sizeof s->token_error, "give --token or --token-file, not both");
        s->token = NULL;
        return;
    }
    if (!s->token && !s->token_file) {
        const char *file = getenv("DDPD_TOKEN_FILE"), *token = getenv("DDPD_TOKEN");
        if (file && *file && token && *token) {
            snprintf(s->token_error, sizeof s->token_error,
                     "DDPD_TOKEN and DDPD_TOKEN_FILE are both set: unset one (the file is the safer place)");
            return;
        }
        s->token_file = file && *file ? file : NULL;
        s->token = token;
    }
    if (s->token_file) {
        char *token;
        if (secret_read_file(s->token_file, &token, s->token_error, sizeof s->token_error) != 0) return;
        s->token = s->storage_[6] = token;
    }
    if (s->token && !*s->token) s->token = NULL;
}

/* The runs' sharing settings in Slurm's: flags, else DDPD_SLURM_USER_ACCOUNTS (space-
 * separated), DDPD_SLURM_ALLOW_PRIORITY, DDPD_SLURM_PREEMPTIBLE_QOS; a bad one dies
 * naming where it came from. */
static void read_slurm_sharing(settings *s) {
    const char *from = "--slurm-user-account";
    const char *ua = getenv("DDPD_SLURM_USER_ACCOUNTS");
    if (!s->n_slurm_user_accounts && ua && *ua) {
        from = "DDPD_SLURM_USER_ACCOUNTS";
        s->storage_[8] = xstrdup(ua);
        char *save = NULL;
        for (char *w = strtok_r(s->storage_[8], " \t", &save); w; w = strtok_r(NULL, " \t", &save)) {
            if (s->n_slurm_user_accounts == SETTINGS_MAX_ROOTS) die("at most %d users in %s", SETTINGS_MAX_ROOTS, from);
            s->slurm_user_accounts[s->n_slurm_user_accounts++] = w;
        }
    }
    for (int i = 0; i < s->n_slurm_user_accounts; i++) {
        const char *spec = s->slurm_user_accounts[i];
        char err[512];
        if (!slurm_user_account_ok(spec, err, sizeof err)) die("%s %s", from, err);
        size_t len = (size_t)(strchr(spec, '=') - spec);
        for (int k = 0; k < i; k++)
            if (strncmp(s->slurm_user_accounts[k], spec, len + 1) == 0)
                die("%s: user %.*s is given twice (\"%s\" and \"%s\"): one Slurm account per user", from, (int)len,
                    spec, s->slurm_user_accounts[k], spec);
    }
    s->slurm_allow_priority = s->slurm_allow_priority || truthy(getenv("DDPD_SLURM_ALLOW_PRIORITY"));
    if (!s->slurm_preemptible_qos) {
        const char *qos = getenv("DDPD_SLURM_PREEMPTIBLE_QOS");
        if (qos && *qos && strpbrk(qos, " \t\n"))
            die("DDPD_SLURM_PREEMPTIBLE_QOS \"%s\": a QOS name is needed (no spaces)", qos);
        s->slurm_preemptible_qos = qos && *qos ? qos : NULL;
    }
}

void settings_read(int argc, char **argv, settings *s) {
    memset(s, 0, sizeof *s);
    parse_flags(argc, argv, s);
    s->listen = env_or(s->listen, "DDPD_LISTEN");
    if (!s->listen || !*s->listen) s->listen = "127.0.0.1:8080";
    s->state_dir = s->storage_[2] = settings_state_dir(s->state_dir);
    const char *tr = env_or(s->trainer, "DDPD_TRAINER");
    s->trainer = s->storage_[3] = tr && *tr ? xstrdup(tr) : beside_self("ddp-trainer");
    const char *ru = env_or(s->runner, "DDPD_RUNNER");
    s->runner = s->storage_[4] = ru && *ru ? xstrdup(ru) : beside_self("ddp-run");
    s->allow_commands = s->allow_commands || truthy(getenv("DDPD_ALLOW_COMMANDS"));
    s->show_paths = s->show_paths || truthy(getenv("DDPD_SHOW_PATHS"));
    s->port_range = env_or(s->port_range, "DDPD_PORT_RANGE");
    if (!s->port_range || !*s->port_range) s->port_range = "29600-29999";
    const char *wr = getenv("DDPD_WORK_ROOT");
    if (!s->n_work_roots && wr && *wr) split_roots(wr, &s->storage_[5], s->work_roots, &s->n_work_roots);
    read_token(s);
    s->insecure = s->insecure || truthy(getenv("DDPD_INSECURE"));
    s->gpus = env_or(s->gpus, "DDPD_GPUS");
    s->slots = env_or(s->slots, "DDPD_SLOTS");
    s->advertise = env_or(s->advertise, "DDPD_ADVERTISE");
    s->node_name = env_or(s->node_name, "DDPD_NODE_NAME");
    s->node_timeout = env_or(s->node_timeout, "DDPD_NODE_TIMEOUT");
    s->executor = env_or(s->executor, "DDPD_EXECUTOR");
    if (!s->executor || !*s->executor) s->executor = "local";
    s->slurm_partition = env_or(s->slurm_partition, "DDPD_SLURM_PARTITION");
    s->slurm_account = env_or(s->slurm_account, "DDPD_SLURM_ACCOUNT");
    s->slurm_work_dir = env_or(s->slurm_work_dir, "DDPD_SLURM_WORK_DIR");
    s->slurm_ddpd = env_or(s->slurm_ddpd, "DDPD_SLURM_DDPD");
    s->slurm_gpus = s->slurm_gpus || truthy(getenv("DDPD_SLURM_GPUS"));
    const char *so = getenv("DDPD_SLURM_OPTIONS");
    if (!s->n_slurm_options && so && *so) {
        s->storage_[7] = xstrdup(so);
        char *save = NULL;
        for (char *w = strtok_r(s->storage_[7], " \t", &save); w && s->n_slurm_options < SETTINGS_MAX_ROOTS;
             w = strtok_r(NULL, " \t", &save))
            s->slurm_options[s->n_slurm_options++] = w;
    }
    read_slurm_sharing(s);
    s->http_threads = env_or(s->http_threads, "DDPD_HTTP_THREADS");
    s->cancel_grace = env_or(s->cancel_grace, "DDPD_CANCEL_GRACE");
    s->backfill_window = env_or(s->backfill_window, "DDPD_BACKFILL_WINDOW");
    s->fairshare_half_life = env_or(s->fairshare_half_life, "DDPD_FAIRSHARE_HALF_LIFE");
    s->preempt_grace = env_or(s->preempt_grace, "DDPD_PREEMPT_GRACE");
    s->max_stop_grace = env_or(s->max_stop_grace, "DDPD_MAX_STOP_GRACE");
    s->web_dir = env_or(s->web_dir, "DDPD_WEB_DIR");
    s->log_level = env_or(s->log_level, "DDPD_LOG_LEVEL");
    s->log_file = env_or(s->log_file, "DDPD_LOG_FILE");
    s->log_max_bytes = env_or(s->log_max_bytes, "DDPD_LOG_MAX_BYTES");
    s->log_keep = env_or(s->log_keep, "DDPD_LOG_KEEP");
    s->max_connections = env_or(s->max_connections, "DDPD_MAX_CONNECTIONS");
    s->max_connections_per_address = env_or(s->max_connections_per_address, "DDPD_MAX_CONNECTIONS_PER_ADDRESS");
    s->reserved_connections = env_or(s->reserved_connections, "DDPD_RESERVED_CONNECTIONS");
    s->header_timeout = env_or(s->header_timeout, "DDPD_HEADER_TIMEOUT");
    s->idle_timeout = env_or(s->idle_timeout, "DDPD_IDLE_TIMEOUT");
    s->max_streams = env_or(s->max_streams, "DDPD_MAX_STREAMS");
    s->max_streams_per_address = env_or(s->max_streams_per_address, "DDPD_MAX_STREAMS_PER_ADDRESS");
    /* data roots: flags, else the environment (colon-separated), else the defaults */
    s->data_roots_given = true;
    if (s->n_data_roots) return;
    const char *env = getenv("DDPD_DATA_ROOT");
    if (env && *env) {
        split_roots(env, &s->storage_[0], s->data_roots, &s->n_data_roots);
        return;
    }
    s->data_roots_given = false;
    s->data_roots[s->n_data_roots++] = "/usr/share/datasets";
    s->storage_[1] = xasprintf("%s/datasets", s->state_dir);
    if (access(s->storage_[1], F_OK) == 0) s->data_roots[s->n_data_roots++] = s->storage_[1];
}

void settings_free(settings *s) {
    for (size_t i = 0; i < sizeof s->storage_ / sizeof *s->storage_; i++) free(s->storage_[i]);
    memset(s, 0, sizeof *s);
}
