/* The scheduler's front door: every entry point of scheduler.h but the recovery at
 * start-up (run_recovery.c, beside it), the executors' hooks, the tick, and the queue
 * policy's decisions applied under the lock (schedule_locked). The one place that
 * chooses where runs execute, and so the one that names an executor: the rest asks
 * the executor table. See scheduler.h and sched_state.h. */
#include "sched_state.h"
#include "scheduler.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base.h"
#include "executor_agents.h"
#include "executor_local.h"
#include "executor_slurm.h"
#include "fair_share.h"
#include "fnv.h"
#include "launcher_argv.h"
#include "log_limit.h"
#include "nodes.h"
#include "path_redact.h"
#include "queue_forecast.h"
#include "queue_policy.h"
#include "run_as.h"
#include "run_limits.h"
#include "secret.h"
#include "store.h"
#include "suspects.h"
#include "users.h"

static void sched_lock(void);

int scheduler_capacity(pool_kind pool) { return device_pool_capacity(&sched.devices, pool); }

/* This host's, the agents', and the batch system's when there is one: each executor
 * in use, in that order (NULL past the last). */
static const executor *executor_at(int i) {
    const executor *in_use[] = {sched.local, sched.agents, sched.batch};
    return i < 3 ? in_use[i] : NULL;
}

void scheduler_set_self_url(const char *url, const char *reachable_url) {
    for (int i = 0; i < 3; i++)
        if (executor_at(i) && executor_at(i)->set_server_url) executor_at(i)->set_server_url(url, reachable_url);
}

/* ---- the executors' hooks: a part's start done, a part's end ---- */

static bool on_part_started(int64_t run, int part, const part_handle *h, const char *err) {
    sched_lock();
    live_run *r = find_run(run);
    bool wanted = r && r->status != RUN_QUEUED;
    if (wanted && err) {
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        schedule_locked();
    } else if (wanted) {
        part_started_locked(r, part, h);
    }
    pthread_mutex_unlock(&sched.mu);
    return wanted;
}

static void on_part_ended(int64_t run, int part, const part_end *e) {
    sched_lock();
    live_run *r = find_run(run);
    if (r && part_ended_locked(r, part, e)) schedule_locked();
    pthread_mutex_unlock(&sched.mu);
}

static void on_job_submitted(int64_t run, const part_handle *h) {
    sched_lock();
    live_run *r = find_run(run);
    if (r && batch_pending(r)) job_submitted_locked(r, h);
    pthread_mutex_unlock(&sched.mu);
}

/* The one place where it is chosen where runs execute, and the only one that names an
 * executor: this host's supervisor and the agents, or a batch system that every run
 * goes to (serve --executor slurm). */
void scheduler_init(const scheduler_config *c) {
    sched.c = *c;
    device_pool_init(&sched.devices, c->gpus, c->n_gpus, c->slots);
    static const executor_hooks hooks = {on_part_started, on_part_ended, on_job_submitted};
    executor_local_config lc = {.trainer = c->trainer, .runner = c->runner, .data_roots = c->data_roots,
                                .n_data_roots = c->n_data_roots, .advertise = c->advertise,
                                .max_log_bytes = c->max_log_bytes};
    sched.local = executor_local_init(&lc, &hooks); /* also for runs a previous server started here */
    sched.agents = executor_agents_init(c->node_timeout_ms > 0 ? c->node_timeout_ms : 10000, &hooks);
    sched.batch = c->slurm ? executor_slurm_init(c->slurm, &hooks) : NULL;
    sched_lock();
    suspects_init_locked(c->suspect_after, c->exclude_node_after, c->exclude_node_window_ms);
    pthread_mutex_unlock(&sched.mu);
}

bool scheduler_batch(bool *gpus) {
    if (gpus) *gpus = sched.batch && sched.batch->gives_gpus && sched.batch->gives_gpus();
    return sched.batch != NULL;
}

bool scheduler_local_start_as(const char *owner, const json_t *config, run_account *account, bool *as_account,
                              run_cgroup_limits *limits) {
    if (sched.batch) return false;
    char why[1024];
    run_as_verdict as = run_as_resolve(owner, true, account, why, sizeof why);
    if (as == RUN_AS_REFUSED) return false;
    *as_account = as == RUN_AS_ACCOUNT;
    const json_t *dist = json_object_get(config, "distributed");
    const char *backend = json_string_value(json_object_get(dist, "backend"));
    json_int_t n = json_integer_value(json_object_get(dist, "world_size"));
    int ranks = n > 0 && n < 4096 ? (int)n : 1;
    pool_kind pool = backend && !strcmp(backend, "nccl") ? POOL_GPU
                   : backend && !strcmp(backend, "cpu") ? POOL_CPU
                   : scheduler_capacity(POOL_GPU) > 0 ? POOL_GPU : POOL_CPU;
    char from[256];
    limits->memory_bytes = run_memory_limit(run_memory_asked(config), owner, pool, ranks, ranks,
                                            sched.c.memory_per_device[pool], from, sizeof from);
    limits->pids_max = run_pids_limit(sched.c.max_run_processes, ranks);
    return true;
}

static int free_devices(pool_kind pool) { return device_pool_free(&sched.devices, pool); }

const char *scheduler_local_name(void) { return local_node_name(); }

void scheduler_spawned(int64_t id, int group, pid_t pid, const char *err) {
    executor_local_spawned(id, group, pid, err);
}

void scheduler_child_exited(pid_t pid, int wstatus) { executor_local_exited(pid, wstatus); }

/* ---- fair share: each owner's decayed usage (live_runs.c keeps it) ---- */

void scheduler_load_usage(const char *const *owners, const double *values, const int64_t *as_of, int n) {
    sched_lock();
    for (int i = 0; i < n; i++) usage_load_locked(owners[i], values[i], as_of[i]);
    pthread_mutex_unlock(&sched.mu);
}

/* ---- the queue policy's snapshot, and what it decides ---- */

_Static_assert(NODES_MAX + 1 <= POLICY_NODES_MAX, "a policy snapshot holds this host and every node");

typedef struct {
    policy_snapshot s;
    policy_node nodes[POLICY_NODES_MAX];
    char names[POLICY_NODES_MAX][NODE_NAME_MAX];
    policy_run *queued;
    live_run **queued_runs; /* the live run of each of queued[] */
    policy_running *running;
    policy_hold *holds;
    policy_owner *owners;
} snapshot;

/* The index of r's owner among the snapshot's, added when new (its quota, its usage
 * of the runs that ended; the running ones' spans are added after). */
static int owner_index(snapshot *sn, const char *owner, int64_t now) {
    for (int i = 0; i < sn->s.n_owners; i++)
        if (same_owner(sn->owners[i].name, owner)) return i;
    int i = sn->s.n_owners++;
    sn->owners[i] = (policy_owner){.name = owner, .max_devices = owner ? users_max_devices(owner) : -1,
                                   .usage = usage_ended_locked(owner, now)};
    return i;
}

static policy_run policy_run_of(const live_run *r) {
    return (policy_run){.id = r->id, .pool = r->pool, .world_size = r->world_size, .nodes_wanted = r->nodes_wanted,
                        .owner = -1, .priority = r->priority, .queued_ms = r->queued_ms,
                        .preempted_by = r->requeued_by, .not_before_ms = r->not_before_ms,
                        .elsewhere = r->elsewhere, .failed_at = (const char *const *)r->failed_at,
                        .n_failed_at = r->n_failed_at, .yielded = r->requeued_by && r->requeued_slice,
                        .preemptible = r->preemptible, .min_devices = r->min_ranks < r->width ? r->min_ranks : 0};
}

/* How many free devices of the pool of node `id` (0: this host), named `node`, are suspect on their own. */
static int shunned_free(int id, const char *node, pool_kind pool) {
    node_pool np = pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU;
    int n = id ? nodes_capacity(id, np) : device_pool_capacity(&sched.devices, pool), k = 0;
    for (int i = 0; i < n; i++) {
        bool free_now = id ? nodes_device_free(id, np, i) : !sched.devices.owner[pool][i];
        char dev[200];
        device_name(pool, NULL, id ? nodes_gpu_id(id, i) : pool == POOL_GPU ? sched.devices.gpus[i] : NULL, i, dev,
                    sizeof dev);
        k += free_now && suspect_device_of(node, dev);
    }
    return k;
}

/* This host and the agent nodes up now, with what they have free and in all; with
 * `runs`, the queue and the started runs with what they hold, and their owners. */
