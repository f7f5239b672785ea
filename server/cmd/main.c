/* ddpd: the data-parallel training service. This file only wires the parts together:
 * `ddpd serve` reads its settings (cmd/settings.c), takes the state directory's lock,
 * refuses a database it must not touch (store/db_inspect.c),
 * and starts the parts in dependency order, handing each the hooks through which it
 * reaches the parts above it: the store (its observer: the live feed; and the cache
 * of GET /runs/{id}'s answers, told of deleted runs), the
 * supervisor (its starts, exits and ticks go to the scheduler), the event socket
 * (hellos and ends go to the scheduler), the scheduler (which recovers runs a
 * previous server left behind), and last the HTTP API (each finished request goes to
 * the log and the metrics). SIGTERM or SIGINT stops them in reverse: no new requests,
 * active runs canceled ("the server shut down"; queued runs stay queued for the next
 * start), events drained, database closed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "run_account.h"
#include "run_as.h"
#include "run_cgroup.h"
#include "run_dir.h"
#include "byte_size.h"
#include "disk_use.h"
#include "agent.h"
#include "auth.h"
#include "beside_self.h"
#include "base.h"
#include "check_cmd.h"
#include "man_page.h"
#include "conn_limits.h"
#include "datapaths.h"
#include "db_inspect.h"
#include "history_rebuild.h"
#include "journal_compact.h"
#include "ddpd_build_config.h"
#include "devices.h"
#include "dirs.h"
#include "die.h"
#include "feed.h"
#include "hostport.h"
#include "http.h"
#include "ingest.h"
#include "metrics_sink.h"
#include "part.h"
#include "path_redact.h"
#include "ports.h"
#include "routes.h"
#include "routes_nodes.h"
#include "routes_parts.h"
#include "routes_rendezvous.h"
#include "routes_static.h"
#include "routes_sweeps.h"
#include "routes_audit.h"
#include "routes_usage.h"
#include "sweep.h"
#include "run_cache.h"
#include "runs.h"
#include "scheduler.h"
#include "settings.h"
#include "sse.h"
#include "state_layout.h"
#include "state_lock.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"
#include "zygotes.h"
#include "node_cmd.h"
#include "user_cmd.h"
#include "users.h"

static void make_dir(const char *path) {
    if (mkdir_p(path, 0700) != 0) die("cannot create %s: %s", path, strerror(errno));
}

/* How long a start waits for a lock that a dead server's child still holds between
 * its fork and its exec (state_lock.h). */
enum { STATE_LOCK_WAIT_MS = 5000 };

/* The server's own paths, named by their roots in what it answers (path_redact.h),
 * unless serve --show-paths. */
static void name_roots(const data_roots *r, const char *what) {
    for (int i = 0; i < r->n; i++) {
        char label[64];
        if (r->n == 1) snprintf(label, sizeof label, "<%s>", what);
        else snprintf(label, sizeof label, "<%s-%d>", what, i + 1);
        path_redact_add(r->roots[i], label);
    }
}

/* --slurm-user-account's users: a name no user can have stops the server; one that is
 * not a user (yet: `ddpd user add` may come while it runs) is said. */
static void check_slurm_users(const settings *o) {
    for (int i = 0; i < o->slurm_user_accounts.n; i++) {
        const char *spec = o->slurm_user_accounts.v[i], *eq = strchr(spec, '=');
        char name[USER_NAME_MAX + 2];
        snprintf(name, sizeof name, "%.*s", (int)(eq - spec), spec);
        const char *bad = users_name_problem(name);
        if (bad) die("--slurm-user-account \"%s\": %s", spec, bad);
        user_info u;
        if (!users_find(name, &u))
            log_warn("--slurm-user-account %s: there is no ddpd user %s (yet): its runs would go under %s once there "
                     "is (ddpd user add %s)", spec, name, eq + 1, name);
    }
}

