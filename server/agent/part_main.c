/* `ddpd part`: see part.h. Its options, its report, its loop. */
#include "part.h"

#include <errno.h>
#include <netinet/in.h>
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
#include "hostport.h"
#include "log_limit.h"
#include "opt_table.h"
#include "ports.h"
#include "secret.h"

#define BUDGET_BYTES (640 * 1024) /* of events and of logs per report: under the 1 MiB body cap */

typedef struct {
    const char *server, *run, *work_dir, *trainer, *runner, *node_name, *advertise;
    int node_rank, nodes, deliver;
    opt_list data_roots;
} part_options;

#define AT(name) offsetof(part_options, name)
static const opt_row ROWS[] = {
    {.flag = "--server", .meta = "URL", .kind = OPT_STRING, .field = AT(server),
     .help = "the ddpd serve the run belongs to, e.g. http://10.0.0.1:8080"},
    {.flag = "--run", .meta = "ID", .kind = OPT_STRING, .field = AT(run), .help = "the run"},
    {.flag = "--work-dir", .meta = "DIR", .kind = OPT_STRING, .field = AT(work_dir),
     .help = "the part's run directory is DIR/ID/part-K (K: its node rank)"},
    {.flag = "--data-root", .meta = "DIR", .kind = OPT_PATHS, .field = AT(data_roots), .dflt = "/usr/share/datasets",
     .help = "where built-in runs read data on this node"},
    {.flag = "--trainer", .meta = "PATH", .kind = OPT_STRING, .field = AT(trainer), .help = "ddp-trainer",
     .dflt_says = "default: beside ddpd"},
    {.flag = "--runner", .meta = "PATH", .kind = OPT_STRING, .field = AT(runner), .help = "ddp-run",
     .dflt_says = "default: beside ddpd"},
    {.flag = "--node-rank", .meta = "K", .env = "SLURM_NODEID", .kind = OPT_INT, .field = AT(node_rank), .min = 0,
     .max = 4095, .help = "this node's rank in the job", .dflt_says = "default: Slurm's"},
    {.flag = "--nodes", .meta = "N", .env = "SLURM_JOB_NUM_NODES", .kind = OPT_INT, .field = AT(nodes), .min = 1,
     .max = 4096, .help = "the job's nodes", .dflt_says = "default: Slurm's"},
    {.flag = "--node-name", .meta = "NAME", .env = "SLURMD_NODENAME", .kind = OPT_STRING, .field = AT(node_name),
     .help = "this node's name", .dflt_says = "default: Slurm's, else its hostname"},
    {.flag = "--advertise", .meta = "ADDR", .kind = OPT_STRING, .field = AT(advertise),
     .help = "the address the other nodes reach this one at",
     .dflt_says = "default: the one it reaches the server from"},
    {.flag = "--deliver-timeout", .meta = "SECONDS", .kind = OPT_INT, .field = AT(deliver), .min = 1, .max = 86400,
     .dflt = "600", .help = "once its launcher has ended, how long it goes on trying to tell the server"},
};

const opt_table PART_OPTIONS = {
    ROWS, sizeof ROWS / sizeof *ROWS, "ddpd part",
    "usage: ddpd part --server URL --run ID --work-dir DIR [options]\n"
    "\n"
    "One node's part of a ddpd run in a Slurm job (ddpd serve --executor slurm writes the job's\n"
    "script, which starts one per node with srun): runs the node's ranks as the server describes\n"
    "them, and reports their events, logs and end to it with the run's secret (DDPD_RUN_SECRET).\n"
    "\n",
    true};

static void parse(int argc, char **argv, part_options *o) {
    opt_origins origins;
    opt_keep keep = {0}; /* (no row reads a list from the environment) */
    char problem[512];
    opt_read(&PART_OPTIONS, 2, argc, argv, o, &origins, &keep, problem, sizeof problem);
    opt_keep_free(&keep);
    if (problem[0]) die("%s", problem);
    if (!o->server || strncmp(o->server, "http://", 7) != 0) die("--server http://HOST:PORT is needed: the ddpd serve of the run");
    if (!o->run || !o->work_dir) die("--run ID and --work-dir DIR are needed");
    if (o->node_rank == OPT_UNSET || o->nodes == OPT_UNSET)
        die("--node-rank and --nodes are needed (Slurm's SLURM_NODEID and SLURM_JOB_NUM_NODES)");
}

static long number(const char *what, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (errno || end == v || *end || n < lo || n > hi) die("%s %s: a whole number from %ld to %ld is needed", what, v, lo, hi);
    return n;
}

