/* ddp-run: the launcher of a command run (a run config with `command`), which ddpd
 * starts instead of ddp-trainer. It runs the user's command once per rank with
 * torchrun's environment, supervises the ranks as a gang (gang.h), starts the gang
 * again after a failure while distributed.max_restarts allows (restarts.h), copies
 * their output into the run's logs, and reports as rank -1 through the run's event
 * sink: a hello first, each attempt's start and end, an `end` last. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "attempts.h"
#include "command_config.h"
#include "ddpd_build_config.h"
#include "env_seconds.h"
#include "events.h"
#include "gang.h"
#include "log.h"
#include "dirs.h"
#include "paths.h"
#include "ports.h"
#include "program_path.h"
#include "rank_env.h"
#include "restarts.h"
#include "utf8_text.h"
#include "warm_ranks.h"
#include "run_dir.h"
#include "stop_reason.h"

#define EXIT_SUCCEEDED 0
#define EXIT_FAILED 1
#define EXIT_BAD_INPUT 2
#define DEFAULT_GRACE_S 10.0
#define MAX_RESTART_COUNT 1000000

typedef struct {
    const char *config_path, *run_dir, *events, *master_port;
    const char *master_addr;   /* rank 0's node, for a run across nodes */
    const char *nodes, *node_rank;
    const char *restart_count; /* the first attempt's number: a run's count that goes on */
    const char *restarts_from; /* the attempt its restarts count from (default: the first) */
    const char *port_range;
    const char *stop_grace, *preempt_grace; /* seconds; NULL: DDPD_CANCEL_GRACE_S, else 10 */
    const char *exit_timeout;               /* seconds; NULL: the config's distributed.exit_timeout_s */
    const char *ranks;                      /* an elastic run on fewer ranks than its world_size */
} options;

static void usage(FILE *f) {
    fprintf(f,
            "usage: ddp-run --config RUN.json --run-dir DIR --master-port PORT [--events SOCKET|-]\n"
            "               [--nodes N --node-rank K --master-addr ADDR] [--restart-count K [--restarts-from F]]\n"
            "               [--port-range LO-HI] [--stop-grace SECONDS] [--preempt-grace SECONDS]\n"
            "               [--exit-timeout SECONDS] [--ranks N]\n"
            "\n"
            "Runs a command run's `command` once per rank (distributed.world_size), with\n"
            "torchrun's environment, as one gang: a rank that fails stops the others, and the\n"
            "gang starts again while distributed.max_restarts allows (torchrun's --max-restarts).\n"
            "\n"
            "  --config FILE       the run config (command, working_dir, env, distributed)\n"
            "  --run-dir DIR       the run's directory: events.jsonl, trainer.log, ranks/rank-N.log\n"
            "  --master-port PORT  MASTER_PORT of every rank (free, leased by ddpd)\n"
            "  --events SOCKET     ddpd's event socket, also handed to the ranks' reporters\n"
            "                      (absent or -: the journal only)\n"
            "  --nodes N           a run across N nodes: this launcher starts node K's ranks,\n"
            "  --node-rank K       K*L .. K*L+L-1 of world_size W (L = W/N; GROUP_RANK K)\n"
            "  --master-addr ADDR  MASTER_ADDR of every rank: rank 0's node (default 127.0.0.1)\n"
            "  --restart-count K   the first attempt's TORCHELASTIC_RESTART_COUNT (default 0): a run\n"
            "                      that goes on after K attempts; up to max_restarts more may follow\n"
            "  --restarts-from F   the restarts max_restarts allows count from attempt F (default K):\n"
            "                      ddpd starts a run again within what one launch of it may use\n"
            "  --port-range LO-HI  where a restart's MASTER_PORT comes from when the run's own was\n"
            "                      taken meanwhile (ddpd serve's; default: a port the kernel picks)\n"
            "  --stop-grace S      seconds from SIGTERM to SIGKILL when the ranks are stopped: the\n"
            "                      launcher canceled (SIGTERM, SIGINT, SIGHUP) or a rank failed\n"
            "                      (default: DDPD_CANCEL_GRACE_S, else 10; ddpd passes its --cancel-grace)\n"
            "  --preempt-grace S   the same when the launcher gets SIGUSR1 (ddpd preempts the run;\n"
            "                      default: the stop grace); a rank whose process catches SIGUSR1\n"
            "                      gets it first, as a notice to checkpoint, and SIGTERM at a second\n"
            "                      SIGUSR1 (ddpd has the checkpoint), else SIGKILL at the grace's end\n"
            "  --exit-timeout S    once a rank exited 0, the ranks still running that write nothing\n"
            "                      for S seconds are stopped and the attempt succeeds (0: never;\n"
            "                      default: distributed.exit_timeout_s, else 30)\n"
            "  --ranks N           an elastic run (distributed.min_world_size below world_size) on\n"
            "                      N ranks, from min_world_size to world_size: WORLD_SIZE N, as\n"
            "                      torchrun's elastic mode starts a group of the size it has now\n"
            "  --version           print the version\n"
            "\n"
            "environment: DDPD_RUN_ID, DDPD_RUN_SECRET, CUDA_VISIBLE_DEVICES (the run's GPUs),\n"
            "DDPD_CANCEL_GRACE_S (seconds between SIGTERM and SIGKILL without --stop-grace, default 10),\n"
            "DDPD_RESTART_BACKOFF_S (seconds between a failed attempt and the next, default 1)\n"
            "\n"
            "exit status: 0 succeeded, 1 failed, 2 bad config or usage, 128+N canceled by signal N\n");
}

