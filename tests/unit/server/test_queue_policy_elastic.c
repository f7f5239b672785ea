/* Unit tests of the queue policy's elastic runs (server/sched/queue_policy.c) on
 * hand-made snapshots: a preemptor takes from an elastic run only the devices it needs
 * (shrunk to what it keeps, never below its min_devices) rather than stopping a run
 * whole; a set of shrinks alone comes before any set with a stop, even one that loses
 * less; a stop is still made where shrinks cannot free enough, with as few whole as
 * can be; a non-elastic run is stopped whole as before; a shrinking run's freed
 * devices are its preemptor's to wait for. And the grow back (queue_policy_grow): only
 * on idle devices nothing queued waits for, the oldest first, up to its width, its
 * owner's quota and its interval. And the start below width (queue_policy_narrow): the
 * elastic run at the head of its pool that waits for devices starts on those free, at
 * least its min_devices; not one behind another, nor one a decision preempts for. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "queue_policy.h"

#define CPU POOL_CPU

static policy_node host(int cpu_free, int slots) {
    return (policy_node){.id = 0, .name = "coord", .free = {[CPU] = cpu_free}, .capacity = {[CPU] = slots}};
}

static policy_run urgent_run(int64_t id, int world_size, int priority) {
    return (policy_run){.id = id, .pool = CPU, .world_size = world_size, .owner = -1, .priority = priority};
}

/* A preemptible built-in run of priority 0 on this host (it saves when told: it loses
 * its checkpoint's write, 1 s); elastic down to `min` when min > 0. */
static policy_running built_in(int64_t id, const policy_hold *hold, int min, int64_t started) {
    return (policy_running){.id = id, .pool = CPU, .owner = -1, .preemptible = true, .started_ms = started,
                            .holds = hold, .n_holds = 1, .saves_on_notice = true, .checkpoint_write_ms = 1000,
                            .min_devices = min, .width = min > 0 ? hold->devices : 0};
}

/* "preempt 0 -7>2,8" : run 7 shrunk to keep 2, run 8 stopped whole; "wait preempted -7". */
static char *describe(const policy_decision *d) {
    static char text[8][128];
    static int next;
    char *t = text[next++ % 8];
    int n = snprintf(t, 128, "%s", d->verb == POLICY_START ? "start" : d->verb == POLICY_WAIT ? "wait" : "preempt");
    if (d->verb == POLICY_WAIT && d->wait == WAIT_PREEMPTED) n += snprintf(t + n, (size_t)(128 - n), " preempted");
    else if (d->verb == POLICY_WAIT && d->wait == WAIT_THIS_HOST) n += snprintf(t + n, (size_t)(128 - n), " here");
    else if (d->verb == POLICY_WAIT && d->wait == WAIT_PROTECTED) n += snprintf(t + n, (size_t)(128 - n), " protected");
    for (int i = 0; d->verb != POLICY_WAIT && i < d->n_nodes; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%d", i ? "," : " ", d->nodes[i]);
    for (int i = 0; i < d->n_preempt; i++) {
        n += snprintf(t + n, (size_t)(128 - n), "%s%lld", i ? "," : " -", (long long)d->preempt[i]);
        if (d->preempt_to && d->preempt_to[i] > 0) n += snprintf(t + n, (size_t)(128 - n), ">%d", d->preempt_to[i]);
    }
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

static void test_shrink(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 4)};
    policy_hold four[] = {{.node = 0, .devices = 4}};
    policy_running running[] = {built_in(10, four, 2, now - 60000)};
    policy_run urgent = urgent_run(20, 2, 10);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &urgent, .n_queued = 1, .running = running,
                         .n_running = 1, .now_ms = now};
    expect("width 4, min 2; a 2-slot run: run 10 shrunk to 2", &s, (const char *const[]){"preempt 0 -10>2"});
    urgent.world_size = 1;
    expect("a 1-slot run takes 1: run 10 keeps 3", &s, (const char *const[]){"preempt 0 -10>3"});
    urgent.world_size = 3;
    expect("3 slots: more than its floor frees: run 10 stopped whole", &s, (const char *const[]){"preempt 0 -10"});
    running[0].min_devices = 1;
    expect("min 1: shrunk to 1", &s, (const char *const[]){"preempt 0 -10>1"});
    running[0].min_devices = 2;
    urgent.world_size = 2;
    /* the conditions of any preemption hold a shrink too */
    urgent.priority = 0;
    expect("a preemptor of the same priority shrinks nothing", &s, (const char *const[]){"wait here"});
    urgent.priority = 10;
    running[0].preemptible = false;
    expect("not preemptible: not shrunk", &s, (const char *const[]){"wait here"});
    running[0].preemptible = true;
    running[0].protected_until_ms = now + 5000;
    expect("inside its minimum run time: its preemptor waits", &s, (const char *const[]){"wait protected -10"});
    running[0].protected_until_ms = 0;

    /* a shrink comes before a stop, even a stop that loses less: an elastic run of 4
     * (min 2) against a plain 2-slot run that loses nothing but its write too */
    policy_node six[] = {host(0, 6)};
    policy_hold two[] = {{.node = 0, .devices = 2}};
    policy_running pair[] = {built_in(10, four, 2, now - 60000), built_in(11, two, 0, now - 30000)};
    pair[1].checkpoint_write_ms = 10; /* run 11 loses less */
    s.nodes = six;
    s.running = pair;
    s.n_running = 2;
    expect("run 11 loses less, but a shrink of run 10 stops nothing", &s, (const char *const[]){"preempt 0 -10>2"});
    pair[0].min_devices = 0; /* the same run not elastic */
    pair[0].width = 0;
    expect("not elastic: the least lost, run 11 stopped whole", &s, (const char *const[]){"preempt 0 -11"});
    pair[0].min_devices = 2;
    pair[0].width = 4;
    /* 4 needed: run 10's shrink (2) and run 11 stopped (2), rather than run 10 whole */
    urgent.world_size = 4;
    expect("4 slots: run 10 shrunk by 2 and run 11 stopped; 2 stops against 1 lose more: run 10 whole", &s,
           (const char *const[]){"preempt 0 -10"});
    pair[0].checkpoint_write_ms = 10000; /* now stopping run 10 whole loses 40 s, the pair 40.02 */
    pair[1].checkpoint_write_ms = 10;
    expect("run 10 whole loses 40 s, shrunk with run 11 stopped 40.02: still run 10 whole (fewer)", &s,
           (const char *const[]){"preempt 0 -10"});

    /* two elastic runs: the shrinks that lose least; the first in preference takes most */
    policy_running two_elastic[] = {built_in(10, four, 2, now - 60000), built_in(12, four, 1, now - 50000)};
    policy_node eight[] = {host(0, 8)};
    s.nodes = eight;
    s.running = two_elastic;
    urgent.world_size = 3;
    expect("3 slots: run 12 (min 1) gives 3 alone", &s, (const char *const[]){"preempt 0 -12>1"});
    urgent.world_size = 5;
    expect("5 slots: both shrunk, run 12 to 1 and run 10 to 2", &s, (const char *const[]){"preempt 0 -12>1,10>2"});
}

