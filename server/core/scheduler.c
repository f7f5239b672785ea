/* The lock, the queue and the entry points of the scheduler: see scheduler.h and sched_state.h. */
#include "sched_state.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base.h"
#include "executor_agents.h"
#include "executor_local.h"
#include "nodes.h"
#include "placement.h"
#include "secret.h"
#include "store.h"

sched_state K = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

int scheduler_capacity(pool_kind pool) { return device_pool_capacity(&K.devices, pool); }

void scheduler_set_self_url(const char *url) { executor_local_set_self_url(url); }

/* ---- the executors' hooks: a part's start done, a part's end ---- */

static bool on_part_started(int64_t run, int part, const part_handle *h, const char *err) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find_run(run);
    bool wanted = r && r->status != RUN_QUEUED;
    if (wanted && err) {
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        schedule_locked();
    } else if (wanted) {
        part_started_locked(r, part, h);
    }
    pthread_mutex_unlock(&K.mu);
    return wanted;
}

static void on_part_ended(int64_t run, int part, const part_end *e) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find_run(run);
    if (r && part_ended_locked(r, part, e)) schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

void scheduler_init(const scheduler_config *c) {
    K.c = *c;
    device_pool_init(&K.devices, c->gpus, c->n_gpus, c->slots);
    static const executor_hooks hooks = {on_part_started, on_part_ended};
    executor_local_config lc = {.trainer = c->trainer, .runner = c->runner, .data_roots = c->data_roots,
                                .n_data_roots = c->n_data_roots, .advertise = c->advertise};
    K.local = executor_local_init(&lc, &hooks);
    K.agents = executor_agents_init(c->node_timeout_ms > 0 ? c->node_timeout_ms : 10000, &hooks);
}

static int free_devices(pool_kind pool) { return device_pool_free(&K.devices, pool); }

const char *scheduler_local_name(void) { return K.c.node_name && K.c.node_name[0] ? K.c.node_name : "local"; }

void scheduler_spawned(int64_t id, int group, pid_t pid, const char *err) {
    executor_local_spawned(id, group, pid, err);
}

void scheduler_child_exited(pid_t pid, int wstatus) { executor_local_exited(pid, wstatus); }

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
        start_run_locked(r, false, (int[]){0}, 1);
        return true;
    }
    place_candidate c[NODES_MAX + 1];
    int ids[NODES_MAX + 1];
    int k = placement_choose(c, candidates_locked(r->pool, c), r->world_size, r->nodes_wanted, false, ids);
    if (!k) return false;
    start_run_locked(r, true, ids, k);
    return true;
}

/* Starts every queued run that fits, in order; per pool, the first run that does
 * not fit blocks those behind it (no starvation of big runs). */
void schedule_locked(void) {
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
    live_run *r = find_run(id);
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
        /* else once its start is done (part_started_locked) */
        if (r->start_stored) signal_cancel_locked(r);
        res = CANCEL_SIGNALED;
    }
    pthread_mutex_unlock(&K.mu);
    return res;
}

int scheduler_queue_position(int64_t id) {
    pthread_mutex_lock(&K.mu);
    int pos = 0, n = 0;
    pool_kind pool = POOL_CPU;
    live_run *me = find_run(id);
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
    live_run *r = find_run(id);
    /* A started run (its secret made, its trainer asked for): the trainer may say hello
     * before the supervisor has told us its pid, so the secret alone decides. */
    bool ok = r && r->status != RUN_QUEUED && r->secret[0] && secret_equal(secret, r->secret);
    /* running: a rank has said hello; for a command run, ddp-run has (its ranks are
     * started, and a script need not report at all) */
    if (ok && (rank >= 0 || r->command) && r->status == RUN_STARTING) {
        if (r->start_stored) mark_running_locked(r);
        else r->said_hello = true; /* running once its start is stored (part_started_locked) */
    }
    pthread_mutex_unlock(&K.mu);
    return ok;
}

void scheduler_end_event(int64_t id, const char *status, const char *reason) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find_run(id);
    if (r) {
        free(r->end_status);
        free(r->end_reason);
        r->end_status = xstrdup(status);
        r->end_reason = reason && *reason ? xstrdup(reason) : NULL;
    }
    pthread_mutex_unlock(&K.mu);
}

void scheduler_tick(void) {
    pthread_mutex_lock(&K.mu);
    int64_t now = mono_ms();
    for (live_run *r = K.runs; r; r = r->next) {
        if (r->adopted) watch_adopted_locked(r);
        watch_hang_locked(r, now);
    }
    pthread_mutex_unlock(&K.mu);
    /* outside the lock: what they learn comes back through the hooks */
    K.local->tick();
    K.agents->tick();
}

bool scheduler_journal_fed(int64_t id) {
    pthread_mutex_lock(&K.mu);
    live_run *r = find_run(id);
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
        if (r->start_stored) signal_cancel_locked(r);
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
    live_run *r = find_run(id);
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
