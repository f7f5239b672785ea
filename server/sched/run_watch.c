/* The scheduler's watches: the hang watch of command runs, and runs a previous
 * server started (taken back at start-up and fed from their journal, or finished
 * from it). See sched_state.h. */
#include "sched_state.h"
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ckpt_header.h"
#include "journal_replay.h"
#include "logtail.h"
#include "rendezvous.h"
#include "run_dir.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

/* A command run's hang watch is the server's: the ranks report to it, not to ddp-run. */
void watch_hangs_of(live_run *r) {
    free(r->last_progress_ms); /* a run started again: counted anew */
    free(r->last_step);
    free(r->rank_gone);
    r->last_progress_ms = calloc((size_t)r->world_size, sizeof *r->last_progress_ms);
    r->last_step = calloc((size_t)r->world_size, sizeof *r->last_step);
    r->rank_gone = calloc((size_t)r->world_size, sizeof *r->rank_gone);
    if (!r->last_progress_ms || !r->last_step || !r->rank_gone) abort();
}

void rank_state_seen_locked(live_run *r, const store_op *op) {
    if (!r || !r->rank_gone || r->status == RUN_QUEUED || op->rank < 0 || op->rank >= r->world_size) return;
    const char *state = op->u.rank_state.state;
    r->rank_gone[op->rank] = state && strcmp(state, "started") != 0;
}

/* A rank reported (a command run's, with a hang watch): its watch counts from now. */
static void note_progress(live_run *r, int rank, int64_t global_step) {
    if (!r || !r->last_progress_ms || rank < 0 || rank >= r->world_size) return;
    r->last_progress_ms[rank] = mono_ms();
    if (global_step != NO_INT) r->last_step[rank] = global_step;
}

/* Command runs only: a rank that has reported and then says nothing for
 * hang_timeout_s stops the run, which fails naming the ranks furthest behind. */
void watch_hang_locked(live_run *r, int64_t now) {
    if (!r->last_progress_ms || r->hang_timeout_s <= 0 || r->fail_reason || r->cancel_reason || !r->start_stored)
        return;
    int64_t limit = (int64_t)(r->hang_timeout_s * 1000);
    bool hung = false;
    int64_t behind = INT64_MAX;
    for (int k = 0; k < r->world_size; k++) {
        if (!r->last_progress_ms[k] || r->rank_gone[k]) continue; /* a rank that exited is not hung */
        if (now - r->last_progress_ms[k] > limit) hung = true;
        if (r->last_step[k] < behind) behind = r->last_step[k];
    }
    if (!hung) return;
    buf_t who = {0};
    int n = 0;
    rank_failure_clear(&r->server_blame);
    for (int k = 0; k < r->world_size; k++) {
        if (!r->last_progress_ms[k] || r->rank_gone[k] || r->last_step[k] != behind) continue;
        buf_printf(&who, "%s%d", n++ ? ", " : "", k);
        if (r->server_blame.rank != NO_INT) continue;
        r->server_blame.rank = k; /* the attempt's failing rank: the first furthest behind, and its last line */
        char *dir = layout_run_dir(r->id), rel[64];
        snprintf(rel, sizeof rel, RUN_DIR_RANK_LOG, k);
        r->server_blame.last_line = logtail_last_line(dir, rel, 1000);
        free(dir);
    }
    r->fail_reason = xasprintf("no progress for %.0f s (distributed.hang_timeout_s): rank%s %s furthest behind, at "
                               "step %lld; the run was stopped", r->hang_timeout_s, n > 1 ? "s" : "", who.data,
                               (long long)behind);
    buf_free(&who);
    log_warn("run %lld: %s: %s", (long long)r->id, r->fail_reason,
             r->across ? "its nodes are told to stop it" : "its launcher is told to stop");
    stop_parts_locked(r);
}

/* ---- runs a previous server started: taken back, or finished from their journal ---- */

/* The journal's hooks: a rank of an adopted command run made progress (hang watch);
 * its launcher's attempt started or ended. */
static void journal_progress(void *ctx, int rank, int64_t global_step) { note_progress(ctx, rank, global_step); }
static void journal_attempt(void *ctx, store_op *op) {
    if (op->kind == OP_RANK_STATE) rank_state_seen_locked(ctx, op);
    else attempt_seen_locked(ctx, op);
}

/* A point its journal brings counts against the run's cap (--max-points-per-run), as
 * ingest counts those its sockets bring: past it the point is not stored and the run
 * fails for good, with ingest's words. */
