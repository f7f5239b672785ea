/* The device pool, the FIFO queue and the life of unfinished runs: see scheduler.h. */
#include "scheduler.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"
#include "journal_end.h"
#include "journal_replay.h"
#include "node_relay.h"
#include "nodes.h"
#include "peer_loss.h"
#include "placement.h"
#include "logtail.h"
#include "ports.h"
#include "launcher_argv.h"
#include "procstat.h"
#include "rendezvous.h"
#include "secret.h"
#include "run_status.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"

/* One node's part of a run across nodes: its launcher, started by this server (node
 * 0) or by the node's agent. */
typedef struct {
    int node;           /* 0: this host; else the agent node's id */
    int node_rank;
    int *devices;       /* its devices on that node (world_size / nodes of them) */
    bool stop;          /* told to stop (an agent: no longer in its heartbeat's answer) */
    int64_t stop_t;     /* when (unix ms): a part that ended before it failed on its own */
    bool ended;
    bool failed;        /* ended with a failure of its own (not by the stop it was sent) */
    int64_t exit_code, exit_signal;
    char *reason;       /* its launcher's end, or what became of its node */
    int64_t end_t;      /* when its launcher ended (unix ms), to tell cause from consequence */
} run_part;

typedef struct live_run {
    int64_t id;
    int world_size;
    pool_kind pool;
    bool command;       /* a command run: ddp-run starts it */
    bool resume;        /* resumed (POST /runs/{id}/resume): its trainer continues from its newest checkpoint */
    int port;           /* its MASTER_PORT while started (command runs), else 0 */
    run_status status;  /* queued, starting, running, canceling */
    int *devices;       /* indices into the pool, once started */
    pid_t pid;          /* 0 while its start is queued to the supervisor */
    char secret[65];
    char *cancel_reason;  /* set once canceled */
    char *fail_reason;    /* set once the server stopped it (a hang): it fails with this */
    double hang_timeout_s; /* command runs: no progress from a rank this long fails it; 0: off */
    int64_t *last_progress_ms; /* command runs, per rank: mono ms of its last report; 0: none yet */
    int64_t *last_step;        /* and its global step then */
    int64_t kill_at;      /* mono ms: SIGKILL then */
    bool killed;
    bool said_hello;      /* a hello came before the supervisor said the trainer started */
    char *end_status, *end_reason; /* from the launcher's `end` event */
    char *devices_json;   /* ["cpu:0","cpu:1"]: for the store, once its trainer started */
    /* adopted: started by a previous server, taken back at start-up. Not this server's
     * child: its exit is seen in /proc (pid and start time), its events are read from
     * its journal (ingest ignores what its processes send), and its end is the
     * journal's `end`. */
    bool adopted;
    uint64_t start_time;
    journal_replay *journal;
    /* across nodes: its parts (n_parts 0: a run of this host only, as above) */
    int nodes_wanted;     /* distributed.nodes; 0: as few as it fits */
    int n_parts;
    run_part *parts;
    json_t *config;       /* its config.json, for the agents */
    bool start_stored;    /* its start is stored (a run with no part here has no pid) */
    bool parts_stopping;
    struct live_run *next;
} live_run;

static struct {
    scheduler_config c;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a run finished */
    live_run *runs;         /* unfinished runs, in submission order */
    int64_t *owner[2];      /* per pool and device: the run using it, or 0 */
    bool shutting_down;
    int next_port;          /* where the next lease looks first */
    char self_url[128];
} K = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

const char *pool_name(pool_kind pool) { return pool == POOL_GPU ? "gpu" : "cpu"; }
const char *pool_unit(pool_kind pool) { return pool == POOL_GPU ? "GPUs" : "CPU slots"; }

int scheduler_capacity(pool_kind pool) { return pool == POOL_GPU ? K.c.n_gpus : K.c.slots; }

void scheduler_set_self_url(const char *url) { snprintf(K.self_url, sizeof K.self_url, "%s", url); }

void scheduler_init(const scheduler_config *c) {
    K.c = *c;
    nodes_init(c->node_timeout_ms > 0 ? c->node_timeout_ms : 10000);
    K.owner[POOL_CPU] = calloc((size_t)(c->slots > 0 ? c->slots : 1), sizeof(int64_t));
    K.owner[POOL_GPU] = calloc((size_t)(c->n_gpus > 0 ? c->n_gpus : 1), sizeof(int64_t));
}

static int free_devices(pool_kind pool) {
    int n = 0;
    for (int i = 0; i < scheduler_capacity(pool); i++) n += K.owner[pool][i] == 0;
    return n;
}

static live_run *find(int64_t id) {
    for (live_run *r = K.runs; r; r = r->next)
        if (r->id == id) return r;
    return NULL;
}

static void unlink_run(live_run *r) {
    for (live_run **p = &K.runs; *p; p = &(*p)->next) {
        if (*p == r) {
            *p = r->next;
            return;
        }
    }
}

static void free_run(live_run *r) {
    free(r->devices);
    free(r->cancel_reason);
    free(r->fail_reason);
    free(r->last_progress_ms);
    free(r->last_step);
    free(r->end_status);
    free(r->end_reason);
    free(r->devices_json);
    journal_replay_close(r->journal);
    for (int i = 0; i < r->n_parts; i++) {
        free(r->parts[i].devices);
        free(r->parts[i].reason);
    }
    free(r->parts);
    json_decref(r->config);
    free(r);
}

static void release_devices(live_run *r) {
    if (!r->devices) return;
    for (int i = 0; i < r->world_size; i++) { /* -1: an adopted run's device this server does not have */
        if (r->devices[i] >= 0 && K.owner[r->pool][r->devices[i]] == r->id) K.owner[r->pool][r->devices[i]] = 0;
    }
}

/* Queues the run's final state and forgets it. Devices go back to the pool. */
static void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code,
                          int64_t exit_signal) {
    store_op op = {.kind = OP_RUN_FINISH, .run_id = r->id, .t = now_ms()};
    op.u.finish.status = run_status_name(status);
    op.u.finish.reason = xstrdup(reason);
    op.u.finish.exit_code = exit_code;
    op.u.finish.exit_signal = exit_signal;
    store_submit_now(&op);
    if (K.c.run_ended) K.c.run_ended(r->id); /* no hello opens a connection for it from now on */
    log_info("run %lld %s%s%s", (long long)r->id, run_status_name(status), reason ? ": " : "", reason ? reason : "");
    rendezvous_close(r->id); /* its keys go with it */
    release_devices(r);
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].node) nodes_release(r->parts[i].node, r->id);
    if (r->n_parts) relay_run_ended(r->id);
    unlink_run(r);
    free_run(r);
    pthread_cond_broadcast(&K.changed);
}

static void schedule_locked(void);

/* SIGTERM to a started run's process group; SIGKILL after the grace period (tick). */
static void stop_parts_locked(live_run *r);

