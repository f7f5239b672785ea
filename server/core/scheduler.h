/* The scheduler owns the devices and the life of every unfinished run in memory.
 *
 * Devices come in two pools: GPUs (given to a run through CUDA_VISIBLE_DEVICES) and
 * CPU slots (for CPU runs, one rank each). A run needs world_size devices of one
 * pool; runs wait in submission order (FIFO per pool: a big run at the head is not
 * overtaken by smaller ones behind it) until enough are free, and no device is ever
 * given to two runs.
 *
 * State changes happen here, under one lock, and are queued to the store's writer
 * in the same order: queued -> starting (devices given, trainer started) -> running
 * (its first rank said hello) -> succeeded | failed | canceled, with canceling on the
 * way to canceled. */
#ifndef DDPD_SCHEDULER_H
#define DDPD_SCHEDULER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

typedef enum { POOL_CPU, POOL_GPU } pool_kind;

typedef struct {
    const char *trainer;
    const char *runner;      /* ddp-run: starts a command run's ranks */
    int port_lo, port_hi;    /* MASTER_PORTs leased to command runs */
    const char *const *data_roots; /* passed to the trainer (--data-root), which opens data beneath them */
    int n_data_roots;
    char **gpus;             /* GPU ids, as CUDA_VISIBLE_DEVICES names them */
    int n_gpus;
    int slots;               /* CPU slots */
    int cancel_grace_ms;     /* SIGTERM, then SIGKILL this much later */
    /* a run is finished (its final state queued to the store): its event connections
     * go (ingest_run_ended, wired by main.c); may be NULL */
    void (*run_ended)(int64_t id);
} scheduler_config;

void scheduler_init(const scheduler_config *c);

/* At start-up: queued runs are queued again, in order. A run a previous server left
 * starting/running/canceling is taken back when its launcher is still alive (the pid
 * and the start time stored at spawn): its journal (events.jsonl) is replayed from
 * where the store is, and from then on it is fed from its journal and supervised
 * through /proc (it is not this server's child); its end is the journal's `end`.
 * When its processes are gone, its journal is replayed to the end: its `end` says
 * how it ended (with its exit code); without one it fails, saying that its
 * processes were gone and at which step its journal ends. */
void scheduler_recover(void);

/* Ingest's hook: the run is fed from its journal (an adopted run), so what its
 * processes send on the socket is not stored again. */
bool scheduler_journal_fed(int64_t id);

/* How many devices of the pool this server has. */
int scheduler_capacity(pool_kind pool);
const char *pool_name(pool_kind pool);      /* "cpu", "gpu" */
const char *pool_unit(pool_kind pool);      /* "CPU slots", "GPUs" */

/* Queues a run that is already in the store as queued (its config.json written).
 * command: a command run (started by the runner, with a MASTER_PORT of its own). */
void scheduler_submit(int64_t id, int world_size, pool_kind pool, bool command);

/* Queues again a built-in run that the store has just turned from failed or canceled
 * to queued (runs_resume): at the back of its pool's queue; its trainer is started
 * with --resume (it continues from the newest checkpoint in its run directory). */
void scheduler_resume(int64_t id, int world_size, pool_kind pool);

typedef enum { CANCEL_DONE, CANCEL_SIGNALED, CANCEL_ALREADY, CANCEL_NOT_LIVE } cancel_result;
/* Cancels a queued run at once; signals a started one (SIGTERM to its group, SIGKILL
 * after the grace period). CANCEL_NOT_LIVE: no such unfinished run. */
cancel_result scheduler_cancel(int64_t id, const char *reason);

/* 1-based position in the queue of its pool, or 0 when not queued. */
int scheduler_queue_position(int64_t id);

/* Ingest's hooks (ingest.h): a connection's hello, true when the secret is the run's
 * (the run then counts as running once a rank has said hello); the launcher's `end`. */
bool scheduler_hello(int64_t id, const char *secret, int rank);
void scheduler_end_event(int64_t id, const char *status, const char *reason);
/* A rank's progress (ingest's hook): the hang watch of command runs
 * (distributed.hang_timeout_s) counts from each rank's first report. */
void scheduler_progress(int64_t id, int rank, int64_t global_step);

/* The supervisor's hooks (supervisor.h): a start it was asked for is done (pid, or -1
 * and why not); a child was reaped; about every 100 ms (kills after grace periods). */
void scheduler_spawned(int64_t id, int group, pid_t pid, const char *err);
void scheduler_child_exited(pid_t pid, int wstatus);
void scheduler_tick(void);

/* Shutting down: no more starts; active runs are canceled ("the server shut down")
 * and waited for (queued runs stay queued for the next start). */
void scheduler_shutdown(void);

/* For /healthz and /metrics: devices in all and free, runs queued and active. */
typedef struct {
    int cpu_slots, cpu_free, gpus, gpu_free, queued, active;
} scheduler_snapshot;
void scheduler_take_snapshot(scheduler_snapshot *out);

#endif
