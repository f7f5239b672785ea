/* Which queued run starts next, and where, and whom to preempt for it: a pure
 * function of a snapshot (the queue, what each node has free and in all, what the
 * running runs hold, each owner's quota and decayed usage). No lock, no I/O, no
 * clock but the snapshot's: the rule is tested on hand-made snapshots
 * (tests/unit/server/test_queue_policy.c), and the scheduler applies what it decides.
 *
 * The order (Slurm's multifactor priority with fair share, in three keys): the
 * queued runs are taken by `priority`, highest first; then by their owner's decayed
 * usage (fair_share.h), least first; then the oldest in the queue (when it was
 * queued: submitted, resumed or preempted); then by id.
 *
 * In that order, each run is placed all at once or not at all:
 *   - its owner's quota (max_devices, over both pools) holds it back when what the
 *     owner's runs hold, with it, would pass it; it waits without holding up others;
 *   - a run that asks for at most one node and that this host's pool can hold runs on
 *     this host alone, once enough of its devices are free;
 *   - any other goes across nodes: k nodes with world_size / k devices free on each,
 *     the first that fit in the snapshot's order (this host first when it takes part
 *     in runs across nodes), the fewest k that fit unless it asks for k
 *     (distributed.nodes).
 * The devices a start takes are not free for the runs after it.
 *
 * A run that does not fit and preempts nothing waits, and it holds its pool: the runs
 * after it in its pool wait behind it, except that one that fits now may start ahead
 * of it (backfill) while it has waited less than backfill_window_ms. ddpd cannot
 * know when a run will end (a run has no time limit), so it cannot promise a
 * backfilled run ends before the waiting one could start; the window bounds how long
 * a large run can be passed over: once it has waited that long, the devices that come
 * free are kept for it. A window of 0 is strict first come first served per pool.
 *
 * Preemption: a run that does not fit, at the head of its pool, takes first the
 * devices of runs already being preempted (`stopping`: it waits for them, WAIT_PREEMPTED),
 * and when those are not enough, preempts running runs that are `preemptible` and of
 * a lower priority than its own, of its pool, and past their minimum run time
 * (`protected_until_ms`): the set that frees what it needs and throws away the least
 * work (queue_policy_lost_ms: the device-seconds since each one's newest durable
 * checkpoint, or only its checkpoint's write for a run that saves when told to stop),
 * then the fewest, then the lowest priority, then the most recently started
 * (POLICY_PREEMPT; `victims` VICTIMS_LOWEST_PRIORITY is the rule before it: the
 * fewest, the lowest priority, the most recently started, kept for measuring the two
 * on one scenario). Where only runs inside their minimum run time would free enough,
 * it waits for them (WAIT_PROTECTED, reason `priority`, naming them). The devices it
 * will take are reserved for it (the free ones and those of the runs it waits for):
 * the runs after it may start on what is left, as that cannot delay it.
 *
 * Elastic runs (a built-in or command run of this host with distributed.min_world_size
 * below its world_size: `min_devices`) are shrunk rather than stopped: by the least-lost rule, a
 * run of this host alone may take from a preemptible elastic run only the devices it
 * needs, down to the run's min_devices; the run checkpoints and starts again at once
 * on what it keeps (`preempt_to`). Any set that frees enough by shrinks alone comes
 * before every set that stops a run whole (a shrunk run goes on; a stopped one waits
 * in the queue), and among those the least work lost, the fewest, the preference;
 * where stops are needed, the rule above, then the fewest stopped whole. A shrunk run
 * grows back on devices nothing queued waits for (queue_policy_grow); an elastic run
 * that waits for devices at the head of its pool starts on fewer (queue_policy_narrow).
 *
 * Time slices (time_slice_ms > 0: serve --time-slice): a run at the head of its pool
 * that does not fit and preempts nothing by priority may take the devices of runs of
 * its own priority, of another owner, preemptible, past their minimum run time, that
 * have held their devices for a slice in their current attempt (started_ms at least
 * time_slice_ms ago): by the same least-lost rule (POLICY_PREEMPT with `time_slice`).
 * Those yield them at their next checkpoint (the notice), are queued again and wait
 * (reason `time_slice`, `yielded`) until the run that took their turn has held its
 * devices for a slice, and so on: every owner's run moves forward in turn. A run
 * never yields to a run of its own owner (an owner without a name, -1, is one
 * owner), nor to a run that is not preemptible: that one would never give the turn
 * back. */
