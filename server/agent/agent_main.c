/* `ddpd agent`: see agent.h. Its options, its registration, its loop. */
#include "agent.h"

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent_http.h"
#include "agent_loop.h"
#include "agent_parts.h"
#include "agent_streams.h"
#include "base.h"
#include "beside_self.h"
#include "die.h"
#include "dirs.h"
#include "hostport.h"
#include "log_limit.h"
#include "opt_table.h"
#include "run_account.h"
#include "secret_file.h"

#define BUDGET_BYTES (640 * 1024) /* of events and of logs per heartbeat: under the 1 MiB body cap */

typedef struct {
    const char *coordinator, *token, *token_file, *name, *advertise, *gpus, *state_dir, *trainer, *runner;
    int slots, grace;
    opt_list data_roots;
    bool allow_commands;
} agent_options;

#define AT(name) offsetof(agent_options, name)
static const opt_row ROWS[] = {
    {.flag = "--coordinator", .meta = "URL", .env = "DDPD_COORDINATOR", .kind = OPT_STRING, .field = AT(coordinator),
     .help = "the coordinator, e.g. http://10.0.0.1:8080"},
    {.flag = "--token-file", .meta = "PATH", .env = "DDPD_TOKEN_FILE", .kind = OPT_STRING, .field = AT(token_file),
     .help = "the coordinator's token, one line, readable by its owner only",
     .dflt_says = "or the token itself in DDPD_TOKEN", .flags = OPT_ENV_BY_HAND},
    {.flag = "--token", .meta = "TOKEN", .kind = OPT_STRING, .field = AT(token),
     .help = "the same on the command line, where every local user can read it"},
    {.flag = "--name", .meta = "NAME", .env = "DDPD_NODE_NAME", .kind = OPT_STRING, .field = AT(name),
     .help = "this node's name", .dflt_says = "default: its hostname"},
    {.flag = "--advertise", .meta = "ADDR", .env = "DDPD_ADVERTISE", .kind = OPT_STRING, .field = AT(advertise),
     .help = "the address the other nodes reach this node's ranks at",
     .dflt_says = "default: the one it reaches the coordinator from"},
    {.flag = "--slots", .meta = "N", .env = "DDPD_SLOTS", .kind = OPT_INT, .field = AT(slots), .min = 0, .max = 256,
     .help = "CPU slots, one rank each", .dflt_says = "default: the number of cores"},
    {.flag = "--gpus", .meta = "LIST", .env = "DDPD_GPUS", .kind = OPT_STRING, .field = AT(gpus),
     .help = "GPU ids for runs here, e.g. 0,1", .dflt_says = "default: none"},
    {.flag = "--state-dir", .meta = "DIR", .env = "DDPD_AGENT_STATE_DIR", .kind = OPT_STRING, .field = AT(state_dir),
     .help = "the parts' run directories and the event socket",
     .dflt_says = "default $XDG_STATE_HOME/ddpd-agent, else ~/.local/state/ddpd-agent"},
    {.flag = "--data-root", .meta = "DIR", .kind = OPT_PATHS, .field = AT(data_roots), .dflt = "/usr/share/datasets",
     .help = "where built-in runs read data here"},
    {.flag = "--trainer", .meta = "PATH", .kind = OPT_STRING, .field = AT(trainer), .help = "ddp-trainer",
     .dflt_says = "default: beside ddpd"},
    {.flag = "--runner", .meta = "PATH", .kind = OPT_STRING, .field = AT(runner), .help = "ddp-run",
     .dflt_says = "default: beside ddpd"},
    {.flag = "--allow-commands", .kind = OPT_BOOL, .field = AT(allow_commands),
     .help = "run the parts of command runs (the user's program, as this user)"},
    {.flag = "--coordinator-grace", .meta = "SECONDS", .kind = OPT_INT, .field = AT(grace), .min = 1, .max = 86400,
     .dflt = "30", .help = "the coordinator unreachable this long: every part here is stopped"},
};

const opt_table AGENT_OPTIONS = {ROWS, sizeof ROWS / sizeof *ROWS, "ddpd agent",
                                  "usage: ddpd agent --coordinator URL [options]\n"
                                  "\n"
                                  "Makes this host a node of a ddpd coordinator (an ordinary `ddpd serve`): registers its\n"
                                  "devices, runs the parts of runs the coordinator places here, forwards their events and\n"
                                  "logs, and reports how they end. A run of a user mapped to a Unix account runs here\n"
                                  "as that account: that takes root, or CAP_SETUID and CAP_SETGID (its start-up log says\n"
                                  "whether it can), and the account made on this host by the same name.\n"
                                  "\n",
                                  true};

