/* A control group per run part: see run_cgroup.h. */
#include "run_cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "keyed_file.h"
#include "procstat.h"
#include "server_log.h"

#define ROOT "/sys/fs/cgroup"

static bool is_v2(void) {
    struct stat st;
    return stat(ROOT "/cgroup.controllers", &st) == 0;
}

static int write_text(const char *path, const char *text) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

static int read_text(const char *path, char *out, size_t outlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, out, outlen - 1);
    close(fd);
    if (n < 0) return -1;
    out[n] = '\0';
    out[strcspn(out, "\n")] = '\0';
    return 0;
}

static int make_dir(const char *path) { return mkdir(path, 0755) == 0 || errno == EEXIST ? 0 : -1; }

/* Whether v1's memory hierarchy is mounted (its root's limit file is there). */
static bool v1_has_memory(void) { return access(ROOT "/memory/memory.limit_in_bytes", F_OK) == 0; }

/* The hierarchies' directories for `name`: v2 one; v1 pids, cpuset and, where the host
 * has it, memory (the first is the one whose cgroup.procs lists the processes). */
static int dirs_of(const char *name, char dirs[RUN_CGROUP_MAX][256]) {
    if (is_v2()) {
        snprintf(dirs[0], sizeof dirs[0], ROOT "/ddpd/%.200s", name);
        return 1;
    }
    snprintf(dirs[0], sizeof dirs[0], ROOT "/pids/ddpd/%.200s", name);
    snprintf(dirs[1], sizeof dirs[1], ROOT "/cpuset/ddpd/%.200s", name);
    if (!v1_has_memory()) return 2;
    snprintf(dirs[2], sizeof dirs[2], ROOT "/memory/ddpd/%.200s", name);
    return 3;
}

/* Writes `value` into the cgroup directory's file `file`. 0 or -1 (errno). */
static int write_in(const char *dir, const char *file, const char *value) {
    char path[320];
    snprintf(path, sizeof path, "%.250s/%s", dir, file);
    return write_text(path, value);
}

static bool has_file(const char *dir, const char *file) {
    char path[320];
    snprintf(path, sizeof path, "%.250s/%s", dir, file);
    return access(path, F_OK) == 0;
}

/* v1: the memory limit in the run's memory cgroup `dir`, and the same for memory and
 * swap together where the kernel accounts swap (memsw), so no swap is taken beyond it.
 * The two are written in the order the kernel takes (memsw may never be below the
 * limit), whatever an earlier cgroup of the same name held. 0 or -1 (errno). */
static int v1_memory_limit(const char *dir, const char *bytes) {
    bool memsw = has_file(dir, "memory.memsw.limit_in_bytes");
    if (write_in(dir, "memory.limit_in_bytes", bytes) == 0) return memsw ? write_in(dir, "memory.memsw.limit_in_bytes", bytes) : 0;
    if (!memsw || write_in(dir, "memory.memsw.limit_in_bytes", bytes) != 0) return -1;
    return write_in(dir, "memory.limit_in_bytes", bytes);
}

/* The limits of one cgroup (v2), or of v1's pids cgroup `dir` and memory cgroup `mem`
 * (NULL: none); what cannot be set is said in `unlimited`, and fails nothing. */
static void set_limits(const char *dir, const char *mem, const run_cgroup_limits *l, bool v2, char *unlimited,
                       size_t ulen) {
    char value[32];
    if (l->pids_max > 0) {
        snprintf(value, sizeof value, "%ld", l->pids_max);
        if (write_in(dir, "pids.max", value) != 0)
            snprintf(unlimited, ulen, "the process limit (pids.max %ld): %s", l->pids_max, strerror(errno));
    }
    if (l->memory_bytes <= 0) return;
    snprintf(value, sizeof value, "%lld", l->memory_bytes);
    int rc = -1;
    if (v2) {
        rc = write_in(dir, "memory.max", value);
        /* no swap beyond it (absent: the kernel accounts no swap here) */
        if (rc == 0 && has_file(dir, "memory.swap.max")) rc = write_in(dir, "memory.swap.max", "0");
    } else if (mem) {
        rc = v1_memory_limit(mem, value);
    } else {
        errno = ENOENT;
    }
    if (rc != 0 && !unlimited[0])
        snprintf(unlimited, ulen, "the memory limit (%lld bytes): %s", l->memory_bytes,
                 errno == ENOENT ? "this host's cgroups have no memory controller" : strerror(errno));
}

