/* A control group per run part, where the host has them: every process the run
 * starts is in it, whatever its session or parent (a rank that calls setsid and
 * forks stays in), so the run's end can kill them all; and its CPUs are the slots
 * the run holds (cpuset). cgroup v1 (the pids and cpuset hierarchies) and v2 (one
 * unified hierarchy, cpuset enabled where it can be) under a `ddpd/` directory of
 * their root. Where none can be made (no cgroupfs, a read-only one in a container,
 * no right to it) the caller falls back to the process group and the CPU affinity.
 *
 * A part's cgroup is named by the caller (unique per state directory, run and part),
 * so that a server started again finds the cgroups of runs it adopts. */
#ifndef DDPD_LIB_RUN_CGROUP_H
#define DDPD_LIB_RUN_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

#define RUN_CGROUP_MAX 2

typedef struct {
    int n;
    char procs[RUN_CGROUP_MAX][320]; /* each cgroup's cgroup.procs, which the child writes to join */
} run_cgroup;

/* Makes the cgroups named `name` (cpus: the CPUs its processes may use; n_cpus 0:
 * any). 0; or -1 and why (out->n 0: none made). */
int run_cgroup_make(const char *name, const int *cpus, int n_cpus, run_cgroup *out, char *err, size_t errlen);

/* In the forked child, before it changes account: it joins them (async-signal-safe). */
int run_cgroup_join(const run_cgroup *g);

/* Kills every process left in the cgroups named `name` (SIGKILL until none is left)
 * and removes them. Returns how many processes it killed (0: none, or no such cgroup). */
int run_cgroup_kill(const char *name);

/* Removes the empty cgroups whose names start with `prefix` (those a server killed
 * before its runs ended left behind; one that still holds a process stays). */
void run_cgroup_remove_empty(const char *prefix);

#endif