static bool journal_keep(void *ctx, const store_op *op) {
    live_run *r = ctx;
    int64_t points = store_op_points(op);
    if (!points || K.c.max_points <= 0) return true;
    if (r->journal_points < 0) {
        int64_t held = store_count_points(r->id);
        r->journal_points = held > 0 ? held : 0;
    }
    if (r->journal_points + points <= K.c.max_points) {
        r->journal_points += points;
        return true;
    }
    if (!r->fail_reason) {
        char *reason = xasprintf("its metrics passed the cap of %lld points a run may store (ddpd serve "
                                 "--max-points-per-run): it had stored %lld (steps, epochs and series values, its "
                                 "journal's among them) and was stopped as a runaway flood; what it reported past the "
                                 "cap was not stored. Report less often (every N steps), or ask the operator for a "
                                 "larger cap", (long long)K.c.max_points, (long long)r->journal_points);
        fail_for_good_locked(r, reason);
        free(reason);
    }
    return false;
}

void watch_adopted_locked(live_run *r) {
    if (r->journal) journal_replay_read(r->journal, false, 4 << 20);
}

/* Whether the devices the store has for a run name an agent node's ("node-b/cpu:0"). */
static bool ran_across_nodes(const json_t *devices) {
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d) if (json_string_value(d) && strchr(json_string_value(d), '/')) return true;
    return false;
}

/* A run the previous server had started (starting, running, canceling). Its launcher
 * still alive (this host's executor finds it again from the pid and start time stored
 * at its start): adopted, its journal replayed from where the store is, and
 * supervised on. Gone: its journal is replayed to the end and says how it ended. A
 * run across nodes is not taken back. */
static void recover_started_locked(const run_brief *b, const run_needs *need) {
    run_process rp = {.pid_start_time = NO_INT};
    if (store_get_run_process(b->id, &rp) < 0) log_error("run %lld: cannot read its process from the database", (long long)b->id);
    pid_t pid = b->pid != NO_INT && b->pid > 1 ? (pid_t)b->pid : 0;
    /* the start time counts only with the secret: without it the run could never be let in again */
    part_handle h = {.pid = pid,
                     .start_time = rp.pid_start_time != NO_INT && rp.secret[0] ? (uint64_t)rp.pid_start_time : 0};
    live_run *r = add_queued(need);
    r->status = b->status;
    r->started_ms = b->started_at != NO_INT ? b->started_at : 0;
    if (b->preempting) r->preempt_by = b->preempted_by != NO_INT ? b->preempted_by : -1; /* asked to stop for it */
    if (ran_across_nodes(rp.devices)) {
        /* its parts on the agents hear that it is over at their next heartbeat (it is
         * not in the answer), and stop; what is left of this host's is killed */
        K.local->abandon(b->id, &h);
        finish_locked(r, b->status == RUN_CANCELING ? RUN_CANCELED : RUN_FAILED,
                      "the coordinator restarted while the run ran across nodes: a run across nodes is not taken "
                      "back after a restart; its parts were stopped on every node (resume it, or submit it again)",
                      NO_INT, NO_INT);
        json_decref(rp.devices);
        return;
    }
    char gone[256];
    part_launch l = {.run = b->id, .world_size = r->world_size, .command = r->command, .secret = rp.secret};
    bool alive = K.local->adopt(&l, &h, gone, sizeof gone) == ADOPT_TAKEN;
    if (alive && r->command) watch_hangs_of(r);
    char *dir = layout_run_dir(b->id);
    r->journal = journal_replay_open(b->id, dir,
                                     &(journal_hooks){.ctx = r, .progress = journal_progress, .attempt = journal_attempt,
                                                      .keep = journal_keep});
    free(dir);
    if (!r->journal) log_error("run %lld: cannot read what the database holds of it: its journal is not replayed", (long long)b->id);
    if (alive) {
        r->adopted = true;
        r->n_parts = 1;
        r->parts = calloc(1, sizeof *r->parts);
        if (!r->parts) abort();
        r->parts[0] = (run_part){.exec = K.local, .handle = h, .exit_code = NO_INT, .exit_signal = NO_INT};
        r->start_stored = true;
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
        } else if (r->preempt_by) { /* being preempted when the server stopped: asked again (the same request) */
            preempt_again_locked(r);
        }
    } else {
        if (b->status == RUN_CANCELING) r->cancel_reason = xstrdup("the server stopped while the run was being canceled");
        finish_from_journal_locked(r, gone);
    }
    json_decref(rp.devices);
}