static void cpu_list(const int *cpus, int n, char *out, size_t outlen) {
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < n && at < outlen; i++) at += (size_t)snprintf(out + at, outlen - at, "%s%d", i ? "," : "", cpus[i]);
}

int run_cgroup_make(const char *name, const int *cpus, int n_cpus, const run_cgroup_limits *limits, run_cgroup *out,
                    char *err, size_t errlen) {
    out->n = 0;
    out->unlimited[0] = '\0';
    run_cgroup_limits none = {0};
    if (!limits) limits = &none;
    char list[1024];
    cpu_list(cpus, n_cpus, list, sizeof list);
    char dirs[RUN_CGROUP_MAX][256];
    int n = dirs_of(name, dirs);
    if (n == 1) { /* v2: cpuset where it can be enabled down to ddpd/ */
        if (make_dir(ROOT "/ddpd") != 0) goto fail;
        /* each controller on its own: one the host lacks leaves the others on */
        static const char *const CONTROLLERS[] = {"+cpuset", "+memory", "+pids"};
        for (size_t c = 0; c < sizeof CONTROLLERS / sizeof *CONTROLLERS; c++) {
            (void)write_text(ROOT "/cgroup.subtree_control", CONTROLLERS[c]);
            (void)write_text(ROOT "/ddpd/cgroup.subtree_control", CONTROLLERS[c]);
        }
        if (make_dir(dirs[0]) != 0) goto fail;
        set_limits(dirs[0], NULL, limits, true, out->unlimited, sizeof out->unlimited);
        char path[320];
        snprintf(path, sizeof path, "%.250s/cpuset.cpus", dirs[0]);
        if (n_cpus > 0 && access(path, F_OK) == 0 && write_text(path, list) != 0) goto fail;
    } else {
        if (make_dir(ROOT "/pids/ddpd") != 0 || make_dir(dirs[0]) != 0) goto fail;
        /* cpuset: a new cgroup has no CPUs and no memory nodes until given some */
        char cpus_all[256], mems[256];
        if (read_text(ROOT "/cpuset/cpuset.effective_cpus", cpus_all, sizeof cpus_all) != 0 ||
            read_text(ROOT "/cpuset/cpuset.effective_mems", mems, sizeof mems) != 0 ||
            make_dir(ROOT "/cpuset/ddpd") != 0)
            goto fail;
        char have[256] = "";
        (void)read_text(ROOT "/cpuset/ddpd/cpuset.cpus", have, sizeof have);
        if (!have[0] && (write_text(ROOT "/cpuset/ddpd/cpuset.cpus", cpus_all) != 0 ||
                         write_text(ROOT "/cpuset/ddpd/cpuset.mems", mems) != 0))
            goto fail;
        if (make_dir(dirs[1]) != 0) goto fail;
        char path[320];
        snprintf(path, sizeof path, "%.250s/cpuset.cpus", dirs[1]);
        if (write_text(path, n_cpus > 0 ? list : cpus_all) != 0) goto fail;
        snprintf(path, sizeof path, "%.250s/cpuset.mems", dirs[1]);
        if (write_text(path, mems) != 0) goto fail;
        /* memory: where the host has the hierarchy and lets it be written; else the run
         * goes without the memory limit, and says so */
        if (n == 3 && (make_dir(ROOT "/memory/ddpd") != 0 || make_dir(dirs[2]) != 0)) {
            if (limits->memory_bytes > 0)
                snprintf(out->unlimited, sizeof out->unlimited, "the memory limit (%lld bytes): cannot make %.120s: %s",
                         limits->memory_bytes, dirs[2], strerror(errno));
            n = 2;
        }
        set_limits(dirs[0], n == 3 ? dirs[2] : NULL, limits, false, out->unlimited, sizeof out->unlimited);
    }
    /* its memory counters (oom_kill, the limit) readable by the run's own group, no one else's */
    const char *memory_dir = n == 1 ? dirs[0] : n == 3 ? dirs[2] : NULL;
    if (memory_dir && limits->reader_gid > 0 &&
        (chown(memory_dir, (uid_t)-1, (gid_t)limits->reader_gid) != 0 || chmod(memory_dir, 0750) != 0))
        log_warn("the run's cgroup %s: cannot let its group read it (%s): its launcher cannot tell an out-of-memory "
                 "kill from another", memory_dir, strerror(errno));
    for (int i = 0; i < n; i++) snprintf(out->procs[i], sizeof out->procs[i], "%.250s/cgroup.procs", dirs[i]);
    out->n = n;
    return 0;
fail:
    snprintf(err, errlen, "cannot make the run's cgroup %s: %s", name, strerror(errno));
    return -1;
}