static int parse_args(int argc, char **argv, options *o) {
    static const struct option opts[] = {
        {"config", required_argument, 0, 'c'}, {"run-dir", required_argument, 0, 'd'},
        {"events", required_argument, 0, 'e'}, {"master-port", required_argument, 0, 'p'},
        {"nodes", required_argument, 0, 'n'},  {"node-rank", required_argument, 0, 'k'},
        {"master-addr", required_argument, 0, 'a'}, {"restart-count", required_argument, 0, 'r'},
        {"port-range", required_argument, 0, 'P'}, {"restarts-from", required_argument, 0, 'F'},
        {"stop-grace", required_argument, 0, 'g'}, {"preempt-grace", required_argument, 0, 'G'},
        {"exit-timeout", required_argument, 0, 'x'}, {"ranks", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},         {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "c:d:e:p:n:k:a:r:P:F:g:G:x:R:hV", opts, NULL)) != -1) {
        switch (c) {
        case 'c': o->config_path = optarg; break;
        case 'd': o->run_dir = optarg; break;
        case 'e': o->events = optarg; break;
        case 'p': o->master_port = optarg; break;
        case 'n': o->nodes = optarg; break;
        case 'k': o->node_rank = optarg; break;
        case 'a': o->master_addr = optarg; break;
        case 'r': o->restart_count = optarg; break;
        case 'P': o->port_range = optarg; break;
        case 'F': o->restarts_from = optarg; break;
        case 'g': o->stop_grace = optarg; break;
        case 'G': o->preempt_grace = optarg; break;
        case 'x': o->exit_timeout = optarg; break;
        case 'R': o->ranks = optarg; break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("ddp-run %s\n", DDPD_VERSION); exit(0);
        default: usage(stderr); return -1;
        }
    }
    const char *missing = !o->config_path ? "--config" : !o->run_dir ? "--run-dir" : !o->master_port ? "--master-port" : NULL;
    if (optind < argc) fprintf(stderr, "ddp-run: unexpected argument '%s'\n", argv[optind]);
    else if (missing) fprintf(stderr, "ddp-run: %s is required\n", missing);
    if (optind < argc || missing) {
        usage(stderr);
        return -1;
    }
    if (o->events && strcmp(o->events, "-") == 0) o->events = NULL;
    /* The ranks' reporters connect to it too, so it must be the server's socket (the
     * sink would take another path for a file to write). */
    struct stat st;
    errno = 0;
    if (o->events && (stat(o->events, &st) != 0 || !S_ISSOCK(st.st_mode))) {
        fprintf(stderr, "ddp-run: --events %s: %s\n", o->events,
                errno == ENOENT ? "no such socket" : "not a Unix socket (give ddpd's event socket, or -)");
        return -1;
    }
    return 0;
}