/* A run being shrunk shows as what it keeps (not preemptible) and, stopping, what it
 * gives up: the preemptor waits for those; another queued run does not take them. */
static void test_shrinking(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 4)};
    policy_hold keeps[] = {{.node = 0, .devices = 2}}, gives[] = {{.node = 0, .devices = 2}};
    policy_running running[] = {built_in(10, keeps, 0, now - 60000), built_in(10, gives, 0, now - 60000)};
    running[0].preemptible = false;
    running[1].stopping = true;
    policy_run q[] = {urgent_run(20, 2, 10), urgent_run(21, 2, 5)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .running = running,
                         .n_running = 2, .now_ms = now};
    expect("run 20 waits for run 10's 2; run 21 neither shrinks nor takes them", &s,
           (const char *const[]){"wait preempted -10", "wait here"});
}

static void test_grow(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(2, 4)};
    policy_hold two[] = {{.node = 0, .devices = 2}}, one[] = {{.node = 0, .devices = 1}};
    policy_running running[] = {built_in(10, two, 2, now - 60000)};
    running[0].width = 4;
    running[0].may_grow = true;
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .running = running, .n_running = 1, .now_ms = now};
    int grow_to[4];
    policy_decision d[4] = {0};
    CHECK(queue_policy_grow(&s, d, grow_to) == 1 && grow_to[0] == 4, "2 idle slots, nothing queued: run 10 back to 4 "
          "(%d)", grow_to[0]);
    running[0].may_grow = false;
    CHECK(queue_policy_grow(&s, d, grow_to) == 0 && grow_to[0] == 0, "inside its grow interval: it stays at 2");
    running[0].may_grow = true;
    nodes[0].free[CPU] = 1;
    CHECK(queue_policy_grow(&s, d, grow_to) == 1 && grow_to[0] == 3, "1 idle slot: to 3 (%d)", grow_to[0]);
    nodes[0].free[CPU] = 2;
    /* a queued run that waits for devices keeps them idle for it */
    policy_run waiting = urgent_run(30, 3, 0);
    s.queued = &waiting;
    s.n_queued = 1;
    int n = queue_policy_decide(&s, d);
    CHECK(d[0].verb == POLICY_WAIT, "the 3-slot run waits");
    CHECK(queue_policy_grow(&s, d, grow_to) == 0 && grow_to[0] == 0, "a run waits for devices: no grow");
    queue_policy_free(d, n);
    /* one held back by its owner's quota does not */
    policy_owner owners[] = {{.name = "alice", .max_devices = 0}};
    s.owners = owners;
    s.n_owners = 1;
    waiting.owner = 0;
    n = queue_policy_decide(&s, d);
    CHECK(d[0].wait == WAIT_QUOTA, "alice's run waits for her quota");
    CHECK(queue_policy_grow(&s, d, grow_to) == 1 && grow_to[0] == 4, "a run held by its quota: run 10 grows (%d)",
          grow_to[0]);
    queue_policy_free(d, n);
    s.n_queued = 0;
    /* the grower's own quota bounds it */
    owners[0].max_devices = 3;
    running[0].owner = 0;
    CHECK(queue_policy_grow(&s, d, grow_to) == 1 && grow_to[0] == 3, "alice may hold 3: to 3 (%d)", grow_to[0]);
    running[0].owner = -1;
    /* the oldest first */
    policy_running pair[] = {built_in(11, one, 1, now - 50000), built_in(10, two, 2, now - 60000)};
    pair[0].width = pair[1].width = 4;
    pair[0].may_grow = pair[1].may_grow = true;
    s.running = pair;
    s.n_running = 2;
    CHECK(queue_policy_grow(&s, d, grow_to) == 1 && grow_to[1] == 4 && grow_to[0] == 0,
          "2 idle: run 10, the older, takes both (%d, %d)", grow_to[1], grow_to[0]);
    nodes[0].free[CPU] = 3;
    CHECK(queue_policy_grow(&s, d, grow_to) == 2 && grow_to[1] == 4 && grow_to[0] == 2,
          "3 idle: run 10 to 4, run 11 to 2 (%d, %d)", grow_to[1], grow_to[0]);
    /* not elastic, or being stopped: never */
    pair[1].width = 0;
    pair[0].stopping = true;
    CHECK(queue_policy_grow(&s, d, grow_to) == 0, "not elastic, or stopping: nothing grows");
}