static void name_server_paths(const settings *o, const char *state_dir, const data_roots *roots,
                              const data_roots *work_roots) {
    if (o->show_paths) {
        path_redact_disable();
        return;
    }
    if (layout_runs_apart()) { /* a root of its own (the longest root that holds a path names it) */
        path_redact_add(layout_runs_dir(), "<runs-dir>");
        path_redact_add(o->runs_dir, "<runs-dir>");
    }
    path_redact_add(state_dir, "<state-dir>");
    path_redact_add(o->state_dir, "<state-dir>");
    name_roots(roots, "data-root");
    name_roots(work_roots, "work-root");
    /* the programs by their file names: what a reason like "cannot start ddp-trainer" needs */
    const char *trainer = strrchr(o->trainer, '/'), *runner = strrchr(o->runner, '/');
    path_redact_add(o->trainer, trainer ? trainer + 1 : o->trainer);
    path_redact_add(o->runner, runner ? runner + 1 : o->runner);
}

/* ---- the hooks: how the lower parts reach the upper ones ---- */

/* A trainer is gone: what it wrote to the event socket is all there, so ingest reads
 * it first (its `end` event carries the reason), then the scheduler finishes the run. */
static void on_child_exited(pid_t pid, int wstatus) {
    ingest_sync();
    scheduler_child_exited(pid, wstatus);
}

/* Reads need a token once there are users, unless serve --open-reads (http.h). */
static bool open_reads;
static bool reads_need_token(void) { return !open_reads && users_known(); }

static void on_request_done(const http_done *d) {
    if (d->status) metrics_observe_request(d->route, d->method, d->status, d->seconds);
    server_log_request(d->client, d->method, d->path, d->status, d->bytes, d->seconds * 1000.0);
}

static const store_observer FEED_OBSERVES_STORE = {feed_attach, feed_detach, feed_record, feed_commit};
static const supervisor_hooks SUPERVISOR_REPORTS = {scheduler_spawned, on_child_exited, scheduler_tick};
/* A run deleted: its cached answer goes, and what its directory held counts no more. */
static void on_run_deleted(int64_t run_id) {
    run_cache_forget(run_id);
    disk_use_run_deleted(run_id);
}

static const store_cache_hooks CACHE_FORGETS_DELETED = {on_run_deleted};
/* A run's metrics passed --max-points-per-run (ingest.h): it fails, for good. */
static void on_points_capped(int64_t run_id, const char *reason) { scheduler_fail(run_id, reason); }

/* A checkpoint written: what it takes on disk, and what a preemption would lose now. */
static void on_checkpoint(int64_t run_id, const char *path) {
    disk_use_checkpoint(run_id, path);
    scheduler_checkpoint(run_id, true);
}

static void on_checkpointing(int64_t run_id) { scheduler_checkpoint(run_id, false); }

static const ingest_hooks INGEST_ASKS = {.hello = scheduler_hello, .end = scheduler_end_event,
                                         .progress = scheduler_progress, .planned = scheduler_planned,
                                         .attempt = scheduler_attempt,
                                         .journal_fed = scheduler_journal_fed, .checkpoint = on_checkpoint,
                                         .checkpointing = on_checkpointing, .points_capped = on_points_capped,
                                         .preempt = scheduler_preempt_word};

/* Fair share: each owner's usage as the store kept it, for the scheduler. */
static void load_usage(void) {
    char **owners = NULL;
    double *values = NULL;
    int64_t *as_of = NULL;
    int n = store_list_usage(&owners, &values, &as_of);
    if (n < 0) {
        log_error("cannot read the owners' usage from the database: fair share starts from nothing");
        return;
    }
    scheduler_load_usage((const char *const *)owners, values, as_of, n);
    for (int i = 0; i < n; i++) free(owners[i]);
    free(owners);
    free(values);
    free(as_of);
}

/* The log first, so that everything after goes where it was asked to (a setting
 * ddpd refuses still goes to stderr, through die). */
