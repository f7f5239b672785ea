/* The floor of the scheduler's state machine: the table of live runs, what a start
 * held given back, each owner's usage. See live_runs.h. */
#include "live_runs.h"

#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "fair_share.h"
#include "nodes.h"
#include "rendezvous.h"
#include "secret.h"
#include "store.h"

sched_state sched = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

/* ---- the table ---- */

/* The index by id: open addressing, linear probing, at most half full; a removal
 * shifts back the entries after it (no tombstones). Under sched.mu, as the list. */
static struct {
    live_run **slots;
    size_t cap, n;
} ix;

static size_t slot_of(int64_t id) { return (size_t)(((uint64_t)id * 0x9E3779B97F4A7C15ull) >> 32) & (ix.cap - 1); }

static void ix_insert(live_run *r) {
    size_t i = slot_of(r->id);
    while (ix.slots[i]) i = (i + 1) & (ix.cap - 1);
    ix.slots[i] = r;
}

static void ix_put(live_run *r) {
    if ((ix.n + 1) * 2 > ix.cap) {
        live_run **was = ix.slots;
        size_t was_cap = ix.cap;
        ix.cap = ix.cap ? ix.cap * 2 : 64;
        ix.slots = xcalloc(ix.cap, sizeof *ix.slots);
        for (size_t i = 0; i < was_cap; i++)
            if (was[i]) ix_insert(was[i]);
        free(was);
    }
    ix_insert(r);
    ix.n++;
}

static void ix_remove(const live_run *r) {
    if (!ix.cap) return;
    size_t i = slot_of(r->id);
    while (ix.slots[i] && ix.slots[i] != r) i = (i + 1) & (ix.cap - 1);
    if (!ix.slots[i]) return;
    ix.slots[i] = NULL;
    ix.n--;
    /* the entries after it in its cluster move back where their probe would find them */
    for (size_t j = (i + 1) & (ix.cap - 1); ix.slots[j]; j = (j + 1) & (ix.cap - 1)) {
        live_run *e = ix.slots[j];
        size_t home = slot_of(e->id);
        bool misplaced = i <= j ? (home <= i || home > j) : (home <= i && home > j);
        if (misplaced) {
            ix.slots[i] = e;
            ix.slots[j] = NULL;
            i = j;
        }
    }
}

live_run *find_run(int64_t id) {
    if (!ix.cap) return NULL;
    for (size_t i = slot_of(id); ix.slots[i]; i = (i + 1) & (ix.cap - 1))
        if (ix.slots[i]->id == id) return ix.slots[i];
    return NULL;
}

void live_runs_changed(void) { sched.watched_stale = true; }

const int64_t *live_runs_watched(int *n_started, int *n) {
    if (sched.watched_stale || !sched.watched) {
        int k = 0;
        for (live_run *r = sched.runs; r; r = r->next) k++;
        if (k + 1 > sched.watched_cap) {
            sched.watched_cap = 2 * (k + 1);
            sched.watched = xrealloc(sched.watched, (size_t)sched.watched_cap * sizeof *sched.watched);
        }
        k = 0;
        for (live_run *r = sched.runs; r; r = r->next)
            if (r->status != RUN_QUEUED) sched.watched[k++] = r->id;
        sched.n_started = k;
        for (live_run *r = sched.runs; r; r = r->next)
            if (r->status == RUN_QUEUED && r->not_before_ms) sched.watched[k++] = r->id;
        sched.n_watched = k;
        sched.watched_stale = false;
    }
    *n_started = sched.n_started;
    *n = sched.n_watched;
    return sched.watched;
}

/* r into the list before `at` (NULL: at the back), and into the index. */
static void link_before(live_run *r, live_run *at) {
    live_runs_changed();
    r->next = at;
    r->prev = at ? at->prev : sched.runs_tail;
    if (r->prev) r->prev->next = r;
    else sched.runs = r;
    if (at) at->prev = r;
    else sched.runs_tail = r;
    ix_put(r);
}