static void signal_cancel_locked(live_run *r) {
    r->status = RUN_CANCELING;
    r->kill_at = mono_ms() + K.c.cancel_grace_ms;
    if (r->n_parts) stop_parts_locked(r);
    if (r->pid > 0 && kill(-r->pid, SIGTERM) != 0 && errno != ESRCH)
        log_warn("run %lld: SIGTERM to process group %d: %s", (long long)r->id, (int)r->pid, strerror(errno));
    store_op op = {.kind = OP_RUN_CANCELING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    if (r->pid > 0) log_info("run %lld canceling: SIGTERM sent to process group %d", (long long)r->id, (int)r->pid);
    else log_info("run %lld canceling: its nodes are told to stop it", (long long)r->id);
}


/* A MASTER_PORT for a command run: in the range, held by no live run, free on the
 * host now (a bind succeeds); taken round the range so a port just released is not
 * the next one given. 0 when none is. */
static int lease_port_locked(void) {
    int span = K.c.port_hi - K.c.port_lo + 1;
    if (K.next_port < K.c.port_lo || K.next_port > K.c.port_hi) K.next_port = K.c.port_lo;
    for (int i = 0; i < span; i++) {
        int port = K.c.port_lo + (K.next_port - K.c.port_lo + i) % span;
        bool held = false;
        for (live_run *o = K.runs; o && !held; o = o->next) held = o->port == port;
        if (!held && port_is_free(port)) {
            K.next_port = port + 1;
            return port;
        }
    }
    return 0;
}

/* A command run's hang watch is the server's: the ranks report to it, not to ddp-run. */
static void watch_hangs_of(live_run *r) {
    r->last_progress_ms = calloc((size_t)r->world_size, sizeof *r->last_progress_ms);
    r->last_step = calloc((size_t)r->world_size, sizeof *r->last_step);
    if (!r->last_progress_ms || !r->last_step) abort();
}

/* A device's name for the store and the log: "cpu:3", "gpu:UUID"; on an agent node,
 * "NODE/cpu:3". */
static void device_name(pool_kind pool, const char *node, const char *gpu, int i, char *out, size_t n) {
    char dev[100];
    if (pool == POOL_GPU) snprintf(dev, sizeof dev, "gpu:%.90s", gpu);
    else snprintf(dev, sizeof dev, "cpu:%d", i);
    if (node) snprintf(out, n, "%.63s/%s", node, dev);
    else snprintf(out, n, "%s", dev);
}

/* The devices of the run (or of its part here) taken from this host's pool: their
 * indices in devices[0..n), their names appended to names/json, the GPU ids to
 * visible. */
static void take_local_locked(live_run *r, int n, int *devices, buf_t *names, buf_t *json, buf_t *visible) {
    for (int i = 0, k = 0; k < n; i++) {
        if (K.owner[r->pool][i]) continue;
        K.owner[r->pool][i] = r->id;
        devices[k] = i;
        const char *label = r->pool == POOL_GPU ? K.c.gpus[i] : NULL;
        char name[200];
        device_name(r->pool, NULL, label, i, name, sizeof name);
        buf_printf(names, "%s%s", names->len ? ", " : "", name);
        /* device names are digits, letters, '-', '.' and ':' (GPU UUIDs, node names): no escaping needed */
        buf_printf(json, "%s\"%s\"", json->len > 1 ? "," : "", name);
        if (label) buf_printf(visible, "%s%s", visible->len ? "," : "", label);
        k++;
    }
}

const char *scheduler_local_name(void) { return K.c.node_name && K.c.node_name[0] ? K.c.node_name : "local"; }

/* The run's launcher on this host: the whole run, or `part` of a run across nodes. */
static void spawn_launcher_locked(live_run *r, const char *names, const char *visible, const run_part *part,
                                  const char *master_addr) {
    const char *program = r->command ? K.c.runner : K.c.trainer;
    char *run_dir = layout_run_dir(r->id), *config = layout_run_path(r->id, RUN_FILE_CONFIG);
    char *log = layout_run_path(r->id, RUN_FILE_LOG);
    char *rendezvous = xasprintf("%s/runs/%lld/rendezvous", K.self_url, (long long)r->id);
    launcher_spec spec = {.program = program, .config = config, .run_dir = run_dir, .events = layout_socket_path(),
                          .command = r->command, .master_port = r->port, .nodes = part ? r->n_parts : 0,
                          .node_rank = part ? part->node_rank : 0, .master_addr = master_addr,
                          .node_addr = K.c.advertise, .rendezvous = rendezvous, .resume = r->resume,
                          .data_roots = K.c.data_roots, .n_data_roots = K.c.n_data_roots, .run_id = r->id,
                          .secret = r->secret, .visible = visible};
    launcher_cmd cmd;
    launcher_cmd_build(&spec, &cmd);
    char *banner = r->command ? xasprintf("starting %s for run %lld on %s, MASTER_PORT %d", program, (long long)r->id,
                                          names, r->port)
                              : xasprintf("starting %s for run %lld on %s", program, (long long)r->id, names);
    spawn_request req = {.run_id = r->id, .program = program, .argv = (char *const *)cmd.argv, .env_set = cmd.env,
                         .env_drop = LAUNCHER_ENV_DROP, .cwd = run_dir, .log_path = log, .log_banner = banner};
    supervisor_request_spawn(&req);
    launcher_cmd_free(&cmd);
    free(banner);
    free(rendezvous);
    free(run_dir);
    free(config);
    free(log);
}

/* What every start does before its launchers run: the run is starting, with a
 * secret and (a command run) a MASTER_PORT. false when it failed instead (finished). */
static bool begin_start_locked(live_run *r, buf_t *json) {
    buf_printf(json, "]");
    r->devices_json = json->data;
    json->data = NULL;
    r->status = RUN_STARTING;
    if (random_hex(r->secret, 32) != 0) {
        char err[256];
        snprintf(err, sizeof err, "cannot make a secret for the run: getrandom failed: %s", strerror(errno));
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        return false;
    }
    rendezvous_open(r->id, r->secret); /* its processes exchange their addresses there */
    if (r->command) {
        r->port = lease_port_locked();
        if (!r->port) {
            char err[256];
            snprintf(err, sizeof err, "no free port for MASTER_PORT in --port-range %d-%d (all held by runs or by "
                     "other programs): an operator can give ddpd serve a wider --port-range", K.c.port_lo, K.c.port_hi);
            finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
            return false;
        }
        watch_hangs_of(r);
    }
    return true;
}

/* Gives the run devices and asks the supervisor to start its trainer; the supervisor
 * answers through scheduler_spawned. */
static void start_locked(live_run *r) {
    r->devices = xmalloc((size_t)r->world_size * sizeof *r->devices);
    buf_t names = {0}, json = {0}, visible = {0};
    buf_printf(&json, "[");
    take_local_locked(r, r->world_size, r->devices, &names, &json, &visible);
    if (begin_start_locked(r, &json)) {
        spawn_launcher_locked(r, names.data, visible.data, NULL, NULL);
        log_info("run %lld starting on %s", (long long)r->id, names.data);
    }
    buf_free(&json);
    buf_free(&names);
    buf_free(&visible);
}

/* Places a run across the nodes `ids` (node rank order; 0 is this host): its devices
 * on each, its launcher here for this host's part; the agents start theirs when they
 * next ask (scheduler_node_heartbeat). */
static void start_parts_locked(live_run *r, const int *ids, int k) {
    int per_node = r->world_size / k;
    r->n_parts = k;
    r->parts = calloc((size_t)k, sizeof *r->parts);
    r->devices = xmalloc((size_t)r->world_size * sizeof *r->devices);
    if (!r->parts) abort();
    for (int i = 0; i < r->world_size; i++) r->devices[i] = -1; /* this host's part fills its own */
    buf_t names = {0}, json = {0}, visible = {0};
    buf_printf(&json, "[");
    run_part *here = NULL;
    char master_addr[NODE_ADDR_MAX] = "";
    for (int p = 0; p < k; p++) {
        run_part *part = &r->parts[p];
        part->node = ids[p];
        part->node_rank = p;
        part->exit_code = part->exit_signal = NO_INT;
        part->devices = xmalloc((size_t)per_node * sizeof *part->devices);
        if (!part->node) {
            here = part;
            take_local_locked(r, per_node, part->devices, &names, &json, &visible);
            memcpy(r->devices, part->devices, (size_t)per_node * sizeof *part->devices);
            if (p == 0) snprintf(master_addr, sizeof master_addr, "%s", K.c.advertise);
            continue;
        }
        char node_name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
        nodes_describe(part->node, node_name, sizeof node_name, address, sizeof address);
        if (p == 0) snprintf(master_addr, sizeof master_addr, "%s", address);
        nodes_take(part->node, r->pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU, per_node, r->id, part->devices);
        for (int d = 0; d < per_node; d++) {
            char name[200];
            device_name(r->pool, node_name, nodes_gpu_id(part->node, part->devices[d]), part->devices[d], name,
                        sizeof name);
            buf_printf(&names, "%s%s", names.len ? ", " : "", name);
            buf_printf(&json, "%s\"%s\"", json.len > 1 ? "," : "", name);
        }
    }
    char *config = layout_run_path(r->id, RUN_FILE_CONFIG);
    r->config = json_load_file(config, 0, NULL);
    free(config);
    if (begin_start_locked(r, &json)) {
        log_info("run %lld starting on %d nodes (%d ranks each): %s; MASTER_ADDR %s", (long long)r->id, k, per_node,
                 names.data, master_addr);
        if (here) {
            spawn_launcher_locked(r, names.data, visible.data, here, master_addr);
        } else { /* no launcher here, no pid to wait for: its start is stored now */
            store_op op = {.kind = OP_RUN_STARTING, .run_id = r->id, .t = now_ms()};
            op.u.starting.devices = xstrdup(r->devices_json);
            op.u.starting.pid = op.u.starting.pid_start_time = NO_INT;
            op.u.starting.secret = xstrdup(r->secret);
            store_submit_now(&op);
            r->start_stored = true;
            if (r->cancel_reason) signal_cancel_locked(r);
        }
    }
    buf_free(&json);
    buf_free(&names);
    buf_free(&visible);
}

/* Running: its first hello has come, and the trainer's start is stored. */
static void mark_running_locked(live_run *r) {
    r->status = RUN_RUNNING;
    store_op op = {.kind = OP_RUN_RUNNING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    log_info("run %lld running", (long long)r->id);
}

void scheduler_spawned(int64_t id, int group, pid_t pid, const char *err) {
    (void)group;
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    if (!r) { /* gone meanwhile (cannot happen: a starting run waits for its pid) */
        if (pid > 0) kill(-pid, SIGKILL);
    } else if (pid < 0) {
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        schedule_locked();
    } else {
        r->pid = pid;
        proc_stat ps; /* not reaped yet (the supervisor's thread reaps after this): /proc has it */
        store_op op = {.kind = OP_RUN_STARTING, .run_id = r->id, .t = now_ms()};
        op.u.starting.devices = xstrdup(r->devices_json);
        op.u.starting.pid = pid;
        op.u.starting.pid_start_time = proc_stat_read(pid, &ps) == 0 ? (int64_t)ps.start_time : NO_INT;
        op.u.starting.secret = xstrdup(r->secret);
        store_submit_now(&op);
        r->start_stored = true;
        log_info("run %lld: trainer started (pid %d)", (long long)r->id, (int)pid);
        if (r->cancel_reason) signal_cancel_locked(r); /* canceled while its start was queued */
        else if (r->said_hello && r->status == RUN_STARTING) mark_running_locked(r);
    }
    pthread_mutex_unlock(&K.mu);
}

/* The nodes a run across nodes may use, in the order they are taken: this host
 * first (when other nodes can reach it), then the agent nodes that are up. */
static int candidates_locked(pool_kind pool, place_candidate *c) {
    int n = 0;
    if (K.c.advertise && K.c.advertise[0] && scheduler_capacity(pool) > 0)
        c[n++] = (place_candidate){.id = 0, .free = free_devices(pool), .capacity = scheduler_capacity(pool)};
    int ids[NODES_MAX];
    int up = nodes_up(ids, NODES_MAX);
    node_pool np = pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU;
    for (int i = 0; i < up; i++) {
        int cap = nodes_capacity(ids[i], np);
        if (cap > 0) c[n++] = (place_candidate){.id = ids[i], .free = nodes_free(ids[i], np), .capacity = cap};
    }
    return n;
}

/* A run of this host alone (today's kind): it asks for no more than one node and
 * fits this host's pool. */
static bool runs_here_only(pool_kind pool, int world_size, int nodes_wanted) {
    return nodes_wanted <= 1 && world_size <= scheduler_capacity(pool);
}

/* Starts the run if it fits now; false when it waits. */
static bool try_start_locked(live_run *r) {
    if (runs_here_only(r->pool, r->world_size, r->nodes_wanted)) {
        if (free_devices(r->pool) < r->world_size) return false;
        start_locked(r);
        return true;
    }
    place_candidate c[NODES_MAX + 1];
    int ids[NODES_MAX + 1];
    int k = placement_choose(c, candidates_locked(r->pool, c), r->world_size, r->nodes_wanted, false, ids);
    if (!k) return false;
    start_parts_locked(r, ids, k);
    return true;
}

/* Starts every queued run that fits, in order; per pool, the first run that does
 * not fit blocks those behind it (no starvation of big runs). */
static void schedule_locked(void) {
    if (K.shutting_down) return;
    bool blocked[2] = {false, false};
    live_run *next;
    for (live_run *r = K.runs; r; r = next) {
        next = r->next; /* try_start_locked may finish (free) r */
        if (r->status != RUN_QUEUED || blocked[r->pool]) continue;
        if (!try_start_locked(r)) blocked[r->pool] = true;
    }
}

void run_needs_distributed(const json_t *config, run_needs *n) {
    const json_t *dist = json_object_get(config, "distributed");
    n->nodes_wanted = (int)json_integer_value(json_object_get(dist, "nodes"));
    n->hang_timeout_s = json_number_value(json_object_get(dist, "hang_timeout_s"));
}

/* A queued run, not yet in the list. */
static live_run *new_queued(const run_needs *n) {
    live_run *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->id = n->id;
    r->world_size = n->world_size;
    r->pool = n->pool;
    r->nodes_wanted = n->nodes_wanted;
    r->command = n->command;
    r->resume = n->resume;
    r->hang_timeout_s = n->hang_timeout_s;
    r->status = RUN_QUEUED;
    return r;
}

static live_run *add_queued(const run_needs *n) {
    live_run *r = new_queued(n);
    live_run **p = &K.runs;
    while (*p && (*p)->id < n->id) p = &(*p)->next; /* ids are submission order */
    r->next = *p;
    *p = r;
    return r;
}

void scheduler_submit(const run_needs *n) {
    pthread_mutex_lock(&K.mu);
    add_queued(n);
    log_info("run %lld queued: needs %d %s", (long long)n->id, n->world_size, pool_unit(n->pool));
    schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

void scheduler_resume(const run_needs *n) {
    live_run *r = new_queued(n);
    pthread_mutex_lock(&K.mu);
    live_run **p = &K.runs;
    while (*p) p = &(*p)->next; /* at the back of the queue: it is queued now */
    *p = r;
    log_info("run %lld queued again (resumed): needs %d %s", (long long)n->id, n->world_size, pool_unit(n->pool));
    schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

cancel_result scheduler_cancel(int64_t id, const char *reason) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    cancel_result res = CANCEL_NOT_LIVE;
    if (!r) {
        res = CANCEL_NOT_LIVE;
    } else if (r->status == RUN_QUEUED) {
        finish_locked(r, RUN_CANCELED, reason, NO_INT, NO_INT);
        schedule_locked(); /* it may have been blocking the runs behind it */
        res = CANCEL_DONE;
    } else if (r->cancel_reason) {
        res = CANCEL_ALREADY;
    } else {
        r->cancel_reason = xstrdup(reason);
        /* else when its start is done (scheduler_spawned) */
        if (r->pid > 0 || r->start_stored) signal_cancel_locked(r);
        res = CANCEL_SIGNALED;
    }
    pthread_mutex_unlock(&K.mu);
    return res;
}

int scheduler_queue_position(int64_t id) {
    pthread_mutex_lock(&K.mu);
    int pos = 0, n = 0;
    pool_kind pool = POOL_CPU;
    live_run *me = find(id);
    if (me && me->status == RUN_QUEUED) {
        pool = me->pool;
        for (live_run *r = K.runs; r; r = r->next) {
            if (r->pool == pool && r->status == RUN_QUEUED) n++;
            if (r == me) {
                pos = n;
                break;
            }
        }
    }
    pthread_mutex_unlock(&K.mu);
    return pos;
}

bool scheduler_hello(int64_t id, const char *secret, int rank) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    /* A started run (its secret made, its trainer asked for): the trainer may say hello
     * before the supervisor has told us its pid, so the secret alone decides. */
    bool ok = r && r->status != RUN_QUEUED && r->secret[0] && secret_equal(secret, r->secret);
    /* running: a rank has said hello; for a command run, ddp-run has (its ranks are
     * started, and a script need not report at all) */
    if (ok && (rank >= 0 || r->command) && r->status == RUN_STARTING) {
        if (r->pid > 0 || r->start_stored) mark_running_locked(r);
        else r->said_hello = true; /* running once its start is stored (scheduler_spawned) */
    }
    pthread_mutex_unlock(&K.mu);
    return ok;
}

void scheduler_end_event(int64_t id, const char *status, const char *reason) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    if (r) {
        free(r->end_status);
        free(r->end_reason);
        r->end_status = xstrdup(status);
        r->end_reason = reason && *reason ? xstrdup(reason) : NULL;
    }
    pthread_mutex_unlock(&K.mu);
}

/* The reason a person reads when the trainer's end gave none. */
static char *derive_reason(live_run *r, int wstatus) {
    const char *who = r->command ? "ddp-run" : "ddp-trainer";
    char how[128];
    describe_wait_status(wstatus, how, sizeof how);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 2) {
        /* 2: invalid config or usage, said in the log before any rank started */
        char *log_path = layout_run_path(r->id, RUN_FILE_LOG);
        char *last = logtail_last_line(log_path, 400);
        free(log_path);
        char *reason = last ? xasprintf("the trainer refused the run: %s", last)
                            : xasprintf("%s %s (invalid config or usage); see its log", who, how);
        free(last);
        return reason;
    }
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) > 128) {
        int sig = WEXITSTATUS(wstatus) - 128;
        return xasprintf("%s stopped on signal %d (%s) that the server did not send", who, sig, strsignal(sig));
    }
    char *log_path = layout_run_path(r->id, RUN_FILE_LOG);
    char *last = WIFEXITED(wstatus) ? logtail_last_line(log_path, 400) : NULL;
    free(log_path);
    char *reason = last ? xasprintf("%s %s; its last log line: %s", who, how, last)
                        : xasprintf("%s %s", who, how);
    free(last);
    return reason;
}