static void start_log(const settings *o) {
    server_log_config config;
    char err[512];
    if (server_log_parse_config(o->log_level, o->log_file, o->log_max_bytes, o->log_keep, &config, err, sizeof err) != 0 ||
        server_log_setup(&config, err, sizeof err) != 0)
        die("%s", err);
}

/* The state directory, made and locked, and its database judged before anything
 * writes to it: a database that is damaged, not ddpd's, newer, or gone beside run
 * directories is refused (ddpd check says the same), unless --rebuild-from-runs
 * applies. Returns the lock's descriptor; *rebuild: the history is to be rebuilt. */
static int runs_lock_fd = -1; /* the runs' directory's own lock, where it lies apart */

static int open_state_dir(const settings *o, char state_dir[PATH_MAX], db_report *verdict, bool *rebuild) {
    make_dir(o->state_dir);
    if (!realpath(o->state_dir, state_dir)) die("state dir %s: %s", o->state_dir, strerror(errno));
    state_layout_init(state_dir);
    make_dir(o->runs_dir);
    char runs_dir[PATH_MAX];
    if (!realpath(o->runs_dir, runs_dir)) die("runs dir %s: %s", o->runs_dir, strerror(errno));
    state_layout_set_runs_dir(runs_dir);
    int lock_fd = state_lock_take(layout_lock_path(), state_dir, STATE_LOCK_WAIT_MS);
    if (layout_runs_apart()) { /* one server's alone, as its state dir is */
        char *runs_lock = xasprintf("%s/ddpd.lock", runs_dir);
        runs_lock_fd = state_lock_take(runs_lock, runs_dir, STATE_LOCK_WAIT_MS);
        free(runs_lock);
        log_info("the runs' directories are in %s (--runs-dir), apart from the state dir %s", runs_dir, state_dir);
    }
    /* the cheap look (header, schema, the runs table's two ends): a start costs the
     * same at any history; a rebuild, which must know a damaged one, reads it all */
    db_inspect(layout_db_path(), layout_runs_dir(), o->rebuild_from_runs, verdict);
    *rebuild = false;
    if (o->rebuild_from_runs) {
        char why[sizeof verdict->line + 256];
        int applies = history_rebuild_applies(verdict, layout_db_path(), why, sizeof why);
        if (applies < 0) die("%s", why);
        *rebuild = applies > 0;
        if (!*rebuild) log_info("--rebuild-from-runs: nothing to rebuild, there are no run directories (%s)", verdict->line);
    } else if (db_refuses(verdict->state)) {
        die("%s", verdict->line);
    }
    /* then the state dir this user's only (a refusal above stays one line): its top at
     * every start, everything beneath once, at the start that migrates the database
     * past the schema from which starts stopped walking it (state_layout.h) */
    char err[PATH_MAX + 256];
    if (layout_tighten(verdict->version < LAYOUT_WALKED_SCHEMA, err, sizeof err) != 0) die("%s", err);
    return lock_fd;
}

static void say_token(const settings *o) {
    if (o->token && o->token_on_command_line)
        log_warn("the token given with --token can be read by every user of this host (ps, /proc/%d/cmdline): "
                 "put it in a file only you can read and pass --token-file PATH (DDPD_TOKEN_FILE), or set DDPD_TOKEN",
                 (int)getpid());
    else if (o->token_file)
        log_info("the token is read from %s", o->token_file);
}

/* Connection limits, sized to the descriptors there are (a run: its ranks'
 * connections, its pipes and logs). */
static void plan_connections(const settings *o, int n_gpus, conn_plan *limits) {
    conn_plan_make(o, (unsigned)o->http_threads, 8u * (unsigned)(o->slots + n_gpus) + 16, limits);
    if (limits->fd_need > limits->fd_limit)
        log_warn("these connection limits can take about %llu file descriptors and this process may open %llu "
                 "(ulimit -n): raise the limit (ulimit -n, LimitNOFILE=) or lower --max-connections, "
                 "--reserved-connections or --max-streams", limits->fd_need, limits->fd_limit);
}