static int parse_port(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    return errno || end == s || *end || v < 1 || v > 65535 ? -1 : (int)v;
}

/* --nodes N --node-rank K: this launcher's part of a run across nodes. N must divide
 * the world size (every node runs as many ranks), and K name one of the N. */
static int node_part(const options *o, int world_size, int *nodes, int *node_rank) {
    if (!o->nodes && !o->node_rank) return 0;
    char *end;
    long n = o->nodes ? strtol(o->nodes, &end, 10) : -1;
    if (!o->nodes || *end || n < 1 || n > world_size) {
        fprintf(stderr, "ddp-run: --nodes %s: a number of nodes from 1 to the world size (%d) is needed with --node-rank\n",
                o->nodes ? o->nodes : "(missing)", world_size);
        return -1;
    }
    if (world_size % n != 0) {
        fprintf(stderr, "ddp-run: --nodes %ld does not divide distributed.world_size %d: every node runs as many ranks\n",
                n, world_size);
        return -1;
    }
    long k = o->node_rank ? strtol(o->node_rank, &end, 10) : -1;
    if (!o->node_rank || *end || k < 0 || k >= n) {
        fprintf(stderr, "ddp-run: --node-rank %s: one of 0 to %ld is needed with --nodes %ld\n",
                o->node_rank ? o->node_rank : "(missing)", n - 1, n);
        return -1;
    }
    *nodes = (int)n;
    *node_rank = (int)k;
    return 0;
}

/* An attempt's number from an option: -1 (said on stderr) when it is not one. */
static int attempt_number(const char *name, const char *text) {
    char *end;
    errno = 0;
    long k = strtol(text, &end, 10);
    if (errno || end == text || *end || k < 0 || k > MAX_RESTART_COUNT) {
        fprintf(stderr, "ddp-run: --%s %s is not a number of attempts (0 to %d)\n", name, text, MAX_RESTART_COUNT);
        return -1;
    }
    return (int)k;
}

/* --restart-count, --restarts-from and --port-range: -1 (said on stderr) when one
 * cannot be right. */
static int attempt_options(const options *o, int *first, int *from, int *port_lo, int *port_hi) {
    *first = *from = *port_lo = *port_hi = 0;
    if (o->restart_count && (*first = attempt_number("restart-count", o->restart_count)) < 0) return -1;
    *from = *first;
    if (o->restarts_from && (*from = attempt_number("restarts-from", o->restarts_from)) < 0) return -1;
    if (*from > *first) {
        fprintf(stderr, "ddp-run: --restarts-from %d is after --restart-count %d: the restarts count from an attempt "
                "made already, or this one\n", *from, *first);
        return -1;
    }
    char err[256];
    if (o->port_range && port_range_parse(o->port_range, port_lo, port_hi, err, sizeof err) != 0) {
        fprintf(stderr, "ddp-run: %s\n", err);
        return -1;
    }
    return 0;
}

/* Seconds from an option (a grace, a timeout), 0 to a day; -1 (said on stderr) when it is not one. */
static double seconds_option(const char *name, const char *text) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !(v >= 0 && v <= 86400)) {
        fprintf(stderr, "ddp-run: --%s %s is not a number of seconds (0 to 86400)\n", name, text);
        return -1;
    }
    return v;
}

static void send_hello(event_sink *events, int world_size) {
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    event_emit(events, "hello",
               json_pack("{s:i, s:s, s:n, s:i}", "pid", (int)getpid(), "host", host, "device", "world_size", world_size));
}

