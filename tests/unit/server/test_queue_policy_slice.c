/* Unit tests of the queue policy's time slices (server/sched/queue_policy.c, serve
 * --time-slice) on hand-made snapshots: a waiting run takes the devices of a run of
 * its priority and another owner once that one has held them for a slice, by the
 * least-lost rule among such runs; never for a run that is not preemptible itself
 * (it would never give the turn back); never from its own owner's run, nor before the
 * slice, nor from a run that is not preemptible or still inside its minimum run time;
 * not at all without --time-slice; priority preemption comes first; and the run that
 * yielded waits with reason `time_slice` until the taker's own slice is over, when it
 * takes its turn back. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "queue_policy.h"

#define CPU POOL_CPU
#define SLICE 60000

static policy_node host(int cpu_free, int slots) {
    return (policy_node){.id = 0, .name = "coord", .free = {[CPU] = cpu_free}, .capacity = {[CPU] = slots}};
}

static policy_run queued(int64_t id, int world_size, int owner, int64_t queued_ms) {
    return (policy_run){.id = id, .pool = CPU, .world_size = world_size, .owner = owner, .queued_ms = queued_ms,
                        .preemptible = true};
}

/* A preemptible run of priority 0 on this host that last checkpointed `ckpt_ago` ms
 * before `now` (a command run that does not save on notice: it loses that much). */
static policy_running running(int64_t id, const policy_hold *hold, int owner, int64_t started, int64_t ckpt) {
    return (policy_running){.id = id, .pool = CPU, .owner = owner, .preemptible = true, .started_ms = started,
                            .holds = hold, .n_holds = 1, .checkpoint_ms = ckpt};
}

/* "preempt 0 -7 slice", "wait here time_slice". */
static char *describe(const policy_decision *d) {
    static char text[8][128];
    static int next;
    char *t = text[next++ % 8];
    int n = snprintf(t, 128, "%s", d->verb == POLICY_START ? "start" : d->verb == POLICY_WAIT ? "wait" : "preempt");
    if (d->verb == POLICY_WAIT && d->wait == WAIT_PREEMPTED) n += snprintf(t + n, (size_t)(128 - n), " preempted");
    else if (d->verb == POLICY_WAIT && d->wait == WAIT_THIS_HOST) n += snprintf(t + n, (size_t)(128 - n), " here");
    else if (d->verb == POLICY_WAIT && d->wait == WAIT_BEHIND) n += snprintf(t + n, (size_t)(128 - n), " behind");
    for (int i = 0; d->verb != POLICY_WAIT && i < d->n_nodes; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%d", i ? "," : " ", d->nodes[i]);
    for (int i = 0; i < d->n_preempt; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%lld", i ? "," : " -", (long long)d->preempt[i]);
    if (d->verb == POLICY_PREEMPT && d->time_slice) n += snprintf(t + n, (size_t)(128 - n), " slice");
    if (d->verb == POLICY_WAIT) snprintf(t + n, (size_t)(128 - n), " %s", pending_reason_name(d->reason));
    return t;
}

static void expect(const char *what, const policy_snapshot *s, const char *const *want) {
    policy_decision d[8];
    int n = queue_policy_decide(s, d);
    for (int i = 0; i < n && i < s->n_queued; i++)
        CHECK(strcmp(describe(&d[i]), want[i]) == 0, "%s: run %lld: %s, wanted %s", what, (long long)d[i].run,
              describe(&d[i]), want[i]);
    queue_policy_free(d, n);
}

/* One slot: alice's run 10 holds it, bob's run 20 waits. */
static void test_one_slot(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 1)};
    policy_owner owners[] = {{.name = "alice", .max_devices = -1}, {.name = "bob", .max_devices = -1}};
    policy_hold one[] = {{.node = 0, .devices = 1}};
    policy_running r[] = {running(10, one, 0, now - SLICE, now - 1000)};
    policy_run q = queued(20, 1, 1, now - 5000);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &q, .n_queued = 1, .running = r, .n_running = 1,
                         .owners = owners, .n_owners = 2, .now_ms = now, .time_slice_ms = SLICE};
    expect("alice's run held the slot a slice: it yields to bob's", &s, (const char *const[]){"preempt 0 -10 slice"});
    s.time_slice_ms = 0;
    expect("no --time-slice: bob's run waits", &s, (const char *const[]){"wait here devices"});
    s.time_slice_ms = SLICE;
    r[0].started_ms = now - SLICE + 1;
    expect("1 ms short of its slice: it keeps the slot", &s, (const char *const[]){"wait here devices"});
    r[0].started_ms = now - SLICE;
    q.owner = 0;
    expect("alice's own waiting run takes no turn from her", &s, (const char *const[]){"wait here devices"});
    q.owner = 1;
    q.preemptible = false; /* mallory's way to keep a slot: a run that would never give the turn back */
    expect("bob's run that is not preemptible takes no turn", &s, (const char *const[]){"wait here devices"});
    q.preemptible = true;
    q.owner = r[0].owner = -1;
    expect("runs of nobody in particular: one owner, no turns", &s, (const char *const[]){"wait here devices"});
    q.owner = 1;
    r[0].owner = 0;
    r[0].preemptible = false;
    expect("not preemptible: it keeps the slot", &s, (const char *const[]){"wait here devices"});
    r[0].preemptible = true;
    r[0].protected_until_ms = now + 1000;
    expect("inside its minimum run time: it keeps the slot", &s, (const char *const[]){"wait here devices"});
    r[0].protected_until_ms = 0;
    r[0].priority = 5;
    expect("of a higher priority: no slice for a lower one", &s, (const char *const[]){"wait here devices"});
    r[0].priority = -5;
    expect("of a lower priority: preempted by priority, not a slice", &s, (const char *const[]){"preempt 0 -10"});
    r[0].priority = 0;
    r[0].stopping = true;
    expect("already yielding: bob's run waits for it", &s, (const char *const[]){"wait preempted -10 devices"});
}