/* SIGTERM/SIGINT/SIGHUP are taken by sigwait (wait_for_stop), SIGCHLD by the
 * supervisor's signalfd; blocked in every thread (threads inherit this mask). */
static void block_signals(void) {
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);
}

/* The database (moved aside first when the history is rebuilt), its users, and the
 * refusal to listen beyond this host with nobody to ask a token of (auth.h). */
static void open_store(const settings *o, const db_report *verdict, bool rebuild, int loopback) {
    char err[1024];
    if (rebuild && !(verdict->state == DB_CURRENT || verdict->state == DB_OLDER)) { /* those hold no run */
        char moved[PATH_MAX + 64];
        if (history_move_db_aside(layout_db_path(), moved, sizeof moved, err, sizeof err) != 0) die("%s", err);
        if (moved[0]) log_warn("--rebuild-from-runs: %s (%s) was moved aside to %s", layout_db_path(), verdict->line, moved);
    }
    feed_init(); /* the live feed (sse.h): it observes the store's writer */
    if (store_open(layout_db_path(), &FEED_OBSERVES_STORE, &CACHE_FORGETS_DELETED, err, sizeof err) != 0) die("%s", err);
    if (users_open(layout_db_path(), o->token, err, sizeof err) != 0) die("%s", err);
    if (run_account_take_permitted() != 0) log_warn("cannot make this server's permitted capabilities effective: %s",
                                                    strerror(errno));
    run_as_config ra = {.run_user = o->run_user, .unsafe_as_server = o->unsafe_commands_as_server};
    if (run_as_init(&ra, err, sizeof err) != 0) die("%s", err);
    bool has_users = users_exist(); /* their tokens are needed to change anything */
    if (loopback == 0 && !o->token && !has_users && !o->insecure)
        die("refusing to listen on %s without a token: anyone who can reach it could submit, cancel and delete runs. "
            "Set a token (--token-file PATH or DDPD_TOKEN; e.g. openssl rand -hex 16 >PATH; chmod 600 PATH), "
            "add users (ddpd user add NAME), listen on 127.0.0.1, "
            "or pass --insecure (DDPD_INSECURE=1) to serve without one",
            o->listen);
    if (loopback == 0 && !o->token && !has_users)
        log_warn("serving %s without a token (--insecure): anyone who can reach it can submit, cancel and delete runs",
                 o->listen);
    if (has_users && o->open_reads)
        log_warn("--open-reads: anybody who can reach %s reads the runs, their logs, metrics and events without a "
                 "token (a command run's env values and arguments stay its owner's and the admins')", o->listen);
    else if (has_users)
        log_info("there are users: every request but /healthz and the dashboard's files needs a token, a user's or "
                 "the server's (--open-reads lets anybody read)");
    if (!rebuild) return;
    rebuild_counts rb;
    if (history_rebuild(layout_runs_dir(), &rb, err, sizeof err) != 0) die("--rebuild-from-runs: %s", err);
    log_info("--rebuild-from-runs: the history of %d run%s rebuilt from %s (%d succeeded, %d failed, %d canceled; "
             "%d without an end event; %d run director%s skipped; %lld journal events)",
             rb.runs, rb.runs == 1 ? "" : "s", layout_runs_dir(), rb.succeeded, rb.failed, rb.canceled,
             rb.without_end, rb.skipped, rb.skipped == 1 ? "y" : "ies", (long long)rb.events);
}

/* The roots as data_roots: each one given must be usable (`strict`), else a missing
 * one is skipped. */
static void add_roots(data_roots *r, const opt_list *dirs, bool strict, const char *what) {
    char err[1024];
    for (int i = 0; i < dirs->n; i++)
        if (data_roots_add(r, dirs->v[i], err, sizeof err) != 0 && strict) die("%s%s", what, err);
}

typedef struct {
    data_roots roots, work_roots, runs_root;
    char **gpus;
    int n_gpus;
    int port_lo, port_hi;
    executor_slurm_config slurm;
    bool on_slurm;
} serving;