/* Decides, then narrows: "start_on[0],start_on[1]" into out. */
static int narrow(const policy_snapshot *s, int *start_on) {
    policy_decision d[4];
    int n = queue_policy_decide(s, d);
    int started = queue_policy_narrow(s, d, start_on);
    queue_policy_free(d, n);
    return started;
}

static void test_narrow(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(2, 4)};
    policy_hold two[] = {{.node = 0, .devices = 2}};
    policy_running running[] = {built_in(10, two, 0, now - 60000)};
    running[0].preemptible = false;
    policy_run q[] = {urgent_run(20, 4, 0), urgent_run(21, 2, 0)};
    q[0].min_devices = 2;
    q[0].queued_ms = now - 2000;
    q[1].queued_ms = now - 1000;
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 1, .running = running,
                         .n_running = 1, .now_ms = now};
    int start_on[4] = {0};
    CHECK(narrow(&s, start_on) == 1 && start_on[0] == 2, "width 4, min 2, 2 free: it starts on 2 (%d)", start_on[0]);
    q[0].min_devices = 3;
    CHECK(narrow(&s, start_on) == 0 && start_on[0] == 0, "min 3, 2 free: it waits (%d)", start_on[0]);
    q[0].min_devices = 0;
    CHECK(narrow(&s, start_on) == 0 && start_on[0] == 0, "not elastic: it waits");
    q[0].min_devices = 1;
    nodes[0].free[CPU] = 0;
    CHECK(narrow(&s, start_on) == 0, "nothing free: it waits");
    nodes[0].free[CPU] = 3;
    CHECK(narrow(&s, start_on) == 1 && start_on[0] == 3, "3 free: on 3 (%d)", start_on[0]);
    /* a run behind it in its pool does not start narrow, and takes nothing from it */
    nodes[0].free[CPU] = 1;
    q[1].min_devices = 1;
    s.n_queued = 2;
    CHECK(narrow(&s, start_on) == 1 && start_on[0] == 1 && start_on[1] == 0,
          "the head (min 1) starts on the 1 free; the run behind it waits (%d, %d)", start_on[0], start_on[1]);
    q[0].min_devices = 2;
    CHECK(narrow(&s, start_on) == 0 && start_on[1] == 0, "the head cannot start on 1: the one behind neither (%d)",
          start_on[1]);
    /* a run that preempts for its width does so rather than start narrow */
    s.n_queued = 1;
    nodes[0].free[CPU] = 2;
    CHECK(narrow(&s, start_on) == 1 && start_on[0] == 2, "2 free: on 2 (%d)", start_on[0]);
    q[0].priority = 10;
    running[0].preemptible = true;
    CHECK(narrow(&s, start_on) == 0, "a preemptor of a higher priority takes its width");
    /* a run across nodes never */
    q[0].priority = 0;
    q[0].nodes_wanted = 2;
    CHECK(narrow(&s, start_on) == 0, "distributed.nodes 2: it waits");
}

int main(void) {
    test_shrink();
    test_shrinking();
    test_grow();
    test_narrow();
    return test_done("test_queue_policy_elastic");
}
