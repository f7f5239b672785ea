/* ddpd check: one verdict per part a box needs, changing nothing. See check_cmd.h. */
#include "check_cmd.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <microhttpd.h>
#include <poll.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "auth.h"
#include "byte_size.h"
#include "db_inspect.h"
#include "disk_space.h"
#include "run_cgroup.h"
#include "ddpd_build_config.h"
#include "devices.h"
#include "run_account.h"
#include "server_log.h"
#include "supervisor.h"
#include "base.h"
#include "settings.h"
#include "state_layout.h"

typedef enum { V_OK, V_WARN, V_FAIL } verdict;

static int counts[3];

static void say(verdict v, const char *part, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(verdict v, const char *part, const char *fmt, ...) {
    static const char *const words[] = {"ok", "warn", "FAIL"};
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    printf("%-5s %-11s %s\n", words[v], part, line);
    fflush(stdout);
    counts[v]++;
}

void ddpd_version_line(char *out, size_t outlen) {
    snprintf(out, outlen, "ddpd %s (cuda: %s; %slibmicrohttpd %s, SQLite %s, Jansson %s)", DDPD_VERSION,
             DDPD_HAVE_CUDA ? "yes" : "no", DDPD_SANITIZED ? "sanitizers: address,undefined; " : "",
             MHD_get_version(), sqlite3_libversion(), JANSSON_VERSION);
}

/* ---- config ---- */

static int check_config_part(const settings *c, int *slots_out) {
    char err[512];
    buf_t b = {0};
    verdict v = V_OK;
    *slots_out = c->slots;
    if (c->problem[0]) { /* a setting serve would refuse */
        say(V_FAIL, "config", "%s", c->problem);
        return -1;
    }
    int lb = auth_listen_is_loopback(c->listen, err, sizeof err);
    if (lb < 0) {
        say(V_FAIL, "config", "%s", err);
        return -1;
    }
    if (lb) {
        buf_printf(&b, "listen %s (loopback%s)", c->listen, c->token ? "; token set" : ": no token needed");
    } else if (c->token) {
        buf_printf(&b, "listen %s (every interface it names; token set: changes need it)", c->listen);
        if (strlen(c->token) < 16) {
            v = V_WARN;
            buf_printf(&b, "; the token is short (%zu characters): use 32 random ones, e.g. openssl rand -hex 16",
                       strlen(c->token));
        }
    } else if (c->insecure) {
        v = V_WARN;
        buf_printf(&b, "listen %s with --insecure and no token: anyone who reaches it can submit, cancel and delete runs",
                   c->listen);
    } else {
        say(V_FAIL, "config",
            "listen %s is not a loopback address and there is no token: ddpd serve would refuse; set a token "
            "(--token-file PATH or DDPD_TOKEN), or --insecure to serve without one, or listen on 127.0.0.1",
            c->listen);
        buf_free(&b);
        return -1;
    }
    if (c->token && c->token_on_command_line) {
        v = V_WARN;
        buf_printf(&b, "; the --token on the command line is readable by every user of this host (ps): "
                       "use --token-file PATH (chmod 600) or DDPD_TOKEN");
    } else if (c->token && c->token_file) {
        buf_printf(&b, "; the token from %s", c->token_file);
    }
    buf_printf(&b, "; %d CPU slot%s", c->slots, c->slots == 1 ? "" : "s");
    server_log_config lc;
    if (server_log_parse_config(c->log_level, c->log_file, c->log_max_bytes, c->log_keep, &lc, err, sizeof err) != 0) {
        say(V_FAIL, "config", "%s", err);
        buf_free(&b);
        return -1;
    }
    if (lc.file) {
        int fd = open(lc.file, O_WRONLY | O_APPEND | O_CLOEXEC);
        bool exists = fd >= 0 || errno != ENOENT;
        if (fd >= 0) close(fd);
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", lc.file);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        if ((exists && fd < 0) || (!exists && access(slash ? (dir[0] ? dir : "/") : ".", W_OK) != 0)) {
            say(V_FAIL, "config", "the log file %s cannot be written: %s", lc.file, strerror(errno));
            buf_free(&b);
            return -1;
        }
        buf_printf(&b, "; log to %s at %s", lc.file, log_level_name(lc.level));
        if (lc.max_bytes) buf_printf(&b, ", rotated daily and past %llu bytes", (unsigned long long)lc.max_bytes);
        else buf_printf(&b, ", rotated daily");
        if (lc.keep) buf_printf(&b, ", %d kept", lc.keep);
    } else {
        buf_printf(&b, "; log to stderr at %s", log_level_name(lc.level));
    }
    say(v, "config", "%s", b.data);
    buf_free(&b);
    return 0;
}

