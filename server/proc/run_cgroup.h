/* A control group per run part, where the host has them: every process the run
 * starts is in it, whatever its session or parent (a rank that calls setsid and
 * forks stays in), so the run's end can kill them all; and its CPUs are the slots
 * the run holds (cpuset). cgroup v1 (the pids and cpuset hierarchies) and v2 (one
 * unified hierarchy, cpuset enabled where it can be) under a `ddpd/` directory of
 * their root. Where none can be made (no cgroupfs, a read-only one in a container,
 * no right to it) the caller falls back to the process group and the CPU affinity.
 *
 * A part's cgroup is named by the caller (unique per state directory, run and part),
 * so that a server started again finds the cgroups of runs it adopts.
 *
 * Limits (run_cgroup_limits): the memory its processes may use together (v1: the
 * memory hierarchy's memory.limit_in_bytes, and memory.memsw.limit_in_bytes the same
 * where it exists, so that no swap is taken beyond it; v2: memory.max and
 * memory.swap.max 0), so that an out-of-memory kill ends a process of the run that
 * went over, never another's; and how many processes and threads it may hold at once
 * (pids.max), so that a fork loop stops at it. A host without the memory controller
 * runs without the memory limit (run_cgroup_make says so in `unlimited`). */
#ifndef DDPD_SERVER_PROC_RUN_CGROUP_H
#define DDPD_SERVER_PROC_RUN_CGROUP_H

#include <stdbool.h>
#include <stddef.h>

#define RUN_CGROUP_MAX 3

typedef struct {
    int n;
    char procs[RUN_CGROUP_MAX][320]; /* each cgroup's cgroup.procs, which the child writes to join */
    /* what the host could not limit ("" when every limit asked for is set): "the memory
     * limit: this host has no memory controller ..." */
    char unlimited[256];
} run_cgroup;

typedef struct {
    long long memory_bytes; /* its processes together; 0: no limit */
    long pids_max;          /* processes and threads at once; 0: no limit */
    long long reader_gid;   /* the group that may read its memory counters (the run's account's: its launcher
                             * tells an out-of-memory kill apart, failure_class.h); -1, or 0 unset: the owner alone */
} run_cgroup_limits;

/* Makes the cgroups named `name` (cpus: the CPUs its processes may use; n_cpus 0:
 * any) with `limits` (NULL: none). 0; or -1 and why (out->n 0: none made). A limit
 * the host cannot set is no failure: out->unlimited says which, and why. */
int run_cgroup_make(const char *name, const int *cpus, int n_cpus, const run_cgroup_limits *limits, run_cgroup *out,
                    char *err, size_t errlen);

/* How many processes the kernel's OOM killer ended in the cgroups named `name` for
 * want of their memory limit (v1 memory.oom_control's oom_kill, v2 memory.events'
 * oom_kill): read before run_cgroup_kill removes them. 0: none; -1: it cannot be told
 * (no such cgroup, no memory controller). */
long run_cgroup_oom_kills(const char *name);

/* Whether this host's cgroups can limit a run's memory and processes: true, or false
 * with why not in `why` (for the log and ddpd check). Changes nothing. */
bool run_cgroup_can_limit_memory(char *why, size_t whylen);
bool run_cgroup_can_limit_pids(char *why, size_t whylen);

/* In the forked child, before it changes account: it joins them (async-signal-safe). */
int run_cgroup_join(const run_cgroup *g);

/* Kills every process left in the cgroups named `name` (SIGKILL until none is left)
 * and removes them. Returns how many processes it killed (0: none, or no such cgroup). */
int run_cgroup_kill(const char *name);

/* Removes the empty cgroups whose names start with `prefix` (those a server killed
 * before its runs ended left behind; one that still holds a process stays). */
void run_cgroup_remove_empty(const char *prefix);

#endif
