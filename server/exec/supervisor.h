/* Process groups: starting a program in its own session and process group (so that
 * one killpg reaches it and everything it forks), with the environment and working
 * directory asked for and its output appended to a log file; and the thread that
 * reaps them and keeps time.
 *
 * Starts are requests: supervisor_request_spawn queues one and returns at once; the
 * supervisor's thread forks, and the child joins the run's cgroup, takes its CPUs,
 * becomes its account and execs (never an HTTP thread, never under the
 * caller's locks) and reports the pid, or why it could not start, through the
 * `spawned` hook. The same thread waits for SIGCHLD on a signalfd (SIGCHLD is blocked
 * in every thread), reaps with waitpid and reports each exit through `exited`, and
 * calls `tick` about every 100 ms. The hooks are wired by main.c (the scheduler's). */
#ifndef DDPD_SERVER_EXEC_SUPERVISOR_H
#define DDPD_SERVER_EXEC_SUPERVISOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "run_account.h"
#include "run_cgroup.h"
#include "zygote_handoff.h"

typedef struct {
    int64_t run_id;
    int group;                 /* which of the run's process groups (0 for the built-in trainer) */
    const char *program;       /* the executable: a path, or a name looked up in PATH */
    char *const *argv;         /* NULL-terminated; argv[0] as the program sees it */
    char *const *env_set;      /* "NAME=VALUE", NULL-terminated: added, replacing the server's */
    char *const *env_drop;     /* name prefixes ("DDPD_") of the server's variables not passed on */
    const char *cwd;           /* its run directory */
    const char *log_name;      /* stdout and stderr are appended to this file of cwd (created 0600), opened
                                * as run_files.h opens a run's files: never through a link, never a FIFO */
    const char *log_banner;    /* a first line for the log, or NULL */
    /* the account it runs as (run_as.h): its uid, gid and groups, HOME, USER and LOGNAME,
     * umask 077, no capability; cwd (its run directory) is handed to it first. NULL: the
     * server's own user */
    const run_account *account;
    const char *refused;       /* not started at all: `spawned` reports pid -1 with this */
    /* where every process it starts is kept (run_cgroup.h; NULL: none), and the CPUs
     * they may use (the run's slots: its cgroup's cpuset and the launcher's affinity,
     * which its children inherit; n_cpus 0: any) */
    const char *cgroup;
    const int *cpus;
    int n_cpus;
    /* what its cgroup holds it to (run_cgroup.h): its memory, its processes; a limit the
     * host cannot set is said once in the log, and the process starts without it */
    run_cgroup_limits limits;
    /* a warm start (zygotes.h): the zygote the child asks for a trial zygote, which it
     * moves into the run's cgroup and hands over in env_set's DDPD_WARM_FD slot; socket "": none */
    warm_handle warm;
} spawn_request;

typedef struct {
    void (*spawned)(int64_t run_id, int group, pid_t pid, const char *err); /* pid -1: err says why */
    void (*exited)(pid_t pid, int wstatus);
    void (*tick)(void);
} supervisor_hooks;

/* Starts the supervisor's thread. SIGCHLD must already be blocked in every thread. */
int supervisor_start(const supervisor_hooks *hooks);
void supervisor_stop(void);

/* Queues a start (the request is copied). */
void supervisor_request_spawn(const spawn_request *r);

/* Describes a wait status: "exited with status 1", "was killed by signal 9 (Killed)". */
void describe_wait_status(int wstatus, char *out, size_t outlen);

#endif