/* The command for the log: its program and how many arguments it has, never the
 * arguments themselves. The run's log is read by others than the run's owner (admins,
 * GET /runs/{id}/logs), while the API shows a command's arguments to its owner alone
 * (they may hold a token passed as --token=...). */
static void command_words(const command_config *c, char *out, size_t n) {
    int args = c->argc - 1;
    snprintf(out, n, "`%s` with %d argument%s (not shown: the run's config has them)", c->argv[0], args,
             args == 1 ? "" : "s");
    utf8_repair(out); /* a long program's path is clipped */
}

/* --ranks N: the run's ranks now, within its elastic range (world_size when not given). */
static int ranks_option(const options *o, command_config *cfg) {
    if (!o->ranks) return 0;
    char *end;
    errno = 0;
    long n = strtol(o->ranks, &end, 10);
    if (errno || end == o->ranks || *end || n < cfg->min_world_size || n > cfg->world_size) {
        if (cfg->min_world_size == cfg->world_size)
            fprintf(stderr, "ddp-run: --ranks %s: the run is not elastic (distributed.min_world_size is not below its "
                    "world_size %d): give %d, or set min_world_size\n", o->ranks, cfg->world_size, cfg->world_size);
        else
            fprintf(stderr, "ddp-run: --ranks %s is not within the run's elastic range: give %d to %d "
                    "(distributed.min_world_size to world_size)\n", o->ranks, cfg->min_world_size, cfg->world_size);
        return -1;
    }
    cfg->world_size = (int)n;
    return 0;
}