static void snapshot_take_locked(snapshot *sn, bool runs) {
    memset(sn, 0, sizeof *sn);
    sn->nodes[0] = (policy_node){.id = 0, .name = local_node_name()};
    sn->nodes[0].suspect = suspect_of(sn->nodes[0].name, &sn->nodes[0].excluded);
    int n = 1, ids[NODES_MAX], up = nodes_up(ids, NODES_MAX);
    for (int i = 0; i < up; i++) {
        char address[NODE_ADDR_MAX];
        if (!nodes_describe(ids[i], sn->names[n], NODE_NAME_MAX, address, sizeof address)) continue;
        sn->nodes[n] = (policy_node){.id = ids[i], .name = sn->names[n]};
        sn->nodes[n].suspect = suspect_of(sn->names[n], &sn->nodes[n].excluded);
        n++;
    }
    for (pool_kind pool = POOL_CPU; pool <= POOL_GPU; pool++) {
        sn->nodes[0].free[pool] = device_pool_free(&sched.devices, pool);
        sn->nodes[0].capacity[pool] = device_pool_capacity(&sched.devices, pool);
        node_pool np = pool == POOL_GPU ? NODE_POOL_GPU : NODE_POOL_CPU;
        for (int i = 1; i < n; i++) {
            sn->nodes[i].free[pool] = nodes_free(sn->nodes[i].id, np);
            sn->nodes[i].capacity[pool] = nodes_capacity(sn->nodes[i].id, np);
        }
        for (int i = 0; i < n; i++) sn->nodes[i].shunned[pool] = shunned_free(sn->nodes[i].id, sn->nodes[i].name, pool);
    }
    int64_t now = now_ms();
    sn->s = (policy_snapshot){.nodes = sn->nodes, .n_nodes = n, .here_across = sched.c.advertise && sched.c.advertise[0],
                              .backfill_window_ms = sched.c.backfill_window_ms, .now_ms = now,
                              .time_slice_ms = sched.c.time_slice_ms};
    if (!runs) return;
    int queued = 0, started = 0, parts = 0;
    for (live_run *r = sched.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED) queued++;
        else started++;
        parts += r->n_parts;
    }
    sn->queued = xmalloc((size_t)(queued + 1) * sizeof *sn->queued);
    sn->queued_runs = xmalloc((size_t)(queued + 1) * sizeof *sn->queued_runs);
    sn->running = xmalloc((size_t)(2 * started + 1) * sizeof *sn->running); /* a run being shrunk is two */
    sn->holds = xmalloc((size_t)(parts + started + 1) * sizeof *sn->holds);
    sn->owners = xmalloc((size_t)(queued + started + 1) * sizeof *sn->owners);
    sn->s.owners = sn->owners;
    policy_hold *hold = sn->holds;
    for (live_run *r = sched.runs; r; r = r->next) {
        int owner = owner_index(sn, r->owner, now);
        if (r->status == RUN_QUEUED) {
            policy_run q = policy_run_of(r);
            q.owner = owner;
            sn->queued_runs[sn->s.n_queued] = r;
            sn->queued[sn->s.n_queued++] = q;
            continue;
        }
        /* a run across nodes is not preempted: its nodes would not agree on the step to stop at */
        sn->running[sn->s.n_running++] = (policy_running){
            .id = r->id, .pool = r->pool, .owner = owner, .priority = r->priority,
            .preemptible = r->preemptible && !r->across && r->parts && r->parts[0].exec->preempt && !r->cancel_reason &&
                           !r->fail_reason && !r->timeout_reason,
            .stopping = r->preempt_by != 0, .started_ms = r->started_ms, .n_holds = r->n_parts, .holds = hold,
            .checkpoint_ms = r->checkpoint_ms, .checkpoint_write_ms = r->checkpoint_write_ms,
            /* a built-in run checkpoints at its next step when preempted; a command run
             * whose ranks listen for the notice (ddpd.preempt_requested) says it will */
            .saves_on_notice = !r->command || r->answers_notices,
            .protected_until_ms = r->min_runtime_ms > 0 && r->started_ms ? r->started_ms + r->min_runtime_ms : 0};
        for (int i = 0; i < r->n_parts; i++)
            *hold++ = (policy_hold){.node = r->parts[i].node, .devices = r->world_size / r->n_parts};
        policy_running *last = &sn->running[sn->s.n_running - 1];
        bool elastic = r->min_ranks < r->width && !r->across && r->n_parts == 1 && !r->parts[0].node;
        if (elastic && !r->resize_to) {
            last->min_devices = r->min_ranks;
            last->width = r->width;
            last->may_grow = r->status == RUN_RUNNING && r->start_stored && !r->preempt_by && !r->cancel_reason &&
                             !r->fail_reason && !r->timeout_reason &&
                             now - r->resized_ms >= sched.c.elastic_grow_interval_ms;
        }
        if (elastic && r->resize_to) { /* being resized: it keeps what it starts again on, and gives up the rest */
            last->preemptible = false;
            if (r->resize_to < r->world_size) {
                hold[-1].devices = r->resize_to;
                policy_running freed = *last;
                freed.stopping = true;
                freed.holds = hold;
                *hold++ = (policy_hold){.node = 0, .devices = r->world_size - r->resize_to};
                sn->running[sn->s.n_running++] = freed;
            }
        }
        if (r->started_ms) /* its span so far */
            sn->owners[owner].usage += fair_share_span(r->world_size, r->started_ms, now, now, sched.c.fair_share_half_life_s);
    }
    sn->s.queued = sn->queued;
    sn->s.running = sn->running;
}

static void snapshot_free(snapshot *sn) {
    free(sn->queued);
    free(sn->queued_runs);
    free(sn->running);
    free(sn->holds);
    free(sn->owners);
}

/* ---- what reads and submissions use without the scheduler's lock ---- */

/* A queued run as last decided, as GET /runs/{id} shows it. */
typedef struct {
    int64_t id;
    int position;          /* live_run.queue_position */
    char *waiting;         /* its waiting_for; NULL: none */
    json_t *pending;       /* a reference to its `pending` (set_pending replaces it, never changes it); NULL: none */
    uint32_t pending_hash;
} queued_view;

/* The queue as published: GET /queue's answer and each queued run's view, written by
 * the thread that decided (the tick, or the first read after a change), read under
 * their own small lock, so that a read never waits for the scheduler's lock while the
 * tick decides the queue anew (at 10,000 queued, tens to hundreds of milliseconds, a
 * good part of each second). `current`: they answer for the decisions as they stand;
 * a change not decided yet (queue_stale, pending_stale, a submission in the inbox)
 * makes it false, and a read then decides under the scheduler's lock first, as before.
 *
 * Behind a long queue a submission does not wait for the scheduler's lock either: when
 * it is held (a decision), the new run waits in the inbox, and the next holder of the
 * lock (sched_lock: the tick within a tenth of a second, or the first read or change)
 * puts it in the table; the decision that follows places it. Its POST answers it
 * queued, its place and pending not decided yet (as any submission behind a long
 * queue). A refusal of a run no node can hold is checked against the nodes and
 * devices as the tick last saw them (placement) when the lock is held.
 *
 * Lock order: sched.mu, then pub.mu. */
static struct {
    pthread_mutex_t mu;
    char *text;
    size_t len;
    char tag[SCHED_QUEUE_TAG_LEN];
    bool current;
    queued_view *views; /* by id */
    int n_views;
    live_run *inbox, *inbox_tail; /* submissions not in the table yet, in order (chained by next) */
    bool long_queue;              /* as last seen under sched.mu: the inbox is for a long queue only */
    snapshot place;               /* this host and the nodes, without runs (have_place) */
    bool have_place;
    uint64_t submitted_to_inbox, lock_reads; /* debug stats: /metrics */
} pub = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void queue_unpublish_locked(void) {
    pthread_mutex_lock(&pub.mu);
    pub.current = false;
    pthread_mutex_unlock(&pub.mu);
}

/* The submissions in the inbox go into the table, to be decided (the queue is long:
 * by the tick, or the first read). */
static void inbox_drain_locked(void) {
    pthread_mutex_lock(&pub.mu);
    live_run *r = pub.inbox;
    pub.inbox = pub.inbox_tail = NULL;
    pthread_mutex_unlock(&pub.mu);
    if (!r) return;
    for (live_run *next; r; r = next) {
        next = r->next;
        r->next = NULL;
        live_run_link(r);
    }
    sched.queue_stale = true; /* unpublished when they came */
}

/* The scheduler's lock, with the submissions that came while it was held in the table:
 * every entry point takes it so. */
static void sched_lock(void) {
    pthread_mutex_lock(&sched.mu);
    inbox_drain_locked();
}

static void placement_publish_locked(void);
static bool view_published(int64_t id, bool decide, int *position, char **waiting, json_t **pending,
                           uint32_t *pending_hash);
static void sched_lock_for_read(void);

/* Whether the queue is long (long_queue_locked), for the submissions that come while
 * the lock is held. */
static void queue_length_seen_locked(bool long_queue) {
    pthread_mutex_lock(&pub.mu);
    pub.long_queue = long_queue;
    pthread_mutex_unlock(&pub.mu);
}

/* The queue policy's decisions on the scheduler's state now, and the snapshot they
 * were made on (both the caller's to free). */
static policy_decision *decide_locked(snapshot *sn) {
    snapshot_take_locked(sn, true);
    policy_decision *d = xmalloc((size_t)(sn->s.n_queued + 1) * sizeof *d);
    queue_policy_decide(&sn->s, d);
    return d;
}

static void decisions_free(snapshot *sn, policy_decision *d) {
    queue_policy_free(d, sn->s.n_queued);
    free(d);
    snapshot_free(sn);
}

static void pending_refresh_locked(void);
static void pending_refresh_tick_locked(void);
static void grow_elastic_locked(void);
static void queue_unpublish_locked(void);
static void start_narrow_locked(void);

/* Starts and preempts what the queue policy says (queue_policy.h), in its order. A
 * start that fails instead (no secret, no port) finishes its run and gives its
 * devices back: the policy decides again. With a batch system, there is no queue
 * here in front of its own: every queued run goes there at once. */
static bool long_queue_locked(void);

/* Tests: while the file DDPD_TEST_HOLD_DECISION names exists, the tick's refresh of a
 * long queue's decisions (once a second) takes that long, so that what must not wait
 * for it is seen not to: when the file says "lock", holding the scheduler's lock (as a
 * decision under the lock does: a submission, a read of the decided queue must not
 * wait for it); else outside the lock, where the refresh decides (a cancel, a run's
 * end, a launcher's event must not wait for it). */