/* What bounds each run (docs/security.md, Each run bounded), said once at start: what this
 * host's cgroups can hold a run to, and the caps. */
static void announce_bounds(const settings *o, const char *memory_says, bool on_slurm) {
    char why[256], logs[32];
    if (on_slurm) return; /* Slurm's own limits hold its jobs */
    if (!run_cgroup_can_limit_memory(why, sizeof why))
        log_warn("runs go without a memory limit: %s (ddpd check says what this host can limit)", why);
    else log_info("each run's memory is limited by its cgroup (%s): %s unless its config asks (resources.memory_gb)", why,
                  memory_says);
    if (!run_cgroup_can_limit_pids(why, sizeof why)) log_warn("runs go without a process limit: %s", why);
    if (o->max_log_bytes) byte_size_format(o->max_log_bytes, logs, sizeof logs);
    log_info("each run: at most %d points stored (--max-points-per-run), %s a log (--max-log-bytes-per-run), %s",
             o->max_points_per_run, o->max_log_bytes ? logs : "no cap on", o->max_run_processes == 0
             ? "no process limit (--max-run-processes 0)" : "a process limit (--max-run-processes)");
}

/* The scheduler and what feeds it: the supervisor, the event socket, the runs it
 * recovers; then runs (submit, cancel, delete). Where runs execute (this host and
 * its agents, or Slurm) the scheduler chooses from sc.slurm, in one place. */
static void start_runs(const settings *o, serving *v) {
    char err[1024];
    if (port_range_parse(o->port_range, &v->port_lo, &v->port_hi, err, sizeof err) != 0) die("%s", err);
    add_roots(&v->work_roots, &o->work_roots, true, "--work-root: ");
    v->slurm = (executor_slurm_config){.partition = o->slurm_partition, .account = o->slurm_account,
                                       .user_accounts = o->slurm_user_accounts.v,
                                       .n_user_accounts = o->slurm_user_accounts.n,
                                       .allow_priority = o->slurm_allow_priority,
                                       .preemptible_qos = o->slurm_preemptible_qos, .options = o->slurm_options.v,
                                       .n_options = o->slurm_options.n, .work_dir = o->slurm_work_dir,
                                       .ddpd = o->slurm_ddpd, .data_roots = (const char *const *)v->roots.roots,
                                       .n_data_roots = v->roots.n, .gpus = o->slurm_gpus};
    v->on_slurm = strcmp(o->executor, "slurm") == 0;
    if (v->on_slurm) check_slurm_users(o);
    char memory_says[256];
    int64_t memory_per_device[2];
    settings_memory_per_device(o, v->n_gpus, memory_per_device, memory_says, sizeof memory_says);
    scheduler_config sc = {.trainer = o->trainer, .runner = o->runner, .port_lo = v->port_lo, .port_hi = v->port_hi,
                           .data_roots = (const char *const *)v->roots.roots, .n_data_roots = v->roots.n,
                           .gpus = v->gpus, .n_gpus = v->n_gpus, .slots = o->slots,
                           .cancel_grace_ms = o->cancel_grace * 1000, .run_ended = ingest_run_ended,
                           .config_mend = runs_config_mend,
                           .node_name = o->node_name, .advertise = o->advertise && *o->advertise ? o->advertise : NULL,
                           .node_timeout_ms = o->node_timeout * 1000LL,
                           .backfill_window_ms = o->backfill_window * 1000LL,
                           .fair_share_half_life_s = o->fairshare_half_life,
                           .preempt_grace_ms = o->preempt_grace * 1000, .min_runtime_ms = o->min_runtime * 1000LL,
                           .elastic_grow_interval_ms = o->elastic_grow_interval * 1000LL,
                           .time_slice_ms = o->time_slice * 1000LL,
                           .exclude_node_after = o->exclude_node_after, .suspect_after = o->suspect_after,
                           .exclude_node_window_ms = o->exclude_node_window * 1000LL,
                           .max_stop_grace_ms = o->max_stop_grace * 1000, .slurm = v->on_slurm ? &v->slurm : NULL,
                           .memory_per_device = {memory_per_device[0], memory_per_device[1]},
                           .max_run_processes = o->max_run_processes, .max_log_bytes = o->max_log_bytes,
                           .max_points = o->max_points_per_run};
    scheduler_init(&sc);
    load_usage();
    announce_bounds(o, memory_says, v->on_slurm);
    if (supervisor_start(&SUPERVISOR_REPORTS) != 0) die("cannot start the supervisor's thread");
    ingest_set_max_points(o->max_points_per_run);
    if (ingest_start(layout_socket_path(), &INGEST_ASKS, err, sizeof err) != 0) die("%s", err);
    /* runs of other accounts reach their directories and the socket (before any is adopted) */
    if (run_as_accounts_in_use()) layout_open_for_accounts();
    /* before the recovery: a queued run it starts may need its config.json made again (runs_config_mend) */
    if (data_roots_add(&v->runs_root, layout_runs_dir(), err, sizeof err) != 0) die("%s", err);
    runs_config rc = {.data_roots = &v->roots, .runs_root = &v->runs_root, .work_roots = &v->work_roots,
                      .allow_commands = o->allow_commands};
    runs_init(&rc);
    scheduler_recover();
    if (disk_use_start(scheduler_fail, err, sizeof err) != 0) die("%s", err);
    /* finished runs' journals compacted in the background: a start reads none of them */
    if (!o->keep_journals && journal_compact_start() != 0) die("cannot start the journals' compaction thread");
    if (sweep_start(layout_db_path(), err, sizeof err) != 0) die("%s", err);
}

