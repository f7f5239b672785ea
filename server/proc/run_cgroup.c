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

#include "procstat.h"

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

/* The hierarchies' directories for `name`: v2 one, v1 pids and cpuset (the first is
 * the one whose cgroup.procs lists the processes). */
static int dirs_of(const char *name, char dirs[RUN_CGROUP_MAX][256]) {
    if (is_v2()) {
        snprintf(dirs[0], sizeof dirs[0], ROOT "/ddpd/%.200s", name);
        return 1;
    }
    snprintf(dirs[0], sizeof dirs[0], ROOT "/pids/ddpd/%.200s", name);
    snprintf(dirs[1], sizeof dirs[1], ROOT "/cpuset/ddpd/%.200s", name);
    return 2;
}

static void cpu_list(const int *cpus, int n, char *out, size_t outlen) {
    size_t at = 0;
    out[0] = '\0';
    for (int i = 0; i < n && at < outlen; i++) at += (size_t)snprintf(out + at, outlen - at, "%s%d", i ? "," : "", cpus[i]);
}

int run_cgroup_make(const char *name, const int *cpus, int n_cpus, run_cgroup *out, char *err, size_t errlen) {
    out->n = 0;
    char list[1024];
    cpu_list(cpus, n_cpus, list, sizeof list);
    char dirs[RUN_CGROUP_MAX][256];
    int n = dirs_of(name, dirs);
    if (n == 1) { /* v2: cpuset where it can be enabled down to ddpd/ */
        if (make_dir(ROOT "/ddpd") != 0) goto fail;
        (void)write_text(ROOT "/cgroup.subtree_control", "+cpuset");
        (void)write_text(ROOT "/ddpd/cgroup.subtree_control", "+cpuset");
        if (make_dir(dirs[0]) != 0) goto fail;
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
    }
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
    const char *bases[] = {ROOT "/ddpd", ROOT "/pids/ddpd", ROOT "/cpuset/ddpd"};
    for (size_t b = is_v2() ? 0 : 1; b < (is_v2() ? 1 : 3); b++) {
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
