/* How a part of a run is started, stopped and followed: one interface, one
 * implementation per place where runs execute. This host's supervisor
 * (executor_local.c: a process group, spawned by the supervisor's thread), the
 * agents' nodes (executor_agents.c: a part handed out in a heartbeat's answer), and
 * a batch system (executor_slurm.c: the run is one Slurm job, its parts the job's
 * nodes). The scheduler chooses them in one place (scheduler_init), the only place
 * in it that names one: the rest asks this table.
 *
 * A run is one part (a run of this host alone) or k parts (a run across k nodes:
 * part i is node rank i, world_size / k ranks), each its own launcher, started
 * where the scheduler placed it, by that place's executor.
 *
 * Threads and locks: the scheduler calls an executor's operations under its own
 * lock. They return at once and call no hook: nothing is spawned there (a start is
 * queued to the thread that starts it) and nothing is waited for. An executor tells
 * the scheduler about its parts through the hooks, from its own threads (the
 * supervisor's, the HTTP thread of an agent's heartbeat, the scheduler's tick
 * outside its lock), never while it holds a lock of its own: a hook takes the
 * scheduler's lock.
 *
 * A part's life: start, then (when the start was pending) `started`, then `ended`,
 * once. `stop` may come at any time, a pending start included; `release` once its
 * run is over. After a restart, `adopt` finds a part again from the handle the store
 * kept, and its end comes as any other's.
 *
 * A batch system (`batch`) places runs itself: the scheduler hands it every run at
 * once, with none of this host's or the agents' devices and no MASTER_PORT (node 0
 * picks one), and keeps no queue of its own in front of the system's. Its start is
 * pending while the job waits there: `submitted` says the job's id at once (the store
 * keeps it: the run is still queued), `waiting_for` says what it waits for, and each
 * part's `started` comes when it runs. */
#ifndef DDPD_SERVER_EXEC_EXECUTOR_H
#define DDPD_SERVER_EXEC_EXECUTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "run_account.h"

/* What names a started part where it runs: what the store keeps to find it again. */
typedef struct {
    pid_t pid;           /* this host: its launcher, the leader of its process group (0: none) */
    uint64_t start_time; /* and the launcher's start time (/proc/PID/stat); 0: not recorded */
    int node;            /* an agent's node id (0: this host) */
    char job[64];        /* a batch system's job id ("": none) */
    char place[64];      /* where it runs, for a person, when the executor names it (a Slurm node); "": none */
} part_handle;

/* A part to start: what its launcher needs. Its strings and arrays are the caller's:
 * an executor copies what it keeps. */
typedef struct {
    int64_t run;
    int part;                /* its index among the run's parts: its node rank */
    int nodes;               /* how many parts the run has; 0: a run of this host alone (no --nodes) */
    int node;                /* where it was placed: 0 this host, else an agent node's id */
    int world_size;
    bool gpu;                /* on GPUs (CUDA_VISIBLE_DEVICES), else CPU slots */
    bool command;            /* a command run: ddp-run, not ddp-trainer */
    bool resume;             /* continue from the newest checkpoint (--resume) */
    int ranks;               /* an elastic run: its processes when fewer than world_size (--ranks); 0: world_size */
    const char *secret;      /* DDPD_RUN_SECRET */
    int master_port;         /* a command run's MASTER_PORT */
    int port_lo, port_hi;    /* a command run: where a restart's other MASTER_PORT comes from (--port-range) */
    int restart_count;       /* the attempt its launcher starts at (--restart-count; 0: the run's first) */
    int restarts_from;       /* the attempt its restarts count from (--restarts-from) */
    const char *master_addr; /* across nodes: the address of rank 0's node */
    const char *rendezvous;  /* the run's rendezvous, a path under the coordinator's URL ("/runs/7/rendezvous") */
    int n_devices;           /* its devices on that node: world_size / nodes of them */
    const int *devices;      /* their indices there */
    const char *visible;     /* this host's GPUs for it, as CUDA_VISIBLE_DEVICES names them (NULL: none) */
    const char *where;       /* every device of the run, for a person ("cpu:0, node-b/cpu:0") */
    /* the run's sharing settings, for a batch system that has its own (Slurm's account,
     * nice and QOS); this host's supervisor and the agents ignore them */
    const char *owner;       /* the user who submitted it; NULL: nobody in particular */
    int priority;            /* its config's priority, -100..100 */
    bool preemptible;        /* its config's preemptible */
    /* a command run: its ranks' grace between SIGTERM and SIGKILL, in seconds, when it
     * is stopped (a cancel, a shutdown: ddp-run --stop-grace) and when it is preempted
     * (ddp-run --preempt-grace); the executor kills the launcher only
     * LAUNCHER_GRACE_MARGIN_MS after the grace it was given */
    int stop_grace_s, preempt_grace_s;
    /* whom its processes run as, as the scheduler decided (sched/include/run_as.h):
     * another account (NULL: the server's own user); or, in account_refused, why it
     * cannot start (its account gone since it was submitted): a start that failed */
    const run_account *account;
    const char *account_refused;
    /* what its processes may hold on this node where the executor can hold them to it
     * (this host's cgroups, run_cgroup.h): their memory together (0: no limit), with
     * the words that say where that limit comes from ("resources.memory_gb"), and
     * their processes and threads (0: no limit) */
    int64_t memory_bytes;
    const char *memory_from;
    long pids_max;
    int64_t sweep_id; /* a sweep's trial: its sweep (the warm start's zygote, zygotes.h); 0: none */
    /* a batch system: the nodes its job must not get (Slurm's --exclude), with why each
     * ("its attempt failed there", "suspect"): a run restarted by retry_elsewhere
     * (docs/failures.md); this host's supervisor and the agents ignore them (the
     * scheduler places their parts away from such nodes itself) */
    const char *const *exclude;
    const char *const *exclude_why;
    int n_exclude;
} part_launch;