/* ---- state dir and database ---- */

static void check_state_dir(const settings *c) {
    struct stat sb;
    if (stat(c->state_dir, &sb) != 0) {
        if (errno != ENOENT) {
            say(V_FAIL, "state dir", "%s: %s", c->state_dir, strerror(errno));
            return;
        }
        /* The nearest existing ancestor must let us create it. */
        char up[PATH_MAX];
        snprintf(up, sizeof up, "%s", c->state_dir);
        for (;;) {
            char *slash = strrchr(up, '/');
            if (!slash) {
                snprintf(up, sizeof up, ".");
                break;
            }
            if (slash == up) {
                up[1] = '\0';
                break;
            }
            *slash = '\0';
            if (stat(up, &sb) == 0) break;
        }
        if (access(up, W_OK | X_OK) != 0)
            say(V_FAIL, "state dir", "%s does not exist and %s is not writable by this user: create it, or use --state-dir",
                c->state_dir, up);
        else
            say(V_OK, "state dir", "%s does not exist yet: ddpd serve creates it (mode 0700)", c->state_dir);
        return;
    }
    if (!S_ISDIR(sb.st_mode)) {
        say(V_FAIL, "state dir", "%s is not a directory", c->state_dir);
        return;
    }
    if (access(c->state_dir, W_OK | X_OK) != 0) {
        say(V_FAIL, "state dir", "%s is not writable by this user (uid %d): chown it, or use --state-dir", c->state_dir,
            (int)getuid());
        return;
    }
    char *sock = xasprintf("%s/events.sock", c->state_dir);
    size_t sock_len = strlen(sock);
    free(sock);
    if (sock_len >= sizeof ((struct sockaddr_un *)0)->sun_path) {
        say(V_FAIL, "state dir", "%s is too long a path for the event socket (%zu bytes; a Unix socket's path is at most %zu): use a shorter --state-dir",
            c->state_dir, sock_len, sizeof ((struct sockaddr_un *)0)->sun_path - 1);
        return;
    }
    /* Is a ddpd serving it? Its lock says (taken shared for an instant, then let go). */
    char *lock = xasprintf("%s/ddpd.lock", c->state_dir);
    char serving[64] = "no ddpd is serving it";
    int fd = open(lock, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        if (flock(fd, LOCK_SH | LOCK_NB) != 0) {
            char pid[32] = "";
            ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
            pid[n > 0 ? n : 0] = '\0';
            pid[strcspn(pid, "\n")] = '\0';
            snprintf(serving, sizeof serving, "a ddpd%s%s%s is serving it", *pid ? " (pid " : "", pid, *pid ? ")" : "");
        } else {
            flock(fd, LOCK_UN);
        }
        close(fd);
    }
    free(lock);
    say(V_OK, "state dir", "%s (writable; %s)", c->state_dir, serving);
}

static void check_database(const settings *c) {
    char *path = xasprintf("%s/ddpd.db", c->state_dir);
    db_report r;
    db_inspect(path, c->runs_dir, true, &r); /* the verdict serve goes by, after reading every page */
    say(db_refuses(r.state) ? V_FAIL : V_OK, "database", "%s", r.line);
    free(path);
}

/* The runs' directories: where (apart from the database's filesystem or not), and
 * that serve can make or write them. */