#ifndef DDPD_SERVER_SCHED_QUEUE_POLICY_H
#define DDPD_SERVER_SCHED_QUEUE_POLICY_H

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
    bool suspect;     /* a failure there marked it (docs/failures.md): no run goes there while another place
                       * fits, and a run restarted by retry_elsewhere never */
    bool excluded;    /* it failed too many runs in the window: no run goes there until an admin clears it */
    int shunned[2];   /* per pool: its free devices that are suspect on their own (not the node): a run is
                       * given them only when no other place fits, a run restarted by retry_elsewhere never */
} policy_node;

/* Whose runs they are: a user, or nobody (runs from before users, or the server's
 * own token: name NULL). */
typedef struct {
    const char *name;
    int max_devices; /* the quota: devices its runs may hold at once, both pools; -1: none */
    double usage;    /* decayed device-seconds as of the snapshot (fair_share.h) */
} policy_owner;

/* A queued run. */
typedef struct {
    int64_t id;
    pool_kind pool;
    int world_size;
    int nodes_wanted;  /* distributed.nodes; 0: as few nodes as hold it */
    int owner;         /* index into the snapshot's owners; -1: none (no quota, no usage) */
    int priority;      /* -100 to 100, higher first */
    int64_t queued_ms; /* when it entered the queue (submitted, resumed, preempted): the older first */
    int64_t preempted_by; /* queued again after a preemption for this run (0: not; -1: by a run unknown) */
    int64_t not_before_ms; /* the server's restart waits out its backoff until then (unix ms; 0: none): it
                            * waits (WAIT_BACKOFF, reason `restart_backoff`) without holding up its pool */
    bool elsewhere;        /* restarted by retry_elsewhere: never on a suspect node or device, nor where its
                            * attempts failed (`failed_at`; it waits, reason `suspect_nodes`, while only they
                            * would hold it) */
    const char *const *failed_at; /* "NODE" or "NODE/DEVICE" (live_runs.h): read only when `elsewhere` */
    int n_failed_at;
    bool yielded;          /* queued again after it yielded its devices at a time slice's end: it waits,
                            * reason `time_slice`, where it would otherwise say `preempted` */
    bool preemptible;      /* it may be preempted once started: only such a run takes a time slice's turn */
    int min_devices;       /* elastic: the fewest devices it may start on (queue_policy_narrow); 0: not elastic */
} policy_run;

typedef struct {
    int node;    /* where (0: this host) */
    int devices; /* how many of the run's pool */
} policy_hold;

/* A started run and what it holds. */
typedef struct {
    int64_t id;
    pool_kind pool;
    int owner;          /* index into the owners; -1: none */
    int priority;
    bool preemptible;   /* it may be preempted for a run of a higher priority */
    bool stopping;      /* it is being preempted: its devices will be free */
    int64_t started_ms; /* the most recently started are preempted first among equals */
    int n_holds;
    const policy_hold *holds;
    int64_t checkpoint_ms;       /* its newest durable checkpoint (unix ms); before started_ms or 0: none this attempt */
    int64_t checkpoint_write_ms; /* how long its checkpoint takes to write, as measured; 0: not known */
    bool saves_on_notice;        /* it checkpoints at its current step when told to stop (a built-in run) */
    int64_t protected_until_ms;  /* its minimum run time (min_runtime_s) ends then: not preempted before; 0: none */
    int min_devices;             /* elastic: the fewest devices it may be shrunk to (0: not elastic) */
    int width;                   /* elastic: the devices it grows back to (its world_size); 0: not elastic */
    bool may_grow;               /* elastic: its last change of size is at least the grow interval ago */
} policy_running;