/* The end the server itself gave a run that did not succeed: canceled by request,
 * or failed by its own decision (a hang, a lost peer). Sets *status and a copy of the
 * reason; false when it gave none. */
static bool server_end_locked(const live_run *r, run_status *status, char **reason) {
    const char *why = r->cancel_reason ? r->cancel_reason : r->fail_reason;
    if (!why) return false;
    *status = r->cancel_reason ? RUN_CANCELED : RUN_FAILED;
    *reason = xstrdup(why);
    return true;
}

/* ---- runs across nodes: their parts' ends ---- */

static const char *part_node_name(const run_part *p, char *buf, size_t n) {
    char address[NODE_ADDR_MAX];
    if (!p->node) return scheduler_local_name();
    if (!nodes_describe(p->node, buf, n, address, sizeof address)) snprintf(buf, n, "node %d", p->node);
    return buf;
}

/* Every part still running is stopped: this host's by SIGTERM to its group (SIGKILL
 * after the grace), an agent's by leaving it out of the heartbeat's answer. */
static void stop_parts_locked(live_run *r) {
    if (r->parts_stopping) return;
    r->parts_stopping = true;
    for (int i = 0; i < r->n_parts; i++) {
        run_part *p = &r->parts[i];
        if (p->ended) continue;
        p->stop = true;
        p->stop_t = now_ms();
        if (!p->node && r->pid > 0) {
            r->kill_at = mono_ms() + K.c.cancel_grace_ms;
            if (kill(-r->pid, SIGTERM) != 0 && errno != ESRCH)
                log_warn("run %lld: SIGTERM to process group %d: %s", (long long)r->id, (int)r->pid, strerror(errno));
        }
    }
}

