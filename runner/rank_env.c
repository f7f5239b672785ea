/* Each rank's environment: see rank_env.h. */
#include "rank_env.h"
#include "run_dir.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* What ddpd sets for every rank (PYTHONPATH is not here: a config may add to it, and
 * the reporter's directory goes in front). */
static const char *const RESERVED[] = {
    "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
    "ROLE_RANK", "ROLE_NAME", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
    "TORCHELASTIC_RUN_ID", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS",
    "TORCHELASTIC_USE_AGENT_STORE", "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
    "NCCL_ASYNC_ERROR_HANDLING", "OMP_NUM_THREADS", "PYTHONUNBUFFERED", "CUDA_VISIBLE_DEVICES",
    "DDPD_RUN_ID", "DDPD_RUN_SECRET", "DDPD_EVENTS_SOCKET", "DDPD_EVENTS_JOURNAL", NULL,
};

int rank_env_reserved(const char *name) {
    for (int i = 0; RESERVED[i]; i++)
        if (strcmp(name, RESERVED[i]) == 0) return 1;
    return 0;
}

int rank_env_device_count(const char *devices) {
    if (!devices || !devices[0]) return 0;
    int n = 1;
    for (const char *p = devices; *p; p++) n += *p == ',';
    return n;
}

/* The i-th entry of a comma-separated list, into out. */
static void device_at(const char *devices, int i, char *out, size_t n) {
    const char *p = devices;
    for (; i > 0 && p; i--) {
        p = strchr(p, ',');
        if (p) p++;
    }
    size_t len = p ? strcspn(p, ",") : 0;
    snprintf(out, n, "%.*s", (int)(len < n ? len : n - 1), p ? p : "");
}

/* "NAME=value" of `name` in a list, or NULL. */
static const char *find_var(char *const *list, const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; list && list[i]; i++)
        if (strncmp(list[i], name, n) == 0 && list[i][n] == '=') return list[i];
    return NULL;
}

static int name_is(const char *var, const char *name) {
    size_t n = strlen(name);
    return strncmp(var, name, n) == 0 && var[n] == '=';
}

typedef struct {
    char **v;
    size_t n, cap;
    int failed;
} env_list;

__attribute__((format(printf, 2, 3))) static void add(env_list *e, const char *fmt, ...) {
    if (e->n + 2 > e->cap) {
        size_t cap = e->cap ? e->cap * 2 : 64;
        char **grown = realloc(e->v, cap * sizeof *grown);
        if (!grown) {
            e->failed = 1;
            return;
        }
        e->v = grown;
        e->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        e->failed = 1;
        s = NULL;
    }
    va_end(ap);
    if (s) e->v[e->n++] = s;
    e->v[e->n] = NULL;
}

/* An inherited variable stays unless ddpd sets it, the config sets it, or it is
 * PYTHONPATH (rebuilt below) or PWD (the ranks' working directory, as a shell's). */
static int inherited_kept(const char *var, const rank_env_params *p) {
    char name[256];
    size_t len = strcspn(var, "=");
    if (len >= sizeof name) return 1;
    memcpy(name, var, len);
    name[len] = '\0';
    return !rank_env_reserved(name) && strcmp(name, "PYTHONPATH") != 0 && strcmp(name, "PWD") != 0 &&
           !find_var(p->config_env, name);
}