/* How victims are chosen among the runs that may be preempted. */
typedef enum {
    VICTIMS_LEAST_LOST,      /* the set that loses the fewest device-seconds; then the fewest, priority, age */
    VICTIMS_LOWEST_PRIORITY, /* the rule before: the fewest, then the lowest priority, then the newest */
} policy_victims;

typedef struct {
    const policy_node *nodes; /* nodes[0] is this host; then the agent nodes that are up */
    int n_nodes;
    bool here_across;         /* this host takes part in runs across nodes (serve --advertise) */
    const policy_run *queued; /* in any order: the policy orders them */
    int n_queued;
    const policy_running *running;
    int n_running;
    const policy_owner *owners;
    int n_owners;
    int64_t backfill_window_ms; /* a run may start ahead of a waiting one of its pool while that one has waited less */
    int64_t now_ms;             /* when the snapshot was taken */
    policy_victims victims;     /* how victims are chosen (VICTIMS_LEAST_LOST unless told) */
    int64_t time_slice_ms;      /* a run of the same priority and another owner that has held its devices this
                                 * long may be asked to yield them to a waiting run (0: never) */
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
    WAIT_BEHIND,    /* behind `behind`, a run of its pool that waits and comes first */
    WAIT_QUOTA,     /* its owner's quota: `quota_used` of it are held */
    WAIT_PREEMPTED, /* for the runs `preempt`, being preempted, to stop: their devices are its */
    WAIT_PROTECTED, /* for the runs `preempt`, of a lower priority, to pass their minimum run time */
    WAIT_BACKOFF,   /* for its restart's backoff to end (not_before_ms) */
} policy_wait;

/* Why a queued run is not running, as a code a program reads (GET /runs/{id}'s
 * `pending.reason`; docs/using.md says each). The policy gives the first seven and
 * `nodes` (and restart_backoff); the scheduler the rest (a batch system's own queue: `slurm`). */
typedef enum {
    PENDING_NONE,              /* it starts now */
    PENDING_DEVICES,           /* not enough free devices of its kind on this host (or runs being preempted for it to stop) */
    PENDING_USER_QUOTA,        /* its owner's max_devices: what the owner's runs hold, with it, would pass it */
    PENDING_FAIR_SHARE,        /* a run of an owner with less decayed usage goes first and waits for the devices */
    PENDING_PRIORITY,          /* a run of a higher priority goes first and waits for the devices */
    PENDING_BACKFILL_RESERVED, /* it would fit, but the free devices are kept for a run ahead that waited its window */
    PENDING_RESTART_BACKOFF,   /* the server's restart waits out distributed.restart_policy.backoff */
    PENDING_PREEMPTED,         /* queued again after a preemption, and waiting for devices */
    PENDING_SWEEP_PARALLEL,    /* reserved: a sweep makes no run beyond its `parallel` (the trial waits unmade) */
    PENDING_NODES,             /* not enough nodes with free devices for a run across nodes */
    PENDING_SLURM,             /* waiting in Slurm's own queue (Slurm's reason in detail) */
    PENDING_SUSPECT_NODES,     /* only nodes it may not use (suspect for a retry_elsewhere restart, excluded) would hold it */
    PENDING_TIME_SLICE,        /* queued again after it yielded its devices at its time slice's end (serve --time-slice) */
} pending_reason;

/* The code's name: "devices", "user_quota", ... */
const char *pending_reason_name(pending_reason r);

