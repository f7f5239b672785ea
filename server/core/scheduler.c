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
#include "journal_replay.h"
#include "logtail.h"
#include "ports.h"
#include "procstat.h"
#include "secret.h"
#include "run_status.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"

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
} K = {.mu = PTHREAD_MUTEX_INITIALIZER, .changed = PTHREAD_COND_INITIALIZER};

const char *pool_name(pool_kind pool) { return pool == POOL_GPU ? "gpu" : "cpu"; }
const char *pool_unit(pool_kind pool) { return pool == POOL_GPU ? "GPUs" : "CPU slots"; }

int scheduler_capacity(pool_kind pool) { return pool == POOL_GPU ? K.c.n_gpus : K.c.slots; }

void scheduler_init(const scheduler_config *c) {
    K.c = *c;
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
    release_devices(r);
    unlink_run(r);
    free_run(r);
    pthread_cond_broadcast(&K.changed);
}

static void schedule_locked(void);

/* SIGTERM to a started run's process group; SIGKILL after the grace period (tick). */
static void signal_cancel_locked(live_run *r) {
    r->status = RUN_CANCELING;
    r->kill_at = mono_ms() + K.c.cancel_grace_ms;
    if (kill(-r->pid, SIGTERM) != 0 && errno != ESRCH)
        log_warn("run %lld: SIGTERM to process group %d: %s", (long long)r->id, (int)r->pid, strerror(errno));
    store_op op = {.kind = OP_RUN_CANCELING, .run_id = r->id, .t = now_ms()};
    store_submit_now(&op);
    log_info("run %lld canceling: SIGTERM sent to process group %d", (long long)r->id, (int)r->pid);
}

/* The server's DDPD_* settings stay with the server (the token among them), but for
 * the ones the trainer reads too, passed on by name: where the dataset cache lies,
 * the GPU collectives' timeout, the CPU convolutions' implementation, and which
 * ddp-trainer-nccl takes GPU runs (the one `ddpd check` names). */
static const char *const PASSED_ON[] = {"DDPD_CACHE_DIR", "DDPD_COLLECTIVE_TIMEOUT_S", "DDPD_CPU_CONV",
                                        "DDPD_TRAINER_NCCL"};

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
    char *config = layout_run_path(r->id, RUN_FILE_CONFIG);
    json_t *cfg = json_load_file(config, 0, NULL);
    free(config);
    r->hang_timeout_s = json_number_value(json_object_get(json_object_get(cfg, "distributed"), "hang_timeout_s"));
    json_decref(cfg);
    r->last_progress_ms = calloc((size_t)r->world_size, sizeof *r->last_progress_ms);
    r->last_step = calloc((size_t)r->world_size, sizeof *r->last_step);
    if (!r->last_progress_ms || !r->last_step) abort();
}

/* Gives the run devices and asks the supervisor to start its trainer; the supervisor
 * answers through scheduler_spawned. */
