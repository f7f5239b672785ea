/* ddpd: the data-parallel training service. This file only wires the parts together:
 * `ddpd serve` reads its settings (cmd/settings.c), takes the state directory's lock,
 * refuses a database it must not touch (core/db_inspect.c),
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

#include "agent.h"
#include "auth.h"
#include "beside_self.h"
#include "base.h"
#include "check_cmd.h"
#include "conn_limits.h"
#include "datapaths.h"
#include "db_inspect.h"
#include "history_rebuild.h"
#include "ddpd_build_config.h"
#include "devices.h"
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
#include "run_cache.h"
#include "runs.h"
#include "scheduler.h"
#include "settings.h"
#include "sse.h"
#include "state_layout.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"
#include "user_cmd.h"
#include "users.h"

static int parse_count(const char *what, const char *s, int min, int max) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) die("%s must be an integer from %d to %d (got \"%s\")", what, min, max, s);
    return (int)v;
}

static void mkdir_p(const char *path, mode_t mode) {
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, mode) != 0 && errno != EEXIST) die("cannot create %s: %s", tmp, strerror(errno));
        *p = '/';
    }
    if (mkdir(tmp, mode) != 0 && errno != EEXIST) die("cannot create %s: %s", tmp, strerror(errno));
}

/* One server per state directory: the lock lives as long as the process. */
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
    for (int i = 0; i < o->n_slurm_user_accounts; i++) {
        const char *spec = o->slurm_user_accounts[i], *eq = strchr(spec, '=');
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
    path_redact_add(state_dir, "<state-dir>");
    path_redact_add(o->state_dir, "<state-dir>");
    name_roots(roots, "data-root");
    name_roots(work_roots, "work-root");
    /* the programs by their file names: what a reason like "cannot start ddp-trainer" needs */
    const char *trainer = strrchr(o->trainer, '/'), *runner = strrchr(o->runner, '/');
    path_redact_add(o->trainer, trainer ? trainer + 1 : o->trainer);
    path_redact_add(o->runner, runner ? runner + 1 : o->runner);
}

static int lock_state_dir(const char *state_dir) {
    char *path = xstrdup(layout_lock_path());
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) die("cannot open %s: %s", path, strerror(errno));
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        pid[n > 0 ? n : 0] = '\0';
        pid[strcspn(pid, "\n")] = '\0';
        die("another ddpd%s%s%s is serving %s: stop it, or use another --state-dir", *pid ? " (pid " : "", pid,
            *pid ? ")" : "", state_dir);
    }
    if (ftruncate(fd, 0) == 0) dprintf(fd, "%d\n", (int)getpid());
    free(path);
    return fd;
}

/* ---- the hooks: how the lower parts reach the upper ones ---- */

/* A trainer is gone: what it wrote to the event socket is all there, so ingest reads
 * it first (its `end` event carries the reason), then the scheduler finishes the run. */
static void on_child_exited(pid_t pid, int wstatus) {
    ingest_sync();
    scheduler_child_exited(pid, wstatus);
}

static void on_request_done(const http_done *d) {
    if (d->status) metrics_observe_request(d->route, d->method, d->status, d->seconds);
    server_log_request(d->client, d->method, d->path, d->status, d->bytes, d->seconds * 1000.0);
}

static const store_observer FEED_OBSERVES_STORE = {feed_attach, feed_detach, feed_record, feed_commit};
static const supervisor_hooks SUPERVISOR_REPORTS = {scheduler_spawned, on_child_exited, scheduler_tick};
static const store_cache_hooks CACHE_FORGETS_DELETED = {run_cache_forget};
static const ingest_hooks INGEST_ASKS = {.hello = scheduler_hello, .end = scheduler_end_event,
                                         .progress = scheduler_progress, .attempt = scheduler_attempt,
                                         .journal_fed = scheduler_journal_fed};

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