live_run *live_run_new(const run_needs *n) {
    live_run *r = xcalloc(1, sizeof *r);
    r->id = n->id;
    r->shown_start_ms = -1;
    r->world_size = r->width = n->world_size;
    /* elastic, on one node: a built-in run on this host's CPU slots (ddp-trainer --ranks), or
     * a command run (ddp-run --ranks: torchrun's environment at the size it has now) */
    bool elastic = (n->command || n->pool == POOL_CPU) && n->nodes_wanted <= 1 && n->min_world_size > 0 &&
                   n->min_world_size < n->world_size;
    r->min_ranks = elastic ? n->min_world_size : n->world_size;
    r->pool = n->pool;
    r->nodes_wanted = n->nodes_wanted;
    r->command = n->command;
    r->sweep_id = n->sweep_id;
    r->resume = n->resume;
    r->hang_timeout_s = n->hang_timeout_s;
    r->owner = n->owner ? xstrdup(n->owner) : NULL;
    r->priority = n->priority;
    r->preemptible = n->preemptible;
    r->queued_ms = n->queued_ms ? n->queued_ms : now_ms();
    r->max_restarts = n->max_restarts;
    r->restart = n->restart;
    restart_budget_init(&r->budget, 0);
    r->stop_grace_s = n->stop_grace_s;
    r->max_duration_ms = n->max_duration_s > 0 ? (int64_t)(n->max_duration_s * 1000) : 0;
    r->min_runtime_ms = n->min_runtime_s >= 0 ? (int64_t)(n->min_runtime_s * 1000) : sched.c.min_runtime_ms;
    r->restart_count = r->attempt = n->restart_count;
    r->restarts_from = n->restarts_from;
    r->memory_asked = n->memory_bytes;
    r->expected_len_ms = n->expected_ms > 0 ? n->expected_ms : -1;
    r->journal_points = -1;
    r->server_blame = (rank_failure){.rank = NO_INT, .exit_code = NO_INT, .signal = NO_INT};
    r->status = RUN_QUEUED; /* where every run starts; run_life.c moves it from here */
    return r;
}

void live_run_link(live_run *r) {
    live_run *before = NULL; /* ids are submission order: a new run goes at the back */
    if (sched.runs_tail && sched.runs_tail->id > r->id)
        for (before = sched.runs; before && before->id < r->id; before = before->next) {}
    link_before(r, before);
}

live_run *live_run_add(const run_needs *n, run_status at) {
    live_run *r = live_run_new(n);
    r->status = at; /* a run taken back after a restart is made at the status the store has */
    live_run_link(r);
    return r;
}

void live_run_append(live_run *r) { link_before(r, NULL); }

/* What belonged to one start of the run (its devices, how its launcher ended, its hang
 * watch, its adopted journal), let go: when the run is freed, or queued again. */
static void forget_start(live_run *r) {
    free(r->devices_json);
    free(r->end_status);
    free(r->end_reason);
    free(r->last_progress_ms);
    free(r->last_step);
    free(r->rank_gone);
    r->devices_json = r->end_status = r->end_reason = NULL;
    r->last_progress_ms = NULL;
    r->last_step = NULL;
    r->rank_gone = NULL;
    journal_replay_close(r->journal);
    r->journal = NULL;
}

void live_run_drop(live_run *r) {
    live_runs_changed();
    if (r->prev) r->prev->next = r->next;
    else if (sched.runs == r) sched.runs = r->next;
    if (r->next) r->next->prev = r->prev;
    else if (sched.runs_tail == r) sched.runs_tail = r->prev;
    ix_remove(r);
    free(r->owner);
    json_decref(r->pending);
    free(r->waiting_for);
    json_decref(r->preempting);
    free(r->queue_entry);
    free(r->cancel_reason);
    free(r->fail_reason);
    free(r->timeout_reason);
    rank_failure_clear(&r->server_blame);
    for (int i = 0; i < r->n_failed_at; i++) free(r->failed_at[i]);
    forget_start(r);
    free(r);
    pthread_cond_broadcast(&sched.changed);
}

/* ---- its timeline ---- */

void timeline_note_locked(const live_run *r, const char *kind, json_t *detail) {
    if (!r) {
        json_decref(detail);
        return;
    }
    store_op op = {.kind = OP_TIMELINE, .run_id = r->id, .t = now_ms()};
    op.u.timeline.kind = kind;
    op.u.timeline.detail = detail ? json_dumps(detail, JSON_COMPACT) : NULL;
    json_decref(detail);
    store_submit_now(&op);
}

/* ---- what a start held ---- */

void release_started_locked(live_run *r) {
    rendezvous_close(r->id); /* its keys go with it */
    device_pool_release(&sched.devices, r->pool, r->id);
    for (int i = 0; i < r->n_parts; i++) {
        r->parts[i].exec->release(r->id, i);
        if (r->parts[i].node) nodes_release(r->parts[i].node, r->id);
        free(r->parts[i].reason);
        rank_failure_clear(&r->parts[i].failure);
    }
    free(r->parts);
    r->parts = NULL;
    r->n_parts = 0;
    r->port = 0;
}