/* A run a previous server handed to Slurm (the store kept its job's id): taken back
 * as it was, waiting in Slurm's queue (the store has it queued) or started, its parts
 * followed by the Slurm executor again. Its events were never journal-fed here: its
 * parts kept them, and go on sending them. A server started without --executor
 * slurm leaves the job to Slurm, and the run fails saying so. */
static void recover_batch_locked(const run_brief *b, const run_needs *need, const run_process *rp) {
    live_run *r = add_queued(need);
    if (!K.batch) {
        char *why = xasprintf("the server restarted without --executor slurm: the run's Slurm job %s was left to "
                              "Slurm (scancel %s stops it)", rp->job, rp->job);
        finish_locked(r, b->status == RUN_CANCELING ? RUN_CANCELED : RUN_FAILED, why, NO_INT, NO_INT);
        free(why);
        return;
    }
    bool pending = b->status == RUN_QUEUED;
    r->status = pending ? RUN_STARTING : b->status;
    snprintf(r->secret, sizeof r->secret, "%s", rp->secret);
    rendezvous_open(r->id, r->secret);
    r->devices_json = rp->devices ? json_dumps(rp->devices, JSON_COMPACT) : xstrdup("[]");
    int k = need->nodes_wanted > 1 ? need->nodes_wanted : 1;
    r->across = k > 1;
    r->n_parts = k;
    r->parts = calloc((size_t)k, sizeof *r->parts);
    if (!r->parts) abort();
    for (int p = 0; p < k; p++) {
        run_part *part = &r->parts[p];
        *part = (run_part){.node_rank = p, .exec = K.batch, .pending = pending, .exit_code = NO_INT,
                           .exit_signal = NO_INT};
        snprintf(part->handle.job, sizeof part->handle.job, "%s", rp->job);
        char gone[256];
        batch_launch_strings keep;
        part_launch l = batch_launch_of(r, p, &keep);
        K.batch->adopt(&l, &part->handle, gone, sizeof gone);
    }
    r->start_stored = !pending;
    if (r->command) watch_hangs_of(r);
    log_info("run %lld: taken back after the restart: Slurm job %s, %s", (long long)r->id, rp->job,
             pending ? "waiting in Slurm's queue" : "started");
    if (b->status == RUN_CANCELING) { /* canceled before the restart: scancel again */
        r->cancel_reason = xstrdup("canceled before the server restarted");
        signal_cancel_locked(r);
    }
}

void scheduler_progress(int64_t id, int rank, int64_t global_step) {
    pthread_mutex_lock(&K.mu);
    note_progress(find_run(id), rank, global_step);
    pthread_mutex_unlock(&K.mu);
}

static bool has_checkpoint(int64_t id) {
    char *dir = layout_run_dir(id), *name = ckpt_newest(dir);
    bool found = name != NULL;
    free(name);
    free(dir);
    return found;
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
        /* resumes: a built-in run queued by POST /runs/{id}/resume starts with --resume;
         * so does one queued again after a preemption, from the checkpoint it wrote.
         * Attempts: a started run is in its newest; a queued one starts the next. */
        int next = b->status == RUN_QUEUED ? b->last_attempt + 1 : b->last_attempt < 0 ? 0 : b->last_attempt;
        run_needs need = {.id = b->id, .world_size = b->world_size, .pool = pool, .command = b->command,
                          .resume = !b->command && (b->resumes > 0 || (b->preemptions > 0 && has_checkpoint(b->id))),
                          .owner = b->has_owner ? b->owner : NULL, .priority = b->priority,
                          .preemptible = b->preemptible, .queued_ms = b->queued_at != NO_INT ? b->queued_at : 0,
                          .restart_count = next, .restarts_from = b->restarts_from, .memory_bytes = b->memory_bytes};
        /* how it runs, from the config as submitted: not from its config.json, which
         * its account may have edited, and which is not read under the lock */
        json_t *cfg = NULL;
        if (store_get_config(b->id, &cfg) < 0) log_error("run %lld: cannot read its config from the database", (long long)b->id);
        run_needs_distributed(cfg, &need);
        json_decref(cfg);
        run_process rp = {.pid_start_time = NO_INT};
        if (store_get_run_process(b->id, &rp) < 0)
            log_error("run %lld: cannot read its process from the database", (long long)b->id);
        if (rp.job[0]) {
            recover_batch_locked(b, &need, &rp);
            json_decref(rp.devices);
            continue;
        }
        json_decref(rp.devices);
        if (b->status != RUN_QUEUED) {
            recover_started_locked(b, &need);
            continue;
        }
        live_run *r = add_queued(&need);
        if (!K.batch && b->world_size > scheduler_capacity(pool)) {
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