static int serve(int argc, char **argv) {
    settings o;
    settings_read(argc, argv, &o);
    /* Everything this server and its trainers create is this user's only: the state
     * directory holds the runs' configs, logs, journals and checkpoints, and the
     * database (a command run's program inherits it too; the README's Security part). */
    umask(077);
    /* The log first, so that everything after goes where it was asked to (a setting
     * ddpd refuses still goes to stderr, through die). */
    server_log_config log_config;
    char log_err[512];
    if (server_log_parse_config(o.log_level, o.log_file, o.log_max_bytes, o.log_keep, &log_config, log_err,
                                sizeof log_err) != 0 ||
        server_log_setup(&log_config, log_err, sizeof log_err) != 0)
        die("%s", log_err);
    mkdir_p(o.state_dir, 0700);
    char state_dir[PATH_MAX];
    if (!realpath(o.state_dir, state_dir)) die("state dir %s: %s", o.state_dir, strerror(errno));
    state_layout_init(state_dir);
    mkdir_p(layout_runs_dir(), 0700);
    int lock_fd = lock_state_dir(state_dir);
    /* A database that is damaged, not ddpd's, newer, or gone beside run directories:
     * refuse before anything writes to it (ddpd check says the same). */
    db_report db_verdict;
    db_inspect(layout_db_path(), layout_runs_dir(), &db_verdict);
    bool rebuild = false;
    if (o.rebuild_from_runs) {
        char why[sizeof db_verdict.line + 256];
        int applies = history_rebuild_applies(&db_verdict, layout_db_path(), why, sizeof why);
        if (applies < 0) die("%s", why);
        rebuild = applies > 0;
        if (!rebuild) log_info("--rebuild-from-runs: nothing to rebuild, there are no run directories (%s)", db_verdict.line);
    } else if (db_refuses(db_verdict.state)) {
        die("%s", db_verdict.line);
    }
    /* then the state dir this user's only (a refusal above stays one line) */
    char tighten_err[PATH_MAX + 256];
    if (layout_tighten(tighten_err, sizeof tighten_err) != 0) die("%s", tighten_err);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    int slots = o.slots && *o.slots ? parse_count("--slots", o.slots, 0, 4096) : (int)cores;
    int threads = o.http_threads && *o.http_threads ? parse_count("--http-threads", o.http_threads, 1, 256)
                                                    : (int)(cores < 2 ? 2 : cores > 16 ? 16 : cores);
    int grace = o.cancel_grace && *o.cancel_grace ? parse_count("--cancel-grace", o.cancel_grace, 0, 3600) : 10;
    int node_timeout = o.node_timeout && *o.node_timeout ? parse_count("--node-timeout", o.node_timeout, 2, 3600) : 10;
    int backfill = o.backfill_window && *o.backfill_window
                       ? parse_count("--backfill-window", o.backfill_window, 0, 30 * 24 * 3600) : 600;
    int half_life = o.fairshare_half_life && *o.fairshare_half_life
                        ? parse_count("--fairshare-half-life", o.fairshare_half_life, 1, 365 * 24 * 3600) : 3600;
    int preempt_grace = o.preempt_grace && *o.preempt_grace ? parse_count("--preempt-grace", o.preempt_grace, 1, 3600) : 60;
    int max_stop_grace = o.max_stop_grace && *o.max_stop_grace
                             ? parse_count("--max-stop-grace", o.max_stop_grace, 0, 86400) : 300;
    char host_name[64] = "local";
    if (!o.node_name) gethostname(host_name, sizeof host_name - 1);
    if (o.token_error[0]) die("%s", o.token_error);
    if (o.token && o.token_on_command_line)
        log_warn("the token given with --token can be read by every user of this host (ps, /proc/%d/cmdline): "
                 "put it in a file only you can read and pass --token-file PATH (DDPD_TOKEN_FILE), or set DDPD_TOKEN",
                 (int)getpid());
    else if (o.token_file)
        log_info("the token is read from %s", o.token_file);
    /* Without a token or users, only this host's users may reach it (auth.h): judged
     * once the database says whether it has users (below). */
    char listen_err[512];
    int loopback = auth_listen_is_loopback(o.listen, listen_err, sizeof listen_err);

    /* data roots: as given (a bad one is fatal), or the defaults (a missing one is skipped) */
    data_roots roots = {0};
    char err[1024];
    for (int i = 0; i < o.n_data_roots; i++)
        if (data_roots_add(&roots, o.data_roots[i], err, sizeof err) != 0 && o.data_roots_given) die("%s", err);

    /* GPUs: before any thread exists (detection forks). */
    char **gpus = NULL;
    int n_gpus = o.gpus ? devices_parse_list(o.gpus, &gpus) : devices_detect_gpus(&gpus);
    if (slots == 0 && n_gpus == 0) die("--slots 0 and no GPUs: this server could never run anything");
    /* Connection limits, sized to the descriptors there are (a run: its ranks'
     * connections, its pipes and logs). */
    conn_plan limits;
    if (conn_plan_make(&o, (unsigned)threads, 8u * (unsigned)(slots + n_gpus) + 16, &limits, err, sizeof err) != 0)
        die("%s", err);
    if (limits.fd_need > limits.fd_limit)
        log_warn("these connection limits can take about %llu file descriptors and this process may open %llu "
                 "(ulimit -n): raise the limit (ulimit -n, LimitNOFILE=) or lower --max-connections, "
                 "--reserved-connections or --max-streams", limits.fd_need, limits.fd_limit);

    /* Signals: SIGTERM/SIGINT/SIGHUP are taken by sigwait below, SIGCHLD by the
     * supervisor's signalfd; block them in every thread (threads inherit this mask). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    if (rebuild && !(db_verdict.state == DB_CURRENT || db_verdict.state == DB_OLDER)) { /* those hold no run */
        char moved[PATH_MAX + 64];
        if (history_move_db_aside(layout_db_path(), moved, sizeof moved, err, sizeof err) != 0) die("%s", err);
        if (moved[0]) log_warn("--rebuild-from-runs: %s (%s) was moved aside to %s", layout_db_path(), db_verdict.line, moved);
    }
    feed_init(); /* the live feed (sse.h): it observes the store's writer */
    if (store_open(layout_db_path(), &FEED_OBSERVES_STORE, &CACHE_FORGETS_DELETED, err, sizeof err) != 0) die("%s", err);
    if (users_open(layout_db_path(), o.token, err, sizeof err) != 0) die("%s", err);
    bool has_users = users_exist(); /* their tokens are needed to change anything */
    if (loopback == 0 && !o.token && !has_users && !o.insecure)
        die("refusing to listen on %s without a token: anyone who can reach it could submit, cancel and delete runs. "
            "Set a token (--token-file PATH or DDPD_TOKEN; e.g. openssl rand -hex 16 >PATH; chmod 600 PATH), "
            "add users (ddpd user add NAME), listen on 127.0.0.1, "
            "or pass --insecure (DDPD_INSECURE=1) to serve without one",
            o.listen);
    if (loopback == 0 && !o.token && !has_users)
        log_warn("serving %s without a token (--insecure): anyone who can reach it can submit, cancel and delete runs",
                 o.listen);
    if (rebuild) {
        rebuild_counts rb;
        if (history_rebuild(layout_runs_dir(), &rb, err, sizeof err) != 0) die("--rebuild-from-runs: %s", err);
        log_info("--rebuild-from-runs: the history of %d run%s rebuilt from %s (%d succeeded, %d failed, %d canceled; "
                 "%d without an end event; %d run director%s skipped; %lld journal events)",
                 rb.runs, rb.runs == 1 ? "" : "s", layout_runs_dir(), rb.succeeded, rb.failed, rb.canceled,
                 rb.without_end, rb.skipped, rb.skipped == 1 ? "y" : "ies", (long long)rb.events);
    }
    int port_lo = 0, port_hi = 0;
    if (port_range_parse(o.port_range, &port_lo, &port_hi, err, sizeof err) != 0) die("%s", err);
    data_roots work_roots = {0};
    for (int i = 0; i < o.n_work_roots; i++)
        if (data_roots_add(&work_roots, o.work_roots[i], err, sizeof err) != 0) die("--work-root: %s", err);
    /* where runs execute: this host and its agents, or Slurm (the scheduler chooses the
     * executor from this, in one place) */
    if (strcmp(o.executor, "local") != 0 && strcmp(o.executor, "slurm") != 0)
        die("--executor %s: local (this host and its agents) or slurm (every run a Slurm job)", o.executor);
    char *slurm_work = o.slurm_work_dir && *o.slurm_work_dir ? xstrdup(o.slurm_work_dir)
                                                             : xasprintf("/tmp/ddpd-slurm-%d", (int)getuid());
    char *slurm_ddpd = o.slurm_ddpd && *o.slurm_ddpd ? xstrdup(o.slurm_ddpd) : beside_self("ddpd");
    if (slurm_work[0] != '/') die("--slurm-work-dir %s: an absolute path is needed (it is a path on the nodes)", slurm_work);
    executor_slurm_config slurm = {.partition = o.slurm_partition, .account = o.slurm_account,
                                   .user_accounts = o.slurm_user_accounts,
                                   .n_user_accounts = o.n_slurm_user_accounts,
                                   .allow_priority = o.slurm_allow_priority,
                                   .preemptible_qos = o.slurm_preemptible_qos,
                                   .options = o.slurm_options, .n_options = o.n_slurm_options,
                                   .work_dir = slurm_work, .ddpd = slurm_ddpd,
                                   .data_roots = (const char *const *)roots.roots, .n_data_roots = roots.n,
                                   .gpus = o.slurm_gpus};
    bool on_slurm = strcmp(o.executor, "slurm") == 0;
    if (on_slurm) check_slurm_users(&o);
    scheduler_config sc = {.trainer = o.trainer, .runner = o.runner, .port_lo = port_lo, .port_hi = port_hi,
                           .data_roots = (const char *const *)roots.roots,
                           .n_data_roots = roots.n, .gpus = gpus, .n_gpus = n_gpus, .slots = slots,
                           .cancel_grace_ms = grace * 1000, .run_ended = ingest_run_ended,
                           .node_name = o.node_name ? o.node_name : host_name,
                           .advertise = o.advertise && *o.advertise ? o.advertise : NULL,
                           .node_timeout_ms = node_timeout * 1000LL, .backfill_window_ms = backfill * 1000LL,
                           .fair_share_half_life_s = half_life, .preempt_grace_ms = preempt_grace * 1000,
                           .max_stop_grace_ms = max_stop_grace * 1000,
                           .slurm = on_slurm ? &slurm : NULL};
    scheduler_init(&sc);
    load_usage();
    if (supervisor_start(&SUPERVISOR_REPORTS) != 0) die("cannot start the supervisor's thread");
    if (ingest_start(layout_socket_path(), &INGEST_ASKS, err, sizeof err) != 0) die("%s", err);
    scheduler_recover();
    data_roots runs_root = {0};
    if (data_roots_add(&runs_root, layout_runs_dir(), err, sizeof err) != 0) die("%s", err);
    runs_config rc = {.data_roots = &roots, .runs_root = &runs_root, .work_roots = &work_roots,
                      .allow_commands = o.allow_commands};
    runs_init(&rc);
    name_server_paths(&o, state_dir, &roots, &work_roots);
    routes_init();
    /* The routes: the API's, the nodes', the runs' rendezvous and parts, the event streams', the dashboard's files. */
    routes_static_init(o.web_dir);
    size_t n_routes = api_routes_count + node_routes_count + rendezvous_routes_count + part_routes_count +
                      sse_routes_count + static_routes_count, at = 0;
    route *all_routes = xmalloc(n_routes * sizeof *all_routes);
    memcpy(all_routes + at, api_routes, api_routes_count * sizeof *all_routes);
    memcpy(all_routes + (at += api_routes_count), node_routes, node_routes_count * sizeof *all_routes);
    memcpy(all_routes + (at += node_routes_count), rendezvous_routes, rendezvous_routes_count * sizeof *all_routes);
    memcpy(all_routes + (at += rendezvous_routes_count), part_routes, part_routes_count * sizeof *all_routes);
    memcpy(all_routes + (at += part_routes_count), sse_routes, sse_routes_count * sizeof *all_routes);
    memcpy(all_routes + (at += sse_routes_count), static_routes, static_routes_count * sizeof *all_routes);
    if (feed_start() != 0) die("cannot start the live feed's thread");
    sse_set_limits(limits.max_streams, limits.streams_per_address);
    http_config hc = {.listen = o.listen, .threads = (unsigned)threads, .routes = all_routes,
                      .n_routes = n_routes, .token = o.token, .identify = users_identify, .refusal = users_refusal,
                      .request_done = on_request_done,
                      .limits = limits.http, .idle_timeout_s = limits.idle_timeout_s};
    int port = 0;
    if (http_start(&hc, &port, err, sizeof err) != 0) die("%s", err);
    /* where this host's own ranks reach it: the address it listens on, or loopback */
    char listen_host[256] = "", listen_port[16], self_url[320];
    parse_host_port("--listen", o.listen, listen_host, sizeof listen_host, listen_port, sizeof listen_port, err, sizeof err);
    bool wildcard = !listen_host[0] || strcmp(listen_host, "0.0.0.0") == 0 || strcmp(listen_host, "::") == 0;
    snprintf(self_url, sizeof self_url, strchr(listen_host, ':') ? "http://[%s]:%d" : "http://%s:%d",
             wildcard ? "127.0.0.1" : listen_host, port);
    /* where other machines reach it (a Slurm job's nodes): the advertised address, else the same */
    char reachable_url[320];
    const char *reach_host = o.advertise && *o.advertise ? o.advertise : wildcard ? "127.0.0.1" : listen_host;
    snprintf(reachable_url, sizeof reachable_url, strchr(reach_host, ':') ? "http://[%s]:%d" : "http://%s:%d",
             reach_host, port);
    scheduler_set_self_url(self_url, reachable_url);
    if (on_slurm && !(o.advertise && *o.advertise) && (wildcard || loopback == 1))
        log_warn("--executor slurm without --advertise: the jobs' ddpd parts report to %s, which only Slurm nodes on "
                 "this host can reach; give --advertise ADDR (an address of this host the nodes reach)", reachable_url);
    if (on_slurm)
        log_info("runs are Slurm jobs (--executor slurm): partition %s, account %s, %d more sbatch option(s); the "
                 "nodes run %s part, in %s/ID/part-K", o.slurm_partition ? o.slurm_partition : "Slurm's default",
                 o.slurm_account ? o.slurm_account : "Slurm's default", o.n_slurm_options, slurm_ddpd, slurm_work);
    if (on_slurm)
        log_info("Slurm's queue is the queue: %d user(s) with an account of their own; a run's priority is its job's "
                 "nice (%s); preemptible runs %s%s; ddpd's own quotas, fair share and preemption do not apply",
                 o.n_slurm_user_accounts, o.slurm_allow_priority ? "lowered or raised" : "lowered only",
                 o.slurm_preemptible_qos ? "get QOS " : "get no QOS of their own",
                 o.slurm_preemptible_qos ? o.slurm_preemptible_qos : "");

    char *roots_text = data_roots_list(&roots);
    log_info("ddpd %s: state in %s; data roots %s; %d CPU slot(s); %d GPU(s); trainer %s; %d HTTP threads",
             DDPD_VERSION, state_dir, roots_text, slots, n_gpus, o.trainer, threads);
    free(roots_text);
    char limits_text[400];
    conn_plan_describe(&limits, limits_text, sizeof limits_text);
    log_info("HTTP: %s", limits_text);
    if (o.allow_commands) {
        char *wr = data_roots_list(&work_roots);
        log_warn("command runs are on (--allow-commands): submitted programs run as this server's user; work roots: "
                 "%s; MASTER_PORTs %d-%d; runner %s", work_roots.n ? wr : "none (runs work in their run directory)",
                 port_lo, port_hi, o.runner);
        free(wr);
        if (access(o.runner, X_OK) != 0)
            log_warn("the runner %s is not there or not executable (%s): command runs will fail to start (--runner)",
                     o.runner, strerror(errno));
    }
    if (access(o.trainer, X_OK) != 0)
        log_warn("the trainer %s is not there or not executable (%s): runs will fail to start until it is (--trainer)",
                 o.trainer, strerror(errno));
    const char *colon = strrchr(o.listen, ':');
    printf("ddpd: listening on http://%.*s:%d\n", (int)(colon - o.listen), o.listen, port);
    fflush(stdout);

    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGHUP);
    int sig = 0;
    sigwait(&stop, &sig);
    log_info("%s: shutting down", strsignal(sig));

    sse_shutdown(); /* event streams end before the HTTP server stops */
    http_stop();
    feed_stop();
    free(all_routes);
    scheduler_shutdown();
    supervisor_stop();
    ingest_stop();
    store_read_release();
    users_close();
    store_close();
    run_cache_clear(); /* after the writer: it may still tell of a deletion */
    path_redact_clear();
    unlink(layout_socket_path());
    close(lock_fd);
    log_info("stopped");
    data_roots_free(&roots);
    data_roots_free(&runs_root);
    data_roots_free(&work_roots);
    devices_free_list(gpus, n_gpus);
    free(slurm_work);
    free(slurm_ddpd);
    state_layout_free();
    settings_free(&o);
    return 0;
}

