/* The warm start's zygotes: see zygotes.h. The table is the executor's (its own
 * lock); the handoff runs in a forked child and uses async-signal-safe calls only. */
#include "zygotes.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base.h"
#include "dirs.h"
#include "run_files.h"
#include "sha256.h"
#include "state_layout.h"
#include "supervisor.h"

#define ZYGOTES_MAX 64

typedef struct {
    int64_t key; /* 0: a free entry */
    int64_t sweep_id;
    long uid;
    pid_t pid; /* 0: its start asked, not yet answered (-1: not started, as it ends) */
    int live;  /* its sweep's trials started and not ended */
    int64_t idle_since;
    bool ending; /* ended (its sweep did) before its spawn was answered: zygotes_spawned ends it */
    bool failed; /* it ended before it listened (an import failed): its sweep's trials start cold */
    char why[400]; /* then why: its log's last line (the import's error), or its spawn's failure */
    char dir[PATH_MAX + 64], socket[PATH_MAX + 96], cgroup[96];
} zygote;

static struct {
    pthread_mutex_t mu;
    zygote z[ZYGOTES_MAX];
    int64_t next_key;
    char code_dir[PATH_MAX + 64];
} Z = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_key = 1};

void zygotes_init(const char *runner) {
    Z.code_dir[0] = '\0';
    const char *slash = runner ? strrchr(runner, '/') : NULL;
    if (slash) {
        char probe[PATH_MAX + 96];
        snprintf(probe, sizeof probe, "%.*s/../share/ddpd/reporter/python/ddpd_zygote.py", (int)(slash - runner), runner);
        if (access(probe, R_OK) == 0) snprintf(Z.code_dir, sizeof Z.code_dir, "%.*s/../share/ddpd/reporter/python",
                                               (int)(slash - runner), runner);
    }
#ifdef DDPD_REPORTER_SOURCE_DIR
    if (!Z.code_dir[0]) snprintf(Z.code_dir, sizeof Z.code_dir, "%s", DDPD_REPORTER_SOURCE_DIR);
#endif
}

static zygote *find(int64_t sweep_id, long uid) {
    for (int i = 0; i < ZYGOTES_MAX; i++)
        if (Z.z[i].key && !Z.z[i].ending && Z.z[i].sweep_id == sweep_id && Z.z[i].uid == uid) return &Z.z[i];
    return NULL;
}

/* "torch,torchvision" from warm_start.imports (module names only: letters, digits, _ and .); NULL: none. */
static char *imports_of(const json_t *config) {
    json_t *list = json_object_get(json_object_get(config, "warm_start"), "imports");
    if (!json_is_array(list) || json_array_size(list) == 0) return NULL;
    size_t n = 0, i;
    json_t *m;
    json_array_foreach(list, i, m) n += strlen(json_string_value(m) ? json_string_value(m) : "") + 1;
    char *out = xmalloc(n + 1), *at = out;
    json_array_foreach(list, i, m) {
        const char *s = json_string_value(m);
        if (!s || !s[0] || strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != strlen(s)) {
            free(out);
            return NULL;
        }
        at += sprintf(at, "%s%s", at == out ? "" : ",", s);
    }
    return out;
}

