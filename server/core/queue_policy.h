/* Which queued run starts next, and where: a pure function of a snapshot (the queue,
 * what each node has free and in all, what the running runs hold). No lock, no I/O,
 * no clock but the snapshot's: the rule is tested on hand-made snapshots
 * (tests/server/test_queue_policy.c), and the scheduler applies what it decides.
 * Fair share, quotas, priorities and preemption are rules of this file.
 *
 * Today's rule, first come first served in each pool (CPU slots, GPUs). In queue
 * order, each run is placed all at once or not at all:
 *   - a run that asks for at most one node and that this host's pool can hold runs on
 *     this host alone, once enough of its devices are free;
 *   - any other goes across nodes: k nodes with world_size / k devices free on each,
 *     the first that fit in the snapshot's order (this host first when it takes part
 *     in runs across nodes), the fewest k that fit unless it asks for k
 *     (distributed.nodes).
 * A run that does not fit waits, and the runs behind it in its pool wait behind it
 * (a big run is not overtaken by smaller ones); the other pool's queue goes on. The
 * devices a start takes are not free for the runs after it. Nothing is preempted. */
#ifndef DDPD_CORE_QUEUE_POLICY_H
#define DDPD_CORE_QUEUE_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device_pool.h"

/* This host and as many agent nodes as nodes.h holds. */
#define POLICY_NODES_MAX 65

typedef struct {
    int id;           /* 0: this host; else an agent node's id */
    const char *name; /* for what a person reads */
    int free[2];      /* per pool (pool_kind): devices free now */
    int capacity[2];  /* and in all */
} policy_node;

/* A queued run. */
typedef struct {
    int64_t id;
    pool_kind pool;
    int world_size;
    int nodes_wanted;  /* distributed.nodes; 0: as few nodes as hold it */
    const char *owner; /* who submitted it (NULL: nobody in particular; nothing sets it yet) */
    int priority;      /* higher first (0; nothing sets it yet) */
} policy_run;

typedef struct {
    int node;    /* where (0: this host) */
    int devices; /* how many of the run's pool */
} policy_hold;

/* A started run and what it holds. */
typedef struct {
    int64_t id;
    pool_kind pool;
    const char *owner;
    int priority;
    int n_holds;
    const policy_hold *holds;
} policy_running;

typedef struct {
    const policy_node *nodes; /* nodes[0] is this host; then the agent nodes that are up */
    int n_nodes;
    bool here_across;         /* this host takes part in runs across nodes (serve --advertise) */
    const policy_run *queued; /* in queue order */
    int n_queued;
    const policy_running *running;
    int n_running;
    int64_t now_ms;           /* when the snapshot was taken, for rules that weigh time (today's does not) */
} policy_snapshot;

typedef enum {
    POLICY_START,   /* start it now, on `nodes` */
    POLICY_PREEMPT, /* stop the runs `preempt` for it; it starts on `nodes` once they have ended */
    POLICY_WAIT,    /* it waits: `wait` says for what */
} policy_verb;

/* Why a run waits; queue_policy_waiting_for says it for a person, with the numbers. */
typedef enum {
    WAIT_NONE,      /* it does not wait */
    WAIT_THIS_HOST, /* for enough of this host's devices */
    WAIT_NODES,     /* for nodes with enough free devices each */
    WAIT_BEHIND,    /* behind `behind`, a run of its pool that waits (first come first served) */
} policy_wait;

typedef struct {
    policy_verb verb;
    int64_t run;
    bool across;                  /* START, PREEMPT: as parts across nodes (each launcher told --nodes) */
    int n_nodes;                  /* START, PREEMPT: its nodes' ids in node-rank order (0: this host) */
    int nodes[POLICY_NODES_MAX];
    int n_preempt;                /* PREEMPT: the runs to stop first (malloc'd) */
    int64_t *preempt;
    policy_wait wait;             /* WAIT: for what */
    int64_t behind;               /* WAIT_BEHIND: the run of its pool it waits behind */
} policy_decision;

/* One decision per queued run, in queue order, into out[0 .. n_queued). Returns
 * n_queued. The snapshot is not changed. */
int queue_policy_decide(const policy_snapshot *s, policy_decision *out);
/* What the decisions own. */
void queue_policy_free(policy_decision *d, int n);

/* What a queued run waits for, for a person (malloc'd): "2 CPU slots on this host (1
 * free of 2)", or the nodes it needs with what each has free now. */
char *queue_policy_waiting_for(const policy_snapshot *s, const policy_run *q);

/* Could the run ever be placed: on this host, or on nodes of the snapshot by their
 * capacity? false with why in err, naming what there is. */
bool queue_policy_can_place(const policy_snapshot *s, const policy_run *q, char *err, size_t errlen);

#endif