static void check_runs_dir(const settings *c) {
    struct stat rs, ss;
    if (stat(c->runs_dir, &rs) != 0) {
        if (errno == ENOENT)
            say(V_OK, "runs dir", "%s does not exist yet: ddpd serve creates it (mode 0700)", c->runs_dir);
        else say(V_FAIL, "runs dir", "%s: %s", c->runs_dir, strerror(errno));
        return;
    }
    if (!S_ISDIR(rs.st_mode) || access(c->runs_dir, W_OK | X_OK) != 0) {
        say(V_FAIL, "runs dir", "%s is not a directory this user (uid %d) can write: chown it, or use --runs-dir",
            c->runs_dir, (int)getuid());
        return;
    }
    unsigned long long avail = 0;
    char free_text[32] = "?";
    if (disk_space_low(c->runs_dir, &avail) || avail) byte_size_format(avail, free_text, sizeof free_text);
    bool apart = stat(c->state_dir, &ss) == 0 && ss.st_dev != rs.st_dev;
    if (apart)
        say(V_OK, "runs dir", "%s (%s free; a filesystem apart from the database's: runs that fill it leave the "
            "database writable)", c->runs_dir, free_text);
    else
        say(V_OK, "runs dir", "%s (%s free, on the database's filesystem: runs that fill it stop the database too; "
            "--runs-dir DIR puts them on another)", c->runs_dir, free_text);
}

/* Modes: whether anything beneath the state dir (and the runs' dir) is readable by
 * others. A start tightens only their tops (state_layout.h); this walks every run
 * directory, as starts before schema 18 did, and changes nothing. */
static void check_modes(const settings *c) {
    char first[512];
    const char *dirs[2] = {c->state_dir, c->runs_dir};
    size_t n = strcmp(c->state_dir, c->runs_dir) != 0 &&
                       !(strncmp(c->runs_dir, c->state_dir, strlen(c->state_dir)) == 0 &&
                         c->runs_dir[strlen(c->state_dir)] == '/')
                   ? 2 : 1;
    long loose = 0;
    buf_t b = {0};
    for (size_t i = 0; i < n; i++) {
        long k = layout_loose_entries(dirs[i], first, sizeof first);
        if (k) buf_printf(&b, "%s%ld beneath %s (first: %s)", loose ? "; " : "", k, dirs[i], first);
        loose += k;
    }
    if (loose)
        say(V_WARN, "modes", "%ld file(s) and directories of this user's are readable by group or others: %s; "
            "ddpd serve tightens only the state dir's own entries at start: stop it and run chmod -R go-rwx on the "
            "directory (serve gives back the 0711 its runs' accounts pass through)", loose, b.data);
    else
        say(V_OK, "modes", "nothing beneath %s%s%s is readable by group or others", c->state_dir, n == 2 ? " or " : "",
            n == 2 ? c->runs_dir : "");
    buf_free(&b);
}

/* What bounds each run (docs/security.md, Each run bounded): what this host's cgroups can
 * hold a run to, and the caps. A warning where a run would go without a limit. */
static void check_limits(const settings *c, int n_gpus) {
    char mem_why[256], pids_why[256], says[256], logs[32];
    int64_t per_device[2];
    settings_memory_per_device(c, n_gpus, per_device, says, sizeof says);
    bool memory = run_cgroup_can_limit_memory(mem_why, sizeof mem_why);
    bool pids = run_cgroup_can_limit_pids(pids_why, sizeof pids_why);
    buf_t b = {0};
    if (!memory || !pids)
        buf_printf(&b, "runs go without %s: %s; run ddpd serve as root, or give it a cgroup it may write. Each run: ",
                   !memory && !pids ? "a memory or process limit" : !memory ? "a memory limit" : "a process limit",
                   !memory ? mem_why : pids_why);
    else buf_printf(&b, "each run: ");
    if (memory) buf_printf(&b, "memory %s unless its config asks (%s), ", says, mem_why);
    if (pids && c->max_run_processes == 0) buf_printf(&b, "no process limit (--max-run-processes 0), ");
    else if (pids && c->max_run_processes > 0) buf_printf(&b, "at most %d processes and threads, ", c->max_run_processes);
    else if (pids) buf_printf(&b, "at most 1024 processes and threads a device (at least 4096), ");
    if (c->max_log_bytes) byte_size_format(c->max_log_bytes, logs, sizeof logs);
    buf_printf(&b, "at most %d points stored, %s%s", c->max_points_per_run, c->max_log_bytes ? logs : "no cap on",
               c->max_log_bytes ? " a log" : " its logs");
    say(memory && pids ? V_OK : V_WARN, "limits", "%s", b.data);
    buf_free(&b);
}