/* The routes: the API's, the nodes', the runs' rendezvous and parts, the event
 * streams', the dashboard's files; malloc'd, *n their number. */
static route *all_routes(size_t *n) {
    const struct {
        const route *routes;
        size_t n;
    } parts[] = {{api_routes, api_routes_count},       {node_routes, node_routes_count},
                 {rendezvous_routes, rendezvous_routes_count}, {part_routes, part_routes_count},
                 {sse_routes, sse_routes_count},       {sweep_routes, sweep_routes_count}, {audit_routes, audit_routes_count}, {usage_routes, usage_routes_count},
                 {static_routes, static_routes_count}};
    *n = 0;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) *n += parts[i].n;
    route *all = xmalloc(*n * sizeof *all), *at = all;
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        memcpy(at, parts[i].routes, parts[i].n * sizeof *at);
        at += parts[i].n;
    }
    return all;
}

/* Where this host's own ranks reach it (the address it listens on, or loopback), and
 * where other machines do (a Slurm job's nodes: the advertised address, else the same). */
static void tell_scheduler_urls(const settings *o, int port, int loopback, bool on_slurm) {
    char listen_host[256] = "", listen_port[16], err[512], self_url[320], reachable_url[320];
    parse_host_port("--listen", o->listen, listen_host, sizeof listen_host, listen_port, sizeof listen_port, err, sizeof err);
    bool wildcard = !listen_host[0] || strcmp(listen_host, "0.0.0.0") == 0 || strcmp(listen_host, "::") == 0;
    snprintf(self_url, sizeof self_url, strchr(listen_host, ':') ? "http://[%s]:%d" : "http://%s:%d",
             wildcard ? "127.0.0.1" : listen_host, port);
    bool advertised = o->advertise && *o->advertise;
    const char *reach_host = advertised ? o->advertise : wildcard ? "127.0.0.1" : listen_host;
    snprintf(reachable_url, sizeof reachable_url, strchr(reach_host, ':') ? "http://[%s]:%d" : "http://%s:%d",
             reach_host, port);
    scheduler_set_self_url(self_url, reachable_url);
    if (on_slurm && !advertised && (wildcard || loopback == 1))
        log_warn("--executor slurm without --advertise: the jobs' ddpd parts report to %s, which only Slurm nodes on "
                 "this host can reach; give --advertise ADDR (an address of this host the nodes reach)", reachable_url);
}