static void start_locked(live_run *r) {
    r->devices = xmalloc((size_t)r->world_size * sizeof *r->devices);
    buf_t names = {0}, json = {0}, visible = {0};
    buf_printf(&json, "[");
    for (int i = 0, k = 0; k < r->world_size; i++) {
        if (K.owner[r->pool][i]) continue;
        K.owner[r->pool][i] = r->id;
        r->devices[k] = i;
        const char *label = r->pool == POOL_GPU ? K.c.gpus[i] : NULL;
        char name[160];
        if (label) snprintf(name, sizeof name, "gpu:%s", label);
        else snprintf(name, sizeof name, "cpu:%d", i);
        buf_printf(&names, "%s%s", k ? ", " : "", name);
        /* device names are digits, letters, '-' and ':' (GPU UUIDs): no escaping needed */
        buf_printf(&json, "%s\"%s\"", k ? "," : "", name);
        if (label) buf_printf(&visible, "%s%s", k ? "," : "", label);
        k++;
    }
    buf_printf(&json, "]");
    r->devices_json = json.data;
    r->status = RUN_STARTING;
    if (random_hex(r->secret, 32) != 0) {
        char err[256];
        snprintf(err, sizeof err, "cannot make a secret for the run: getrandom failed: %s", strerror(errno));
        buf_free(&names);
        buf_free(&visible);
        finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
        return;
    }
    char port_text[16] = "";
    if (r->command) {
        r->port = lease_port_locked();
        if (!r->port) {
            char err[256];
            snprintf(err, sizeof err, "no free port for MASTER_PORT in --port-range %d-%d (all held by runs or by "
                     "other programs): an operator can give ddpd serve a wider --port-range", K.c.port_lo, K.c.port_hi);
            buf_free(&names);
            buf_free(&visible);
            finish_locked(r, RUN_FAILED, err, NO_INT, NO_INT);
            return;
        }
        snprintf(port_text, sizeof port_text, "%d", r->port);
    }
    const char *program = r->command ? K.c.runner : K.c.trainer;
    char *run_dir = layout_run_dir(r->id), *config = layout_run_path(r->id, RUN_FILE_CONFIG);
    if (r->command) watch_hangs_of(r);
    char *log = layout_run_path(r->id, RUN_FILE_LOG);
    const char *argv[10 + 2 * 64] = {program, "--config", config, "--run-dir", run_dir, "--events",
                                     layout_socket_path()};
    int argc = 7;
    if (r->command) {
        argv[argc++] = "--master-port";
        argv[argc++] = port_text;
    }
    if (r->resume) argv[argc++] = "--resume";
    for (int i = 0; !r->command && i < K.c.n_data_roots && i < 64; i++) {
        argv[argc++] = "--data-root";
        argv[argc++] = K.c.data_roots[i];
    }
    argv[argc] = NULL;
    char *env[4 + sizeof PASSED_ON / sizeof *PASSED_ON] = {
        xasprintf("DDPD_RUN_ID=%lld", (long long)r->id), xasprintf("DDPD_RUN_SECRET=%s", r->secret),
        xasprintf("CUDA_VISIBLE_DEVICES=%s", visible.data ? visible.data : "")};
    int envc = 3;
    for (size_t i = 0; i < sizeof PASSED_ON / sizeof *PASSED_ON; i++)
        if (getenv(PASSED_ON[i])) env[envc++] = xasprintf("%s=%s", PASSED_ON[i], getenv(PASSED_ON[i]));
    env[envc] = NULL;
    char *drop[] = {"DDPD_", NULL};
    char *banner = r->command ? xasprintf("starting %s for run %lld on %s, MASTER_PORT %d", program, (long long)r->id,
                                          names.data, r->port)
                              : xasprintf("starting %s for run %lld on %s", program, (long long)r->id, names.data);
    spawn_request req = {.run_id = r->id, .program = program, .argv = (char *const *)argv, .env_set = env,
                         .env_drop = drop, .cwd = run_dir, .log_path = log, .log_banner = banner};
    supervisor_request_spawn(&req);
    log_info("run %lld starting on %s", (long long)r->id, names.data);
    for (int i = 0; i < envc; i++) free(env[i]);
    free(banner);
    free(run_dir);
    free(config);
    free(log);
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
        log_info("run %lld: trainer started (pid %d)", (long long)r->id, (int)pid);
        if (r->cancel_reason) signal_cancel_locked(r); /* canceled while its start was queued */
        else if (r->said_hello && r->status == RUN_STARTING) mark_running_locked(r);
    }
    pthread_mutex_unlock(&K.mu);
}

/* Starts every queued run that fits, in order; per pool, the first run that does
 * not fit blocks those behind it (no starvation of big runs). */
static void schedule_locked(void) {
    if (K.shutting_down) return;
    bool blocked[2] = {false, false};
    live_run *next;
    for (live_run *r = K.runs; r; r = next) {
        next = r->next; /* start_locked may finish (free) r */
        if (r->status != RUN_QUEUED || blocked[r->pool]) continue;
        if (free_devices(r->pool) >= r->world_size) start_locked(r);
        else blocked[r->pool] = true;
    }
}