/* Whether part p is a likelier cause of the run's failure than part q: one that
 * failed on its own before one stopped; one whose reason is its own before one that
 * only lost a peer (a rank's failure makes the other nodes' ranks lose their peer
 * within milliseconds, and their launchers may well end first); else the one whose
 * launcher ended first. */
static bool likelier_cause(const run_part *p, const run_part *q) {
    if (!q) return true;
    if (p->failed != q->failed) return p->failed;
    bool p_own = !says_peer_lost(p->reason), q_own = !says_peer_lost(q->reason);
    if (p_own != q_own) return p_own;
    return p->end_t < q->end_t;
}

/* The run's end, once every part has ended: succeeded when all did; else the
 * server's own end (a cancel, a lost node, a hang); else the likeliest cause among
 * the parts that failed (likelier_cause), named with its node and ranks. */
static void finish_parts_locked(live_run *r) {
    const run_part *blamed = NULL;
    bool all_ok = true;
    for (int i = 0; i < r->n_parts; i++) {
        const run_part *p = &r->parts[i];
        if (p->exit_code == 0) continue;
        all_ok = false;
        if (likelier_cause(p, blamed)) blamed = p;
    }
    run_status status = RUN_SUCCEEDED;
    char *reason = NULL;
    int64_t code = 0, sig = NO_INT;
    if (!all_ok && !server_end_locked(r, &status, &reason)) {
        status = RUN_FAILED;
        int per_node = r->world_size / r->n_parts;
        char name[NODE_NAME_MAX];
        reason = xasprintf("node %s (ranks %d to %d): %s", part_node_name(blamed, name, sizeof name),
                           blamed->node_rank * per_node, (blamed->node_rank + 1) * per_node - 1,
                           blamed->reason ? blamed->reason : "its launcher failed");
    }
    if (!all_ok) {
        code = blamed ? blamed->exit_code : NO_INT;
        sig = blamed ? blamed->exit_signal : NO_INT;
    }
    finish_locked(r, status, reason, code, sig);
    free(reason);
}