/* The start-up's lines: what this server runs with, and what may not work. */
static void announce(const settings *o, const serving *v, const char *state_dir, const conn_plan *limits, int port) {
    if (v->on_slurm) {
        log_info("runs are Slurm jobs (--executor slurm): partition %s, account %s, %d more sbatch option(s); the "
                 "nodes run %s part, in %s/ID/part-K", o->slurm_partition ? o->slurm_partition : "Slurm's default",
                 o->slurm_account ? o->slurm_account : "Slurm's default", o->slurm_options.n, o->slurm_ddpd,
                 o->slurm_work_dir);
        log_info("Slurm's queue is the queue: %d user(s) with an account of their own; a run's priority is its job's "
                 "nice (%s); preemptible runs %s%s; ddpd's own quotas, fair share and preemption do not apply",
                 o->slurm_user_accounts.n, o->slurm_allow_priority ? "lowered or raised" : "lowered only",
                 o->slurm_preemptible_qos ? "get QOS " : "get no QOS of their own",
                 o->slurm_preemptible_qos ? o->slurm_preemptible_qos : "");
    }
    char *roots_text = data_roots_list(&v->roots);
    log_info("ddpd %s: state in %s; data roots %s; %d CPU slot(s); %d GPU(s); trainer %s; %d HTTP threads",
             DDPD_VERSION, state_dir, roots_text, o->slots, v->n_gpus, o->trainer, o->http_threads);
    free(roots_text);
    char limits_text[400];
    conn_plan_describe(limits, limits_text, sizeof limits_text);
    log_info("HTTP: %s", limits_text);
    if (o->allow_commands) {
        char *wr = data_roots_list(&v->work_roots);
        log_warn("command runs are on (--allow-commands): submitted programs run as %s; work roots: "
                 "%s; MASTER_PORTs %d-%d; runner %s",
                 o->run_user ? "their user's Unix account, else --run-user's"
                 : o->unsafe_commands_as_server ? "their user's Unix account, else THIS SERVER'S USER "
                                                  "(--unsafe-commands-as-server)"
                                                : "their user's Unix account (others are refused)",
                 v->work_roots.n ? wr : "none (runs work in their run directory)", v->port_lo, v->port_hi, o->runner);
        free(wr);
        if (access(o->runner, X_OK) != 0)
            log_warn("the runner %s is not there or not executable (%s): command runs will fail to start (--runner)",
                     o->runner, strerror(errno));
    }
    if (access(o->trainer, X_OK) != 0)
        log_warn("the trainer %s is not there or not executable (%s): runs will fail to start until it is (--trainer)",
                 o->trainer, strerror(errno));
    const char *colon = strrchr(o->listen, ':');
    printf("ddpd: listening on http://%.*s:%d\n", (int)(colon - o->listen), o->listen, port);
    fflush(stdout);
}

static void wait_for_stop(void) {
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    int sig = 0;
    sigwait(&stop, &sig);
    log_info("%s: shutting down", strsignal(sig));
}

/* In reverse: no new requests, active runs canceled, events drained, database closed. */
static void stop_all(int lock_fd) {
    sse_shutdown(); /* event streams end before the HTTP server stops */
    http_stop();
    feed_stop();
    sweep_stop(); /* before the shutdown's cancels, which are no trial's end */
    journal_compact_stop(); /* the runs the shutdown ends are compacted at the next start */
    scheduler_shutdown();
    disk_use_stop();
    supervisor_stop();
    zygotes_tick(true); /* the warm start's zygotes end with the server (one started again makes its own) */
    ingest_stop();
    store_read_release();
    users_close();
    store_close();
    run_cache_clear(); /* after the writer: it may still tell of a deletion */
    path_redact_clear();
    unlink(layout_socket_path());
    if (runs_lock_fd >= 0) close(runs_lock_fd);
    close(lock_fd);
    log_info("stopped");
}