/* How a part ended. */
typedef struct {
    int64_t exit_code;   /* its launcher's exit status; NO_INT: none (a signal; lost; not this server's child) */
    int64_t exit_signal; /* the signal that ended it; NO_INT: none */
    const char *reason;  /* its launcher's own word on why (a part across nodes: its journal's `end`); NULL: none */
    const char *how;     /* how it ended as the executor saw it, for a person when the launcher said nothing (an
                          * exit status and the log's last line; an adopted launcher gone); NULL: it succeeded */
    int64_t end_t;       /* when it ended (unix ms), to tell a cause from its consequences among parts */
    bool lost;           /* the place it ran is gone (a node stopped heartbeating), or ended it (a batch system's
                          * time limit, a failed node): `reason` says so, and the run fails with it */
    bool canceled;       /* the place it ran canceled it (scancel from outside ddpd): the run is canceled with
                          * `reason` */
    int64_t stop_t;      /* when the place it ran asked it to stop on its own account (Slurm, as another node's
                          * part failed), unix ms; 0: it did not. Not the stop the scheduler asks for */
    /* what the place it ran says of it beside how it ended (NULL: nothing): it ran out
     * of its memory limit (a process of it was killed for it), put before the reason;
     * its log reached its cap, put after */
    const char *out_of_memory;
    const char *log_capped;
} part_end;

/* How an executor reaches the scheduler (which takes its lock). */
typedef struct {
    /* A pending start is done: *h names the part, or err says why it did not start
     * (the run fails with it). Returns false when the run no longer wants the part:
     * the executor kills it at once. */
    bool (*started)(int64_t run, int part, const part_handle *h, const char *err);
    /* The part ended: once per part. */
    void (*ended)(int64_t run, int part, const part_end *e);
    /* A batch system's: the run's pending start is in its queue as job h->job (the
     * store keeps it; the run stays queued while the job waits). */
    void (*submitted)(int64_t run, const part_handle *h);
} executor_hooks;

typedef enum {
    START_DONE,    /* handed over: *h names it now */
    START_PENDING, /* the `started` hook follows */
} start_result;

typedef enum {
    ADOPT_TAKEN, /* it still runs: followed from now on as if started here */
    ADOPT_GONE,  /* it is gone: what was left of it is stopped, and `gone` says what became of it */
} adopt_result;

typedef struct executor {
    const char *name;  /* "local", "agents", "slurm" */
    const char *title; /* for a person, in the scheduler's words about a run it holds: "this host", "Slurm" */
    bool batch;        /* a batch system: it places runs itself (above) */
    /* Starts a part. */
    start_result (*start)(const part_launch *l, part_handle *h);
    /* Asks a part to stop: a polite request at once (SIGTERM to its process group; an
     * agent's part is left out of its node's list), and a kill grace_ms later if it
     * has not ended (an agent keeps its own grace). Asking again asks again and starts
     * the grace anew. Before a pending start is done: the part is stopped once it
     * has started. */
    void (*stop)(int64_t run, int part, int grace_ms);
    /* Asks a part to stop for a preemption (SIGUSR1 to its launcher: a built-in run's
     * writes a checkpoint at its next step and stops; ddp-run gives its ranks the notice,
     * or stops them with its --preempt-grace); if it has not ended preempt_grace_ms
     * later, stops it as `stop` does with grace_ms. Asked again (the checkpoint the
     * notice asked for is durable): SIGUSR1 again, the deadline unmoved. NULL: this executor cannot (the scheduler preempts no run
     * across nodes: its nodes would not agree on the step). */
    void (*preempt)(int64_t run, int part, int preempt_grace_ms, int grace_ms);
    /* The run is over: what the executor keeps of the part goes (its `ended` may never
     * come then). */
    void (*release)(int64_t run, int part);
    /* After a restart: part l->part of run l->run, started by a previous server (with
     * what `l` says), found again from the handle the store kept. NULL: this executor
     * cannot take parts back. */
    adopt_result (*adopt)(const part_launch *l, const part_handle *h, char *gone, size_t gone_len);
    /* After a restart: a part that is not taken back (its run cannot be): whatever is
     * left of it is stopped. NULL: nothing needs doing (an agent stops a part its
     * node's list no longer holds). */
    void (*abandon)(int64_t run, const part_handle *h);
    /* About every 100 ms, from the scheduler's tick, outside its lock: kills after
     * their grace, and ends learnt by looking (a node that stopped heartbeating, an
     * adopted launcher gone). May call the hooks. */
    void (*tick)(void);
    /* A batch system's: what run `run`, whose start is pending, waits for there, for a
     * person (malloc'd), or NULL. NULL: none to say. */
    char *(*waiting_for)(int64_t run);
    /* Where this server answers, once it listens: `url` for the processes of this host
     * (http://127.0.0.1:PORT, the base of a local part's rendezvous URL), and
     * `reachable_url` for other machines (serve --advertise's address: where a batch
     * system's parts report). NULL: it needs neither. */
    void (*set_server_url)(const char *url, const char *reachable_url);
    /* A batch system's: whether the nodes it places runs on have GPUs (what a run's
     * backend "auto" asks for there). NULL: it cannot say (the scheduler counts this
     * host's and the agents' devices itself). */
    bool (*gives_gpus)(void);
    /* Shutting down, once the scheduler has said its last word to it: what its own
     * thread is doing is done (a job id given is told), and it stops. Its parts go on.
     * NULL: it has no thread of its own. */
    void (*shut_down)(void);
} executor;

#endif