static void start_zygote(zygote *z, const run_account *account, const json_t *config, const char *imports,
                         const run_cgroup_limits *limits) {
    char parent[PATH_MAX], err[256];
    snprintf(parent, sizeof parent, "%s/zygotes", layout_state_dir());
    if (mkdir_p(parent, 0711) != 0 || chmod(parent, 0711) != 0) {
        log_warn("warm start: cannot make %s: %s: trials start cold", parent, strerror(errno));
        z->key = 0;
        return;
    }
    snprintf(z->dir, sizeof z->dir, "%s/%lld-%ld", parent, (long long)z->sweep_id, z->uid);
    snprintf(z->socket, sizeof z->socket, "%s/zygote.sock", z->dir);
    char hex[SHA256_HEX_LEN + 1];
    sha256_hex(layout_state_dir(), hex);
    snprintf(z->cgroup, sizeof z->cgroup, "%.12s-zygote-%lld-%ld", hex, (long long)z->sweep_id, z->uid);
    run_dir_remove(z->dir, err, sizeof err); /* an earlier server's */
    if (run_dir_make(z->dir, err, sizeof err) != 0) {
        log_warn("warm start: %s: trials start cold", err);
        z->key = 0;
        return;
    }
    json_t *cmd = json_object_get(config, "command");
    const char *python = json_string_value(json_array_get(cmd, 0));
    json_t *env = json_object_get(config, "env");
    const char *user_path = json_string_value(json_object_get(env, "PYTHONPATH"));
    size_t n_env = json_object_size(env) + 2, k = 0;
    char **set = xcalloc(n_env + 1, sizeof *set);
    const char *name;
    json_t *v;
    json_object_foreach(env, name, v) if (json_is_string(v) && strcmp(name, "PYTHONPATH") != 0 &&
                                          strncmp(name, "DDPD_", 5) != 0)
        set[k++] = xasprintf("%s=%s", name, json_string_value(v));
    set[k++] = user_path ? xasprintf("PYTHONPATH=%s:%s", Z.code_dir, user_path) : xasprintf("PYTHONPATH=%s", Z.code_dir);
    /* the script's directory first on sys.path and the run's working directory, as
     * `python3 SCRIPT` has them: a module of the user's own among the imports is found */
    const char *wd = json_string_value(json_object_get(config, "working_dir"));
    const char *script = json_string_value(json_array_get(cmd, 1));
    char *path = NULL;
    if (wd && wd[0] == '/' && script && script[0] && script[0] != '-') {
        char *full = script[0] == '/' ? xstrdup(script) : xasprintf("%s/%s", wd, script);
        char *slash = strrchr(full, '/');
        *slash = '\0';
        path = xstrdup(full[0] ? full : "/");
        free(full);
    }
    char *argv[] = {(char *)python, "-m", "ddpd_zygote", "--socket", z->socket, "--imports", (char *)imports,
                    path ? "--path" : NULL, path, "--cwd", (char *)wd, NULL};
    char *const drop[] = {"DDPD_", NULL};
    char *banner = xasprintf("starting the warm start's zygote of sweep %lld (imports %s)", (long long)z->sweep_id,
                             imports);
    spawn_request req = {.run_id = z->key, .group = ZYGOTE_GROUP, .program = python, .argv = argv, .env_set = set,
                         .env_drop = drop, .cwd = z->dir, .log_name = "zygote.log", .log_banner = banner,
                         .account = account, .cgroup = z->cgroup, .limits = *limits};
    supervisor_request_spawn(&req);
    free(banner);
    free(path);
    for (size_t i = 0; i < k; i++) free(set[i]);
    free(set);
}

/* The zygote of sweep_id and account (started when there is none: NULL when it cannot
 * be, or the trial does not name one), under Z.mu. */
static zygote *zygote_for_locked(int64_t sweep_id, const run_account *account, const json_t *config,
                                 const run_cgroup_limits *limits) {
    char *imports = imports_of(config);
    const char *python = json_string_value(json_array_get(json_object_get(config, "command"), 0));
    if (!imports || !python || python[0] != '/' || !Z.code_dir[0] || sweep_id <= 0) {
        free(imports);
        return NULL;
    }
    long uid = account ? (long)account->uid : (long)geteuid();
    zygote *z = find(sweep_id, uid);
    if (!z) {
        for (int i = 0; i < ZYGOTES_MAX && !z; i++)
            if (!Z.z[i].key) z = &Z.z[i];
        if (z) {
            memset(z, 0, sizeof *z);
            z->key = Z.next_key++;
            z->sweep_id = sweep_id;
            z->uid = uid;
            z->idle_since = mono_ms(); /* none of its trials live yet: the idle limit counts from its start */
            start_zygote(z, account, config, imports, limits);
            if (!z->key) z = NULL;
        }
    }
    free(imports);
    return z;
}