/* A part ended (its launcher exited, or its node was lost). */
static void part_ended_locked(live_run *r, run_part *p) {
    p->ended = true;
    /* A part failed on its own unless it ended by the stop it was sent: an agent hears
     * of a stop at its next heartbeat, so a part whose launcher ended before the stop
     * was given, or that says why other than by the stop (its launcher then ends
     * "canceled by SIGTERM"), failed on its own and is heard of only now. */
    bool by_the_stop = p->stop && p->end_t >= p->stop_t && p->reason && strncmp(p->reason, "canceled by", 11) == 0;
    p->failed = p->exit_code != 0 && (!p->stop || !by_the_stop);
    if (p->exit_code != 0) stop_parts_locked(r);
    for (int i = 0; i < r->n_parts; i++)
        if (!r->parts[i].ended) return;
    finish_parts_locked(r);
    schedule_locked();
}

static run_part *part_on(live_run *r, int node) {
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].node == node) return &r->parts[i];
    return NULL;
}

/* This host's part of a run across nodes: its launcher exited. Its end is in its
 * journal (the relayed parts' ends come through the same socket: which node's is
 * which only the journal here tells). */
static void local_part_exited_locked(live_run *r, int wstatus) {
    run_part *p = part_on(r, 0);
    r->pid = 0; /* nothing here to signal any more */
    if (!p || p->ended) return;
    p->exit_code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : NO_INT;
    p->exit_signal = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : NO_INT;
    char *journal = layout_run_path(r->id, RUN_FILE_JOURNAL);
    journal_end e;
    if (journal_end_read(journal, &e)) {
        p->reason = e.reason[0] ? xstrdup(e.reason) : NULL;
        p->end_t = e.t;
    } else {
        p->end_t = now_ms();
    }
    free(journal);
    if (!p->reason && p->exit_code != 0) p->reason = derive_reason(r, wstatus);
    part_ended_locked(r, p);
}

void scheduler_child_exited(pid_t pid, int wstatus) {
    pthread_mutex_lock(&K.mu);
    live_run *r = K.runs;
    while (r && !(r->pid == pid && r->status != RUN_QUEUED)) r = r->next;
    if (!r) {
        pthread_mutex_unlock(&K.mu);
        return;
    }
    /* No process of the run may outlive it: the ranks die with the launcher
     * (PR_SET_PDEATHSIG), and this catches any that have not yet. */
    if (kill(-pid, SIGKILL) == 0) log_info("run %lld: killed what was left of process group %d", (long long)r->id, (int)pid);
    if (r->n_parts) {
        local_part_exited_locked(r, wstatus);
        pthread_mutex_unlock(&K.mu);
        return;
    }

    int64_t code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : NO_INT;
    int64_t sig = WIFSIGNALED(wstatus) ? WTERMSIG(wstatus) : NO_INT;
    run_status status = code == 0 ? RUN_SUCCEEDED : RUN_FAILED;
    char *reason = NULL;
    if (code != 0 && !server_end_locked(r, &status, &reason))
        reason = r->end_reason ? xstrdup(r->end_reason) : derive_reason(r, wstatus);
    finish_locked(r, status, reason, code, sig);
    free(reason);
    schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

/* Command runs only: a rank that has reported and then says nothing for
 * hang_timeout_s stops the run, which fails naming the ranks furthest behind. */
static void watch_hang_locked(live_run *r, int64_t now) {
    if (!r->last_progress_ms || r->hang_timeout_s <= 0 || r->fail_reason || r->cancel_reason ||
        (r->pid <= 0 && !r->start_stored))
        return;
    int64_t limit = (int64_t)(r->hang_timeout_s * 1000);
    bool hung = false;
    int64_t behind = INT64_MAX;
    for (int k = 0; k < r->world_size; k++) {
        if (!r->last_progress_ms[k]) continue;
        if (now - r->last_progress_ms[k] > limit) hung = true;
        if (r->last_step[k] < behind) behind = r->last_step[k];
    }
    if (!hung) return;
    buf_t who = {0};
    int n = 0;
    for (int k = 0; k < r->world_size; k++)
        if (r->last_progress_ms[k] && r->last_step[k] == behind) buf_printf(&who, "%s%d", n++ ? ", " : "", k);
    r->fail_reason = xasprintf("no progress for %.0f s (distributed.hang_timeout_s): rank%s %s furthest behind, at "
                               "step %lld; the run was stopped", r->hang_timeout_s, n > 1 ? "s" : "", who.data,
                               (long long)behind);
    buf_free(&who);
    r->kill_at = now + K.c.cancel_grace_ms;
    if (r->n_parts) {
        log_warn("run %lld: %s: its nodes are told to stop it", (long long)r->id, r->fail_reason);
        stop_parts_locked(r);
        return;
    }
    log_warn("run %lld: %s: SIGTERM to process group %d", (long long)r->id, r->fail_reason, (int)r->pid);
    if (kill(-r->pid, SIGTERM) != 0 && errno != ESRCH)
        log_warn("run %lld: SIGTERM to process group %d: %s", (long long)r->id, (int)r->pid, strerror(errno));
}

void scheduler_progress(int64_t id, int rank, int64_t global_step) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    if (r && r->last_progress_ms && rank >= 0 && rank < r->world_size) {
        r->last_progress_ms[rank] = mono_ms();
        if (global_step != NO_INT) r->last_step[rank] = global_step;
    }
    pthread_mutex_unlock(&K.mu);
}

static bool watch_adopted_locked(live_run *r);

/* Nodes not heard from for the node timeout are lost: each run with a part there
 * fails naming the node, its other parts are stopped. True when a run finished. */