char **rank_env_build(const rank_env_params *p, int rank) {
    env_list e = {0};
    for (char **v = environ; *v; v++)
        if (inherited_kept(*v, p)) add(&e, "%s", *v);
    for (size_t i = 0; p->config_env && p->config_env[i]; i++)
        if (!name_is(p->config_env[i], "PYTHONPATH") && !name_is(p->config_env[i], "PWD")) add(&e, "%s", p->config_env[i]);
    if (p->working_dir) add(&e, "PWD=%s", p->working_dir);

    int n = p->world_size, local = rank - p->first_rank;
    add(&e, "RANK=%d", rank);
    add(&e, "LOCAL_RANK=%d", p->isolate_devices ? 0 : local);
    add(&e, "WORLD_SIZE=%d", n);
    add(&e, "LOCAL_WORLD_SIZE=%d", p->local_ranks);
    add(&e, "GROUP_RANK=%d", p->node_rank);
    add(&e, "GROUP_WORLD_SIZE=%d", p->nodes > 0 ? p->nodes : 1);
    add(&e, "ROLE_RANK=%d", rank);
    add(&e, "ROLE_NAME=default");
    add(&e, "ROLE_WORLD_SIZE=%d", n);
    add(&e, "MASTER_ADDR=%s", p->master_addr ? p->master_addr : "127.0.0.1");
    add(&e, "MASTER_PORT=%d", p->master_port);
    add(&e, "TORCHELASTIC_RUN_ID=%s", p->run_id);
    add(&e, "TORCHELASTIC_RESTART_COUNT=%d", p->restart_count);
    add(&e, "TORCHELASTIC_MAX_RESTARTS=%d", p->max_restarts);
    add(&e, "TORCHELASTIC_USE_AGENT_STORE=False");
    add(&e, "TORCHELASTIC_ERROR_FILE=%s/" RUN_DIR_RANK_ERROR, p->run_dir, rank);
    add(&e, "TORCH_NCCL_ASYNC_ERROR_HANDLING=1");
    add(&e, "NCCL_ASYNC_ERROR_HANDLING=1");
    add(&e, "OMP_NUM_THREADS=%d", p->threads_per_rank);
    add(&e, "PYTHONUNBUFFERED=1");
    const char *devices = p->devices ? p->devices : "";
    if (p->isolate_devices && rank_env_device_count(devices) > 0) {
        char one[64];
        device_at(devices, local, one, sizeof one);
        add(&e, "CUDA_VISIBLE_DEVICES=%s", one);
    } else {
        add(&e, "CUDA_VISIBLE_DEVICES=%s", devices);
    }
    add(&e, "DDPD_RUN_ID=%s", p->run_id);
    const char *secret = getenv("DDPD_RUN_SECRET");
    if (secret) add(&e, "DDPD_RUN_SECRET=%s", secret);
    if (p->events_socket) add(&e, "DDPD_EVENTS_SOCKET=%s", p->events_socket);
    add(&e, "DDPD_EVENTS_JOURNAL=%s/" RUN_DIR_JOURNAL, p->run_dir);

    const char *config_path = find_var(p->config_env, "PYTHONPATH");
    const char *rest = config_path ? config_path + strlen("PYTHONPATH=") : getenv("PYTHONPATH");
    if (p->reporter_dir && rest && rest[0]) add(&e, "PYTHONPATH=%s:%s", p->reporter_dir, rest);
    else if (p->reporter_dir) add(&e, "PYTHONPATH=%s", p->reporter_dir);
    else if (rest) add(&e, "PYTHONPATH=%s", rest);
    if (e.failed) {
        rank_env_free(e.v);
        return NULL;
    }
    return e.v;
}

void rank_env_free(char **env) {
    for (size_t i = 0; env && env[i]; i++) free(env[i]);
    free(env);
}

static int is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

const char *rank_env_reporter_dir(void) {
    static char found[PATH_MAX + 64];
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) *slash = '\0';
        snprintf(found, sizeof found, "%s/../share/ddpd/reporter/python", exe);
        char resolved[PATH_MAX];
        if (is_dir(found) && realpath(found, resolved)) {
            snprintf(found, sizeof found, "%s", resolved);
            return found;
        }
    }
#ifdef DDPD_REPORTER_SOURCE_DIR
    if (is_dir(DDPD_REPORTER_SOURCE_DIR)) return DDPD_REPORTER_SOURCE_DIR;
#endif
    return NULL;
}