void back_to_queue_locked(live_run *r) {
    usage_fold_locked(r); /* its owner's share is charged for this start, now */
    release_started_locked(r);
    r->world_size = r->width; /* queued again, an elastic run asks for its width (it may start on fewer) */
    r->started_ms = 0;
    r->notice_ms = 0; /* its next attempt's stop gives a notice of its own */
    r->notice_answered = false;
    r->eta_first_ms = r->eta_last_ms = 0; /* its next start's steps give its ETA anew */
    r->secret[0] = '\0';
    r->start_stored = r->said_hello = r->parts_stopping = r->across = r->adopted = false;
    r->reopen_attempt = false; /* (a resize's start again sets it after this) */
    forget_start(r); /* an adopted run's journal too: its next launch is this server's child */
    pthread_cond_broadcast(&sched.changed);
}

void watch_hangs_of(live_run *r) {
    free(r->last_progress_ms); /* a run started again: counted anew */
    free(r->last_step);
    free(r->rank_gone);
    r->last_progress_ms = calloc((size_t)r->world_size, sizeof *r->last_progress_ms);
    r->last_step = calloc((size_t)r->world_size, sizeof *r->last_step);
    r->rank_gone = calloc((size_t)r->world_size, sizeof *r->rank_gone);
    if (!r->last_progress_ms || !r->last_step || !r->rank_gone) abort();
}

void rank_failure_clear(rank_failure *f) {
    free(f->last_line);
    *f = (rank_failure){.rank = NO_INT, .exit_code = NO_INT, .signal = NO_INT};
}

bool of_this_launch_locked(const live_run *r, const char *launch) {
    return !launch || (r->secret[0] && secret_equal(launch, r->secret));
}

bool from_launcher_locked(const live_run *r, long pid) {
    bool known = false;
    for (int i = 0; i < r->n_parts; i++) {
        if (r->parts[i].handle.pid <= 0) continue;
        known = true;
        if ((long)r->parts[i].handle.pid == pid) return true;
    }
    return !known;
}

/* ---- fair share: each owner's decayed usage ---- */

bool same_owner(const char *a, const char *b) { return a == b || (a && b && strcmp(a, b) == 0); }

static owner_usage *usage_of_locked(const char *owner) {
    for (int i = 0; i < sched.n_usage; i++)
        if (same_owner(sched.usage[i].owner, owner)) return &sched.usage[i];
    return NULL;
}

double usage_ended_locked(const char *owner, int64_t now) {
    const owner_usage *u = usage_of_locked(owner);
    return u ? fair_share_decay(u->value, now - u->as_of, sched.c.fair_share_half_life_s) : 0.0;
}

/* The owner's usage, decayed to `now` (made when it has none). */
static owner_usage *usage_now_locked(const char *owner, int64_t now) {
    owner_usage *u = usage_of_locked(owner);
    if (!u) {
        sched.usage = xrealloc(sched.usage, (size_t)(sched.n_usage + 1) * sizeof *sched.usage);
        u = &sched.usage[sched.n_usage++];
        *u = (owner_usage){.owner = owner ? xstrdup(owner) : NULL, .as_of = now};
    }
    u->value = fair_share_decay(u->value, now - u->as_of, sched.c.fair_share_half_life_s);
    u->as_of = now;
    return u;
}

static void usage_store_locked(const owner_usage *u) {
    store_op op = {.kind = OP_USAGE, .t = u->as_of};
    op.u.usage.owner = u->owner ? xstrdup(u->owner) : NULL;
    op.u.usage.device_seconds = u->value;
    store_submit_now(&op);
}

void usage_fold_locked(const live_run *r) {
    if (!r->started_ms) return;
    int64_t now = now_ms();
    owner_usage *u = usage_now_locked(r->owner, now);
    u->value += fair_share_span(r->world_size, r->started_ms, now, now, sched.c.fair_share_half_life_s);
    usage_store_locked(u);
}

void usage_charge_locked(const char *from, const char *to, double device_seconds) {
    if (device_seconds <= 0 || same_owner(from, to)) return;
    int64_t now = now_ms();
    owner_usage *f = usage_now_locked(from, now);
    double moved = device_seconds < f->value ? device_seconds : f->value;
    f->value -= moved;
    usage_store_locked(f);
    owner_usage *t = usage_now_locked(to, now); /* after: the table may have moved */
    t->value += moved;
    usage_store_locked(t);
}

void usage_load_locked(const char *owner, double value, int64_t as_of) {
    sched.usage = xrealloc(sched.usage, (size_t)(sched.n_usage + 1) * sizeof *sched.usage);
    sched.usage[sched.n_usage++] =
        (owner_usage){.owner = owner && owner[0] ? xstrdup(owner) : NULL, .value = value, .as_of = as_of};
}

const char *local_node_name(void) {
    return sched.c.node_name && sched.c.node_name[0] ? sched.c.node_name : "local";
}