int run_cgroup_join(const run_cgroup *g) {
    for (int i = 0; i < g->n; i++) {
        int fd = open(g->procs[i], O_WRONLY | O_CLOEXEC);
        if (fd < 0) return -1;
        ssize_t w = write(fd, "0", 1);
        close(fd);
        if (w != 1) return -1;
    }
    return 0;
}

/* SIGKILL to every live process the cgroup lists (a zombie, already dead, waits for
 * its parent: not counted); how many. */
static int kill_listed(const char *procs) {
    FILE *f = fopen(procs, "re");
    if (!f) return 0;
    int killed = 0;
    long pid;
    proc_stat ps;
    while (fscanf(f, "%ld", &pid) == 1)
        if (pid > 0 && proc_stat_read((pid_t)pid, &ps) == 0 && ps.state != 'Z' && kill((pid_t)pid, SIGKILL) == 0)
            killed++;
    fclose(f);
    return killed;
}

void run_cgroup_remove_empty(const char *prefix) {
    const char *bases[] = {ROOT "/ddpd", ROOT "/pids/ddpd", ROOT "/cpuset/ddpd", ROOT "/memory/ddpd"};
    for (size_t b = is_v2() ? 0 : 1; b < (is_v2() ? 1 : 4); b++) {
        DIR *d = opendir(bases[b]);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            if (strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
            char path[512];
            snprintf(path, sizeof path, "%s/%.200s", bases[b], e->d_name);
            (void)rmdir(path); /* EBUSY: a run's processes are still in it */
        }
        if (d) closedir(d);
    }
}

int run_cgroup_kill(const char *name) {
    char dirs[RUN_CGROUP_MAX][256];
    int n = dirs_of(name, dirs);
    char procs[320];
    snprintf(procs, sizeof procs, "%.250s/cgroup.procs", dirs[0]);
    int total = 0;
    /* a process may fork as it is killed: again until it lists none alive (at most 0.2 s) */
    for (int pass = 0; pass < 200; pass++) {
        int k = kill_listed(procs);
        if (!k) break;
        if (!pass) total = k;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i < n; i++)
        for (int tries = 0; rmdir(dirs[i]) != 0 && errno == EBUSY && tries < 50; tries++) {
            struct timespec ts = {0, 2000000L};
            nanosleep(&ts, NULL); /* killed, not yet gone */
        }
    return total;
}

long run_cgroup_oom_kills(const char *name) {
    char path[320];
    if (is_v2()) snprintf(path, sizeof path, ROOT "/ddpd/%.200s/memory.events", name);
    else snprintf(path, sizeof path, ROOT "/memory/ddpd/%.200s/memory.oom_control", name);
    return keyed_file_value(path, "oom_kill");
}

/* Whether v2's root lists `controller` among those it has. */
static bool v2_controller(const char *controller) {
    char have[512];
    if (read_text(ROOT "/cgroup.controllers", have, sizeof have) != 0) return false;
    for (char *w = strtok(have, " "); w; w = strtok(NULL, " "))
        if (strcmp(w, controller) == 0) return true;
    return false;
}

static bool can_limit(const char *controller, const char *v1_dir, const char *v1_file, char *why, size_t whylen) {
    const char *dir = is_v2() ? ROOT : v1_dir;
    bool there = is_v2() ? v2_controller(controller) : has_file(v1_dir, v1_file);
    if (!there) {
        snprintf(why, whylen, "this host's cgroups (%s) have no %s controller", is_v2() ? "v2, " ROOT : "v1", controller);
        return false;
    }
    if (access(dir, W_OK) != 0) {
        snprintf(why, whylen, "the %s controller (%s) cannot be written by this server: %s", controller, dir,
                 strerror(errno));
        return false;
    }
    snprintf(why, whylen, "cgroup %s, %s", is_v2() ? "v2" : "v1", dir);
    return true;
}

bool run_cgroup_can_limit_memory(char *why, size_t whylen) {
    return can_limit("memory", ROOT "/memory", "memory.limit_in_bytes", why, whylen);
}

bool run_cgroup_can_limit_pids(char *why, size_t whylen) {
    return can_limit("pids", ROOT "/pids", "cgroup.procs", why, whylen);
}