static bool watch_nodes_locked(int64_t now) {
    int ids[NODES_MAX];
    int64_t silent[NODES_MAX];
    int n = nodes_take_lost(now, ids, silent, NODES_MAX);
    bool finished = false;
    for (int i = 0; i < n; i++) {
        char name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
        if (!nodes_describe(ids[i], name, sizeof name, address, sizeof address)) snprintf(name, sizeof name, "%d", ids[i]);
        log_warn("node %s (%s) is lost: nothing heard from it for %.1f s", name, address, (double)silent[i] / 1000);
        relay_node_lost(ids[i]);
        live_run *next;
        for (live_run *r = K.runs; r; r = next) {
            next = r->next; /* part_ended_locked may finish (free) r */
            run_part *p = part_on(r, ids[i]);
            if (!p || p->ended) continue;
            int per_node = r->world_size / r->n_parts;
            char *why = xasprintf("node %s (ranks %d to %d) stopped heartbeating: nothing heard from it for %.0f s "
                                  "(the node timeout); the run was stopped on every node", name,
                                  p->node_rank * per_node, (p->node_rank + 1) * per_node - 1,
                                  (double)silent[i] / 1000);
            if (!r->fail_reason && !r->cancel_reason) r->fail_reason = xstrdup(why);
            p->reason = why;
            p->end_t = now_ms();
            p->exit_code = p->exit_signal = NO_INT;
            part_ended_locked(r, p); /* stops the other parts; may finish (free) r */
            finished = true;
        }
    }
    return finished;
}

void scheduler_tick(void) {
    pthread_mutex_lock(&K.mu);
    int64_t now = mono_ms();
    bool finished = false;
    live_run *next;
    for (live_run *r = K.runs; r; r = next) {
        next = r->next; /* watch_adopted_locked may finish (free) r */
        if (r->adopted && watch_adopted_locked(r)) {
            finished = true;
            continue;
        }
        watch_hang_locked(r, now);
        if ((r->cancel_reason || r->fail_reason || r->parts_stopping) && r->pid > 0 && !r->killed && now >= r->kill_at) {
            r->killed = true;
            log_info("run %lld: still running %d ms after SIGTERM: SIGKILL to process group %d",
                     (long long)r->id, K.c.cancel_grace_ms, (int)r->pid);
            kill(-r->pid, SIGKILL);
        }
    }
    if (watch_nodes_locked(now)) finished = true;
    if (finished) schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

/* ---- start-up recovery ---- */

/* Kills the processes of process group `pgid` that belong to `run_dir` (a pid may
 * have been reused: only processes started for that run directory are touched).
 * Returns how many. */
static int kill_leftovers(pid_t pgid, const char *run_dir) {
    DIR *d = opendir("/proc");
    if (!d) return 0;
    int killed = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!isdigit((unsigned char)e->d_name[0])) continue;
        pid_t pid = (pid_t)atoi(e->d_name);
        proc_stat ps;
        if (proc_stat_read(pid, &ps) != 0 || ps.pgrp != pgid) continue;
        if (proc_cmdline_has(pid, run_dir) && kill(pid, SIGKILL) == 0) killed++;
    }
    closedir(d);
    return killed;
}

/* ---- runs a previous server started: taken back, or finished from their journal ---- */

/* The journal's hook: a rank of an adopted command run made progress (hang watch). */
static void journal_progress(void *ctx, int rank, int64_t global_step) {
    live_run *r = ctx;
    if (!r->last_progress_ms || rank < 0 || rank >= r->world_size) return;
    r->last_progress_ms[rank] = mono_ms();
    if (global_step != NO_INT) r->last_step[rank] = global_step;
}

/* "its journal ends at step 812 without an end event" (malloc'd). */
static char *journal_ending(const live_run *r) {
    const journal_outcome *o = r->journal ? journal_replay_outcome(r->journal) : NULL;
    if (!o || o->last_step == NO_INT) return xstrdup("its journal has no step and no end event");
    return xasprintf("its journal ends at step %lld without an end event", (long long)o->last_step);
}

/* The end a run's journal gives it, once its processes are gone (adopted or not):
 * the journal's `end`, unless the server had canceled or stopped it; without an
 * `end`, failed with `gone` (what became of its processes) and where its journal
 * ends. */
static void finish_from_journal_locked(live_run *r, const char *gone) {
    if (r->journal) journal_replay_read(r->journal, true, 0);
    const journal_outcome *o = r->journal ? journal_replay_outcome(r->journal) : NULL;
    run_status said = RUN_FAILED;
    bool ended = o && o->ended && run_status_parse(o->status, &said) && run_status_is_final(said);
    int64_t code = ended ? o->exit_code : NO_INT;
    if (ended && code == NO_INT) code = said == RUN_SUCCEEDED ? 0 : said == RUN_FAILED ? 1 : NO_INT;
    /* a success stands; else the server's own end; else the journal's; else `gone` */
    run_status status = said;
    char *reason = NULL; /* copied: finishing frees the run and its journal */
    if (!(ended && said == RUN_SUCCEEDED) && !server_end_locked(r, &status, &reason)) {
        if (ended) {
            reason = o->reason ? xstrdup(o->reason) : NULL;
        } else {
            char *ending = journal_ending(r);
            reason = xasprintf("%s; %s", gone, ending);
            free(ending);
        }
    }
    finish_locked(r, status, reason, code, NO_INT);
    free(reason);
}

/* An adopted run, each tick: its journal's new lines; once its launcher is gone, its
 * end. True when it finished (r is freed). */
static bool watch_adopted_locked(live_run *r) {
    if (r->journal) journal_replay_read(r->journal, false, 4 << 20);
    if (proc_is_alive(r->pid, r->start_time)) return false;
    char *run_dir = layout_run_dir(r->id);
    if (kill_leftovers(r->pid, run_dir)) log_info("run %lld: killed what was left of process group %d", (long long)r->id, (int)r->pid);
    free(run_dir);
    char *gone = xasprintf("its launcher (pid %d) exited while the server was not its parent", (int)r->pid);
    finish_from_journal_locked(r, gone);
    free(gone);
    return true;
}

/* An adopted run's devices, as the store has them ("cpu:3", "gpu:UUID"), taken
 * from the pool again; one this server no longer has is -1. */
static void take_devices_locked(live_run *r, const json_t *names) {
    r->devices = xmalloc((size_t)r->world_size * sizeof *r->devices);
    for (int k = 0; k < r->world_size; k++) {
        const char *name = json_string_value(json_array_get(names, (size_t)k));
        int found = -1;
        for (int i = 0; name && found < 0 && i < scheduler_capacity(r->pool); i++) {
            char mine[160];
            if (r->pool == POOL_GPU) snprintf(mine, sizeof mine, "gpu:%s", K.c.gpus[i]);
            else snprintf(mine, sizeof mine, "cpu:%d", i);
            if (strcmp(mine, name) == 0 && K.owner[r->pool][i] == 0) found = i;
        }
        if (found >= 0) K.owner[r->pool][found] = r->id;
        else log_warn("run %lld: its device %s is not one this server has free: it is not counted", (long long)r->id,
                      name ? name : "(none)");
        r->devices[k] = found;
    }
    r->devices_json = json_dumps(names, JSON_COMPACT);
}