static const char *test_hold_path(bool *locked) {
    static const char *path;
    static bool read;
    if (!read) {
        read = true;
        path = getenv("DDPD_TEST_HOLD_DECISION");
    }
    if (!path || !*path) return NULL;
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    char word[8] = "";
    *locked = fgets(word, sizeof word, f) && strncmp(word, "lock", 4) == 0;
    fclose(f);
    return path;
}

static void test_hold_decision_locked(void) {
    bool locked = false;
    const char *path = test_hold_path(&locked);
    if (!path || !locked || !long_queue_locked()) return;
    log_info("test hook: a decision holds the scheduler's lock while %s exists", path);
    while (access(path, F_OK) == 0) usleep(20000);
    log_info("test hook: the decision goes on");
}

/* The same for the tick's refresh where it decides, outside the lock. */
static void test_hold_decision(void) {
    bool locked = true;
    const char *path = test_hold_path(&locked);
    if (!path || locked) return;
    log_info("test hook: a decision outside the scheduler's lock goes on while %s exists", path);
    while (access(path, F_OK) == 0) usleep(20000);
    log_info("test hook: the decision outside the lock goes on");
}

static void decide_and_apply_locked(void) {
    sched.queue_stale = false;
    if (sched.batch) {
        for (live_run *r = sched.runs, *next; r && !sched.shutting_down; r = next) {
            next = r->next; /* a start that fails finishes (frees) r */
            if (r->status == RUN_QUEUED) start_batch_locked(r);
        }
        pending_refresh_locked();
        return;
    }
    for (bool again = !sched.shutting_down; again;) {
        again = false;
        snapshot sn;
        policy_decision *d = decide_locked(&sn);
        int n = sn.s.n_queued;
        int *by_order = xmalloc((size_t)(n + 1) * sizeof *by_order);
        for (int i = 0; i < n; i++) by_order[d[i].order] = i;
        for (int k = 0; k < n && !again; k++) {
            const policy_decision *x = &d[by_order[k]];
            live_run *r = sn.queued_runs[by_order[k]];
            if (x->verb == POLICY_START) again = !start_run_locked(r, x->across, x->nodes, x->n_nodes);
            for (int v = 0; x->verb == POLICY_PREEMPT && v < x->n_preempt; v++) {
                live_run *victim = find_run(x->preempt[v]);
                int keeps = x->preempt_to ? x->preempt_to[v] : 0;
                if (victim && !victim->preempt_by && !victim->resize_to && keeps > 0)
                    resize_locked(victim, keeps, r->id); /* an elastic run: shrunk, it goes on */
                else if (victim && !victim->preempt_by && !victim->resize_to) {
                    victim->preempt_slice = x->time_slice && victim->priority >= r->priority; /* yields its turn */
                    preempt_locked(victim, r->id);
                }
            }
        }
        free(by_order);
        decisions_free(&sn, d);
    }
    start_narrow_locked();
    if (long_queue_locked()) {
        sched.pending_stale = true; /* made by the tick, or a read that needs them */
        queue_unpublish_locked();
    } else {
        pending_refresh_locked();
    }
    grow_elastic_locked();
}

/* An elastic run that waits for devices at the head of its pool starts on those free,
 * down to its min_world_size (queue_policy_narrow), rather than waiting for its width;
 * it grows later as a shrunk run does. */
static void start_narrow_locked(void) {
    bool any = false;
    for (live_run *r = sched.runs; r && !any; r = r->next)
        any = r->status == RUN_QUEUED && r->min_ranks < r->width;
    if (!any || sched.shutting_down || sched.batch) return;
    snapshot sn;
    policy_decision *d = decide_locked(&sn);
    int *start_on = xcalloc((size_t)(sn.s.n_queued + 1), sizeof *start_on);
    queue_policy_narrow(&sn.s, d, start_on);
    for (int i = 0; i < sn.s.n_queued; i++) {
        live_run *r = sn.queued_runs[i];
        if (!start_on[i] || r->status != RUN_QUEUED) continue;
        log_info("run %lld starts on %d of its %d ranks (elastic, at least %d): the devices are short; it grows "
                 "when more are free", (long long)r->id, start_on[i], r->width, r->min_ranks);
        r->world_size = start_on[i];
        int here = 0;
        start_run_locked(r, false, &here, 1); /* a start that fails finishes it, saying why */
    }
    free(start_on);
    decisions_free(&sn, d);
}

/* Elastic runs shrunk below their width grow back on devices nothing queued waits
 * for (queue_policy_grow), at most once per --elastic-grow-interval each. */
static void grow_elastic_locked(void) {
    bool any = false;
    for (live_run *r = sched.runs; r && !any; r = r->next)
        any = r->status == RUN_RUNNING && r->min_ranks < r->width && r->world_size < r->width && !r->resize_to;
    if (!any || sched.shutting_down || sched.batch) return;
    snapshot sn;
    policy_decision *d = decide_locked(&sn);
    int *grow_to = xcalloc((size_t)(sn.s.n_running + 1), sizeof *grow_to);
    queue_policy_grow(&sn.s, d, grow_to);
    for (int j = 0; j < sn.s.n_running; j++) {
        live_run *r = grow_to[j] ? find_run(sn.running[j].id) : NULL;
        if (r && !r->resize_to && grow_to[j] > r->world_size) resize_locked(r, grow_to[j], 0);
    }
    free(grow_to);
    decisions_free(&sn, d);
}

void schedule_locked(void) {
    sched.decisions[QUEUE_DECIDED_FOR_CHANGE]++;
    decide_and_apply_locked();
}

/* With a short queue, everything is decided at once: a submission (a run that fits
 * starts now), and what each queued run shows (its place, what it waits for, its
 * estimate). Behind a long one, the submissions that come together are decided
 * together, and what the queued runs show is made anew once for all the changes:
 * both by the supervisor's tick (a tenth of a second for the decisions, a second for
 * what they show) or by the first read that needs them, whichever comes first. Each
 * costs the whole queue, so a burst of submissions no longer pays it once each. */
enum { DECIDE_AT_ONCE_MAX = 64 };

static bool long_queue_locked(void) {
    int queued = 0;
    for (live_run *r = sched.runs; r && queued <= DECIDE_AT_ONCE_MAX; r = r->next) queued += r->status == RUN_QUEUED;
    queue_length_seen_locked(queued > DECIDE_AT_ONCE_MAX);
    return queued > DECIDE_AT_ONCE_MAX;
}

static void queue_changed_locked(void) {
    if (long_queue_locked()) {
        sched.queue_stale = true;
        queue_unpublish_locked();
    } else {
        schedule_locked();
    }
}

/* Before a read of the decisions: what changed since the last one is decided now. */
static void decided_locked(void) {
    if (!sched.queue_stale && !sched.pending_stale) return;
    sched.decisions[QUEUE_DECIDED_FOR_READ]++;
    if (sched.queue_stale) decide_and_apply_locked();
    if (sched.pending_stale) pending_refresh_locked();
}

void run_needs_distributed(const json_t *config, run_needs *n) {
    const json_t *dist = json_object_get(config, "distributed");
    n->nodes_wanted = (int)json_integer_value(json_object_get(dist, "nodes"));
    n->min_world_size = (int)json_integer_value(json_object_get(dist, "min_world_size"));
    n->hang_timeout_s = json_number_value(json_object_get(dist, "hang_timeout_s"));
    n->max_restarts = (int)json_integer_value(json_object_get(dist, "max_restarts"));
    /* the server's own restarts: no pause without a policy (as before it), else the policy's; a
     * policy the submission checked parses, and one that does not (an older store's) is the defaults */
    char err[256];
    restart_policy_defaults(&n->restart, n->max_restarts, 0);
    if (restart_policy_parse(dist, &n->restart, err, sizeof err) != 0) {
        log_warn("a run's %s: its restarts by the server follow distributed.max_restarts", err);
        restart_policy_defaults(&n->restart, n->max_restarts, 0);
    }
    n->stop_grace_s = (int)json_integer_value(json_object_get(dist, "stop_grace_s"));
    n->max_duration_s = json_number_value(json_object_get(config, "max_duration_s"));
    const json_t *min_runtime = json_object_get(config, "min_runtime_s");
    n->min_runtime_s = json_is_number(min_runtime) ? json_number_value(min_runtime) : -1;
}