static void parse(int argc, char **argv, agent_options *o, opt_keep *keep) {
    opt_origins origins;
    char problem[512];
    opt_read(&AGENT_OPTIONS, 2, argc, argv, o, &origins, keep, problem, sizeof problem);
    if (problem[0]) die("%s", problem);
    if (!o->coordinator || strncmp(o->coordinator, "http://", 7) != 0)
        die("--coordinator http://HOST:PORT is needed: the `ddpd serve` this node works for");
}

/* The address this host reaches the coordinator from: what the others reach it at. */
static char *address_of_this_node(const char *url) {
    char address[64], err[512];
    if (address_towards(url, address, sizeof address, err, sizeof err) != 0) die("%s: give --advertise ADDR", err);
    return xstrdup(address);
}

static json_t *gpu_list(const char *gpus) {
    json_t *a = json_array();
    if (!gpus || !*gpus || strcmp(gpus, "none") == 0) return a;
    char *copy = xstrdup(gpus), *save = NULL;
    for (char *g = strtok_r(copy, ",", &save); g; g = strtok_r(NULL, ",", &save)) json_array_append_new(a, json_string(g));
    free(copy);
    return a;
}

/* A failure that repeats every second (an unreachable coordinator) is logged once
 * per 30 s, with how many times it happened in between. */
static log_limit REPEATED = LOG_LIMIT_INIT;
#define log_error_limited(fmt, ...)                                                                          \
    do {                                                                                                     \
        uint64_t skipped_;                                                                                   \
        if (log_limit_now(&REPEATED, 30000, &skipped_))                                                      \
            log_error(fmt " (%llu more times since the last such line)", __VA_ARGS__, (unsigned long long)skipped_); \
    } while (0)

static struct {
    int id;
    char name[64];
    char *address;
    int slots;
    const char *gpus;
    int64_t last_ok_ms;
    bool stopped_for_loss;
    double grace_s;
} G;

static bool register_node(void) {
    char err[512];
    json_t *reply = NULL;
    long st = agent_http_post("/nodes", json_pack("{s:s, s:s, s:i, s:o}", "name", G.name, "address", G.address,
                                                  "slots", G.slots, "gpus", gpu_list(G.gpus)),
                              &reply, err, sizeof err);
    bool ok = st == 201 && json_is_integer(json_object_get(reply, "id"));
    if (ok) {
        G.id = (int)json_integer_value(json_object_get(reply, "id"));
        log_info("registered with the coordinator as node %s (id %d, %s): %d CPU slots", G.name, G.id, G.address, G.slots);
    } else {
        log_error_limited("cannot register with the coordinator: %s", err);
    }
    json_decref(reply);
    return ok;
}

/* One heartbeat: the events and logs there are, the parts' states; then what the
 * answer says. */
static void heartbeat(void) {
    if (!G.id && !register_node()) return;
    json_t *streams = agent_streams_batch(BUDGET_BYTES);
    json_t *logs = agent_parts_log_batch(BUDGET_BYTES);
    json_t *parts = agent_parts_reports(agent_streams_pending());
    char path[64], err[512];
    snprintf(path, sizeof path, "/nodes/%d/heartbeat", G.id);
    json_t *reply = NULL;
    long st = agent_http_post(path, json_pack("{s:o, s:o, s:o}", "parts", parts, "streams", streams, "logs", logs),
                              &reply, err, sizeof err);
    if (st == 200 && json_is_array(json_object_get(reply, "parts"))) {
        G.last_ok_ms = mono_ms();
        if (G.stopped_for_loss) log_info("the coordinator answers again");
        G.stopped_for_loss = false;
        agent_streams_acked(json_object_get(reply, "streams"));
        agent_parts_logs_acked(json_object_get(reply, "logs"));
        agent_parts_reconcile(json_object_get(reply, "parts"));
        agent_parts_forget_reported(json_object_get(reply, "parts"));
    } else if (st == 404) {
        log_warn("the coordinator does not know this node (it restarted?): registering again");
        G.id = 0;
    } else {
        log_error_limited("heartbeat: %s", err);
    }
    json_decref(reply);
}