/* Each user's disk use as the server last measured it, and its quota: where there are
 * users (and a database with them). */
static void check_disk_use(const settings *c) {
    char *path = xasprintf("%s/ddpd.db", c->state_dir);
    sqlite3 *db = NULL;
    struct stat sb;
    buf_t b = {0};
    int over = 0;
    if (stat(path, &sb) == 0 && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT name, max_disk_gb, (SELECT sum(disk_bytes) FROM runs WHERE owner = users.name)"
                               " FROM users WHERE removed_at IS NULL ORDER BY name", -1, &st, NULL) == SQLITE_OK)
            while (sqlite3_step(st) == SQLITE_ROW) {
                char used[32] = "nothing measured", quota[32];
                if (sqlite3_column_type(st, 2) != SQLITE_NULL)
                    byte_size_format((uint64_t)sqlite3_column_int64(st, 2), used, sizeof used);
                bool has_quota = sqlite3_column_type(st, 1) != SQLITE_NULL;
                double gb = sqlite3_column_double(st, 1);
                if (has_quota) byte_size_format((uint64_t)(gb * 1073741824.0), quota, sizeof quota);
                bool past = has_quota && sqlite3_column_int64(st, 2) > (sqlite3_int64)(gb * 1073741824.0);
                over += past;
                buf_printf(&b, "%s%s %s%s%s%s", b.len ? "; " : "", (const char *)sqlite3_column_text(st, 0), used,
                           has_quota ? " of " : " (no quota)", has_quota ? quota : "", past ? " (PAST its quota)" : "");
            }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    free(path);
    if (b.len)
        say(over ? V_WARN : V_OK, "disk use", "%s (as ddpd serve last measured each run's directory; ddpd user set NAME "
            "--max-disk-gb)", b.data);
    buf_free(&b);
}

/* ---- data roots ---- */

static void check_data_roots(const settings *c) {
    static const char *const FMNIST[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                         "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    buf_t b = {0};
    int usable = 0;
    verdict v = V_OK;
    for (int i = 0; i < c->data_roots.n; i++) {
        const char *root = c->data_roots.v[i];
        struct stat sb;
        if (i) buf_printf(&b, "; ");
        if (stat(root, &sb) != 0 || !S_ISDIR(sb.st_mode) || access(root, R_OK | X_OK) != 0) {
            bool missing = stat(root, &sb) != 0;
            buf_printf(&b, "%s: %s", root, missing ? "not there" : "not a readable directory");
            if (c->data_roots_given) v = V_FAIL;
            continue;
        }
        usable++;
        int found = 0;
        for (size_t k = 0; k < 4; k++) {
            char *f = xasprintf("%s/fashion-mnist/%s", root, FMNIST[k]);
            found += access(f, R_OK) == 0;
            free(f);
        }
        if (found == 4) buf_printf(&b, "%s (fashion-mnist/: the 4 Fashion-MNIST files)", root);
        else if (found) buf_printf(&b, "%s (fashion-mnist/ has %d of the 4 files)", root, found);
        else buf_printf(&b, "%s", root);
    }
    if (!usable) {
        say(V_FAIL, "data roots", "%s%sno data root can be read: runs could read no data; give --data-root DIR "
            "(Debian: apt-get install dataset-fashion-mnist puts Fashion-MNIST under /usr/share/datasets)",
            b.data ? b.data : "", b.data ? ": " : "");
    } else {
        say(v, "data roots", "%s", b.data);
    }
    buf_free(&b);
}

/* ---- GPUs and the trainer ---- */

/* Runs `argv` with stdout in *out (malloc'd), for at most timeout_s. Returns its
 * wait status, or -1 (exec failed, or it was killed for taking too long). */
static int run_capture(char *const argv[], char **out, int timeout_s) {
    int fds[2];
    *out = NULL;
    if (pipe2(fds, O_CLOEXEC) != 0) return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        execv(argv[0], argv);
        _exit(127);
    }
    close(fds[1]);
    buf_t b = {0};
    int64_t deadline = mono_ms() + (int64_t)timeout_s * 1000;
    bool timed_out = false;
    for (;;) {
        int64_t left = deadline - mono_ms();
        if (left <= 0) {
            timed_out = true;
            break;
        }
        struct pollfd p = {.fd = fds[0], .events = POLLIN};
        int r = poll(&p, 1, (int)left);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            timed_out = r == 0;
            break;
        }
        char chunk[4096];
        ssize_t n = read(fds[0], chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (b.len < 65536) buf_append(&b, chunk, (size_t)n);
    }
    close(fds[0]);
    if (timed_out) kill(pid, SIGKILL);
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR) {}
    *out = b.data ? b.data : xstrdup("");
    return timed_out ? -1 : ws;
}