void scheduler_submit(const run_needs *n) {
    live_run *r = live_run_new(n); /* queued; its timeline's "submitted" went in with its insert (runs.c) */
    log_info("run %lld queued: needs %d %s", (long long)n->id, n->world_size, pool_unit(n->pool));
    if (pthread_mutex_trylock(&sched.mu) != 0) { /* held (a decision, most likely) */
        pthread_mutex_lock(&pub.mu);
        bool later = pub.long_queue && !sched.batch;
        if (later) { /* into the inbox: the next holder of the lock takes it (see pub) */
            if (pub.inbox_tail) pub.inbox_tail->next = r;
            else pub.inbox = r;
            pub.inbox_tail = r;
            pub.current = false;
            pub.submitted_to_inbox++;
        }
        pthread_mutex_unlock(&pub.mu);
        if (later) return;
        pthread_mutex_lock(&sched.mu);
    }
    inbox_drain_locked();
    live_run_link(r);
    queue_changed_locked();
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_resume(const run_needs *n) {
    live_run *r = live_run_new(n);
    sched_lock();
    live_run_append(r); /* at the back of the queue: it is queued now */
    timeline_note_locked(r, "resumed", NULL);
    log_info("run %lld queued again (resumed): needs %d %s", (long long)n->id, n->world_size, pool_unit(n->pool));
    queue_changed_locked();
    pthread_mutex_unlock(&sched.mu);
}

static cancel_result cancel_or_stop(int64_t id, const char *reason, bool stops, bool notice) {
    sched_lock();
    live_run *r = find_run(id);
    cancel_result res = CANCEL_NOT_LIVE;
    if (!r) {
        res = CANCEL_NOT_LIVE;
    } else if (r->status == RUN_QUEUED) {
        finish_locked(r, stops ? RUN_STOPPED : RUN_CANCELED, reason, NO_INT, NO_INT);
        /* it may have been blocking the runs behind it (it held no devices): behind a
         * long queue the tick decides, not the cancel's request */
        queue_changed_locked();
        res = CANCEL_DONE;
    } else if (r->cancel_reason) {
        res = CANCEL_ALREADY;
    } else {
        r->cancel_reason = xstrdup(reason);
        r->cancel_stops = stops;
        r->cancel_notice = notice;
        /* else once its start is done (part_started_locked); a job waiting in a batch
         * system's queue is canceled there at once */
        if (r->start_stored) signal_cancel_locked(r);
        else if (batch_pending(r)) stop_parts_locked(r);
        res = CANCEL_SIGNALED;
    }
    pthread_mutex_unlock(&sched.mu);
    return res;
}

cancel_result scheduler_cancel(int64_t id, const char *reason) { return cancel_or_stop(id, reason, false, false); }

cancel_result scheduler_stop(int64_t id, const char *reason) { return cancel_or_stop(id, reason, true, false); }

cancel_result scheduler_pause(int64_t id, const char *reason) { return cancel_or_stop(id, reason, true, true); }

bool scheduler_fail(int64_t id, const char *reason) {
    sched_lock();
    live_run *r = find_run(id);
    bool queued = r && r->status == RUN_QUEUED;
    bool done = fail_for_good_locked(r, reason);
    if (done && queued) schedule_locked(); /* it finished at once: what waited behind it may start */
    pthread_mutex_unlock(&sched.mu);
    return done;
}

/* Queued run `id` as the queue policy last decided on it (what changed since decided
 * first, with `decide`); NULL when it is not queued, or not decided yet. */
static live_run *decided_run_locked(int64_t id, bool decide) {
    if (decide) decided_locked();
    live_run *r = find_run(id);
    return r && r->status == RUN_QUEUED && r->queue_position > 0 ? r : NULL;
}

int scheduler_queue_position(int64_t id) {
    sched_lock();
    live_run *r = decided_run_locked(id, true);
    int pos = r ? r->queue_position : 0;
    pthread_mutex_unlock(&sched.mu);
    return pos;
}

bool scheduler_hello(int64_t id, const char *secret, int rank, long peer_uid) {
    sched_lock();
    live_run *r = find_run(id);
    /* A started run (its secret made, its trainer asked for): the trainer may say hello
     * before the supervisor has told us its pid, so the secret decides, and the account
     * the process runs as (run_as.h): another account's process never reports for it.
     * The server's own account is no other: its relay writes what agents forwarded (the
     * agent checked its peers' accounts, agent_streams.h), and it holds every secret */
    bool ok = r && r->status != RUN_QUEUED && r->secret[0] && secret_equal(secret, r->secret);
    if (ok && peer_uid >= 0 && peer_uid != (long)geteuid() && peer_uid != run_as_uid(r->owner, r->command)) {
        log_warn("event socket: a hello for run %lld from uid %ld, not the run's account: refused", (long long)id,
                 peer_uid);
        ok = false;
    }
    /* running: a rank has said hello; for a command run, ddp-run has (its ranks are
     * started, and a script need not report at all) */
    if (ok && (rank >= 0 || r->command) && r->status == RUN_STARTING) {
        if (r->start_stored) mark_running_locked(r);
        else r->said_hello = true; /* running once its start is stored (part_started_locked) */
    }
    pthread_mutex_unlock(&sched.mu);
    return ok;
}

void scheduler_end_event(int64_t id, const char *status, const char *reason, long peer_pid, const char *launch) {
    sched_lock();
    live_run *r = find_run(id);
    /* how a run ended is its launcher's to say (beside its exit status): an `end` any
     * other process of the run sends is not taken, nor one of an earlier start's */
    if (r && !of_this_launch_locked(r, launch)) {
        log_warn("event socket: an end event for run %lld from an earlier start of it (its connection's secret is "
                 "not the run's now): ignored",
                 (long long)id);
        r = NULL;
    }
    if (r && peer_pid > 0 && !from_launcher_locked(r, peer_pid)) {
        log_warn("event socket: an end event for run %lld from pid %ld, not its launcher: ignored", (long long)id,
                 peer_pid);
        r = NULL;
    }
    if (r) {
        free(r->end_status);
        free(r->end_reason);
        r->end_status = xstrdup(status);
        r->end_reason = reason && *reason ? xstrdup(reason) : NULL;
    }
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_planned(int64_t id, int64_t total_steps) {
    sched_lock();
    live_run *r = find_run(id);
    if (r && total_steps > 0) r->total_steps = total_steps;
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_checkpoint(int64_t id, bool saved) {
    sched_lock();
    live_run *r = find_run(id);
    int64_t now = now_ms();
    if (r && !saved) r->checkpointing_ms = now;
    if (r && saved) {
        if (r->checkpointing_ms && r->checkpointing_ms >= r->started_ms && now >= r->checkpointing_ms)
            r->checkpoint_write_ms = now - r->checkpointing_ms;
        r->checkpointing_ms = 0;
        r->checkpoint_ms = now;
        if (r->notice_ms && now >= r->notice_ms) notice_checkpoint_locked(r); /* the one its notice asked for */
    }
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_preempt_word(int64_t id, int rank, const char *state) {
    sched_lock();
    live_run *r = find_run(id);
    if (r && r->command && strcmp(state, "listening") == 0 && !r->answers_notices) {
        r->answers_notices = true;
        log_info("run %lld: rank %d listens for preemption notices: a preemption would throw away about nothing",
                 (long long)id, rank);
    } else if (r && r->notice_ms && strcmp(state, "heard") == 0) {
        log_info("run %lld: rank %d heard the notice", (long long)id, rank);
    }
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_progress(int64_t id, int rank, int64_t global_step) {
    sched_lock();
    progress_seen_locked(find_run(id), rank, global_step);
    pthread_mutex_unlock(&sched.mu);
}

bool scheduler_attempt(store_op *op, long peer_pid, const char *launch) {
    sched_lock();
    live_run *r = find_run(op->run_id);
    const char *what = op->kind == OP_RANK_STATE ? "a rank_state event" : "an attempt event";
    /* a launcher of an earlier start of the run (before a resize or a restart) has
     * another secret: what it says late is not of this start's attempt */
    bool earlier = r && !of_this_launch_locked(r, launch);
    /* a rank of the run with its secret is not its launcher: what it says of the run's
     * attempts (their number, MASTER_PORT, which rank failed) is not taken */
    bool taken = !earlier && (!r || peer_pid <= 0 || peer_pid == (long)getpid() || from_launcher_locked(r, peer_pid));
    if (earlier) {
        static log_limit stale = LOG_LIMIT_INIT;
        uint64_t skipped = 0;
        if (log_limit_now(&stale, 10000, &skipped))
            log_warn("event socket: %s for run %lld from an earlier start of it (its connection's secret is not the "
                     "run's now): ignored (and %llu more such since the last line)",
                     what, (long long)op->run_id, (unsigned long long)skipped);
    } else if (!taken) {
        static log_limit forged = LOG_LIMIT_INIT; /* a rank may send them by the thousand */
        uint64_t skipped = 0;
        if (log_limit_now(&forged, 10000, &skipped))
            log_warn("event socket: %s for run %lld from pid %ld, not its launcher: ignored (and %llu more such "
                     "since the last line)",
                     what, (long long)op->run_id, peer_pid, (unsigned long long)skipped);
    } else if (op->kind == OP_RANK_STATE) {
        rank_state_seen_locked(r, op);
    } else {
        taken = attempt_seen_locked(r, op);
    }
    pthread_mutex_unlock(&sched.mu);
    return taken;
}

/* A started run's minimum run time (min_runtime_s) ended in (since, now]: a run that
 * waited for it may preempt it now. ids: the started runs' (live_runs_watched). */
static bool protection_ended_locked(const int64_t *ids, int n, int64_t since, int64_t now) {
    for (int i = 0; i < n; i++) {
        live_run *r = find_run(ids[i]);
        if (!r || r->status == RUN_QUEUED || !r->started_ms || r->min_runtime_ms <= 0) continue;
        int64_t end = r->started_ms + r->min_runtime_ms;
        if (end > since && end <= now) return true;
    }
    return false;
}

/* A started run's time slice (serve --time-slice) ended in (since, now]: a run of
 * another owner that waits may take its turn now. */
static bool slice_ended_locked(const int64_t *ids, int n, int64_t since, int64_t now) {
    if (sched.c.time_slice_ms <= 0) return false;
    for (int i = 0; i < n; i++) {
        live_run *r = find_run(ids[i]);
        if (!r || r->status == RUN_QUEUED || !r->started_ms || !r->preemptible) continue;
        int64_t end = r->started_ms + sched.c.time_slice_ms;
        if (end > since && end <= now) return true;
    }
    return false;
}

/* A restart's backoff ended since the last tick (unix ms): it may start now. ids: the
 * queued runs in a backoff (live_runs_watched). */
static bool backoff_ended_locked(const int64_t *ids, int n, int64_t since, int64_t now) {
    for (int i = 0; i < n; i++) {
        live_run *r = find_run(ids[i]);
        if (r && r->status == RUN_QUEUED && r->not_before_ms > since && r->not_before_ms <= now) return true;
    }
    return false;
}

void scheduler_tick(void) {
    bool users_changed = users_refresh(); /* `ddpd user` changed a quota: what waits for one may start */
    sched_lock();
    int64_t now = mono_ms();
    /* the started runs and those in a backoff, not the whole queue: a tick costs what is
     * started (and due), however long the queue (a copy: a watch may end a run) */
    int n_started, n_watched;
    const int64_t *watched = live_runs_watched(&n_started, &n_watched);
    int64_t *ids = xmalloc((size_t)(n_watched + 1) * sizeof *ids);
    memcpy(ids, watched, (size_t)n_watched * sizeof *ids);
    for (int i = 0; i < n_started; i++) {
        live_run *r = find_run(ids[i]);
        if (r && r->adopted) watch_adopted_locked(r);
        if (r) watch_hang_locked(r, now);
    }
    for (int i = 0; i < n_started; i++) {
        live_run *r = find_run(ids[i]);
        if (r) watch_duration_locked(r, now_ms());
    }
    placement_publish_locked(); /* for the submissions that come while a decision holds the lock */
    static int64_t ticked; /* unix ms of the last tick */
    int64_t wall = now_ms();
    bool protection_ended = protection_ended_locked(ids, n_started, ticked, wall) ||
                            slice_ended_locked(ids, n_started, ticked, wall),
         backoff_ended = backoff_ended_locked(ids + n_started, n_watched - n_started, ticked, wall);
    free(ids);
    ticked = wall;
    static int64_t looked; /* ddpd node clear's requests, once a second: what waited for the node may start */
    bool nodes_cleared = now - looked >= 1000 && suspects_take_requests_locked();
    if (now - looked >= 1000) looked = now;
    /* Deciding a long queue costs (10,000 queued: tens of milliseconds, more under load),
     * under the lock every submission and read needs: the tick spends at most a quarter
     * of its time on it. After a decision that took T, the submissions that come are
     * decided together T x 4 after it began (a read that needs them decides them at once). */
    static int64_t decide_after, refresh_after;
    if (users_changed || protection_ended || backoff_ended || nodes_cleared || (sched.queue_stale && now >= decide_after)) {
        sched.decisions[QUEUE_DECIDED_BY_TICK]++;
        int64_t t = mono_ns();
        decide_and_apply_locked();
        decide_after = now + (mono_ns() - t) * 4 / 1000000;
    }
    /* ETAs move, and fair share's decay: the decisions follow, once a second (or, as
     * above, after four times as long as the last refresh took) */
    if (now >= refresh_after) {
        sched.decisions[QUEUE_DECIDED_BY_TICK]++;
        int64_t t = mono_ns();
        pending_refresh_tick_locked(); /* its costly part outside the lock */
        grow_elastic_locked(); /* a shrunk run's grow interval passes with time */
        int64_t took_ms = (mono_ns() - t) / 1000000;
        refresh_after = now + (took_ms * 4 > 1000 ? took_ms * 4 : 1000);
    }
    pthread_mutex_unlock(&sched.mu);
    /* outside the lock: what they learn comes back through the hooks */
    for (int i = 0; i < 3; i++)
        if (executor_at(i)) executor_at(i)->tick();
}

bool scheduler_journal_fed(int64_t id) {
    sched_lock();
    live_run *r = find_run(id);
    bool fed = r && r->adopted;
    pthread_mutex_unlock(&sched.mu);
    return fed;
}

/* A run a batch system runs: it is the system's, and goes on without this server
 * (whose next start follows it again). */
static bool left_to_batch(const live_run *r) { return r->n_parts > 0 && r->parts[0].exec->batch; }

void scheduler_shutdown(void) {
    sched_lock();
    sched.shutting_down = true;
    int active = 0, left = 0;
    for (live_run *r = sched.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED) continue; /* stays queued for the next start */
        if (left_to_batch(r)) {
            left++;
            continue;
        }
        active++;
        if (r->cancel_reason) continue;
        r->cancel_reason = xstrdup("the server shut down");
        if (r->start_stored) signal_cancel_locked(r);
    }
    if (active) log_info("shutting down: canceling %d active run(s)", active);
    if (left) log_info("shutting down: %d run(s) go on in %s; the next start follows them again", left, sched.batch->title);
    /* The reaper keeps running: it SIGKILLs after the grace period and finishes them
     * (a command run's launcher after its ranks' grace, which its config may lengthen). */
    int longest = sched.c.cancel_grace_ms;
    for (live_run *r = sched.runs; r; r = r->next)
        if (r->command && run_stop_grace_ms(r, false) + LAUNCHER_GRACE_MARGIN_MS > longest)
            longest = run_stop_grace_ms(r, false) + LAUNCHER_GRACE_MARGIN_MS;
    int64_t deadline = mono_ms() + longest + 5000;
    for (;;) {
        active = 0;
        for (live_run *r = sched.runs; r; r = r->next) active += r->status != RUN_QUEUED && !left_to_batch(r);
        if (!active || mono_ms() >= deadline) break;
        struct timespec ts = realtime_in_ms(100);
        pthread_cond_timedwait(&sched.changed, &sched.mu, &ts);
    }
    if (active) log_warn("%d run(s) did not end in time; they stay as they are", active);
    pthread_mutex_unlock(&sched.mu);
    for (int i = 0; i < 3; i++) /* their commands under way done (a job id given is stored) */
        if (executor_at(i) && executor_at(i)->shut_down) executor_at(i)->shut_down();
}

void scheduler_take_snapshot(scheduler_snapshot *out) {
    sched_lock();
    *out = (scheduler_snapshot){.cpu_slots = sched.c.slots, .cpu_free = free_devices(POOL_CPU), .gpus = sched.c.n_gpus,
                                .gpu_free = free_devices(POOL_GPU)};
    for (live_run *r = sched.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED || batch_pending(r)) out->queued++;
        else out->active++;
    }
    pthread_mutex_unlock(&sched.mu);
}

/* This host and the nodes as the tick sees them, for scheduler_can_place while the
 * scheduler's lock is held: its pointers made the copy's own. */
static void placement_publish_locked(void) {
    snapshot sn;
    snapshot_take_locked(&sn, false);
    pthread_mutex_lock(&pub.mu);
    pub.place = sn;
    pub.place.s.nodes = pub.place.nodes;
    for (int i = 1; i < pub.place.s.n_nodes; i++) pub.place.nodes[i].name = pub.place.names[i];
    pub.have_place = true;
    pthread_mutex_unlock(&pub.mu);
}

bool scheduler_can_place(const run_needs *need, char *err, size_t errlen) {
    if (sched.batch) return true; /* the batch system says (sbatch refuses what it can never run) */
    live_run r = {.id = need->id, .pool = need->pool, .world_size = need->world_size,
                  .nodes_wanted = need->nodes_wanted};
    policy_run q = policy_run_of(&r);
    if (pthread_mutex_trylock(&sched.mu) != 0) {
        /* held: behind a long queue, a run the nodes as last seen can hold passes without
         * waiting for the decision (a refusal is said from the state as it is, below) */
        pthread_mutex_lock(&pub.mu);
        bool ok = pub.long_queue && pub.have_place && queue_policy_can_place(&pub.place.s, &q, err, errlen);
        pthread_mutex_unlock(&pub.mu);
        if (ok) return true;
        pthread_mutex_lock(&sched.mu);
    }
    inbox_drain_locked();
    snapshot sn;
    snapshot_take_locked(&sn, false);
    bool ok = queue_policy_can_place(&sn.s, &q, err, errlen);
    pthread_mutex_unlock(&sched.mu);
    return ok;
}

/* What a queued run waits for, after why it is queued again where a preemption put it
 * back (a preempted user reads why their run waits, not only for what). */
static char *after_preemption(const live_run *r, char *waiting) {
    if (!waiting || !r || !r->requeued_by) return waiting;
    char by[48] = "";
    if (r->requeued_by > 0) snprintf(by, sizeof by, " by run %lld", (long long)r->requeued_by);
    char *text = xasprintf("preempted%s and queued again; it waits for %s", by, waiting);
    free(waiting);
    return text;
}

/* What run `id` waits for, as last decided, or as its batch system says (malloc'd). */
static char *waiting_for_locked(int64_t id, bool decide) {
    live_run *q = decided_run_locked(id, decide);
    if (q) return q->waiting_for ? xstrdup(q->waiting_for) : NULL;
    live_run *r = find_run(id);
    return r && batch_pending(r) && r->parts[0].exec->waiting_for ? r->parts[0].exec->waiting_for(r->id) : NULL;
}

char *scheduler_waiting_for(int64_t id) {
    sched_lock();
    char *text = waiting_for_locked(id, true);
    pthread_mutex_unlock(&sched.mu);
    return text;
}

/* ---- why each queued run waits, and when it may start (queue_forecast.h) ---- */

/* When a started run is expected to end (unix ms), -1 when nothing says: its ETA from
 * its steps (total_steps from its hello, the rate of rank 0's steps since this start),
 * else the median length of its owner's earlier runs of its name from its start. */
static int64_t expected_end_locked(const live_run *r) {
    if (r->total_steps > 0 && r->eta_last_ms > r->eta_first_ms && r->eta_last_step > r->eta_first_step) {
        double per_ms = (double)(r->eta_last_step - r->eta_first_step) / (double)(r->eta_last_ms - r->eta_first_ms);
        double left = (double)(r->total_steps - r->eta_last_step);
        return r->eta_last_ms + (int64_t)(left > 0 ? left / per_ms : 0);
    }
    if (r->expected_len_ms >= 0 && r->started_ms) return r->started_ms + r->expected_len_ms;
    return -1;
}

/* What an estimate rests on, for a person (malloc'd). */
static char *estimate_basis(const policy_decision *d, const forecast *f) {
    if (d->verb == POLICY_WAIT && d->wait == WAIT_BACKOFF)
        return xstrdup("its restart's backoff (distributed.restart_policy.backoff) ends then, or the queue policy's "
                       "walk forward says later");
    if (f->start_ms >= 0)
        return xstrdup("the queue policy walked forward from the expected ends of the runs ahead (their ETAs, else "
                       "the median length of their owners' earlier runs of the same name)");
    if (f->beyond)
        return xasprintf("more than %d runs come before it: no estimate until fewer do", FORECAST_RUNS_MAX);
    if (f->basis_run)
        return xasprintf("run %lld has no expected end (no ETA from its steps, and no earlier run of its name by its "
                         "owner that succeeded)", (long long)f->basis_run);
    return xstrdup("no run ahead of it has an expected end that frees what it needs");
}

/* The estimate a queued run shows: the fresh forecast, unless it is within a minute
 * (or a tenth of the wait, when that is longer) of the one shown, which then stays.
 * A forecast from step rates wobbles with every step, and a start that is due moves
 * with the clock: shown as they come, they would change every queued run's answer
 * (and its tag) every second. So the shown start lags the forecast by less than its
 * tolerance, and may lie up to a minute in the past while the runs ahead are late. */
static int64_t steady_start_ms(int64_t shown, int64_t fresh, int64_t now) {
    if (fresh < 0 || shown < 0) return fresh;
    if (fresh < now) fresh = now;
    int64_t tolerance = (fresh - now) / 10 > 60000 ? (fresh - now) / 10 : 60000;
    return llabs(fresh - shown) < tolerance ? shown : fresh;
}

static json_t *pending_of(const policy_decision *d, const forecast *f, char *detail) {
    json_t *blocked = json_array();
    for (int k = 0; k < d->n_blocked; k++) json_array_append_new(blocked, json_integer(d->blocked_by[k]));
    json_t *start = json_null();
    if (f->start_ms >= 0) { /* to the second (steady_start_ms: it moves only when the forecast does) */
        char at[32];
        format_iso8601(f->start_ms / 1000 * 1000, at);
        start = json_string(at);
    }
    char *basis = estimate_basis(d, f);
    json_t *o = json_pack("{s:s, s:o, s:o, s:o, s:s}", "reason", pending_reason_name(d->reason), "detail",
                          json_string_or_null(detail), "blocked_by", blocked, "estimated_start", start,
                          "estimate_basis", basis);
    free(basis);
    return o;
}

/* A batch system's queue decides: Slurm's own reason. */
static json_t *batch_pending_of(live_run *r) {
    char *why = r->n_parts && r->parts[0].exec->waiting_for ? r->parts[0].exec->waiting_for(r->id) : NULL;
    json_t *o = json_pack("{s:s, s:o, s:[], s:n, s:s}", "reason", pending_reason_name(PENDING_SLURM), "detail",
                          json_string_or_null(why), "blocked_by", "estimated_start", "estimate_basis",
                          "Slurm's own queue decides when it starts");
    free(why);
    return o;
}

static void drop_queue_entry(live_run *r) {
    free(r->queue_entry);
    r->queue_entry = NULL;
}

static void set_pending(live_run *r, json_t *p) {
    if (p && r->pending && json_equal(p, r->pending)) { /* as it was: its hash and timeline too */
        json_decref(p);
        return;
    }
    const char *reason = p ? json_string_value(json_object_get(p, "reason")) : NULL;
    if (reason && (!r->pending_reason || strcmp(reason, r->pending_reason) != 0)) {
        r->pending_reason = pending_reason_name(PENDING_NONE); /* a constant of the same text, kept */
        for (pending_reason k = PENDING_DEVICES; k <= PENDING_TIME_SLICE; k++)
            if (strcmp(pending_reason_name(k), reason) == 0) r->pending_reason = pending_reason_name(k);
        timeline_note_locked(r, "pending", json_pack("{s:s, s:O}", "reason", reason, "blocked_by",
                                                     json_object_get(p, "blocked_by")));
    }
    if (!p) {
        r->pending_reason = NULL;
        r->shown_start_ms = -1;
    }
    json_decref(r->pending);
    r->pending = p;
    r->pending_hash = 0;
    drop_queue_entry(r);
    if (!p) return;
    char *text = json_dumps(p, JSON_COMPACT);
    r->pending_hash = fnv1a32_text(text);
    free(text);
}

/* The queue policy's decision on a queued run, kept for the reads (NULL d: none;
 * `waiting`: its queue_policy_waiting_for text, taken over). */
static void set_decision(live_run *r, const policy_decision *d, char *waiting) {
    char *was_waiting = r->waiting_for;
    json_t *was_preempting = r->preempting;
    int was_position = r->queue_position, was_verb = r->queue_verb;
    r->waiting_for = NULL;
    r->preempting = NULL;
    r->queue_position = r->queue_order = 0;
    r->queue_verb = POLICY_WAIT;
    if (d) {
        r->queue_order = d->order;
        r->queue_position = d->pool_order + 1;
        r->queue_verb = d->verb;
        r->waiting_for = after_preemption(r, waiting);
        r->preempting = json_array();
        for (int v = 0; d->verb == POLICY_PREEMPT && v < d->n_preempt; v++)
            json_array_append_new(r->preempting, json_integer(d->preempt[v]));
    }
    /* its GET /queue entry stands while what it shows does (its place in the start order
     * is written beside it) */
    bool same = d && was_position == r->queue_position && was_verb == r->queue_verb &&
                (was_waiting && r->waiting_for ? strcmp(was_waiting, r->waiting_for) == 0
                                               : was_waiting == r->waiting_for) &&
                was_preempting && json_equal(was_preempting, r->preempting);
    if (!same) drop_queue_entry(r);
    free(was_waiting);
    json_decref(was_preempting);
}

/* A queued run's pending answer from its decision d and forecast f (f's start made
 * steady, or no sooner than its backoff's end) and `detail` (taken). */
static void show_pending(live_run *r, const policy_decision *d, forecast *f, char *detail, int64_t now_ms) {
    char *text = after_preemption(r, detail);
    if (d->wait == WAIT_BACKOFF && d->verb == POLICY_WAIT)
        f->start_ms = f->start_ms > r->not_before_ms ? f->start_ms : r->not_before_ms;
    else
        f->start_ms = steady_start_ms(r->shown_start_ms, f->start_ms, now_ms);
    r->shown_start_ms = f->start_ms;
    set_pending(r, d->verb == POLICY_START ? NULL : pending_of(d, f, text));
    free(text);
}

/* GET /queue's owners as of the snapshot: each one's decayed usage, devices, quota. */
static json_t *owners_of(const snapshot *sn) {
    json_t *owners = json_array();
    for (int i = 0; i < sn->s.n_owners; i++) {
        const policy_owner *o = &sn->owners[i];
        int held = 0;
        for (int j = 0; j < sn->s.n_running; j++)
            for (int h = 0; sn->running[j].owner == i && h < sn->running[j].n_holds; h++)
                held += sn->running[j].holds[h].devices;
        json_array_append_new(owners, json_pack("{s:o, s:f, s:i, s:o}", "name", json_string_or_null(o->name),
                                                "usage_device_seconds", o->usage, "devices_in_use", held,
                                                "max_devices", o->max_devices < 0 ? json_null() : json_integer(o->max_devices)));
    }
    return owners;
}

/* The queue decided anew: every queued run's decision (its order, position, what it
 * waits for, whom it preempts), pending reason and start estimate, from the queue
 * policy's decisions now and its walk forward (queue_forecast.h). Made when the
 * queue changes (schedule_locked) and once a second for the rules that move with
 * time (fair share's decay, the backfill window, the ETAs); every read copies them. */
static void queue_publish_locked(void);

static uint64_t refreshes_locked; /* pending_refresh_locked's, for the tick's refresh outside the lock */

/* The snapshot's running runs' expected ends and its queued runs' expected lengths,
 * for queue_forecast (*ends and *lens the caller's). */
static void expected_times_locked(const snapshot *sn, int64_t **ends, int64_t **lens) {
    *ends = xmalloc((size_t)(sn->s.n_running + 1) * sizeof **ends);
    for (int j = 0; j < sn->s.n_running; j++) {
        live_run *r = find_run(sn->running[j].id);
        (*ends)[j] = r ? expected_end_locked(r) : -1;
    }
    *lens = xmalloc((size_t)(sn->s.n_queued + 1) * sizeof **lens);
    for (int i = 0; i < sn->s.n_queued; i++) (*lens)[i] = sn->queued_runs[i]->expected_len_ms;
}

/* A decision's first part: the runs no longer queued wait for nothing, and GET
 * /queue's owners are the snapshot's. */
static void unqueued_cleared_locked(const snapshot *sn) {
    for (live_run *r = sched.runs; r; r = r->next) {
        if (r->status == RUN_QUEUED) continue;
        set_pending(r, NULL);
        set_decision(r, NULL, NULL);
    }
    json_decref(sched.queue_owners);
    sched.queue_owners = owners_of(sn);
}

static void pending_refresh_locked(void) {
    refreshes_locked++;
    sched.pending_stale = false;
    if (sched.batch) {
        for (live_run *r = sched.runs; r; r = r->next) {
            set_decision(r, NULL, NULL);
            set_pending(r, r->status == RUN_QUEUED || batch_pending(r) ? batch_pending_of(r) : NULL);
        }
        json_decref(sched.queue_owners);
        sched.queue_owners = json_array();
        queue_publish_locked();
        return;
    }
    test_hold_decision_locked();
    snapshot sn;
    policy_decision *d = decide_locked(&sn);
    int64_t *ends, *lens;
    expected_times_locked(&sn, &ends, &lens);
    forecast *f = xmalloc((size_t)(sn.s.n_queued + 1) * sizeof *f);
    queue_forecast(&sn.s, ends, lens, f);
    unqueued_cleared_locked(&sn);
    for (int i = 0; i < sn.s.n_queued; i++) {
        live_run *r = sn.queued_runs[i];
        /* what it waits for is said once: its waiting_for, and its pending detail from it */
        char *waiting = queue_policy_waiting_for(&sn.s, &sn.queued[i], &d[i]);
        set_decision(r, &d[i], waiting ? xstrdup(waiting) : NULL);
        show_pending(r, &d[i], &f[i], queue_policy_detail_of(&sn.s, &sn.queued[i], &d[i], waiting), sn.s.now_ms);
    }
    free(ends);
    free(lens);
    free(f);
    decisions_free(&sn, d);
    queue_publish_locked();
}

/* The snapshot's strings that point into live runs (owners' names, the nodes a run
 * failed at), made its own: it is read outside the scheduler's lock, where a run may
 * finish and be freed. */
static void snapshot_own_strings(snapshot *sn) {
    for (int i = 0; i < sn->s.n_owners; i++)
        if (sn->owners[i].name) sn->owners[i].name = xstrdup(sn->owners[i].name);
    for (int i = 0; i < sn->s.n_queued; i++) {
        policy_run *q = &sn->queued[i];
        if (!q->n_failed_at) {
            q->failed_at = NULL;
            continue;
        }
        char **copy = xmalloc((size_t)q->n_failed_at * sizeof *copy);
        for (int k = 0; k < q->n_failed_at; k++) copy[k] = xstrdup(q->failed_at[k]);
        q->failed_at = (const char *const *)copy;
    }
}

static void snapshot_free_strings(snapshot *sn) {
    for (int i = 0; i < sn->s.n_owners; i++) free((char *)sn->owners[i].name);
    for (int i = 0; i < sn->s.n_queued; i++) {
        for (int k = 0; k < sn->s.queued[i].n_failed_at; k++) free((char *)sn->s.queued[i].failed_at[k]);
        free((void *)sn->s.queued[i].failed_at);
    }
}

/* The tick's refresh of a long queue's decisions (pending_refresh_locked's result),
 * with its costly part (the policy's decisions, the walk forward, each run's words:
 * tens to hundreds of milliseconds at 10,000 queued) outside the scheduler's lock, on
 * a copy of the state: a cancel, a run's end, a launcher's event, a submission meanwhile
 * take the lock and go on. Called with sched.mu held; returns with it held. What it
 * decided is applied to the runs still queued; a change meanwhile leaves the decisions
 * marked stale (the next read or tick decides them again), and a refresh made under the
 * lock meanwhile (a read's) wins over this one. */
static void pending_refresh_tick_locked(void) {
    if (sched.batch || !long_queue_locked()) {
        pending_refresh_locked();
        return;
    }
    test_hold_decision_locked(); /* tests: as a decision under the lock would */
    sched.pending_stale = false; /* a change from now on marks it again */
    uint64_t seen = refreshes_locked;
    snapshot sn;
    snapshot_take_locked(&sn, true);
    snapshot_own_strings(&sn);
    int n = sn.s.n_queued;
    int64_t *ends, *lens;
    expected_times_locked(&sn, &ends, &lens);
    pthread_mutex_unlock(&sched.mu);

    test_hold_decision(); /* tests: the decision takes long; nothing waits for it */
    policy_decision *d = xmalloc((size_t)(n + 1) * sizeof *d);
    queue_policy_decide(&sn.s, d);
    forecast *f = xmalloc((size_t)(n + 1) * sizeof *f);
    queue_forecast(&sn.s, ends, lens, f);
    char **waiting = xmalloc((size_t)(n + 1) * sizeof *waiting), **detail = xmalloc((size_t)(n + 1) * sizeof *detail);
    for (int i = 0; i < n; i++) {
        char *w = queue_policy_waiting_for(&sn.s, &sn.queued[i], &d[i]);
        waiting[i] = w ? xstrdup(w) : NULL;
        detail[i] = queue_policy_detail_of(&sn.s, &sn.queued[i], &d[i], w);
    }

    sched_lock();
    bool apply = refreshes_locked == seen;
    if (apply) unqueued_cleared_locked(&sn);
    for (int i = 0; i < n; i++) {
        live_run *r = apply ? find_run(sn.queued[i].id) : NULL;
        if (!r || r->status != RUN_QUEUED) { /* it started, or ended, meanwhile */
            free(waiting[i]);
            free(detail[i]);
            continue;
        }
        set_decision(r, &d[i], waiting[i]);
        show_pending(r, &d[i], &f[i], detail[i], sn.s.now_ms);
    }
    if (apply) queue_publish_locked(); /* current only when nothing changed meanwhile (queue_publish_locked) */
    free(waiting);
    free(detail);
    free(ends);
    free(lens);
    free(f);
    queue_policy_free(d, n);
    free(d);
    snapshot_free_strings(&sn);
    snapshot_free(&sn);
}

json_t *scheduler_pending(int64_t id, uint32_t *hash, bool decide) {
    json_t *pending;
    if (view_published(id, decide, NULL, NULL, &pending, hash)) return pending;
    sched_lock_for_read();
    if (decide) decided_locked();
    live_run *r = find_run(id);
    json_t *p = r && r->pending ? json_deep_copy(r->pending) : NULL;
    *hash = p ? r->pending_hash : 0;
    pthread_mutex_unlock(&sched.mu);
    return p;
}

char *scheduler_queued_view(int64_t id, int *position, uint32_t *pending_hash, bool decide) {
    char *waiting;
    if (view_published(id, decide, position, &waiting, NULL, pending_hash)) return waiting;
    sched_lock_for_read();
    char *text = waiting_for_locked(id, decide); /* decides first what waits to be, with `decide` */
    live_run *r = find_run(id);
    *position = r && r->status == RUN_QUEUED ? r->queue_position : 0;
    *pending_hash = r && r->pending ? r->pending_hash : 0;
    pthread_mutex_unlock(&sched.mu);
    return text;
}

static int by_view_id(const void *a, const void *b) {
    const queued_view *x = a, *y = b;
    return (x->id > y->id) - (x->id < y->id);
}

static void views_free(queued_view *v, int n) {
    for (int i = 0; i < n; i++) {
        free(v[i].waiting);
        json_decref(v[i].pending);
    }
    free(v);
}

static const char *verb_word(int verb) {
    return verb == POLICY_START ? "start" : verb == POLICY_PREEMPT ? "preempt" : "wait";
}

static int by_queue_order(const void *a, const void *b) {
    const live_run *x = *(live_run *const *)a, *y = *(live_run *const *)b;
    return (x->queue_order > y->queue_order) - (x->queue_order < y->queue_order);
}

/* Run r's GET /queue entry, less its position, as JSON text: written when what it
 * shows changed (set_decision, set_pending) or its stint in the queue did, else kept. */
static void queue_entry_locked(live_run *r) {
    if (r->queue_entry && r->queue_entry_queued_ms == r->queued_ms && r->queue_entry_requeued_by == r->requeued_by)
        return;
    char queued_at[32];
    format_iso8601(r->queued_ms, queued_at);
    json_t *o = json_pack("{s:I, s:i, s:o, s:i, s:i, s:s, s:s, s:b, s:s, s:o, s:o, s:o, s:o}", "id", (json_int_t)r->id,
                          "pool_position", r->queue_position, "owner", json_string_or_null(r->owner), "priority",
                          r->priority, "world_size", r->world_size, "device_kind", pool_name(r->pool), "queued_at",
                          queued_at, "preemptible", r->preemptible, "decision", verb_word(r->queue_verb),
                          "waiting_for", json_string_or_null(r->waiting_for), "preempting",
                          r->preempting ? json_incref(r->preempting) : json_array(), "preempted_by",
                          r->requeued_by > 0 ? json_integer(r->requeued_by) : json_null(), "pending",
                          r->pending ? json_incref(r->pending) : json_null());
    free(r->queue_entry);
    r->queue_entry_len = json_dumpb(o, NULL, 0, JSON_FLAGS);
    r->queue_entry = xmalloc(r->queue_entry_len + 1);
    json_dumpb(o, r->queue_entry, r->queue_entry_len, JSON_FLAGS);
    r->queue_entry[r->queue_entry_len] = '\0';
    json_decref(o);
    path_redact_apply(&r->queue_entry, &r->queue_entry_len); /* as every answer */
    r->queue_entry_hash = fnv1a64(r->queue_entry, r->queue_entry_len);
    r->queue_entry_queued_ms = r->queued_ms;
    r->queue_entry_requeued_by = r->requeued_by;
}


/* GET /queue from the last decisions: the queued runs in the policy's start order,
 * each "{"position":K," and its entry after its '{'; then the owners and settings.
 * Its tag is a hash of the entries' hashes in that order and of the rest: the same
 * text, the same tag, without a pass over its megabytes. Published for the reads. */
static void queue_publish_locked(void) {
    int n = 0;
    for (live_run *r = sched.runs; r; r = r->next) n += r->status == RUN_QUEUED && r->queue_position > 0;
    live_run **order = xmalloc((size_t)(n + 1) * sizeof *order);
    n = 0;
    for (live_run *r = sched.runs; r; r = r->next)
        if (r->status == RUN_QUEUED && r->queue_position > 0) order[n++] = r;
    qsort(order, (size_t)n, sizeof *order, by_queue_order);
    uint64_t *hashes = xmalloc((size_t)(n + 1) * sizeof *hashes);
    size_t total = 64;
    for (int k = 0; k < n; k++) {
        queue_entry_locked(order[k]);
        hashes[k] = order[k]->queue_entry_hash;
        total += order[k]->queue_entry_len + 24;
    }
    buf_t b = {0};
    buf_reserve(&b, total);
    buf_append(&b, "{\"runs\":[", 9);
    for (int k = 0; k < n; k++) {
        buf_printf(&b, "%s{\"position\":%d,", k ? "," : "", k + 1);
        buf_append(&b, order[k]->queue_entry + 1, order[k]->queue_entry_len - 1);
    }
    free(order);
    json_t *rest = json_pack("{s:o, s:f, s:I}", "owners", sched.queue_owners ? json_incref(sched.queue_owners) : json_array(),
                             "fair_share_half_life_s", sched.c.fair_share_half_life_s, "backfill_window_s",
                             (json_int_t)(sched.c.backfill_window_ms / 1000));
    char *text = json_dumps(rest, JSON_FLAGS);
    json_decref(rest);
    size_t len = strlen(text);
    path_redact_apply(&text, &len);
    buf_append(&b, "],", 2);
    buf_append(&b, text + 1, len - 1); /* its members and its '}' */
    buf_append(&b, "\n", 1);           /* curl-friendly, as every answer */
    hashes[n] = fnv1a64(text, len);
    free(text);
    char tag[SCHED_QUEUE_TAG_LEN];
    snprintf(tag, sizeof tag, "\"%016llx-queue\"", (unsigned long long)fnv1a64(hashes, (size_t)(n + 1) * sizeof *hashes));
    free(hashes);
    /* each queued run's view, by id (the table is in id order but for resumed runs) */
    queued_view *views = xmalloc((size_t)(n + 1) * sizeof *views);
    int k = 0;
    bool sorted = true;
    for (live_run *r = sched.runs; r; r = r->next) {
        if (r->status != RUN_QUEUED || r->queue_position <= 0) continue;
        views[k] = (queued_view){.id = r->id, .position = r->queue_position,
                                 .waiting = r->waiting_for ? xstrdup(r->waiting_for) : NULL,
                                 .pending = r->pending ? json_incref(r->pending) : NULL,
                                 .pending_hash = r->pending ? r->pending_hash : 0};
        sorted &= k == 0 || views[k - 1].id < r->id;
        k++;
    }
    if (!sorted) qsort(views, (size_t)k, sizeof *views, by_view_id);
    pthread_mutex_lock(&pub.mu);
    char *was = pub.text;
    queued_view *was_views = pub.views;
    int was_n = pub.n_views;
    pub.text = b.data;
    pub.len = b.len;
    pub.views = views;
    pub.n_views = k;
    memcpy(pub.tag, tag, sizeof tag);
    pub.current = !sched.queue_stale && !sched.pending_stale && !pub.inbox;
    pthread_mutex_unlock(&pub.mu);
    free(was);
    views_free(was_views, was_n);
}

/* Run `id`'s published view, or NULL (pub.mu held). */
static const queued_view *view_of(int64_t id) {
    queued_view key = {.id = id};
    return pub.views ? bsearch(&key, pub.views, (size_t)pub.n_views, sizeof key, by_view_id) : NULL;
}

/* Queued run `id` as published, without the scheduler's lock: true, with what the
 * caller asks for (NULL: not asked; *waiting and *pending copies, the caller's; 0 and
 * NULLs for a run not among them), when the published views answer for it: current
 * ones (with `decide`), or the last ones (without: a run not among them is not decided
 * yet). false: the scheduler's state must say (a change waits to be decided, a batch
 * system's run, a run no longer queued). */
static bool view_published(int64_t id, bool decide, int *position, char **waiting, json_t **pending,
                           uint32_t *pending_hash) {
    if (sched.batch) return false; /* its queue says */
    pthread_mutex_lock(&pub.mu);
    const queued_view *v = decide && !pub.current ? NULL : view_of(id);
    bool known = v || !decide;
    if (known) {
        if (position) *position = v ? v->position : 0;
        if (waiting) *waiting = v && v->waiting ? xstrdup(v->waiting) : NULL;
        if (pending) *pending = v && v->pending ? json_deep_copy(v->pending) : NULL;
        if (pending_hash) *pending_hash = v && v->pending ? v->pending_hash : 0;
    }
    pthread_mutex_unlock(&pub.mu);
    return known;
}

/* A read goes through the scheduler's lock (counted: /metrics). */
static void sched_lock_for_read(void) {
    pthread_mutex_lock(&pub.mu);
    pub.lock_reads++;
    pthread_mutex_unlock(&pub.mu);
    sched_lock();
}

/* The published text (a copy) and its tag, or only its tag (text NULL); made current
 * first, under the scheduler's lock, only when a change waits to be decided. */
static char *queue_read(bool copy, size_t *len, char tag[SCHED_QUEUE_TAG_LEN]) {
    pthread_mutex_lock(&pub.mu);
    bool current = pub.current;
    if (!current) {
        pub.lock_reads++;
        pthread_mutex_unlock(&pub.mu);
        sched_lock();
        decided_locked();
        pthread_mutex_lock(&pub.mu);
        current = pub.current; /* (a submission may have come to the inbox since) */
        pthread_mutex_unlock(&pub.mu);
        if (!current) queue_publish_locked(); /* as decided now */
        pthread_mutex_lock(&pub.mu);
        pthread_mutex_unlock(&sched.mu);
    }
    char *out = NULL;
    if (copy) {
        out = xmalloc(pub.len + 1);
        memcpy(out, pub.text, pub.len);
        out[pub.len] = '\0';
        *len = pub.len;
    }
    snprintf(tag, SCHED_QUEUE_TAG_LEN, "%s", pub.tag);
    pthread_mutex_unlock(&pub.mu);
    return out;
}

char *scheduler_queue_text(size_t *len, char tag[SCHED_QUEUE_TAG_LEN]) { return queue_read(true, len, tag); }

void scheduler_queue_tag(char tag[SCHED_QUEUE_TAG_LEN]) { queue_read(false, NULL, tag); }

void scheduler_queue_decisions(uint64_t counts[3]) {
    sched_lock();
    for (int i = 0; i < 3; i++) counts[i] = sched.decisions[i];
    pthread_mutex_unlock(&sched.mu);
}

void scheduler_queue_lock_stats(uint64_t *submitted_to_inbox, uint64_t *lock_reads) {
    pthread_mutex_lock(&pub.mu);
    *submitted_to_inbox = pub.submitted_to_inbox;
    *lock_reads = pub.lock_reads;
    pthread_mutex_unlock(&pub.mu);
}

json_t *scheduler_nodes_json(void) {
    sched_lock();
    json_t *gpus = json_array();
    for (int i = 0; i < sched.c.n_gpus; i++) json_array_append_new(gpus, json_string(sched.c.gpus[i]));
    json_t *here = json_pack("{s:s, s:s?, s:b, s:s, s:i, s:i, s:o, s:i}", "name", local_node_name(), "address",
                             sched.c.advertise, "local", 1, "state", "up", "slots", sched.c.slots, "free_slots",
                             free_devices(POOL_CPU), "gpus", gpus, "free_gpus", free_devices(POOL_GPU));
    pthread_mutex_unlock(&sched.mu);
    json_t *all = json_array();
    json_array_append_new(all, here);
    json_t *agents = nodes_to_json();
    json_array_extend(all, agents);
    json_decref(agents);
    sched_lock();
    size_t i;
    json_t *node;
    json_array_foreach(all, i, node) {
        json_t *mark = suspect_json_locked(json_string_value(json_object_get(node, "name")));
        /* the host's devices that are suspect on their own (or all of them, with the node) */
        json_object_set_new(node, "suspect_devices", mark ? json_incref(json_object_get(mark, "devices")) : json_array());
        json_object_set_new(node, "suspect", mark ? mark : json_null());
        json_object_set_new(node, "watch", watch_json_locked(json_string_value(json_object_get(node, "name"))));
    }
    pthread_mutex_unlock(&sched.mu);
    return all;
}

json_t *scheduler_suspects_json(void) {
    sched_lock();
    json_t *all = suspects_json_locked();
    pthread_mutex_unlock(&sched.mu);
    return all;
}

bool scheduler_node_clear(const char *name, const char *by) {
    sched_lock();
    bool had = suspect_clear_locked(name, by);
    /* an admin vouches for the node: the runs restarted elsewhere may go back where they failed */
    size_t len = strlen(name);
    for (live_run *r = sched.runs; r; r = r->next)
        for (int i = 0; i < r->n_failed_at;) {
            if (strncmp(r->failed_at[i], name, len) == 0 && (!r->failed_at[i][len] || r->failed_at[i][len] == '/')) {
                free(r->failed_at[i]);
                memmove(r->failed_at + i, r->failed_at + i + 1, (size_t)(--r->n_failed_at - i) * sizeof *r->failed_at);
                had = true;
            } else {
                i++;
            }
        }
    if (had) queue_changed_locked();
    pthread_mutex_unlock(&sched.mu);
    return had;
}