/* The turn goes back: run 10 yielded (queued again, `yielded`); run 20 took the slot. */
static void test_turns(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 1)};
    policy_owner owners[] = {{.name = "alice", .max_devices = -1}, {.name = "bob", .max_devices = -1}};
    policy_hold one[] = {{.node = 0, .devices = 1}};
    policy_running r[] = {running(20, one, 1, now - 1000, 0)};
    policy_run q = queued(10, 1, 0, now - 1000);
    q.preempted_by = 20;
    q.yielded = true;
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &q, .n_queued = 1, .running = r, .n_running = 1,
                         .owners = owners, .n_owners = 2, .now_ms = now, .time_slice_ms = SLICE};
    expect("the run that yielded waits, reason time_slice", &s, (const char *const[]){"wait here time_slice"});
    q.yielded = false;
    expect("one preempted by priority says preempted", &s, (const char *const[]){"wait here preempted"});
    q.yielded = true;
    s.now_ms = now - 1000 + SLICE;
    expect("the taker's slice is over: the turn goes back", &s, (const char *const[]){"preempt 0 -20 slice"});
}

/* Among the runs whose slice is over, the one that loses least yields; a run of the
 * same owner as the waiting one is never taken, even where it would lose less. */
static void test_least_lost(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 3)};
    policy_owner owners[] = {{.name = "alice", .max_devices = -1}, {.name = "bob", .max_devices = -1},
                             {.name = "carol", .max_devices = -1}};
    policy_hold one[] = {{.node = 0, .devices = 1}};
    policy_running r[] = {running(10, one, 0, now - 3 * SLICE, now - 50000), running(11, one, 2, now - 2 * SLICE, now - 1000),
                          running(12, one, 1, now - 2 * SLICE, now - 10)};
    policy_run q = queued(20, 1, 1, now - 5000);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &q, .n_queued = 1, .running = r, .n_running = 3,
                         .owners = owners, .n_owners = 3, .now_ms = now, .time_slice_ms = SLICE};
    expect("carol's run 11 loses 1 s, alice's 50 s; bob's own 12 is not taken", &s,
           (const char *const[]){"preempt 0 -11 slice"});
    r[1].started_ms = now - 1000;
    expect("run 11 inside its slice: alice's run 10 yields", &s, (const char *const[]){"preempt 0 -10 slice"});
    r[0].started_ms = now - 1000;
    expect("no other owner's slice is over: bob's run waits", &s, (const char *const[]){"wait here devices"});
    /* a lower-priority run goes first by priority, whatever it would lose */
    r[0].started_ms = r[1].started_ms = now - 2 * SLICE;
    r[0].priority = -1;
    expect("alice's lower-priority run 10 is preempted by priority, not carol's by slice", &s,
           (const char *const[]){"preempt 0 -10"});
    r[0].priority = 0;
    /* two queued runs: the first takes a turn, the second waits behind it */
    policy_run two[] = {queued(20, 1, 1, now - 5000), queued(21, 1, 2, now - 4000)};
    s.queued = two;
    s.n_queued = 2;
    expect("bob's run takes carol's turn (least lost); carol's queued run takes bob's 12 (less lost than alice's)", &s,
           (const char *const[]){"preempt 0 -11 slice", "preempt 0 -12 slice"});
}

int main(void) {
    test_one_slot();
    test_turns();
    test_least_lost();
    return test_done("test_queue_policy_slice");
}
