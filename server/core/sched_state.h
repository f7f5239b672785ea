/* The scheduler's state, shared by its files: scheduler.c (the lock, the queue, the
 * entry points, the tick), run_life.c (live runs, their starts, their parts and how a
 * run ends) and run_watch.c (the hang and node watches, runs taken back after a
 * restart). Everything here is read and written under K.mu. Not for other modules:
 * they use scheduler.h. */
#ifndef DDPD_CORE_SCHED_STATE_H
#define DDPD_CORE_SCHED_STATE_H

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "base.h"
#include "journal_replay.h"
#include "run_status.h"
#include "scheduler.h"

/* One node's part of a run across nodes: its launcher, started by this server (node
 * 0) or by the node's agent. */
typedef struct {
    int node;           /* 0: this host; else the agent node's id */
    int node_rank;
    int *devices;       /* its devices on that node (world_size / nodes of them) */
    bool stop;          /* told to stop (an agent: no longer in its heartbeat's answer) */
    int64_t stop_t;     /* when (unix ms): a part that ended before it failed on its own */
    bool ended;
    bool failed;        /* ended with a failure of its own (not by the stop it was sent) */
    int64_t exit_code, exit_signal;
    char *reason;       /* its launcher's end, or what became of its node */
    int64_t end_t;      /* when its launcher ended (unix ms), to tell cause from consequence */
} run_part;

typedef struct live_run {
    int64_t id;
    int world_size;
    pool_kind pool;
    bool command;       /* a command run: ddp-run starts it */
    bool resume;        /* resumed (POST /runs/{id}/resume): its trainer continues from its newest checkpoint */
    int port;           /* its MASTER_PORT while started (command runs), else 0 */
    run_status status;  /* queued, starting, running, canceling */
    pid_t pid;          /* 0 while its start is queued to the supervisor */
    char secret[65];
    char *cancel_reason;  /* set once canceled */
    char *fail_reason;    /* set once the server stopped it (a hang): it fails with this */
    double hang_timeout_s; /* command runs: no progress from a rank this long fails it; 0: off */
    int64_t *last_progress_ms; /* command runs, per rank: mono ms of its last report; 0: none yet */
    int64_t *last_step;        /* and its global step then */
    int64_t kill_at;      /* mono ms: SIGKILL then */
    bool killed;
    bool said_hello;      /* a hello came before the supervisor said the trainer started */
    char *end_status, *end_reason; /* from the launcher's `end` event */
    char *devices_json;   /* ["cpu:0","cpu:1"]: for the store, once its trainer started */
    /* adopted: started by a previous server, taken back at start-up. Not this server's
     * child: its exit is seen in /proc (pid and start time), its events are read from
     * its journal (ingest ignores what its processes send), and its end is the
     * journal's `end`. */
    bool adopted;
    uint64_t start_time;
    journal_replay *journal;
    /* across nodes: its parts (n_parts 0: a run of this host only, as above) */
    int nodes_wanted;     /* distributed.nodes; 0: as few as it fits */
    int n_parts;
    run_part *parts;
    json_t *config;       /* its config.json, for the agents */
    bool start_stored;    /* its start is stored (a run with no part here has no pid) */
    bool parts_stopping;
    struct live_run *next;
} live_run;

typedef struct {
    scheduler_config c;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* a run finished */
    live_run *runs;         /* unfinished runs, in submission order */
    device_pool devices;    /* this host's */
    bool shutting_down;
    int next_port;          /* where the next lease looks first */
    char self_url[128];
} sched_state;

extern sched_state K;

/* scheduler.c: starts every queued run that fits, in order. */
void schedule_locked(void);

/* run_life.c */
live_run *find_run(int64_t id);
void finish_locked(live_run *r, run_status status, const char *reason, int64_t exit_code,
                          int64_t exit_signal);
void signal_cancel_locked(live_run *r);
void start_locked(live_run *r);
void start_parts_locked(live_run *r, const int *ids, int k);
void mark_running_locked(live_run *r);
live_run *new_queued(const run_needs *n);
live_run *add_queued(const run_needs *n);
char *derive_reason(live_run *r, int wstatus);
bool server_end_locked(const live_run *r, run_status *status, char **reason);
void stop_parts_locked(live_run *r);
void part_ended_locked(live_run *r, run_part *p);
run_part *part_on(live_run *r, int node);
void local_part_exited_locked(live_run *r, int wstatus);
void finish_from_journal_locked(live_run *r, const char *gone);
json_t *part_json_locked(const live_run *r, const run_part *p);
void part_report_locked(int node, const json_t *rep);

/* run_watch.c */
void watch_hangs_of(live_run *r);
void watch_hang_locked(live_run *r, int64_t now);
bool watch_nodes_locked(int64_t now);
bool watch_adopted_locked(live_run *r);


#endif