/* A run the previous server had started (starting, running, canceling). Its launcher
 * still alive (the pid, its start time as stored at spawn, and its command line
 * naming the run's directory): adopted, its journal replayed from where the store
 * is, and supervised on. Gone: its journal is replayed to the end and says how it
 * ended. */
/* Whether the devices the store has for a run name an agent node's ("node-b/cpu:0"). */
static bool ran_across_nodes(const json_t *devices) {
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d) if (json_string_value(d) && strchr(json_string_value(d), '/')) return true;
    return false;
}

static void recover_started_locked(const run_brief *b, const run_needs *need) {
    run_process rp = {.pid_start_time = NO_INT};
    if (store_get_run_process(b->id, &rp) < 0) log_error("run %lld: cannot read its process from the database", (long long)b->id);
    char *run_dir = layout_run_dir(b->id), *journal = layout_run_path(b->id, RUN_FILE_JOURNAL);
    pid_t pid = b->pid != NO_INT && b->pid > 1 ? (pid_t)b->pid : 0;
    if (ran_across_nodes(rp.devices)) {
        /* its parts on the agents hear that it is over at their next heartbeat (it is
         * not in the answer), and stop */
        if (pid) kill_leftovers(pid, run_dir);
        live_run *r = add_queued(need);
        r->status = b->status;
        finish_locked(r, b->status == RUN_CANCELING ? RUN_CANCELED : RUN_FAILED,
                      "the coordinator restarted while the run ran across nodes: a run across nodes is not taken "
                      "back after a restart; its parts were stopped on every node (resume it, or submit it again)",
                      NO_INT, NO_INT);
        json_decref(rp.devices);
        free(journal);
        free(run_dir);
        return;
    }
    bool recorded = rp.pid_start_time != NO_INT && rp.secret[0];
    bool alive = pid && recorded && proc_is_alive(pid, (uint64_t)rp.pid_start_time) && proc_cmdline_has(pid, run_dir);
    live_run *r = add_queued(need);
    r->status = b->status;
    r->pid = pid;
    if (alive && r->command) watch_hangs_of(r);
    r->journal = journal_replay_open(b->id, journal, journal_progress, r);
    if (!r->journal) log_error("run %lld: cannot read what the database holds of it: its journal is not replayed", (long long)b->id);
    if (alive) {
        r->adopted = true;
        r->start_time = (uint64_t)rp.pid_start_time;
        snprintf(r->secret, sizeof r->secret, "%s", rp.secret);
        rendezvous_open(r->id, r->secret);
        take_devices_locked(r, rp.devices);
        if (r->journal) journal_replay_read(r->journal, false, 0);
        log_info("run %lld: taken back after the restart: its launcher (pid %d) is alive; %lld event(s) replayed "
                 "from its journal, which feeds it from now on", (long long)r->id, (int)pid,
                 r->journal ? (long long)journal_replay_outcome(r->journal)->replayed : 0LL);
        if (b->status == RUN_CANCELING) { /* canceled before the restart: its SIGTERM again, its SIGKILL on time */
            r->cancel_reason = xstrdup("canceled before the server restarted");
            signal_cancel_locked(r);
        }
    } else {
        int killed = pid ? kill_leftovers(pid, run_dir) : 0;
        const char *gone = !killed  ? "the server restarted and the run's processes were gone"
                           : recorded ? "the server restarted and the run's launcher was gone: what was left of its "
                                        "processes was killed"
                                      : "the server restarted and could not take the run's processes back (their "
                                        "start time was not recorded): they were killed";
        if (b->status == RUN_CANCELING) r->cancel_reason = xstrdup("the server stopped while the run was being canceled");
        finish_from_journal_locked(r, gone);
    }
    json_decref(rp.devices);
    free(journal);
    free(run_dir);
}

void scheduler_recover(void) {
    run_brief *runs = NULL;
    int n = store_list_unfinished(&runs);
    if (n < 0) {
        log_error("cannot read unfinished runs from the database");
        return;
    }
    pthread_mutex_lock(&K.mu);
    for (int i = 0; i < n; i++) {
        run_brief *b = &runs[i];
        pool_kind pool = strcmp(b->device_kind, "gpu") == 0 ? POOL_GPU : POOL_CPU;
        /* resumes: queued by POST /runs/{id}/resume, it starts with --resume */
        run_needs need = {.id = b->id, .world_size = b->world_size, .pool = pool, .command = b->command,
                          .resume = b->resumes > 0};
        char *config = layout_run_path(b->id, RUN_FILE_CONFIG);
        json_t *cfg = json_load_file(config, 0, NULL);
        free(config);
        run_needs_distributed(cfg, &need);
        json_decref(cfg);
        if (b->status != RUN_QUEUED) {
            recover_started_locked(b, &need);
            continue;
        }
        live_run *r = add_queued(&need);
        if (b->world_size > scheduler_capacity(pool)) {
            char *reason = xasprintf("needs %d %s but this server now has %d", b->world_size,
                                     pool_unit(pool), scheduler_capacity(pool));
            finish_locked(r, RUN_FAILED, reason, NO_INT, NO_INT);
            free(reason);
        }
    }
    free(runs);
    schedule_locked();
    pthread_mutex_unlock(&K.mu);
    store_sync();
}

bool scheduler_journal_fed(int64_t id) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    bool fed = r && r->adopted;
    pthread_mutex_unlock(&K.mu);
    return fed;
}

void scheduler_shutdown(void) {
    pthread_mutex_lock(&K.mu);
    K.shutting_down = true;
    int active = 0;
    for (live_run *r = K.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED) continue; /* stays queued for the next start */
        active++;
        if (r->cancel_reason) continue;
        r->cancel_reason = xstrdup("the server shut down");
        if (r->pid > 0 || r->start_stored) signal_cancel_locked(r);
    }
    if (active) log_info("shutting down: canceling %d active run(s)", active);
    /* The reaper keeps running: it SIGKILLs after the grace period and finishes them. */
    int64_t deadline = mono_ms() + K.c.cancel_grace_ms + 5000;
    for (;;) {
        active = 0;
        for (live_run *r = K.runs; r; r = r->next) active += r->status != RUN_QUEUED;
        if (!active || mono_ms() >= deadline) break;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&K.changed, &K.mu, &ts);
    }
    if (active) log_warn("%d run(s) did not end in time; they stay as they are", active);
    pthread_mutex_unlock(&K.mu);
}

void scheduler_take_snapshot(scheduler_snapshot *out) {
    pthread_mutex_lock(&K.mu);
    *out = (scheduler_snapshot){.cpu_slots = K.c.slots, .cpu_free = free_devices(POOL_CPU), .gpus = K.c.n_gpus,
                                .gpu_free = free_devices(POOL_GPU)};
    for (live_run *r = K.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED) out->queued++;
        else out->active++;
    }
    pthread_mutex_unlock(&K.mu);
}

/* ---- runs across nodes: the agents' side ---- */

/* What an agent needs to start its part: the config, its node rank, the secret, the
 * devices, where rank 0 is. */