static void check_gpus(const settings *c, int slots, int *n_gpus_out) {
    char **ids = NULL;
    int n = c->gpus ? devices_parse_list(c->gpus, &ids) : devices_detect_gpus(&ids);
    *n_gpus_out = n;
    buf_t b = {0};
    for (int i = 0; i < n; i++) buf_printf(&b, "%s%s", i ? ", " : "", ids[i]);
    if (n > 0) {
        say(V_OK, "GPUs", "%d GPU%s (%s)%s", n, n == 1 ? "" : "s", b.data, c->gpus ? " as --gpus names them" : "");
    } else if (slots == 0) {
        say(V_FAIL, "GPUs", "no GPUs%s and --slots 0: this server could never run anything",
            c->gpus ? " (--gpus none)" : " found");
    } else if (c->gpus) {
        say(V_OK, "GPUs", "none (--gpus %s): CPU runs only, %d slot%s", c->gpus, slots, slots == 1 ? "" : "s");
    } else {
        struct stat sb;
        bool driver = stat("/dev/nvidiactl", &sb) == 0 || stat("/proc/driver/nvidia", &sb) == 0;
        say(V_WARN, "GPUs", "none found (%s): CPU runs only, %d slot%s",
            driver ? "the NVIDIA driver is loaded but libcuda reports no device (CUDA_VISIBLE_DEVICES?)"
                   : "no NVIDIA driver here; in a container, run it with --gpus all",
            slots, slots == 1 ? "" : "s");
    }
    for (int i = 0; i < n; i++) free(ids[i]);
    free(ids);
    buf_free(&b);
}

#define UNSTARTABLE "could not be run (not a program for this machine, or a library it needs is missing)"

/* Runs `path --version` (20 s at most): true with its first line in `first`; else false,
 * with that line (or "") and how it ended, in words, in `how` (`unstartable` where the
 * program could not be run at all: status 127). */
static bool ask_version(const char *path, const char *unstartable, char first[256], char how[128]) {
    char *out = NULL;
    char *argv[] = {(char *)path, "--version", NULL};
    int ws = run_capture(argv, &out, 20);
    snprintf(first, 256, "%s", out ? out : "");
    first[strcspn(first, "\n")] = '\0';
    free(out);
    if (ws >= 0 && WIFEXITED(ws) && WEXITSTATUS(ws) == 0) return true;
    if (ws < 0) snprintf(how, 128, "did not answer --version within 20 s");
    else if (WIFEXITED(ws) && WEXITSTATUS(ws) == 127) snprintf(how, 128, "%s", unstartable);
    else describe_wait_status(ws, how, 128);
    return false;
}