void zygotes_sweep_submitted(int64_t sweep_id, const run_account *account, const json_t *config,
                             const run_cgroup_limits *limits) {
    pthread_mutex_lock(&Z.mu);
    zygote_for_locked(sweep_id, account, config, limits);
    pthread_mutex_unlock(&Z.mu);
}

void zygotes_trial_starts(int64_t sweep_id, const run_account *account, const json_t *config,
                          const run_cgroup_limits *limits, warm_handle *out, char *cold, size_t coldlen) {
    out->socket[0] = '\0';
    out->zygote = 0;
    cold[0] = '\0';
    pthread_mutex_lock(&Z.mu);
    zygote *z = zygote_for_locked(sweep_id, account, config, limits);
    /* ready or still importing (its spawn maybe not yet answered): the handoff waits for
     * it, in the trial's own child, rather than importing everything again cold */
    if (z && !z->failed) {
        snprintf(out->socket, sizeof out->socket, "%.*s", (int)sizeof out->socket - 1, z->socket);
        out->zygote = z->pid;
        out->key = z->key;
        out->resolve = zygotes_pid_of;
    } else if (z) {
        snprintf(cold, coldlen, "%s", z->why);
    }
    if (z) z->live++;
    pthread_mutex_unlock(&Z.mu);
}

pid_t zygotes_pid_of(int64_t key) {
    pthread_mutex_lock(&Z.mu);
    pid_t pid = 0;
    for (int i = 0; i < ZYGOTES_MAX && !pid; i++)
        if (Z.z[i].key == key) pid = Z.z[i].pid;
    pthread_mutex_unlock(&Z.mu);
    return pid;
}

void zygotes_trial_ended(int64_t sweep_id, long uid) {
    pthread_mutex_lock(&Z.mu);
    zygote *z = find(sweep_id, uid);
    if (z && z->live > 0 && --z->live == 0) z->idle_since = mono_ms();
    pthread_mutex_unlock(&Z.mu);
}

static void end_locked(zygote *z, const char *why);

void zygotes_spawned(int64_t key, pid_t pid, const char *err) {
    pthread_mutex_lock(&Z.mu);
    zygote *z = NULL;
    for (int i = 0; i < ZYGOTES_MAX && !z; i++)
        if (Z.z[i].key == key) z = &Z.z[i];
    if (z && z->ending) { /* its sweep ended meanwhile: it ends now, with what it made */
        z->pid = pid > 0 ? pid : -1;
        end_locked(z, "its sweep ended as it started");
    } else if (z && pid > 0) {
        z->pid = pid;
        log_info("warm start: the zygote of sweep %lld for uid %ld is pid %d", (long long)z->sweep_id, z->uid,
                 (int)pid);
    } else if (z) {
        z->failed = true; /* said by the executor; its trials start cold, no new try */
        snprintf(z->why, sizeof z->why, "could not start: %.300s", err ? err : "no reason given");
    } else if (pid > 0) {
        kill(-pid, SIGKILL);
    }
    pthread_mutex_unlock(&Z.mu);
}

void zygotes_sweep_ended(int64_t sweep_id) {
    pthread_mutex_lock(&Z.mu);
    for (int i = 0; i < ZYGOTES_MAX; i++)
        if (Z.z[i].key && !Z.z[i].ending && Z.z[i].sweep_id == sweep_id) end_locked(&Z.z[i], "its sweep ended");
    pthread_mutex_unlock(&Z.mu);
}

static void end_locked(zygote *z, const char *why) {
    if (z->pid == 0 && !z->failed) { /* its spawn not yet answered: ended when it is */
        z->ending = true;
        log_info("warm start: the zygote of sweep %lld for uid %ld ends once its start is answered: %s",
                 (long long)z->sweep_id, z->uid, why);
        return;
    }
    if (z->pid > 0) kill(-z->pid, SIGKILL);
    run_cgroup_kill(z->cgroup);
    char err[256];
    run_dir_remove(z->dir, err, sizeof err);
    log_info("warm start: the zygote of sweep %lld for uid %ld ended: %s", (long long)z->sweep_id, z->uid, why);
    z->key = 0;
}

