/* The life of a run once queued: its start (devices, secret, port, launcher), its
 * parts across nodes, and how it ends (a part's end, the blame among the parts, the end
 * its journal gives it). See sched_state.h. */
#include "sched_state.h"

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
#include "launcher_argv.h"
#include "logtail.h"
#include "node_relay.h"
#include "nodes.h"
#include "peer_loss.h"
#include "placement.h"
#include "ports.h"
#include "procstat.h"
#include "rendezvous.h"
#include "secret.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"

live_run *find_run(int64_t id) {
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

/* Queues the run's final state and forgets it. Devices go back to the pool. */
void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code,
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
    device_pool_release(&K.devices, r->pool, r->id);
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].node) nodes_release(r->parts[i].node, r->id);
    if (r->n_parts) relay_run_ended(r->id);
    unlink_run(r);
    free_run(r);
    pthread_cond_broadcast(&K.changed);
}

void signal_cancel_locked(live_run *r) {
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
void start_locked(live_run *r) {
    int *devices = xmalloc((size_t)r->world_size * sizeof *devices);
    buf_t names = {0}, json = {0}, visible = {0};
    buf_printf(&json, "[");
    device_pool_take(&K.devices, r->pool, r->world_size, r->id, devices, &names, &json, &visible);
    free(devices);
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
void start_parts_locked(live_run *r, const int *ids, int k) {
    int per_node = r->world_size / k;
    r->n_parts = k;
    r->parts = calloc((size_t)k, sizeof *r->parts);
    if (!r->parts) abort();
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
            device_pool_take(&K.devices, r->pool, per_node, r->id, part->devices, &names, &json, &visible);
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
void mark_running_locked(live_run *r) {
    r->status = RUN_RUNNING;
    store_op op = {.kind = OP_RUN_RUNNING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    log_info("run %lld running", (long long)r->id);
}

/* A queued run, not yet in the list. */
live_run *new_queued(const run_needs *n) {
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

live_run *add_queued(const run_needs *n) {
    live_run *r = new_queued(n);
    live_run **p = &K.runs;
    while (*p && (*p)->id < n->id) p = &(*p)->next; /* ids are submission order */
    r->next = *p;
    *p = r;
    return r;
}

/* The reason a person reads when the trainer's end gave none. */
char *derive_reason(live_run *r, int wstatus) {
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
bool server_end_locked(const live_run *r, run_status *status, char **reason) {
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
void stop_parts_locked(live_run *r) {
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
void part_ended_locked(live_run *r, run_part *p) {
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

run_part *part_on(live_run *r, int node) {
    for (int i = 0; i < r->n_parts; i++)
        if (r->parts[i].node == node) return &r->parts[i];
    return NULL;
}

/* This host's part of a run across nodes: its launcher exited. Its end is in its
 * journal (the relayed parts' ends come through the same socket: which node's is
 * which only the journal here tells). */
void local_part_exited_locked(live_run *r, int wstatus) {
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
void finish_from_journal_locked(live_run *r, const char *gone) {
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

/* What an agent needs to start its part: the config, its node rank, the secret, the
 * devices, where rank 0 is. */
json_t *part_json_locked(const live_run *r, const run_part *p) {
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
void part_report_locked(int node, const json_t *rep) {
    live_run *r = find_run((int64_t)json_integer_value(json_object_get(rep, "run")));
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