static void check_trainer(const settings *c, int n_gpus) {
    if (access(c->trainer, X_OK) != 0) {
        say(V_FAIL, "trainer", "%s: %s: give --trainer PATH (it is built beside ddpd as ddp-trainer)", c->trainer,
            errno == ENOENT ? "not there" : "not executable");
        return;
    }
    char first[256], how[128];
    if (!ask_version(c->trainer, UNSTARTABLE, first, how)) {
        say(V_FAIL, "trainer", "%s %s%s%s", c->trainer, how, first[0] ? ": " : "", first);
        return;
    }
    /* Where GPU runs go, as its --version says: "(nccl backend: built in)" (it is
     * ddp-trainer-nccl), "(nccl backend: PATH)" (it hands GPU runs to PATH, which must
     * start), "(nccl backend: no; ...)". */
    char nccl[256] = "";
    const char *tag = strstr(first, "(nccl backend: ");
    if (tag) {
        snprintf(nccl, sizeof nccl, "%s", tag + strlen("(nccl backend: "));
        char *close_paren = strrchr(nccl, ')');
        if (close_paren) *close_paren = '\0';
    }
    if (nccl[0] == '/') {
        char nfirst[256];
        if (ask_version(nccl, "cannot start", nfirst, how)) {
            say(V_OK, "trainer", "%s: %s, which starts", c->trainer, first);
        } else {
            say(V_WARN, "trainer", "%s: %s, but %s %s%s%s: GPU runs will fail (is the CUDA runtime with cuBLAS and NCCL installed?)",
                c->trainer, first, nccl, how, nfirst[0] ? ": " : "", nfirst);
        }
    } else if (n_gpus > 0 && strncmp(nccl, "built in", 8) != 0) {
        say(V_WARN, "trainer", "%s: %s: this host's GPUs cannot be used; build where the CUDA toolkit (cuBLAS, NCCL) is, "
            "and install ddp-trainer-nccl beside it", c->trainer, first);
    } else {
        say(V_OK, "trainer", "%s: %s", c->trainer, first);
    }
}

/* ---- command runs: --allow-commands, the work roots, ddp-run ---- */

/* ---- accounts (docs/security.md, Who can do what) ---- */

/* The users mapped to an account (ddpd user --unix-user), from the database if there
 * is one: "name\taccount" lines in *out; how many (0 when none, or no such column yet). */
static int mapped_users(const settings *c, buf_t *out) {
    char *path = xasprintf("%s/ddpd.db", c->state_dir);
    sqlite3 *db = NULL;
    int n = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK) {
        sqlite3_busy_timeout(db, 5000);
        sqlite3_stmt *st = NULL;
        if (sqlite3_prepare_v2(db, "SELECT name, unix_user FROM users WHERE unix_user IS NOT NULL AND removed_at IS NULL"
                               " ORDER BY name", -1, &st, NULL) == SQLITE_OK)
            while (sqlite3_step(st) == SQLITE_ROW) {
                buf_printf(out, "%s\t%s\n", (const char *)sqlite3_column_text(st, 0),
                           (const char *)sqlite3_column_text(st, 1));
                n++;
            }
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    free(path);
    return n;
}

static void check_accounts(const settings *c) {
    /* as `ddpd serve` does at start: capabilities its file permits (the Docker image's setcap) count */
    if (run_account_take_permitted() != 0)
        say(V_WARN, "accounts", "cannot make this program's permitted capabilities effective: %s", strerror(errno));
    char how[160], missing[128];
    bool can = run_account_can_switch(how, sizeof how, missing, sizeof missing);
    buf_t users = {0};
    int n = mapped_users(c, &users);
    bool wanted = n > 0 || (c->run_user && *c->run_user);
    if (can && missing[0] && wanted)
        say(V_WARN, "accounts", "runs can run as other accounts (%s), but it lacks %s: it cannot end, own or serve "
            "their files (docs/security.md, The server's rights)", how, missing);
    else if (can) say(V_OK, "accounts", "runs can run as other accounts (%s)", how);
    else if (wanted)
        say(V_FAIL, "accounts", "runs are to run as other accounts (--run-user, ddpd user --unix-user), but this server "
            "cannot switch (%s): run it as root, or give it CAP_SETUID, CAP_SETGID, CAP_KILL, CAP_CHOWN, CAP_FOWNER "
            "and CAP_DAC_OVERRIDE", how);
    else say(V_OK, "accounts", "runs run as this server's user (%s, and no user is mapped to an account)", how);
    if (c->run_user && *c->run_user) {
        run_account a;
        char err[512];
        if (run_account_lookup(c->run_user, &a, err, sizeof err) != 0) say(V_FAIL, "run user", "--run-user: %s", err);
        else say(V_OK, "run user", "%s (uid %d): runs of users without an account of their own", a.name, (int)a.uid);
    }
    char *line = users.data;
    for (int i = 0; i < n && line; i++) {
        char *nl = strchr(line, '\n'), *tab = strchr(line, '\t');
        if (!nl || !tab) break;
        *nl = *tab = '\0';
        run_account a;
        char err[512], part[96];
        snprintf(part, sizeof part, "user %.60s", line);
        if (run_account_lookup(tab + 1, &a, err, sizeof err) != 0) say(V_FAIL, part, "%s: its runs are refused", err);
        else say(V_OK, part, "runs as the account %s (uid %d, gid %d, %d group%s)", a.name, (int)a.uid, (int)a.gid,
                 a.n_groups, a.n_groups == 1 ? "" : "s");
        line = nl + 1;
    }
    buf_free(&users);
}