int agent_main(int argc, char **argv) {
    agent_options o = {0};
    opt_keep keep = {0};
    die_set_program("ddpd agent"); /* its start-up errors name it */
    parse(argc, argv, &o, &keep);
    umask(077);
    char err[512];
    server_log_config lc = {.level = LOG_INFO};
    if (server_log_setup(&lc, err, sizeof err) != 0) die("%s", err);
    const char *token = o.token;
    if (!token && !o.token_file) {
        o.token_file = getenv("DDPD_TOKEN_FILE") && *getenv("DDPD_TOKEN_FILE") ? getenv("DDPD_TOKEN_FILE") : NULL;
        token = getenv("DDPD_TOKEN");
    }
    char *file_token = NULL;
    if (o.token_file) {
        if (secret_read_file(o.token_file, &file_token, err, sizeof err) != 0) die("%s", err);
        token = file_token;
    }
    if (o.token)
        log_warn("--token: every local user can read it (ps, /proc/PID/cmdline); prefer --token-file or DDPD_TOKEN");
    if (!token || !*token) log_warn("no token given: a coordinator that has one refuses this agent (--token-file)");

    char host[64] = "node";
    gethostname(host, sizeof host - 1);
    snprintf(G.name, sizeof G.name, "%s", o.name ? o.name : host);
    G.address = o.advertise ? xstrdup(o.advertise) : address_of_this_node(o.coordinator);
    G.slots = o.slots != OPT_UNSET ? o.slots : (int)sysconf(_SC_NPROCESSORS_ONLN);
    G.gpus = o.gpus;
    G.grace_s = o.grace;

    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    char *state = o.state_dir ? xstrdup(o.state_dir)
                  : xdg && *xdg ? xasprintf("%s/ddpd-agent", xdg)
                                : xasprintf("%s/.local/state/ddpd-agent", home ? home : ".");
    if (mkdir_p(state, 0700) != 0) die("cannot create the state dir %s: %s", state, strerror(errno));
    char *real = realpath(state, NULL); /* the parts' directories are opened by their real paths (run_files.h) */
    if (!real) die("the state dir %s: %s", state, strerror(errno));
    free(state);
    state = real;
    char *sock = xasprintf("%s/events.sock", state);
    if (agent_streams_open(sock, err, sizeof err) != 0) die("%s", err);
    char *trainer = o.trainer ? xstrdup(o.trainer) : beside_self("ddp-trainer");
    char *runner = o.runner ? xstrdup(o.runner) : beside_self("ddp-run");
    agent_parts_config pc = {.state_dir = state, .events_socket = sock, .trainer = trainer, .runner = runner,
                             .advertise = G.address, .coordinator = o.coordinator, .node_name = G.name,
                             .data_roots = o.data_roots.v, .n_data_roots = o.data_roots.n,
                             .allow_commands = o.allow_commands, .grace_s = 10};
    /* an agent given its capabilities as the file's permitted ones (setcap ...+p) takes them, as ddpd serve does */
    if (run_account_take_permitted() != 0)
        log_warn("cannot make this agent's permitted capabilities effective: %s", strerror(errno));
    agent_parts_init(&pc);
    agent_streams_check_peers(agent_parts_peer_ok);
    if (agent_http_init(o.coordinator, token) != 0) die("cannot set up libcurl");

    agent_loop loop;
    agent_loop_open(&loop, (const int[]){SIGTERM, SIGINT}, 2);
    log_info("ddpd agent %s for %s: %d CPU slots, GPUs %s, state in %s", G.name, o.coordinator, G.slots,
             G.gpus ? G.gpus : "none", state);
    const char *how, *missing;
    if (agent_parts_can_switch(&how, &missing) && !missing[0])
        log_info("runs parts as their runs' accounts: yes (%s)", how);
    else if (agent_parts_can_switch(&how, &missing))
        log_warn("runs parts as their runs' accounts: yes (%s), but without %s it may fail to stop them or to read "
                 "their logs: give it those too, or start it as root (docs/security.md, On agent nodes)", how, missing);
    else
        log_info("runs parts as their runs' accounts: no (%s): the parts of runs of users mapped to an account "
                 "(ddpd user --unix-user, serve --run-user) are refused here; start it as root or with CAP_SETUID and "
                 "CAP_SETGID to run them", how);
    G.last_ok_ms = mono_ms();
    int64_t stop_deadline = 0;
    bool stopping = false;
    for (;;) {
        int signo = agent_loop_turn(&loop);
        if (signo && !stopping) {
            log_info("received SIG%s: stopping every part here", sigabbrev_np(signo));
            stopping = true;
            stop_deadline = mono_ms() + 15000;
            agent_parts_stop_all("the agent is stopping");
        }
        int64_t now = mono_ms();
        if (agent_loop_report_due(&loop, now)) heartbeat();
        if (!G.stopped_for_loss && agent_parts_running() && now - G.last_ok_ms > (int64_t)(G.grace_s * 1000)) {
            log_error("the coordinator has not answered for %.0f s (--coordinator-grace): stopping every part here",
                      (double)(now - G.last_ok_ms) / 1000);
            agent_parts_stop_all("the coordinator is unreachable");
            G.stopped_for_loss = true;
        }
        if (stopping && (!agent_parts_running() || now >= stop_deadline)) break;
    }
    heartbeat(); /* the last exits */
    agent_streams_close();
    unlink(sock);
    free(sock);
    free(state);
    free(trainer);
    free(runner);
    free(file_token);
    free(G.address);
    opt_keep_free(&keep);
    return 0;
}
