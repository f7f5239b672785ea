/* This host's executor (executor.h): each part is a launcher in a process group of
 * its own, spawned by the supervisor's thread (never under the scheduler's lock, never
 * on an HTTP thread: a start is a request, supervisor.h) with its output in the run's
 * trainer.log. A stop is SIGTERM to the group, SIGKILL after the grace. Its end is
 * the child's exit as the supervisor reaps it: the exit status, and for a part of a
 * run across nodes its launcher's `end` from the journal; how it ended for a person
 * (the exit status and the log's last line) when the launcher said nothing.
 *
 * A launcher a previous server started is taken back when the process with the
 * stored pid and start time is alive and its command line names the run's directory;
 * as it is not this server's child, its end is seen in /proc. */
#ifndef DDPD_SERVER_EXEC_EXECUTOR_LOCAL_H
#define DDPD_SERVER_EXEC_EXECUTOR_LOCAL_H

#include <stdint.h>
#include <sys/types.h>

#include "executor.h"

typedef struct {
    const char *trainer, *runner;  /* ddp-trainer, ddp-run */
    const char *const *data_roots; /* passed to the trainer (--data-root) */
    int n_data_roots;
    const char *advertise;         /* this host's address among nodes (a built-in part's --node-addr) */
    /* the cap on each log of a run (ddpd serve --max-log-bytes-per-run, passed to the
     * launchers in DDPD_MAX_LOG_BYTES_PER_RUN): a part whose log reached it says so at
     * its end; 0: none */
    uint64_t max_log_bytes;
} executor_local_config;

/* Its executor: its set_server_url takes the URL this server answers at for its own
 * ranks, the base of a part's rendezvous URL. */
const executor *executor_local_init(const executor_local_config *c, const executor_hooks *hooks);

/* The supervisor's hooks (supervisor.h): a spawn it was asked for is done (pid, or -1
 * and why not); a child was reaped. */
void executor_local_spawned(int64_t run, int group, pid_t pid, const char *err);
void executor_local_exited(pid_t pid, int wstatus);

#endif