/* The last line of a zygote's log (its error), in out. */
static void last_line(const zygote *z, char *out, size_t n) {
    out[0] = '\0';
    char buf[4096], err[256];
    struct stat st;
    int fd = run_file_open_in(z->dir, "zygote.log", INT64_MAX, &st, err, sizeof err); /* the account's file: no link followed */
    if (fd < 0) return;
    off_t end = st.st_size;
    ssize_t got = pread(fd, buf, sizeof buf - 1, end > (off_t)sizeof buf - 1 ? end - (off_t)sizeof buf + 1 : 0);
    close(fd);
    if (got <= 0) return;
    buf[got] = '\0';
    while (got > 0 && (buf[got - 1] == '\n' || buf[got - 1] == '\r')) buf[--got] = '\0';
    char *line = strrchr(buf, '\n');
    snprintf(out, n, "%.*s", (int)n - 1, line ? line + 1 : buf);
}

bool zygotes_exited(pid_t pid) {
    pthread_mutex_lock(&Z.mu);
    bool was = false;
    for (int i = 0; i < ZYGOTES_MAX; i++)
        if (Z.z[i].key && Z.z[i].pid == pid) {
            zygote *z = &Z.z[i];
            z->pid = 0;
            was = true;
            struct stat st;
            if (lstat(z->socket, &st) == 0) {
                end_locked(z, "it exited");
                continue;
            }
            /* it never listened: its imports failed. Remembered for the sweep (no new try
             * at each trial); its log kept until the zygote's entry ends */
            char why[512];
            last_line(z, why, sizeof why);
            z->failed = true;
            snprintf(z->why, sizeof z->why, "ended before it was ready: %.340s", why[0] ? why : "no output");
            z->idle_since = mono_ms();
            run_cgroup_kill(z->cgroup);
            log_warn("warm start: the zygote of sweep %lld for uid %ld ended before it was ready (%s; its log: "
                     "%s/zygote.log): the sweep's trials start cold, and no new zygote is tried for it",
                     (long long)z->sweep_id, z->uid, why[0] ? why : "no output", z->dir);
        }
    pthread_mutex_unlock(&Z.mu);
    return was;
}

zygote_state zygotes_state_of(int64_t sweep_id, char *why, size_t whylen) {
    zygote_state st = ZYGOTE_NONE;
    why[0] = '\0';
    pthread_mutex_lock(&Z.mu);
    for (int i = 0; i < ZYGOTES_MAX; i++) {
        const zygote *z = &Z.z[i];
        if (!z->key || z->ending || z->sweep_id != sweep_id) continue;
        struct stat lst;
        zygote_state here = z->failed ? ZYGOTE_FAILED : z->pid > 0 && lstat(z->socket, &lst) == 0 ? ZYGOTE_READY
                                                                                                   : ZYGOTE_LOADING;
        if (here > st) st = here; /* one per account: a failed one is what is said */
        if (here == ZYGOTE_FAILED) snprintf(why, whylen, "%s", z->why);
    }
    pthread_mutex_unlock(&Z.mu);
    return st;
}

bool zygotes_has(pid_t pid) {
    pthread_mutex_lock(&Z.mu);
    bool yes = false;
    for (int i = 0; i < ZYGOTES_MAX && !yes; i++) yes = Z.z[i].key && Z.z[i].pid == pid;
    pthread_mutex_unlock(&Z.mu);
    return yes;
}

void zygotes_tick(bool all) {
    int64_t now = mono_ms();
    pthread_mutex_lock(&Z.mu);
    for (int i = 0; i < ZYGOTES_MAX; i++) {
        zygote *z = &Z.z[i];
        if (!z->key || z->ending || (!all && (z->live > 0 || (z->pid <= 0 && !z->failed) || now - z->idle_since < ZYGOTE_IDLE_MS)))
            continue;
        end_locked(z, all ? "the server stops" : "no trial of its sweep has been live for 30 minutes");
    }
    pthread_mutex_unlock(&Z.mu);
}
