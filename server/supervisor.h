/* The trainer processes: starting ddp-trainer in its own session and process group
 * (so that one killpg reaches the launcher and all its ranks), with the run's
 * secret in its environment and its output in the run's log; and the thread that
 * reaps them and keeps time for cancel grace periods.
 *
 * The reaper waits for SIGCHLD on a signalfd (SIGCHLD is blocked in every thread),
 * reaps with waitpid, lets ingest catch up with what the dead process wrote to the
 * event socket (its `end` event carries the reason), and hands the wait status to
 * the scheduler. Every 100 ms it also gives the scheduler a tick (SIGKILL after the
 * grace period). */
#ifndef DDPD_SUPERVISOR_H
#define DDPD_SUPERVISOR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct {
    const char *trainer;              /* the ddp-trainer executable */
    const char *run_dir;
    const char *events_path;          /* the event socket */
    int64_t run_id;
    const char *secret;
    const char *cuda_visible_devices; /* "" for CPU runs: they never touch a GPU */
    const char *devices_text;         /* "cpu:0, cpu:1": for the log's first line */
} spawn_request;

/* Starts the trainer; returns its pid (= its process group id) or -1 with a
 * sentence in err. */
pid_t supervisor_spawn(const spawn_request *r, char *err, size_t errlen);

/* The reaper thread. SIGCHLD must already be blocked in every thread. */
int supervisor_start(void);
void supervisor_stop(void);

/* Describes a wait status: "exited with status 1", "was killed by signal 9 (Killed)". */
void describe_wait_status(int wstatus, char *out, size_t outlen);

#endif