static int serve(int argc, char **argv) {
    settings o;
    settings_read(argc, argv, &o);
    if (o.problem[0]) die("%s", o.problem);
    /* the cap on a run's logs reaches its launchers as the other settings they read do
     * (trainer_env.h), given by flag or not; before any thread */
    char cap[32];
    snprintf(cap, sizeof cap, "%llu", (unsigned long long)o.max_log_bytes);
    setenv(RUN_DIR_LOG_CAP_ENV, cap, 1);
    /* Everything this server and its trainers create is this user's only: the state
     * directory holds the runs' configs, logs, journals and checkpoints, and the
     * database (a command run's program inherits it too; docs/security.md). */
    umask(077);
    start_log(&o);
    char state_dir[PATH_MAX];
    db_report db_verdict;
    bool rebuild;
    int lock_fd = open_state_dir(&o, state_dir, &db_verdict, &rebuild);
    say_token(&o);
    /* Without a token or users, only this host's users may reach it (auth.h): judged
     * once the database says whether it has users (open_store). */
    char err[1024];
    int loopback = auth_listen_is_loopback(o.listen, err, sizeof err);
    serving v = {0};
    /* data roots: as given (a bad one is fatal), or the defaults (a missing one is skipped) */
    add_roots(&v.roots, &o.data_roots, o.data_roots_given, "");
    /* GPUs: before any thread exists (detection forks). */
    v.n_gpus = o.gpus ? devices_parse_list(o.gpus, &v.gpus) : devices_detect_gpus(&v.gpus);
    if (o.slots == 0 && v.n_gpus == 0) die("--slots 0 and no GPUs: this server could never run anything");
    conn_plan limits;
    plan_connections(&o, v.n_gpus, &limits);
    block_signals();
    open_store(&o, &db_verdict, rebuild, loopback);
    start_runs(&o, &v);
    name_server_paths(&o, state_dir, &v.roots, &v.work_roots);
    routes_init();
    routes_static_init(o.web_dir);
    size_t n_routes;
    route *routes = all_routes(&n_routes);
    if (feed_start() != 0) die("cannot start the live feed's thread");
    sse_set_limits(limits.max_streams, limits.streams_per_address);
    open_reads = o.open_reads;
    http_config hc = {.listen = o.listen, .threads = (unsigned)o.http_threads, .routes = routes, .n_routes = n_routes,
                      .token = o.token, .identify = users_identify, .reads_need_token = reads_need_token,
                      .identify_read = users_identify_read, .refusal = users_refusal,
                      .request_done = on_request_done, .limits = limits.http, .idle_timeout_s = limits.idle_timeout_s};
    int port = 0;
    if (http_start(&hc, &port, err, sizeof err) != 0) die("%s", err);
    tell_scheduler_urls(&o, port, loopback, v.on_slurm);
    announce(&o, &v, state_dir, &limits, port);

    wait_for_stop();
    stop_all(lock_fd);
    free(routes);
    data_roots_free(&v.roots);
    data_roots_free(&v.runs_root);
    data_roots_free(&v.work_roots);
    devices_free_list(v.gpus, v.n_gpus);
    state_layout_free();
    settings_free(&o);
    return 0;
}

/* ddpd check: serve's settings, resolved the same way, checked without starting
 * anything (check_cmd.c). */
static int check(int argc, char **argv) {
    settings o;
    settings_read(argc, argv, &o);
    int rc = ddpd_check(&o);
    settings_free(&o);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "check") == 0) return check(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "agent") == 0) return agent_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "user") == 0) return user_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "node") == 0) return node_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "part") == 0) return part_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "man") == 0) {
        man_page_write(stdout);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        char line[256];
        ddpd_version_line(line, sizeof line);
        printf("%s\n", line);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        settings_usage(stdout);
        return 0;
    }
    settings_usage(stderr);
    return 2;
}