/* ddpd check: serve's settings, resolved the same way, checked without starting
 * anything (check_cmd.c). */
static int check(int argc, char **argv) {
    settings o;
    settings_read(argc, argv, &o);
    check_config c = {
        .listen = o.listen, .token = o.token, .token_file = o.token_file,
        .token_on_command_line = o.token_on_command_line, .token_error = o.token_error,
        .insecure = o.insecure, .state_dir = o.state_dir,
        .data_roots = o.data_roots, .n_data_roots = o.n_data_roots, .data_roots_given = o.data_roots_given,
        .gpus = o.gpus, .slots = o.slots, .trainer = o.trainer, .log_level = o.log_level, .log_file = o.log_file,
        .log_max_bytes = o.log_max_bytes, .log_keep = o.log_keep,
        .allow_commands = o.allow_commands, .runner = o.runner, .work_roots = o.work_roots,
        .n_work_roots = o.n_work_roots,
    };
    int rc = ddpd_check(&c);
    settings_free(&o);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "check") == 0) return check(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "agent") == 0) return agent_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "user") == 0) return user_main(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "part") == 0) return part_main(argc, argv);
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        char line[256];
        ddpd_version_line(line, sizeof line);
        printf("%s\n", line);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(SETTINGS_USAGE, stdout);
        return 0;
    }
    fputs(SETTINGS_USAGE, stderr);
    return 2;
}
