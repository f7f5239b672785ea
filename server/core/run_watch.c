/* The scheduler's watches: the hang watch of command runs, lost nodes, and runs a
 * previous server started (taken back at start-up, or finished from their journal).
 * See sched_state.h. */
#include "sched_state.h"

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

/* A command run's hang watch is the server's: the ranks report to it, not to ddp-run. */
void watch_hangs_of(live_run *r) {
    r->last_progress_ms = calloc((size_t)r->world_size, sizeof *r->last_progress_ms);
    r->last_step = calloc((size_t)r->world_size, sizeof *r->last_step);
    if (!r->last_progress_ms || !r->last_step) abort();
}

/* Command runs only: a rank that has reported and then says nothing for
 * hang_timeout_s stops the run, which fails naming the ranks furthest behind. */
void watch_hang_locked(live_run *r, int64_t now) {
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

/* Nodes not heard from for the node timeout are lost: each run with a part there
 * fails naming the node, its other parts are stopped. True when a run finished. */
bool watch_nodes_locked(int64_t now) {
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

/* An adopted run, each tick: its journal's new lines; once its launcher is gone, its
 * end. True when it finished (r is freed). */
bool watch_adopted_locked(live_run *r) {
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
        device_pool_take_named(&K.devices, r->pool, r->id, rp.devices, r->world_size);
        r->devices_json = json_dumps(rp.devices, JSON_COMPACT);
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

void scheduler_progress(int64_t id, int rank, int64_t global_step) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find_run(id);
    if (r && r->last_progress_ms && rank >= 0 && rank < r->world_size) {
        r->last_progress_ms[rank] = mono_ms();
        if (global_step != NO_INT) r->last_step[rank] = global_step;
    }
    pthread_mutex_unlock(&K.mu);
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
