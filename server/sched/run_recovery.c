/* The recovery at start-up (scheduler_recover, scheduler.h): the runs a previous
 * server left unfinished, from the store. Queued runs are queued again in order; a
 * started run whose launcher is alive is taken back (adopted: fed from its journal,
 * supervised through /proc); one whose processes are gone is finished from its
 * journal; a batch system's job is followed again by its id. The top of the
 * scheduler's state machine, beside its front door, which it calls as any caller
 * does: see sched_state.h. */
#include "sched_state.h"
#include "scheduler.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "ckpt_header.h"
#include "journal_replay.h"
#include "rendezvous.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"

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
    live_run *r = live_run_add(need, b->status);
    r->started_ms = b->started_at != NO_INT ? b->started_at : 0;
    if (b->preempting) r->preempt_by = b->preempted_by != NO_INT ? b->preempted_by : -1; /* asked to stop for it */
    if (ran_across_nodes(rp.devices)) {
        /* its parts on the agents hear that it is over at their next heartbeat (it is
         * not in the answer), and stop; what is left of this host's is killed */
        sched.local->abandon(b->id, &h);
        finish_locked(r, b->status == RUN_CANCELING ? RUN_CANCELED : RUN_FAILED,
                      "the coordinator restarted while the run ran across nodes: a run across nodes is not taken "
                      "back after a restart; its parts were stopped on every node (resume it, or submit it again)",
                      NO_INT, NO_INT);
        json_decref(rp.devices);
        return;
    }
    /* its one part, this host's launcher, as the executor is asked to find it again */
    r->n_parts = 1;
    r->parts = xcalloc(1, sizeof *r->parts);
    r->parts[0] = (run_part){.exec = sched.local, .handle = h, .exit_code = NO_INT, .exit_signal = NO_INT};
    launch_keep keep;
    part_launch l = launch_of(r, 0, NULL, &keep);
    l.secret = rp.secret;
    char gone[256];
    bool alive = sched.local->adopt(&l, &h, gone, sizeof gone) == ADOPT_TAKEN;
    if (!alive) { /* nothing of it here to follow: it never held a part of this server's */
        free(r->parts);
        r->parts = NULL;
        r->n_parts = 0;
    }
    if (alive && r->command) watch_hangs_of(r);
    /* an elastic run: shrunk (it holds fewer devices than its width), or being resized */
    int held = (int)json_array_size(rp.devices), resize_to = 0;
    int64_t resize_by = 0;
    if (r->min_ranks < r->width && held >= r->min_ranks && held < r->width) {
        r->world_size = held;
        r->resized_ms = now_ms(); /* its grow interval counts from its taking back */
    }
    if (r->min_ranks < r->width && store_get_resizing(r->id, &resize_to, &resize_by) < 0)
        log_error("run %lld: cannot read its timeline from the database: a resize under way is not taken back",
                  (long long)b->id);
    if (resize_to < r->min_ranks || resize_to > r->width) resize_to = 0;
    r->journal = watch_journal_open(r);
    if (!r->journal) log_error("run %lld: cannot read what the database holds of it: its journal is not replayed", (long long)b->id);
    if (alive) {
        r->adopted = true;
        r->start_stored = true;
        snprintf(r->secret, sizeof r->secret, "%s", rp.secret);
        rendezvous_open(r->id, r->secret);
        device_pool_take_named(&sched.devices, r->pool, r->id, rp.devices, r->world_size);
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
        } else if (resize_to) { /* being resized: asked again, to start again at its new size */
            resize_again_locked(r, resize_to, resize_by);
        }
    } else {
        if (b->status == RUN_CANCELING) r->cancel_reason = xstrdup("the server stopped while the run was being canceled");
        else if (!r->preempt_by && resize_to) { /* its resize's stop ended it meanwhile: queued at its new size */
            r->resize_to = resize_to;
            r->resize_by = resize_by;
        }
        finish_from_journal_locked(r, gone, true);
    }
    json_decref(rp.devices);
}

/* A run a previous server handed to a batch system (the store kept its job's id):
 * taken back as it was, waiting in the system's queue (the store has it queued) or
 * started, its parts followed by the batch executor again. Its events were never
 * journal-fed here: its parts kept them, and go on sending them. A server started
 * without a batch executor leaves the job where it is, and the run fails saying so
 * (the store's job ids are Slurm's, the one batch system there is). */
static void recover_batch_locked(const run_brief *b, const run_needs *need, const run_process *rp) {
    if (!sched.batch) {
        live_run *r = live_run_add(need, RUN_QUEUED);
        char *why = xasprintf("the server restarted without --executor slurm: the run's Slurm job %s was left to "
                              "Slurm (scancel %s stops it)", rp->job, rp->job);
        finish_locked(r, b->status == RUN_CANCELING ? RUN_CANCELED : RUN_FAILED, why, NO_INT, NO_INT);
        free(why);
        return;
    }
    bool pending = b->status == RUN_QUEUED;
    live_run *r = live_run_add(need, pending ? RUN_STARTING : b->status);
    snprintf(r->secret, sizeof r->secret, "%s", rp->secret);
    rendezvous_open(r->id, r->secret);
    r->devices_json = rp->devices ? json_dumps(rp->devices, JSON_COMPACT) : xstrdup("[]");
    int k = need->nodes_wanted > 1 ? need->nodes_wanted : 1;
    r->across = k > 1;
    r->n_parts = k;
    r->parts = xcalloc((size_t)k, sizeof *r->parts);
    for (int p = 0; p < k; p++) {
        run_part *part = &r->parts[p];
        *part = (run_part){.node_rank = p, .exec = sched.batch, .pending = pending, .exit_code = NO_INT,
                           .exit_signal = NO_INT};
        snprintf(part->handle.job, sizeof part->handle.job, "%s", rp->job);
        char gone[256];
        launch_keep keep;
        part_launch l = launch_of(r, p, NULL, &keep);
        sched.batch->adopt(&l, &part->handle, gone, sizeof gone);
    }
    r->start_stored = !pending;
    if (r->command) watch_hangs_of(r);
    log_info("run %lld: taken back after the restart: %s job %s, %s%s%s", (long long)r->id, sched.batch->title, rp->job,
             pending ? "waiting in " : "started", pending ? sched.batch->title : "", pending ? "'s queue" : "");
    if (b->status == RUN_CANCELING) { /* canceled before the restart: its job stopped again */
        r->cancel_reason = xstrdup("canceled before the server restarted");
        signal_cancel_locked(r);
    }
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
    pthread_mutex_lock(&sched.mu);
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
                          .restart_count = next, .restarts_from = b->restarts_from, .memory_bytes = b->memory_bytes,
                          .sweep_id = b->sweep_id};
        /* how it runs, from the config as submitted: not from its config.json, which
         * its account may have edited, and which is not read under the lock */
        json_t *cfg = NULL;
        if (store_get_config(b->id, &cfg) < 0) log_error("run %lld: cannot read its config from the database", (long long)b->id);
        run_needs_distributed(cfg, &need);
        need.expected_ms = store_median_length(need.owner, json_string_value(json_object_get(cfg, "name")));
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
        live_run *r = live_run_add(&need, RUN_QUEUED);
        if (!sched.batch && b->world_size > scheduler_capacity(pool)) {
            char *reason = xasprintf("needs %d %s but this server now has %d", b->world_size,
                                     pool_unit(pool), scheduler_capacity(pool));
            finish_locked(r, RUN_FAILED, reason, NO_INT, NO_INT);
            free(reason);
        }
    }
    free(runs);
    schedule_locked();
    pthread_mutex_unlock(&sched.mu);
    store_sync();
}