static json_t *part_json_locked(const live_run *r, const run_part *p) {
    json_t *devices = json_array();
    int per_node = r->world_size / r->n_parts;
    for (int d = 0; d < per_node; d++) {
        if (r->pool == POOL_GPU) json_array_append_new(devices, json_string(nodes_gpu_id(p->node, p->devices[d])));
        else json_array_append_new(devices, json_integer(p->devices[d]));
    }
    char master[NODE_ADDR_MAX] = "", name[NODE_NAME_MAX];
    const run_part *first = &r->parts[0];
    if (!first->node) snprintf(master, sizeof master, "%s", K.c.advertise ? K.c.advertise : "");
    else nodes_describe(first->node, name, sizeof name, master, sizeof master);
    char rendezvous[64];
    snprintf(rendezvous, sizeof rendezvous, "/runs/%lld/rendezvous", (long long)r->id);
    return json_pack("{s:I, s:i, s:i, s:i, s:b, s:b, s:O, s:s, s:s, s:i, s:s, s:s, s:o}", "run", (json_int_t)r->id,
                     "node_rank", p->node_rank, "nodes", r->n_parts, "world_size", r->world_size, "command",
                     r->command, "resume", r->resume, "config", r->config ? r->config : json_null(), "secret",
                     r->secret, "master_addr", master, "master_port", r->port, "rendezvous", rendezvous, "pool",
                     pool_name(r->pool), "devices", devices);
}

/* An agent's word on one of its parts. */
static void part_report_locked(int node, const json_t *rep) {
    live_run *r = find((int64_t)json_integer_value(json_object_get(rep, "run")));
    run_part *p = r ? part_on(r, node) : NULL;
    const char *state = json_string_value(json_object_get(rep, "state"));
    if (!p || p->ended || !state || strcmp(state, "exited") != 0) return;
    const json_t *code = json_object_get(rep, "exit_code"), *sig = json_object_get(rep, "signal");
    p->exit_code = json_is_integer(code) ? json_integer_value(code) : NO_INT;
    p->exit_signal = json_is_integer(sig) ? json_integer_value(sig) : NO_INT;
    const char *reason = json_string_value(json_object_get(rep, "reason"));
    p->reason = reason && reason[0] ? xstrdup(reason) : NULL;
    json_t *t = json_object_get(rep, "end_t");
    p->end_t = json_is_integer(t) ? json_integer_value(t) : now_ms();
    part_ended_locked(r, p);
}

json_t *scheduler_node_heartbeat(int node, const json_t *reports) {
    pthread_mutex_lock(&K.mu);
    size_t i;
    json_t *rep;
    json_array_foreach(reports, i, rep) part_report_locked(node, rep);
    json_t *parts = json_array();
    for (live_run *r = K.runs; r; r = r->next) {
        run_part *p = part_on(r, node);
        if (p && !p->ended && !p->stop && r->status != RUN_QUEUED) json_array_append_new(parts, part_json_locked(r, p));
    }
    pthread_mutex_unlock(&K.mu);
    return parts;
}

/* "this host 2 of 4, node-b 0 of 2" (malloc'd). */
static char *free_now_locked(pool_kind pool) {
    place_candidate c[NODES_MAX + 1];
    int n = candidates_locked(pool, c);
    buf_t b = {0};
    for (int i = 0; i < n; i++) {
        char name[NODE_NAME_MAX], address[NODE_ADDR_MAX];
        if (c[i].id) nodes_describe(c[i].id, name, sizeof name, address, sizeof address);
        buf_printf(&b, "%s%s %d of %d", i ? ", " : "", c[i].id ? name : scheduler_local_name(), c[i].free, c[i].capacity);
    }
    if (!n) buf_printf(&b, "no node other than this host (which has %d, and %s)", scheduler_capacity(pool),
                       K.c.advertise ? "takes part" : "takes no part in runs across nodes: serve --advertise ADDR");
    return b.data;
}

bool scheduler_can_place(const run_needs *need, char *err, size_t errlen) {
    pool_kind pool = need->pool;
    int world_size = need->world_size, nodes_wanted = need->nodes_wanted;
    if (nodes_wanted > 0 && world_size % nodes_wanted != 0) {
        snprintf(err, errlen, "distributed.nodes %d does not divide world_size %d: every node runs as many ranks",
                 nodes_wanted, world_size);
        return false;
    }
    if (runs_here_only(pool, world_size, nodes_wanted)) return true;
    pthread_mutex_lock(&K.mu);
    place_candidate c[NODES_MAX + 1];
    int ids[NODES_MAX + 1];
    int n = candidates_locked(pool, c);
    bool ok = placement_choose(c, n, world_size, nodes_wanted, true, ids) > 0;
    if (!ok) {
        char *what = free_now_locked(pool);
        if (nodes_wanted > 1)
            snprintf(err, errlen, "needs %d nodes with %d %s each, and there are not that many (%s, %s as free of all)",
                     nodes_wanted, world_size / nodes_wanted, pool_unit(pool), what, pool_unit(pool));
        else
            snprintf(err, errlen, "needs %d %s, more than this host has (%d: --%s), and no set of nodes holds it "
                     "(%s, %s as free of all)", world_size, pool_unit(pool), scheduler_capacity(pool),
                     pool == POOL_GPU ? "gpus" : "slots", what, pool_unit(pool));
        free(what);
    }
    pthread_mutex_unlock(&K.mu);
    return ok;
}

char *scheduler_waiting_for(int64_t id) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find(id);
    char *text = NULL;
    if (r && r->status == RUN_QUEUED) {
        if (runs_here_only(r->pool, r->world_size, r->nodes_wanted)) {
            text = xasprintf("%d %s on this host (%d free of %d)", r->world_size, pool_unit(r->pool),
                             free_devices(r->pool), scheduler_capacity(r->pool));
        } else {
            char *what = free_now_locked(r->pool);
            if (r->nodes_wanted > 1)
                text = xasprintf("%d nodes with %d free %s each (free now: %s)", r->nodes_wanted,
                                 r->world_size / r->nodes_wanted, pool_unit(r->pool), what);
            else
                text = xasprintf("%d %s on as few nodes as hold them, as many on each (free now: %s)", r->world_size,
                                 pool_unit(r->pool), what);
            free(what);
        }
    }
    pthread_mutex_unlock(&K.mu);
    return text;
}

json_t *scheduler_nodes_json(void) {
    pthread_mutex_lock(&K.mu);
    json_t *gpus = json_array();
    for (int i = 0; i < K.c.n_gpus; i++) json_array_append_new(gpus, json_string(K.c.gpus[i]));
    json_t *here = json_pack("{s:s, s:s?, s:b, s:s, s:i, s:i, s:o, s:i}", "name", scheduler_local_name(), "address",
                             K.c.advertise, "local", 1, "state", "up", "slots", K.c.slots, "free_slots",
                             free_devices(POOL_CPU), "gpus", gpus, "free_gpus", free_devices(POOL_GPU));
    pthread_mutex_unlock(&K.mu);
    json_t *all = json_array();
    json_array_append_new(all, here);
    json_t *agents = nodes_to_json();
    json_array_extend(all, agents);
    json_decref(agents);
    return all;
}
