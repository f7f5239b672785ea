/* ddpd: the data-parallel training service. `ddpd serve` reads its settings (flags,
 * else DDPD_* environment variables, else defaults that suit a laptop), takes the
 * state directory's lock, and starts the parts in dependency order: the store
 * (database + writer), the reaper, the event socket, the scheduler (which recovers
 * runs a previous server left behind) and last the HTTP API. SIGTERM or SIGINT
 * stops them in reverse: no new requests, active runs canceled ("the server shut
 * down"; queued runs stay queued for the next start), events drained, database
 * closed. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"
#include "check_cmd.h"
#include "datapaths.h"
#include "ddpd_build_config.h"
#include "devices.h"
#include "events_feed.h"
#include "http.h"
#include "ingest.h"
#include "routes.h"
#include "routes_static.h"
#include "scheduler.h"
#include "server_log.h"
#include "sse.h"
#include "store.h"
#include "store_read.h"
#include "supervisor.h"
#include "util.h"

static const char USAGE[] =
    "usage: ddpd serve [options]\n"
    "       ddpd check [options]     is this host ready to serve? one verdict per part, nothing changed\n"
    "       ddpd --version\n"
    "\n"
    "Serves the ddpd API: submit data-parallel training runs as JSON, follow them, cancel them.\n"
    "Every option can also be set with the environment variable shown (the flag wins).\n"
    "\n"
    "  --listen HOST:PORT     where to serve HTTP (DDPD_LISTEN; default 127.0.0.1:8080;\n"
    "                         port 0 picks a free port, printed on start-up)\n"
    "  --state-dir DIR        database, event socket and run directories (DDPD_STATE_DIR;\n"
    "                         default $XDG_STATE_HOME/ddpd, else ~/.local/state/ddpd)\n"
    "  --data-root DIR        where run configs may read data from; repeatable (DDPD_DATA_ROOT,\n"
    "                         colon-separated; default /usr/share/datasets and, if it exists,\n"
    "                         <state-dir>/datasets)\n"
    "  --slots N              CPU slots for CPU runs, one rank each (DDPD_SLOTS; default: the\n"
    "                         number of cores)\n"
    "  --gpus LIST            GPUs to manage, e.g. 0,1 or none (DDPD_GPUS; default: all detected)\n"
    "  --trainer PATH         the ddp-trainer executable (DDPD_TRAINER; default: the one beside ddpd)\n"
    "  --token TOKEN          require \"Authorization: Bearer TOKEN\" on every request that changes\n"
    "                         something (POST, DELETE); reading stays open (DDPD_TOKEN; default: none)\n"
    "  --insecure             without a token, listen on a non-loopback address all the same\n"
    "                         (DDPD_INSECURE=1; default: refuse)\n"
    "  --web-dir DIR          the dashboard's files, served at / (DDPD_WEB_DIR; default: installed\n"
    "                         beside ddpd, else the source tree it was built from)\n"
    "  --http-threads N       HTTP worker threads (DDPD_HTTP_THREADS; default: cores, at least 2)\n"
    "  --cancel-grace SECONDS SIGTERM to a canceled run, SIGKILL this much later (DDPD_CANCEL_GRACE;\n"
    "                         default 10)\n"
    "  --log-level LEVEL      debug, info, warn or error (DDPD_LOG_LEVEL; default info: a line per request)\n"
    "  --log-file PATH        log there instead of stderr, rotated daily to PATH.YYYY-MM-DD and by size\n"
    "                         to PATH.YYYY-MM-DD.N (DDPD_LOG_FILE)\n"
    "  --log-max-bytes SIZE   rotate before the file passes SIZE, e.g. 100M; 0: no limit\n"
    "                         (DDPD_LOG_MAX_BYTES; default 100M)\n"
    "  --log-keep N           rotated files to keep; 0: all (DDPD_LOG_KEEP; default 14)\n";

typedef struct {
    const char *listen, *state_dir, *trainer, *token, *gpus, *slots, *http_threads, *cancel_grace;
    const char *web_dir;
    const char *log_level, *log_file, *log_max_bytes, *log_keep;
    bool insecure;
    const char *data_roots[64];
    int n_data_roots;
} options;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "ddpd: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}

static int parse_count(const char *what, const char *s, int min, int max) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > max) die("%s must be an integer from %d to %d (got \"%s\")", what, min, max, s);
    return (int)v;
}

static void parse_flags(int argc, char **argv, options *o) {
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            fputs(USAGE, stdout);
            exit(0);
        }
        if (strcmp(a, "--insecure") == 0) { /* the one flag without a value */
            o->insecure = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) die("unexpected argument \"%s\" (see ddpd --help)", a);
        char name[64];
        const char *eq = strchr(a, '=');
        size_t n = eq ? (size_t)(eq - a) : strlen(a);
        if (n >= sizeof name) die("unknown option %s (see ddpd --help)", a);
        memcpy(name, a, n);
        name[n] = '\0';
        if (eq) v = eq + 1;
        else if (i + 1 < argc) v = argv[++i];
        else die("%s needs a value (see ddpd --help)", name);
        if (strcmp(name, "--listen") == 0) o->listen = v;
        else if (strcmp(name, "--state-dir") == 0) o->state_dir = v;
        else if (strcmp(name, "--trainer") == 0) o->trainer = v;
        else if (strcmp(name, "--token") == 0) o->token = v;
        else if (strcmp(name, "--gpus") == 0) o->gpus = v;
        else if (strcmp(name, "--slots") == 0) o->slots = v;
        else if (strcmp(name, "--http-threads") == 0) o->http_threads = v;
        else if (strcmp(name, "--cancel-grace") == 0) o->cancel_grace = v;
        else if (strcmp(name, "--web-dir") == 0) o->web_dir = v;
        else if (strcmp(name, "--log-level") == 0) o->log_level = v;
        else if (strcmp(name, "--log-file") == 0) o->log_file = v;
        else if (strcmp(name, "--log-max-bytes") == 0) o->log_max_bytes = v;
        else if (strcmp(name, "--log-keep") == 0) o->log_keep = v;
        else if (strcmp(name, "--data-root") == 0) {
            if (o->n_data_roots == 64) die("at most 64 --data-root");
            o->data_roots[o->n_data_roots++] = v;
        } else die("unknown option %s (see ddpd --help)", name);
    }
}