typedef struct {
    policy_verb verb;
    int64_t run;
    int order;                    /* its place in the start order, 0 first */
    int pool_order;               /* and among the queued runs of its pool */
    bool across;                  /* START, PREEMPT: as parts across nodes (each launcher told --nodes) */
    int n_nodes;                  /* START, PREEMPT, WAIT_PREEMPTED: its nodes' ids in node-rank order (0: this host) */
    int nodes[POLICY_NODES_MAX];
    bool backfill;                /* START: ahead of `behind`, which waits (backfill) */
    int n_preempt;                /* PREEMPT: the runs to stop first; WAIT_PREEMPTED, WAIT_PROTECTED: those it waits for (malloc'd) */
    int64_t *preempt;
    int *preempt_to;              /* PREEMPT: per run of `preempt`, the devices it keeps, shrunk (0: stopped whole); malloc'd */
    bool time_slice;              /* PREEMPT: runs of `preempt` of its own priority yield their time slice's end to it */
    policy_wait wait;             /* WAIT: for what */
    int64_t behind;               /* WAIT_BEHIND, and a backfilled START: the run of its pool that comes first */
    int quota_used;               /* WAIT_QUOTA: the devices its owner's runs hold */
    pending_reason reason;        /* WAIT, PREEMPT: why it is not running yet, as a code */
    int n_blocked;                /* WAIT, PREEMPT: the runs it waits behind or for (malloc'd), by id */
    int64_t *blocked_by;
    int64_t ahead;                /* WAIT: the first run of its pool that waits and comes before it (0: none) */
    int behind_at, ahead_at;      /* where `behind` and `ahead` are in the snapshot's s->queued (-1: nowhere),
                                   * so that saying why a run waits finds them without a walk of the queue */
} policy_decision;

/* One decision per queued run, in the snapshot's order of s->queued, into
 * out[0 .. n_queued); each says its place in the start order. Returns n_queued. The
 * snapshot is not changed. */
int queue_policy_decide(const policy_snapshot *s, policy_decision *out);
/* The work run r would lose if it were preempted at the snapshot's time, in device
 * milliseconds: its devices times the time since its newest durable checkpoint of this
 * attempt (else since its start), plus its checkpoint's measured write time; only the
 * write for a run that saves when told to stop. */
int64_t queue_policy_lost_ms(const policy_snapshot *s, const policy_running *r);
/* Elastic runs that grow back, from the snapshot and its decisions (d[0 .. n_queued)):
 * in a pool where no queued run waits for devices (a run held back by its owner's
 * quota does not), the free devices of this host go to the running elastic runs below
 * their width whose grow interval has passed (`may_grow`), the oldest (lowest id)
 * first, each up to its width and its owner's quota. grow_to[j] (per s->running) is
 * the devices run j starts again on, 0 where it does not grow. Returns how many grow. */
int queue_policy_grow(const policy_snapshot *s, const policy_decision *d, int *grow_to);
/* Elastic runs that start below their width, from the snapshot and its decisions
 * (d[0 .. n_queued)): the run at the head of its pool that waits for this host's
 * devices (WAIT_THIS_HOST: nothing comes before it, nothing is preempted for it), in a
 * pool where no decision starts or preempts, starts on the devices free there when
 * they are at least its min_devices, rather than waiting for its width; it grows
 * later (queue_policy_grow). start_on[i] (per s->queued) is the devices run i starts
 * on, 0 where it does not. Returns how many start. */
int queue_policy_narrow(const policy_snapshot *s, const policy_decision *d, int *start_on);
/* What the decisions own. */
void queue_policy_free(policy_decision *d, int n);

/* What a queued run waits for, for a person (malloc'd), from its decision: "2 CPU
 * slots on this host (1 free of 2)", the nodes it needs with what each has free now,
 * "alice's quota: 2 of 2 devices in use", the run it waits behind and why that one
 * comes first, the runs being preempted for it. NULL for a run that does not wait. */
char *queue_policy_waiting_for(const policy_snapshot *s, const policy_run *q, const policy_decision *d);

/* GET /runs/{id}'s pending.detail (malloc'd): what it waits for, as
 * queue_policy_waiting_for says it, after the run ahead of it and why that one comes
 * first where that is its reason (priority, fair_share). */
char *queue_policy_pending_detail(const policy_snapshot *s, const policy_run *q, const policy_decision *d);
/* The same from its queue_policy_waiting_for text, already made (taken over: freed,
 * or returned as the detail itself where nothing comes before it). */
char *queue_policy_detail_of(const policy_snapshot *s, const policy_run *q, const policy_decision *d, char *waiting);

/* Could the run ever be placed: on this host, or on nodes of the snapshot by their
 * capacity? false with why in err, naming what there is. */
bool queue_policy_can_place(const policy_snapshot *s, const policy_run *q, char *err, size_t errlen);

#endif