static int run(const options *o, const command_config *cfg) {
    int port = parse_port(o->master_port);
    if (port < 0) {
        fprintf(stderr, "ddp-run: --master-port %s is not a port (1 to 65535)\n", o->master_port);
        return EXIT_BAD_INPUT;
    }
    int nodes = 1, node_rank = 0, first_attempt, restarts_from, port_lo, port_hi;
    if (node_part(o, cfg->world_size, &nodes, &node_rank) != 0) return EXIT_BAD_INPUT;
    if (attempt_options(o, &first_attempt, &restarts_from, &port_lo, &port_hi) != 0) return EXIT_BAD_INPUT;
    attempt_plan plan = {.first = first_attempt, .from = restarts_from, .restarts_allowed = nodes == 1,
                         .earlier_step = -1};
    char bad[512];
    if (attempts_policy(&plan, o->config_path, cfg->max_restarts, "ddp-run", bad, sizeof bad) != 0) {
        fprintf(stderr, "ddp-run: %s\n", bad);
        return EXIT_BAD_INPUT;
    }
    int max_restarts = plan.policy.max_restarts;
    double grace_s = o->stop_grace ? seconds_option("stop-grace", o->stop_grace)
                                   : env_seconds_between("DDPD_CANCEL_GRACE_S", DEFAULT_GRACE_S, 0, 3600, "ddp-run");
    double preempt_grace_s = o->preempt_grace ? seconds_option("preempt-grace", o->preempt_grace) : grace_s;
    double exit_timeout_s = o->exit_timeout ? seconds_option("exit-timeout", o->exit_timeout) : cfg->exit_timeout_s;
    if (grace_s < 0 || preempt_grace_s < 0 || exit_timeout_s < 0) return EXIT_BAD_INPUT;
    int local_ranks = cfg->world_size / nodes;
    const char *devices = getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "";
    int gpus = rank_env_device_count(devices);
    if (cfg->isolate_devices && gpus > 0 && gpus < local_ranks) {
        fprintf(stderr,
                "ddp-run: /distributed/isolate_devices: each of the %d ranks needs a GPU of its own, but "
                "CUDA_VISIBLE_DEVICES=%s has %d\n",
                local_ranks, devices, gpus);
        return EXIT_BAD_INPUT;
    }
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/" RUN_DIR_RANKS, o->run_dir);
    if (mkdir_p(path, 0755) != 0) {
        fprintf(stderr, "ddp-run: cannot create %s: %s\n", path, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    /* Absolute paths from here on: the ranks start in another directory. */
    char run_dir[PATH_MAX], events_abs[PATH_MAX], run_dir_copy[PATH_MAX];
    if (!realpath(o->run_dir, run_dir)) {
        fprintf(stderr, "ddp-run: cannot resolve %s: %s\n", o->run_dir, strerror(errno));
        return EXIT_BAD_INPUT;
    }
    const char *events_target = o->events && realpath(o->events, events_abs) ? events_abs : o->events;
    snprintf(run_dir_copy, sizeof run_dir_copy, "%s", run_dir);
    const char *run_id = getenv("DDPD_RUN_ID") && getenv("DDPD_RUN_ID")[0] ? getenv("DDPD_RUN_ID") : basename(run_dir_copy);

    snprintf(path, sizeof path, "%s/" RUN_DIR_LOG, run_dir);
    log_open(path, "launcher");
    stop_reason_clear(run_dir); /* an earlier stop's: this start is not stopped */
    char err[1024], warning[1024];
    snprintf(path, sizeof path, "%s/" RUN_DIR_JOURNAL, run_dir);
    event_sink *events = event_sink_open(events_target, path, run_id, EVENT_RANK_LAUNCHER, getenv("DDPD_RUN_SECRET"), err,
                                         sizeof err, warning, sizeof warning);
    if (!events) {
        fprintf(stderr, "ddp-run: %s\n", err);
        log_close();
        return EXIT_BAD_INPUT;
    }
    log_set_events(events);
    send_hello(events, cfg->world_size);
    if (warning[0]) log_msg(LOG_WARN, "%s", warning);

    const char *reporter = rank_env_reporter_dir();
    if (!reporter) log_msg(LOG_WARN, "the ddpd Python reporter was not found: `import ddpd` will fail in the ranks");
    const char *working_dir = cfg->working_dir ? cfg->working_dir : run_dir;
    char program[PATH_MAX];
    const char *search_path = program_search_path(cfg->env);
    if (program_resolve(cfg->argv[0], search_path, working_dir, program, sizeof program) == 0) {
        if (strcmp(program, cfg->argv[0]) != 0) log_msg(LOG_INFO, "%s is %s", cfg->argv[0], program);
    } else {
        char hint[1024];
        program_missing_hint(cfg->argv[0], search_path, hint, sizeof hint);
        log_msg(LOG_WARN, "%s", hint);
        snprintf(program, sizeof program, "%s (not found)", cfg->argv[0]);
    }
    char line[PATH_MAX + 128];
    command_words(cfg, line, sizeof line);
    char restarts_note[96] = "";
    if (max_restarts > 0)
        snprintf(restarts_note, sizeof restarts_note, ", up to %d restart%s (distributed.max_restarts)", max_restarts,
                 max_restarts > 1 ? "s" : "");
    if (nodes > 1)
        log_msg(LOG_INFO, "run %s: node %d of %d: ranks %d to %d of %d of %s in %s, MASTER_ADDR %s, MASTER_PORT %d%s%s",
                run_id, node_rank, nodes, node_rank * local_ranks, (node_rank + 1) * local_ranks - 1, cfg->world_size,
                line, working_dir, o->master_addr ? o->master_addr : "127.0.0.1", port,
                gpus ? ", CUDA_VISIBLE_DEVICES " : "", gpus ? devices : "");
    else
        log_msg(LOG_INFO, "run %s: %d rank%s of %s in %s, MASTER_PORT %d%s%s%s", run_id, cfg->world_size,
                cfg->world_size > 1 ? "s" : "", line, working_dir, port, gpus ? ", CUDA_VISIBLE_DEVICES " : "",
                gpus ? devices : "", restarts_note);
    rank_env_params env = {
        .run_id = run_id,
        .run_dir = run_dir,
        .events_socket = events_target,
        .reporter_dir = reporter,
        .devices = devices,
        .master_port = port,
        .restart_count = first_attempt,
        .max_restarts = max_restarts,
        .master_addr = o->master_addr,
        .world_size = cfg->world_size,
        .nodes = nodes,
        .node_rank = node_rank,
        .first_rank = node_rank * local_ranks,
        .local_ranks = local_ranks,
        .isolate_devices = cfg->isolate_devices,
        .threads_per_rank = cfg->threads_per_rank,
        .config_env = cfg->env,
        .working_dir = working_dir,
    };
    /* a warm start: ddpd hands over a trial zygote for a run whose config names warm_start.imports */
    warm_link warm;
    char warm_why[256];
    warm_link_open(&warm, warm_why, sizeof warm_why);
    if (warm_why[0]) log_msg(LOG_WARN, "%s", warm_why);
    if (warm.fd >= 0 && !warm_command_fits(cfg->argv, program)) {
        log_msg(LOG_WARN, "warm start: the command is not `python3 SCRIPT ARGS`: the ranks start cold");
        warm_link_close(&warm);
    } else if (warm.fd >= 0) {
        log_msg(LOG_INFO, "warm start: the ranks are forked from the trial zygote (warm_start.imports)");
    }
    gang_signals signals;
    attempts_outcome res = {.status = "failed"};
    if (gang_signals_open(&signals) != 0) {
        snprintf(res.reason, sizeof res.reason, "cannot supervise the ranks: signalfd: %s", strerror(errno));
    } else {
        restart_params rp = {
            .gang = {.cfg = cfg, .env = &env, .run_dir = run_dir, .working_dir = working_dir,
                     .grace_s = grace_s, .preempt_grace_s = preempt_grace_s, .exit_timeout_s = exit_timeout_s,
                     .events = events, .signals = &signals, .warm = &warm},
            .env = &env,
            .plan = plan,
            .port_lo = port_lo,
            .port_hi = port_hi,
            .program = program,
        };
        restarts_run(&rp, &res);
        gang_signals_close(&signals);
    }
    warm_link_close(&warm);
    utf8_repair(res.reason);

    int succeeded = strcmp(res.status, "succeeded") == 0;
    int canceled = strcmp(res.status, "canceled") == 0 || strcmp(res.status, "preempted") == 0;
    char stop_reason[1024];
    bool stopped = canceled && (res.signal == SIGTERM || res.signal == SIGUSR1) &&
                   stop_reason_read(run_dir, stop_reason, sizeof stop_reason);
    if (succeeded) log_msg(LOG_INFO, "run succeeded%s%s", res.reason[0] ? ": " : "", res.reason);
    else if (stopped) /* by ddpd (a sweep's rule or pause): not a cancel */
        log_msg(LOG_WARN, "run stopped: %s (SIG%s)", stop_reason, sigabbrev_np(res.signal));
    else log_msg(LOG_ERROR, "run %s: %s", res.status, res.reason);
    int exit_code = canceled ? 128 + res.signal : succeeded ? EXIT_SUCCEEDED : EXIT_FAILED;
    log_set_events(NULL);
    /* with the exit status: a server that is not its parent (restarted meanwhile) reads it here */
    event_emit(events, "end", json_pack("{s:s, s:s, s:i}", "status", res.status, "reason", res.reason,
                                        "exit_code", exit_code));
    event_sink_close(events);
    log_close();
    return exit_code;
}

int main(int argc, char **argv) {
    options o = {0};
    if (parse_args(argc, argv, &o) != 0) return EXIT_BAD_INPUT;
    command_config cfg;
    if (command_config_load(o.config_path, &cfg, stderr) != 0) return EXIT_BAD_INPUT;
    if (ranks_option(&o, &cfg) != 0) {
        command_config_free(&cfg);
        return EXIT_BAD_INPUT;
    }
    signal(SIGPIPE, SIG_IGN); /* a closed stdout must not kill the launcher (the ranks get it back) */
    int rc = run(&o, &cfg);
    command_config_free(&cfg);
    return rc;
}