static void check_commands(const settings *c) {
    if (!c->allow_commands) {
        say(V_OK, "commands", "off (no --allow-commands): command runs are refused (403); the work roots (%d given) "
            "and the runner are not used", c->work_roots.n);
        return;
    }
    bool run_user = c->run_user && *c->run_user;
    if (!run_user && !c->unsafe_commands_as_server && geteuid() == 0)
        say(V_WARN, "commands", "on (--allow-commands): a command run runs its program as its user's account; this "
            "server is root, so one of a user without an account is refused: give --run-user ACCOUNT");
    else
        say(V_OK, "commands", "on (--allow-commands): a command run runs its program as its user's account, else %s",
            run_user ? "--run-user's" : c->unsafe_commands_as_server ? "as this server's user (--unsafe-commands-as-server)"
                                                                     : "as this server's user where it has no users");
    buf_t b = {0};
    verdict v = V_OK;
    for (int i = 0; i < c->work_roots.n; i++) {
        const char *root = c->work_roots.v[i];
        struct stat sb;
        bool readable = stat(root, &sb) == 0 && S_ISDIR(sb.st_mode) && access(root, R_OK | X_OK) == 0;
        if (!readable) v = V_FAIL;
        buf_printf(&b, "%s%s%s", i ? "; " : "", root, readable ? "" : ": not a readable directory (serve refuses it)");
    }
    if (!c->work_roots.n)
        say(V_WARN, "work roots", "none: a command run starts in its own, empty, run directory and a working_dir is "
            "refused; give --work-root DIR (repeatable) where your scripts are");
    else say(v, "work roots", "%s", b.data);
    buf_free(&b);
    if (access(c->runner, X_OK) != 0) {
        say(V_FAIL, "runner", "%s: %s: give --runner PATH (it is built beside ddpd as ddp-run)", c->runner,
            errno == ENOENT ? "not there" : "not executable");
        return;
    }
    char first[256], how[128];
    if (!ask_version(c->runner, UNSTARTABLE, first, how)) {
        say(V_FAIL, "runner", "%s %s%s%s: command runs would fail to start", c->runner, how, first[0] ? ": " : "",
            first);
        return;
    }
    say(V_OK, "runner", "%s: %s", c->runner, first);
}

int ddpd_check(const settings *c) {
    char version[256];
    ddpd_version_line(version, sizeof version);
    printf("%s: checking this host\n", version);
    int slots = 0, n_gpus = 0;
    check_config_part(c, &slots);
    check_state_dir(c);
    check_runs_dir(c);
    check_modes(c);
    check_database(c);
    check_data_roots(c);
    check_gpus(c, slots, &n_gpus);
    check_trainer(c, n_gpus);
    check_limits(c, n_gpus);
    check_accounts(c);
    check_disk_use(c);
    check_commands(c);
    printf("ddpd check: %d ok, %d warning%s, %d failed\n", counts[V_OK], counts[V_WARN], counts[V_WARN] == 1 ? "" : "s",
           counts[V_FAIL]);
    return counts[V_FAIL] ? 1 : 0;
}