/* A port free on this node now, for a command run's MASTER_PORT (node 0's): from the
 * server's --port-range (DDPD_PORT_RANGE, set by the job's script), starting at a
 * random one of it, else one the kernel picks. A kernel-picked port is an ephemeral
 * one, which an outgoing connection of any process of the node may take before rank 0
 * listens there: under load, a rank 0 failed "Address already in use" so. */
static int free_port(void) {
    const char *range = getenv("DDPD_PORT_RANGE");
    int lo, hi;
    char err[200];
    if (range && *range && port_range_parse(range, &lo, &hi, err, sizeof err) == 0) {
        char hex[8] = "0";
        random_hex(hex, 2); /* a random start: parts of several jobs on one node pick apart */
        int port = port_next_listenable(lo, hi, lo + (int)(strtol(hex, NULL, 16) % (hi - lo + 1)));
        if (port) return port;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t len = sizeof a;
    int port = 0;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 && getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static void mkdirs(const char *path) {
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        mkdir(p, 0700);
        *s = '/';
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) die("cannot create %s: %s", p, strerror(errno));
    free(p);
}

static log_limit REPEATED = LOG_LIMIT_INIT;

static struct {
    int64_t run;
    int node_rank;
    const char *node_name;
    char address[64];
    char boot[40];
    int master_port;
    int64_t stop_t;  /* when it was asked to stop (unix ms); 0: not */
    bool delivered;  /* its launcher's end was taken by the server */
    bool gone;       /* the server no longer wants it */
    char path[64];
} P;

/* One report: the events and logs there are, the launcher's state; then what the
 * answer says. */
static void report(void) {
    json_t *streams = agent_streams_batch(BUDGET_BYTES);
    json_t *logs = agent_parts_log_batch(BUDGET_BYTES);
    json_t *parts = agent_parts_reports(agent_streams_pending());
    bool telling_end = false;
    size_t i;
    json_t *p;
    json_array_foreach(parts, i, p) telling_end |= strcmp(json_string_value(json_object_get(p, "state")), "exited") == 0;
    json_t *body = json_pack("{s:i, s:s, s:s, s:s, s:i, s:I, s:o, s:o, s:o}", "node_rank", P.node_rank, "node",
                             P.node_name, "address", P.address, "boot", P.boot, "master_port", P.master_port, "stop_t",
                             (json_int_t)P.stop_t, "parts", parts, "streams", streams, "logs", logs);
    json_t *reply = NULL;
    char err[512];
    long st = agent_http_post(P.path, body, &reply, err, sizeof err);
    if (st == 200 && json_is_array(json_object_get(reply, "parts"))) {
        agent_streams_acked(json_object_get(reply, "streams"));
        agent_parts_logs_acked(json_object_get(reply, "logs"));
        json_t *wanted = json_object_get(reply, "parts");
        if (json_array_size(wanted)) agent_parts_reconcile(wanted); /* starts it; it is listed while it runs */
        /* the server's stop is a scancel: Slurm signals every process of the job */
        if (json_is_true(json_object_get(reply, "stop")) && agent_parts_running())
            agent_parts_stopped_elsewhere("the server canceled the job (scancel)");
        P.delivered |= telling_end;
    } else if (st == 404 || st == 401 || st == 400) {
        if (!P.gone) log_error("the server refuses this part: %s: stopping", err);
        P.gone = true;
        agent_parts_stop_all("the server no longer wants it");
    } else {
        uint64_t skipped;
        if (log_limit_now(&REPEATED, 30000, &skipped))
            log_error("report: %s (%llu more times since the last such line); its events and logs are kept until "
                      "the server takes them", err, (unsigned long long)skipped);
        agent_streams_resend_hellos(); /* the server may come back without the streams it had */
    }
    json_decref(reply);
}

int part_main(int argc, char **argv) {
    die_set_program("ddpd part");
    part_options o = {0};
    parse(argc, argv, &o);
    umask(077);
    char err[512];
    server_log_config lc = {.level = LOG_INFO};
    if (server_log_setup(&lc, err, sizeof err) != 0) die("%s", err);
    const char *secret = getenv("DDPD_RUN_SECRET");
    if (!secret || !*secret) die("DDPD_RUN_SECRET is not set: the job's environment carries the run's secret");
    P.run = number("--run", o.run, 1, INT64_MAX >> 1);
    P.node_rank = o.node_rank;
    int nodes = o.nodes;
    if (P.node_rank >= nodes) die("--node-rank %d: the job has nodes 0 to %d", P.node_rank, nodes - 1);
    char host[64] = "node";
    gethostname(host, sizeof host - 1);
    P.node_name = o.node_name ? o.node_name : host;
    if (o.advertise) snprintf(P.address, sizeof P.address, "%s", o.advertise);
    else if (address_towards(o.server, P.address, sizeof P.address, err, sizeof err) != 0) die("%s: give --advertise ADDR", err);
    double deliver_s = o.deliver;
    if (random_hex(P.boot, 16) != 0) snprintf(P.boot, sizeof P.boot, "%d-%lld", (int)getpid(), (long long)now_ms());
    if (P.node_rank == 0) P.master_port = free_port();
    snprintf(P.path, sizeof P.path, "/runs/%lld/parts", (long long)P.run);

    char *run_dir = xasprintf("%s/%lld/part-%d", o.work_dir, (long long)P.run, P.node_rank);
    mkdirs(run_dir);
    /* the event socket in a directory of its own under TMPDIR (a socket's path is short) */
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    char *sock_dir = xasprintf("%s/ddpd-part-XXXXXX", tmp);
    if (!mkdtemp(sock_dir)) die("cannot create a directory in %s: %s", tmp, strerror(errno));
    char *sock = xasprintf("%s/events.sock", sock_dir);
    if (agent_streams_open(sock, err, sizeof err) != 0) die("%s", err);
    char *trainer = o.trainer ? xstrdup(o.trainer) : beside_self("ddp-trainer");
    char *runner = o.runner ? xstrdup(o.runner) : beside_self("ddp-run");
    const char *gpus = getenv("CUDA_VISIBLE_DEVICES"); /* Slurm's, for the job's GPUs on this node */
    agent_parts_config pc = {.state_dir = run_dir, .events_socket = sock, .trainer = trainer, .runner = runner,
                             .advertise = P.address, .coordinator = o.server, .node_name = P.node_name,
                             .data_roots = o.data_roots.v, .n_data_roots = o.data_roots.n, .allow_commands = true,
                             .grace_s = 10, .run_dir = run_dir, .visible = gpus && *gpus ? gpus : NULL};
    agent_parts_init(&pc);
    if (agent_http_init(o.server, secret) != 0) die("cannot set up libcurl");

    agent_loop loop;
    agent_loop_open(&loop, (const int[]){SIGTERM, SIGINT, SIGHUP}, 3);
    log_info("ddpd part of run %lld: node %s (node rank %d of %d, %s), reporting to %s; its directory %s",
             (long long)P.run, P.node_name, P.node_rank, nodes, P.address, o.server, run_dir);
    if (P.master_port)
        log_info("MASTER_PORT %d (%s%s)", P.master_port, getenv("DDPD_PORT_RANGE") ? "from --port-range " : "picked by the kernel",
                 getenv("DDPD_PORT_RANGE") ? getenv("DDPD_PORT_RANGE") : "");
    int64_t ended_at = 0;
    for (;;) {
        int signo = agent_loop_turn(&loop);
        if (signo && !P.stop_t) {
            log_info("received SIG%s: Slurm stops the job, the part's launcher with it", sigabbrev_np(signo));
            P.stop_t = now_ms();
            /* Slurm signals every process of the step: the launcher has its SIGTERM too */
            agent_parts_stopped_elsewhere("Slurm stops the job");
        }
        int64_t now = mono_ms();
        if (agent_loop_report_due(&loop, now)) report();
        bool started = agent_parts_exit_status() >= 0 || agent_parts_running() > 0;
        if (P.delivered) break;
        if ((P.gone || P.stop_t) && !started) break; /* stopped before its launcher started */
        if (P.gone && !agent_parts_running()) break;
        if (agent_parts_exit_status() >= 0 && !ended_at) ended_at = now;
        if (ended_at && now - ended_at > (int64_t)(deliver_s * 1000)) {
            log_error("the server has not taken how the part ended for %.0f s (--deliver-timeout): giving up; Slurm's "
                      "job state tells it the rest", deliver_s);
            break;
        }
    }
    int status = agent_parts_exit_status();
    if (status < 0) status = P.stop_t ? 128 + SIGTERM : 1;
    agent_streams_close();
    unlink(sock);
    rmdir(sock_dir);
    free(sock);
    free(sock_dir);
    free(run_dir);
    free(trainer);
    free(runner);
    log_info("ddpd part of run %lld on node %s ends with status %d", (long long)P.run, P.node_name, status);
    return status;
}