/* A queued run, not yet in the list. */
static live_run *new_queued(int64_t id, int world_size, pool_kind pool) {
    live_run *r = calloc(1, sizeof *r);
    if (!r) abort();
    r->id = id;
    r->world_size = world_size;
    r->pool = pool;
    r->status = RUN_QUEUED;
    return r;
}

static live_run *add_queued(int64_t id, int world_size, pool_kind pool) {
    live_run *r = new_queued(id, world_size, pool);
    live_run **p = &K.runs;
    while (*p && (*p)->id < id) p = &(*p)->next; /* ids are submission order */
    r->next = *p;
    *p = r;
    return r;
}

void scheduler_submit(int64_t id, int world_size, pool_kind pool, bool command) {
    pthread_mutex_lock(&K.mu);
    add_queued(id, world_size, pool)->command = command;
    log_info("run %lld queued: needs %d %s", (long long)id, world_size, pool_unit(pool));
    schedule_locked();
    pthread_mutex_unlock(&K.mu);
}

void scheduler_resume(int64_t id, int world_size, pool_kind pool) {
    live_run *r = new_queued(id, world_size, pool);
    r->resume = true;
    pthread_mutex_lock(&K.mu);
    live_run **p = &K.runs;
    while (*p) p = &(*p)->next; /* at the back of the queue: it is queued now */
    *p = r;
    log_info("run %lld queued again (resumed): needs %d %s", (long long)id, world_size, pool_unit(pool));
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
        if (r->pid > 0) signal_cancel_locked(r); /* else when its start is done (scheduler_spawned) */
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
        if (r->pid > 0) mark_running_locked(r);
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
    if (!r->last_progress_ms || r->hang_timeout_s <= 0 || r->fail_reason || r->cancel_reason || r->pid <= 0) return;
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
        if ((r->cancel_reason || r->fail_reason) && !r->killed && now >= r->kill_at) {
            r->killed = true;
            log_info("run %lld: still running %d ms after SIGTERM: SIGKILL to process group %d",
                     (long long)r->id, K.c.cancel_grace_ms, (int)r->pid);
            kill(-r->pid, SIGKILL);
        }
    }
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
static void recover_started_locked(const run_brief *b, pool_kind pool) {
    run_process rp = {.pid_start_time = NO_INT};
    if (store_get_run_process(b->id, &rp) < 0) log_error("run %lld: cannot read its process from the database", (long long)b->id);
    char *run_dir = layout_run_dir(b->id), *journal = layout_run_path(b->id, RUN_FILE_JOURNAL);
    pid_t pid = b->pid != NO_INT && b->pid > 1 ? (pid_t)b->pid : 0;
    bool recorded = rp.pid_start_time != NO_INT && rp.secret[0];
    bool alive = pid && recorded && proc_is_alive(pid, (uint64_t)rp.pid_start_time) && proc_cmdline_has(pid, run_dir);
    live_run *r = add_queued(b->id, b->world_size, pool);
    r->command = b->command;
    r->status = b->status;
    r->pid = pid;
    if (alive && r->command) watch_hangs_of(r);
    r->journal = journal_replay_open(b->id, journal, journal_progress, r);
    if (!r->journal) log_error("run %lld: cannot read what the database holds of it: its journal is not replayed", (long long)b->id);
    if (alive) {
        r->adopted = true;
        r->start_time = (uint64_t)rp.pid_start_time;
        snprintf(r->secret, sizeof r->secret, "%s", rp.secret);
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
        if (b->status != RUN_QUEUED) {
            recover_started_locked(b, pool);
            continue;
        }
        live_run *r = add_queued(b->id, b->world_size, pool);
        r->command = b->command;
        r->resume = b->resumes > 0; /* queued by POST /runs/{id}/resume: starts with --resume */
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
        if (r->pid > 0) signal_cancel_locked(r);
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