static const char *env_or(const char *flag, const char *env) { return flag ? flag : getenv(env); }

static bool insecure_set(const options *o) {
    const char *e = getenv("DDPD_INSECURE");
    return o->insecure || (e && (strcmp(e, "1") == 0 || strcasecmp(e, "true") == 0 || strcasecmp(e, "yes") == 0));
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

static char *default_state_dir(void) {
    const char *xdg = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) return xasprintf("%s/ddpd", xdg);
    if (home && *home) return xasprintf("%s/.local/state/ddpd", home);
    return xstrdup("ddpd-state");
}

static char *default_trainer(void) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return xstrdup("ddp-trainer");
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    return xasprintf("%s/ddp-trainer", exe);
}

/* One server per state directory: the lock lives as long as the process. */
static int lock_state_dir(const char *state_dir) {
    char *path = xasprintf("%s/ddpd.lock", state_dir);
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

static int serve(int argc, char **argv) {
    options o = {0};
    parse_flags(argc, argv, &o);
    /* The log first, so that everything after goes where it was asked to (a setting
     * ddpd refuses still goes to stderr, through die). */
    server_log_config log_config;
    char log_err[512];
    if (server_log_parse_config(env_or(o.log_level, "DDPD_LOG_LEVEL"), env_or(o.log_file, "DDPD_LOG_FILE"),
                                env_or(o.log_max_bytes, "DDPD_LOG_MAX_BYTES"), env_or(o.log_keep, "DDPD_LOG_KEEP"),
                                &log_config, log_err, sizeof log_err) != 0 ||
        server_log_setup(&log_config, log_err, sizeof log_err) != 0)
        die("%s", log_err);
    const char *listen = env_or(o.listen, "DDPD_LISTEN");
    if (!listen || !*listen) listen = "127.0.0.1:8080";
    const char *sd = env_or(o.state_dir, "DDPD_STATE_DIR");
    char *state_dir_arg = sd && *sd ? xstrdup(sd) : default_state_dir();
    mkdir_p(state_dir_arg, 0700);
    char state_dir[PATH_MAX];
    if (!realpath(state_dir_arg, state_dir)) die("state dir %s: %s", state_dir_arg, strerror(errno));
    free(state_dir_arg);
    char *runs_dir = xasprintf("%s/runs", state_dir);
    mkdir_p(runs_dir, 0755);
    int lock_fd = lock_state_dir(state_dir);

    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    const char *slots_s = env_or(o.slots, "DDPD_SLOTS");
    int slots = slots_s && *slots_s ? parse_count("--slots", slots_s, 0, 4096) : (int)cores;
    const char *threads_s = env_or(o.http_threads, "DDPD_HTTP_THREADS");
    int threads = threads_s && *threads_s ? parse_count("--http-threads", threads_s, 1, 256)
                                          : (int)(cores < 2 ? 2 : cores > 16 ? 16 : cores);
    const char *grace_s = env_or(o.cancel_grace, "DDPD_CANCEL_GRACE");
    int grace = grace_s && *grace_s ? parse_count("--cancel-grace", grace_s, 0, 3600) : 10;
    const char *token = env_or(o.token, "DDPD_TOKEN");
    if (token && !*token) token = NULL;
    /* Without a token, only this host's users may reach it (auth.h). */
    char listen_err[512];
    int loopback = auth_listen_is_loopback(listen, listen_err, sizeof listen_err);
    if (loopback == 0 && !token && !insecure_set(&o))
        die("refusing to listen on %s without a token: anyone who can reach it could submit, cancel and delete runs. "
            "Set a token (--token or DDPD_TOKEN; e.g. DDPD_TOKEN=$(openssl rand -hex 16)), listen on 127.0.0.1, "
            "or pass --insecure (DDPD_INSECURE=1) to serve without one",
            listen);
    if (loopback == 0 && !token)
        log_warn("serving %s without a token (--insecure): anyone who can reach it can submit, cancel and delete runs",
                 listen);
    const char *tr = env_or(o.trainer, "DDPD_TRAINER");
    char *trainer = tr && *tr ? xstrdup(tr) : default_trainer();

    /* data roots: flags, else the environment, else the defaults */
    data_roots roots = {0};
    char err[1024];
    if (o.n_data_roots) {
        for (int i = 0; i < o.n_data_roots; i++)
            if (data_roots_add(&roots, o.data_roots[i], err, sizeof err) != 0) die("%s", err);
    } else if (getenv("DDPD_DATA_ROOT") && *getenv("DDPD_DATA_ROOT")) {
        char *copy = xstrdup(getenv("DDPD_DATA_ROOT")), *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
            if (data_roots_add(&roots, d, err, sizeof err) != 0) die("%s (DDPD_DATA_ROOT)", err);
        free(copy);
    } else {
        char *own = xasprintf("%s/datasets", state_dir);
        const char *defaults[] = {"/usr/share/datasets", own};
        for (size_t i = 0; i < 2; i++) data_roots_add(&roots, defaults[i], err, sizeof err); /* missing: skipped */
        free(own);
    }

    /* GPUs: before any thread exists (detection forks). */
    char **gpus = NULL;
    const char *gpus_s = env_or(o.gpus, "DDPD_GPUS");
    int n_gpus = gpus_s ? devices_parse_list(gpus_s, &gpus) : devices_detect_gpus(&gpus);
    if (slots == 0 && n_gpus == 0) die("--slots 0 and no GPUs: this server could never run anything");

    /* Signals: SIGTERM/SIGINT/SIGHUP are taken by sigwait below, SIGCHLD by the reaper's
     * signalfd; block them in every thread (threads inherit this mask). */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    sigaddset(&sigs, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    char *db_path = xasprintf("%s/ddpd.db", state_dir);
    char *events_path = xasprintf("%s/events.sock", state_dir);
    feed_init(); /* the live feed (sse.h): the store's writer records into it */
    if (store_open(db_path, err, sizeof err) != 0) die("%s", err);
    scheduler_config sc = {.trainer = trainer, .runs_dir = runs_dir, .events_path = events_path, .gpus = gpus,
                           .n_gpus = n_gpus, .slots = slots, .cancel_grace_ms = grace * 1000};
    scheduler_init(&sc);
    if (supervisor_start() != 0) die("cannot start the reaper thread");
    if (ingest_start(events_path, err, sizeof err) != 0) die("%s", err);
    scheduler_recover();
    data_roots runs_root = {0};
    if (data_roots_add(&runs_root, runs_dir, err, sizeof err) != 0) die("%s", err);
    routes_config rc = {.roots = &roots, .runs_dir = runs_dir, .runs_root = &runs_root};
    routes_init(&rc);
    /* The routes: the API's, the event streams', the dashboard's files. */
    routes_static_init(o.web_dir);
    size_t n_routes = api_routes_count + sse_routes_count + static_routes_count;
    route *all_routes = xmalloc(n_routes * sizeof *all_routes);
    memcpy(all_routes, api_routes, api_routes_count * sizeof *all_routes);
    memcpy(all_routes + api_routes_count, sse_routes, sse_routes_count * sizeof *all_routes);
    memcpy(all_routes + api_routes_count + sse_routes_count, static_routes, static_routes_count * sizeof *all_routes);
    if (feed_start() != 0) die("cannot start the live feed's thread");
    http_config hc = {.listen = listen, .threads = (unsigned)threads, .routes = all_routes,
                      .n_routes = n_routes, .token = token};
    int port = 0;
    if (http_start(&hc, &port, err, sizeof err) != 0) die("%s", err);

    char *roots_text = data_roots_list(&roots);
    log_info("ddpd %s: state in %s; data roots %s; %d CPU slot(s); %d GPU(s); trainer %s; %d HTTP threads",
             DDPD_VERSION, state_dir, roots_text, slots, n_gpus, trainer, threads);
    free(roots_text);
    if (access(trainer, X_OK) != 0)
        log_warn("the trainer %s is not there or not executable (%s): runs will fail to start until it is (--trainer)",
                 trainer, strerror(errno));
    const char *colon = strrchr(listen, ':');
    printf("ddpd: listening on http://%.*s:%d\n", (int)(colon - listen), listen, port);
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
    store_close();
    unlink(events_path);
    close(lock_fd);
    log_info("stopped");
    free(db_path);
    free(events_path);
    free(runs_dir);
    free(trainer);
    return 0;
}

/* ddpd check: serve's settings, resolved the same way, checked without starting
 * anything (check_cmd.c). */
static int check(int argc, char **argv) {
    options o = {0};
    parse_flags(argc, argv, &o);
    check_config c = {0};
    c.listen = env_or(o.listen, "DDPD_LISTEN");
    if (!c.listen || !*c.listen) c.listen = "127.0.0.1:8080";
    c.token = env_or(o.token, "DDPD_TOKEN");
    if (c.token && !*c.token) c.token = NULL;
    c.insecure = insecure_set(&o);
    const char *sd = env_or(o.state_dir, "DDPD_STATE_DIR");
    char *state_dir = sd && *sd ? xstrdup(sd) : default_state_dir();
    c.state_dir = state_dir;
    const char *tr = env_or(o.trainer, "DDPD_TRAINER");
    char *trainer = tr && *tr ? xstrdup(tr) : default_trainer();
    c.trainer = trainer;
    c.gpus = env_or(o.gpus, "DDPD_GPUS");
    c.slots = env_or(o.slots, "DDPD_SLOTS");
    c.log_level = env_or(o.log_level, "DDPD_LOG_LEVEL");
    c.log_file = env_or(o.log_file, "DDPD_LOG_FILE");
    c.log_max_bytes = env_or(o.log_max_bytes, "DDPD_LOG_MAX_BYTES");
    c.log_keep = env_or(o.log_keep, "DDPD_LOG_KEEP");
    const char *roots[64];
    char *env_roots = NULL, *own = NULL;
    int n = 0;
    c.data_roots_given = true;
    if (o.n_data_roots) {
        for (int i = 0; i < o.n_data_roots; i++) roots[n++] = o.data_roots[i];
    } else if (getenv("DDPD_DATA_ROOT") && *getenv("DDPD_DATA_ROOT")) {
        env_roots = xstrdup(getenv("DDPD_DATA_ROOT"));
        char *save = NULL;
        for (char *d = strtok_r(env_roots, ":", &save); d && n < 64; d = strtok_r(NULL, ":", &save)) roots[n++] = d;
    } else { /* the defaults: a missing one is skipped, as serve skips it */
        c.data_roots_given = false;
        roots[n++] = "/usr/share/datasets";
        own = xasprintf("%s/datasets", state_dir);
        if (access(own, F_OK) == 0) roots[n++] = own;
    }
    c.data_roots = roots;
    c.n_data_roots = n;
    int rc = ddpd_check(&c);
    free(state_dir);
    free(trainer);
    free(env_roots);
    free(own);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "serve") == 0) return serve(argc, argv);
    if (argc >= 2 && strcmp(argv[1], "check") == 0) return check(argc, argv);
    if (argc >= 2 && (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0)) {
        char line[256];
        ddpd_version_line(line, sizeof line);
        printf("%s\n", line);
        return 0;
    }
    if (argc >= 2 && (strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        fputs(USAGE, stdout);
        return 0;
    }
    fputs(USAGE, stderr);
    return 2;
}
