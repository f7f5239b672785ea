/* Unit tests of the queue policy (server/sched/queue_policy.c) on hand-made
 * snapshots, with no process, socket or clock. Placement: first come first served per
 * pool among equals; a run of this host alone waits for this host's devices even when
 * agents have room; a run that does not fit blocks those behind it in its pool, not
 * the other pool's (with no backfill window); across nodes, the first nodes that fit
 * in order (this host first when it takes part), the fewest unless distributed.nodes
 * asks for a number; what a start takes is not free for the runs after it. Sharing:
 * priority first, then the owner's decayed usage, then age; quotas hold a run back
 * without holding its pool; backfill within the window; preemption of the set of
 * lower-priority preemptible runs that loses the least work (the time since each
 * one's newest checkpoint times its devices), then the fewest, lowest-priority, most
 * recently started (the rule before, kept as VICTIMS_LOWEST_PRIORITY), never a run
 * inside its minimum run time (its preemptor waits for it, reason priority), the
 * devices of runs already stopping taken first and reserved. The snapshot is not changed; what a
 * waiting run is told it waits for, and why a run can never be placed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "check.h"
#include "queue_policy.h"

#define CPU POOL_CPU
#define GPU POOL_GPU

/* This host with `slots` CPU slots (`cpu_free` free) and `gpus` GPUs (`gpu_free`). */
static policy_node host(int cpu_free, int slots, int gpu_free, int gpus) {
    return (policy_node){.id = 0, .name = "coord", .free = {[CPU] = cpu_free, [GPU] = gpu_free},
                         .capacity = {[CPU] = slots, [GPU] = gpus}};
}

static policy_node agent(int id, const char *name, int cpu_free, int slots) {
    return (policy_node){.id = id, .name = name, .free = {[CPU] = cpu_free}, .capacity = {[CPU] = slots}};
}

static policy_run run(int64_t id, pool_kind pool, int world_size, int nodes_wanted) {
    return (policy_run){.id = id, .pool = pool, .world_size = world_size, .nodes_wanted = nodes_wanted, .owner = -1};
}

/* A run of `owner` (an index of the snapshot's owners) with a priority, queued at `queued_ms`. */
static policy_run owned(int64_t id, int world_size, int owner, int priority, int64_t queued_ms) {
    return (policy_run){.id = id, .pool = CPU, .world_size = world_size, .owner = owner, .priority = priority,
                        .queued_ms = queued_ms};
}

static const char *verb_name(policy_verb v) {
    return v == POLICY_START ? "start" : v == POLICY_WAIT ? "wait" : "preempt";
}

/* "start 0" (this host alone), "start* 0,4" (across nodes), "wait here" (for this
 * host's devices), "wait nodes", "wait>3" (behind run 3). */
static char *describe(const policy_decision *d) {
    static char text[16][128];
    static int next;
    char *t = text[next++ % 16];
    int n = snprintf(t, 128, "%s%s", verb_name(d->verb), d->verb != POLICY_WAIT && d->across ? "*" : "");
    const char *why = d->wait == WAIT_THIS_HOST ? " here" : d->wait == WAIT_NODES ? " nodes"
                      : d->wait == WAIT_QUOTA ? " quota" : d->wait == WAIT_PREEMPTED ? " preempted"
                      : d->wait == WAIT_PROTECTED ? " protected" : "";
    if (d->verb == POLICY_WAIT && d->wait == WAIT_BEHIND)
        n += snprintf(t + n, (size_t)(128 - n), ">%lld", (long long)d->behind);
    else if (d->verb == POLICY_WAIT)
        n += snprintf(t + n, (size_t)(128 - n), "%s", why);
    if (d->verb == POLICY_START && d->backfill) n += snprintf(t + n, (size_t)(128 - n), " (before %lld)", (long long)d->behind);
    for (int i = 0; d->verb != POLICY_WAIT && i < d->n_nodes; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%d", i ? "," : " ", d->nodes[i]);
    for (int i = 0; i < d->n_preempt; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%lld", i ? "," : " -", (long long)d->preempt[i]);
    return t;
}

/* Decides and checks each decision's description, in queue order. */
static void expect(const char *what, const policy_snapshot *s, const char *const *want) {
    policy_decision d[16];
    int n = queue_policy_decide(s, d);
    CHECK(n == s->n_queued, "%s: one decision per queued run (%d of %d)", what, n, s->n_queued);
    for (int i = 0; i < n && i < s->n_queued; i++) {
        CHECK(d[i].run == s->queued[i].id, "%s: decision %d is run %lld's, in queue order (%lld)", what, i,
              (long long)s->queued[i].id, (long long)d[i].run);
        CHECK(strcmp(describe(&d[i]), want[i]) == 0, "%s: run %lld: %s, wanted %s", what, (long long)d[i].run,
              describe(&d[i]), want[i]);
    }
    queue_policy_free(d, n);
}

static void test_this_host(void) {
    policy_node nodes[] = {host(2, 2, 0, 0)};
    policy_run q[] = {run(1, CPU, 1, 0), run(2, CPU, 1, 0), run(3, CPU, 1, 0)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 3};
    expect("three 1-rank runs on 2 slots", &s, (const char *const[]){"start 0", "start 0", "wait here"});
    CHECK(nodes[0].free[CPU] == 2, "the snapshot is not changed: %d free", nodes[0].free[CPU]);
    expect("the same snapshot again", &s, (const char *const[]){"start 0", "start 0", "wait here"});

    /* one slot free: a 2-rank run at the head waits, the 1-rank run behind it waits behind it */
    nodes[0] = host(1, 2, 0, 0);
    policy_run blocked[] = {run(4, CPU, 2, 0), run(5, CPU, 1, 0), run(6, CPU, 1, 0)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = blocked, .n_queued = 3};
    expect("a big run at the head is not overtaken", &s, (const char *const[]){"wait here", "wait>4", "wait>4"});

    /* the GPU queue goes on behind a blocked CPU queue, and each pool takes its own devices */
    nodes[0] = host(1, 2, 2, 2);
    policy_run pools[] = {run(7, CPU, 2, 0), run(8, GPU, 1, 0), run(9, CPU, 1, 0), run(10, GPU, 1, 0),
                          run(11, GPU, 1, 0)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = pools, .n_queued = 5};
    expect("GPUs and CPU slots are two queues", &s,
           (const char *const[]){"wait here", "start 0", "wait>7", "start 0", "wait here"});

    /* a run that fits this host's pool waits for this host, even when an agent has room */
    policy_node with_agent[] = {host(1, 2, 0, 0), agent(4, "node-b", 2, 2)};
    policy_run here[] = {run(12, CPU, 2, 0), run(13, CPU, 2, 1)};
    s = (policy_snapshot){.nodes = with_agent, .n_nodes = 2, .here_across = true, .queued = here, .n_queued = 2};
    expect("this host's runs wait for this host", &s, (const char *const[]){"wait here", "wait>12"});
}

static void test_across_nodes(void) {
    policy_node nodes[] = {host(2, 2, 0, 0), agent(4, "node-b", 1, 2), agent(7, "node-c", 2, 4),
                           agent(9, "node-d", 2, 2)};
    policy_run q[] = {run(1, CPU, 4, 0)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 4, .here_across = true, .queued = q, .n_queued = 1};
    expect("4 ranks: this host first, then the first agent with 2 free", &s, (const char *const[]){"start* 0,7"});
    s.here_across = false;
    expect("this host without --advertise takes no part", &s, (const char *const[]){"start* 7,9"});

    /* distributed.nodes: exactly that many, even for a run this host could hold */
    nodes[0] = host(4, 4, 0, 0);
    policy_run wanted[] = {run(2, CPU, 4, 2), run(3, CPU, 3, 3)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 4, .here_across = true, .queued = wanted, .n_queued = 2};
    expect("nodes asked for: 2 nodes of 2, then 3 nodes of 1 (node-c's 2 taken by the first)", &s,
           (const char *const[]){"start* 0,7", "start* 0,4,9"});
    policy_run wanted_after[] = {run(2, CPU, 4, 2), run(3, CPU, 6, 3)};
    s.queued = wanted_after;
    expect("what a start takes is not free for the next: 3 nodes of 2 are no more", &s,
           (const char *const[]){"start* 0,7", "wait nodes"});

    /* the fewest nodes: one that holds it all comes before two */
    nodes[0] = host(1, 2, 0, 0);
    nodes[2] = agent(7, "node-c", 4, 4);
    policy_run fewest[] = {run(4, CPU, 4, 0), run(5, CPU, 3, 0)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 4, .here_across = true, .queued = fewest, .n_queued = 2};
    expect("4 ranks fit node-c alone; then 3 ranks go to 3 nodes of 1, node-c being full", &s,
           (const char *const[]){"start* 7", "start* 0,4,9"});

    /* a run across nodes that does not fit blocks the pool, this host's runs included */
    nodes[0] = host(2, 2, 0, 0);
    nodes[2] = agent(7, "node-c", 0, 4);
    policy_run block[] = {run(6, CPU, 8, 0), run(7, CPU, 1, 0)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 4, .here_across = true, .queued = block, .n_queued = 2};
    expect("a run across nodes waits, and the run behind it too", &s, (const char *const[]){"wait nodes", "wait>6"});

    /* GPUs on agents are their own pool: an agent with CPU slots only holds no GPU run */
    policy_node gpus[] = {host(0, 0, 1, 1), agent(4, "node-b", 2, 2)};
    gpus[1].free[GPU] = gpus[1].capacity[GPU] = 1;
    policy_run g[] = {run(8, GPU, 2, 0), run(9, CPU, 2, 0)};
    s = (policy_snapshot){.nodes = gpus, .n_nodes = 2, .here_across = true, .queued = g, .n_queued = 2};
    expect("2 GPUs: one here, one on node-b; 2 CPU slots: node-b", &s,
           (const char *const[]){"start* 0,4", "start* 4"});
}

/* A started run: `devices` on this host (node 0), or on `node`. */
static policy_running running_run(int64_t id, int owner, int priority, bool preemptible, int64_t started_ms,
                                  const policy_hold *holds, int n_holds) {
    return (policy_running){.id = id, .pool = CPU, .owner = owner, .priority = priority, .preemptible = preemptible,
                            .started_ms = started_ms, .holds = holds, .n_holds = n_holds};
}

static void test_priority_and_fair_share(void) {
    policy_node nodes[] = {host(1, 4, 0, 0)};
    policy_hold three[] = {{.node = 0, .devices = 3}};
    policy_owner owners[] = {{.name = "alice", .max_devices = -1, .usage = 3600}, {.name = "bob", .max_devices = -1, .usage = 10}};
    policy_running running[] = {running_run(1, 0, 0, false, 0, three, 1)};
    /* a younger run of a higher priority goes first */
    policy_run q[] = {owned(2, 2, 0, 0, 100), owned(3, 1, 1, 9, 200)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .running = running,
                         .n_running = 1, .owners = owners, .n_owners = 2, .now_ms = 1234};
    expect("priority 9 before priority 0, older or not", &s, (const char *const[]){"wait here", "start 0"});
    policy_decision d[4];
    queue_policy_decide(&s, d);
    CHECK(d[1].order == 0 && d[0].order == 1 && d[1].pool_order == 0 && d[0].pool_order == 1,
          "the start order: run 3 first (%d, %d)", d[1].order, d[0].order);
    queue_policy_free(d, 2);

    /* fair share: alice's second run and bob's first, alike but for their owners' usage */
    policy_run fair[] = {owned(4, 1, 0, 0, 100), owned(5, 1, 1, 0, 200)};
    s.queued = fair;
    expect("bob (10 device-seconds) before alice (3600), though his run is younger", &s,
           (const char *const[]){"wait here", "start 0"});
    owners[1].usage = 3600;
    expect("the same usage: the older first", &s, (const char *const[]){"start 0", "wait here"});
    owners[1].usage = 5000;
    expect("alice now has used less", &s, (const char *const[]){"start 0", "wait here"});
    /* priority comes before usage */
    fair[0].priority = 1;
    owners[0].usage = 1e9;
    expect("priority 1 before priority 0 whatever the usage", &s, (const char *const[]){"start 0", "wait here"});
    /* a run of nobody in particular counts no usage */
    policy_run nobody[] = {owned(6, 1, 1, 0, 100), owned(7, 1, -1, 0, 200)};
    s.queued = nobody;
    expect("nobody's run (no usage) before bob's", &s, (const char *const[]){"wait here", "start 0"});
}

static void test_quota(void) {
    policy_node nodes[] = {host(2, 4, 0, 0)};
    policy_hold two[] = {{.node = 0, .devices = 2}};
    policy_owner owners[] = {{.name = "alice", .max_devices = 2}, {.name = "bob", .max_devices = -1}};
    policy_running running[] = {running_run(1, 0, 0, false, 0, two, 1)};
    policy_run q[] = {owned(2, 1, 0, 0, 100), owned(3, 1, 1, 0, 200)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .running = running,
                         .n_running = 1, .owners = owners, .n_owners = 2};
    expect("alice holds her 2: her run waits, bob's behind it starts", &s, (const char *const[]){"wait quota", "start 0"});
    policy_decision d[4];
    queue_policy_decide(&s, d);
    CHECK(d[0].quota_used == 2, "2 of alice's devices in use: %d", d[0].quota_used);
    char *text = queue_policy_waiting_for(&s, &q[0], &d[0]);
    CHECK(text && strcmp(text, "alice's quota: 2 of 2 devices in use") == 0, "what alice's run waits for: %s",
          text ? text : "(null)");
    free(text);
    queue_policy_free(d, 2);

    /* the starts of one pass count against the quota */
    nodes[0] = host(4, 4, 0, 0);
    policy_run three[] = {owned(4, 1, 0, 0, 100), owned(5, 1, 0, 0, 200), owned(6, 1, 0, 0, 300)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = three, .n_queued = 3, .owners = owners,
                          .n_owners = 2};
    expect("two of alice's three start, the third waits for her quota", &s,
           (const char *const[]){"start 0", "start 0", "wait quota"});
    /* a GPU run counts too: the quota is over both pools */
    policy_hold gpu[] = {{.node = 0, .devices = 1}};
    policy_running on_gpu[] = {{.id = 9, .pool = GPU, .owner = 0, .holds = gpu, .n_holds = 1}};
    s.running = on_gpu;
    s.n_running = 1;
    expect("alice's GPU run leaves her one more", &s, (const char *const[]){"start 0", "wait quota", "wait quota"});
}

static void test_backfill(void) {
    policy_node nodes[] = {host(1, 2, 0, 0)};
    policy_run q[] = {owned(1, 2, -1, 0, 1000), owned(2, 1, -1, 0, 2000)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .backfill_window_ms = 600000,
                         .now_ms = 1000 + 599999};
    expect("within the window, the small run starts ahead of the big one", &s,
           (const char *const[]){"wait here", "start (before 1) 0"});
    s.now_ms = 1000 + 600000;
    expect("once the big one has waited the window, the slot is kept for it", &s,
           (const char *const[]){"wait here", "wait>1"});
    s.backfill_window_ms = 0;
    s.now_ms = 1000;
    expect("no window: strict first come first served", &s, (const char *const[]){"wait here", "wait>1"});
    /* a quota-held run holds nothing up */
    policy_owner owners[] = {{.name = "carol", .max_devices = 1}};
    policy_run held[] = {owned(3, 2, 0, 0, 10), owned(4, 1, -1, 0, 20)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = held, .n_queued = 2, .owners = owners,
                          .n_owners = 1};
    expect("carol's run over her quota does not hold the pool", &s, (const char *const[]){"wait quota", "start 0"});
}

static void test_preemption(void) {
    policy_node nodes[] = {host(0, 4, 0, 0)};
    policy_hold one[] = {{.node = 0, .devices = 1}}, two[] = {{.node = 0, .devices = 2}};
    policy_running running[] = {running_run(10, -1, 0, true, 100, one, 1), running_run(11, -1, -5, true, 50, one, 1),
                                running_run(12, -1, 0, true, 200, two, 1)};
    policy_run urgent = owned(20, 2, -1, 10, 0);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &urgent, .n_queued = 1, .running = running,
                         .n_running = 3};
    expect("2 slots: the fewest runs, run 12 alone", &s, (const char *const[]){"preempt 0 -12"});
    urgent.world_size = 1;
    expect("1 slot: the lowest priority, run 11", &s, (const char *const[]){"preempt 0 -11"});
    urgent.world_size = 3;
    expect("3 slots: run 12 and the lowest priority of the others", &s, (const char *const[]){"preempt 0 -11,12"});
    urgent.world_size = 1;
    urgent.priority = 0;
    expect("priority 0 preempts only what is lower: run 11", &s, (const char *const[]){"preempt 0 -11"});
    urgent.priority = -5;
    expect("priority -5 preempts nothing of -5", &s, (const char *const[]){"wait here"});
    /* among equals, the most recently started */
    running[1].priority = 0;
    urgent.priority = 5;
    expect("of runs 10 (started at 100), 11 (at 50) and 12 (at 200), one is enough: run 12", &s,
           (const char *const[]){"preempt 0 -12"});
    running[2].preemptible = false;
    expect("of runs 10 (started at 100) and 11 (at 50), run 10", &s, (const char *const[]){"preempt 0 -10"});
    /* what may not be preempted is not */
    running[0].preemptible = running[2].preemptible = false;
    urgent.world_size = 2;
    expect("only run 11 may be preempted, and 1 slot is not 2", &s, (const char *const[]){"wait here"});
    CHECK(running[0].stopping == false && nodes[0].free[CPU] == 0, "the snapshot is not changed");

    /* runs already stopping are taken first: no new preemption for the same need */
    running[0].preemptible = running[2].preemptible = true;
    running[2].stopping = true;
    policy_run two_urgent[] = {owned(21, 2, -1, 10, 0), owned(22, 2, -1, 10, 5), owned(23, 1, -1, 0, 9)};
    s.queued = two_urgent;
    s.n_queued = 3;
    expect("run 21 waits for run 12, stopping; run 22 preempts 10 and 11; run 23 waits", &s,
           (const char *const[]){"wait preempted -12", "preempt 0 -10,11", "wait here"});
    policy_decision d[4];
    queue_policy_decide(&s, d);
    CHECK(d[0].n_preempt == 1 && d[0].preempt[0] == 12, "run 21 waits for run 12 (%d)", d[0].n_preempt);
    char *text = queue_policy_waiting_for(&s, &two_urgent[0], &d[0]);
    CHECK(text && strcmp(text, "run 12, preempted for it, to stop (2 CPU slots on this host (0 free of 4))") == 0,
          "what run 21 waits for: %s", text ? text : "(null)");
    free(text);
    text = queue_policy_waiting_for(&s, &two_urgent[1], &d[1]);
    CHECK(text && strcmp(text, "runs 10 and 11, preempted for it, to stop (2 CPU slots on this host (0 free of 4))") == 0,
          "what run 22 waits for: %s", text ? text : "(null)");
    free(text);
    queue_policy_free(d, 3);

    /* what is free is taken first, and reserved: the run behind does not take it */
    nodes[0] = host(1, 4, 0, 0);
    running[2].stopping = false;
    policy_hold three[] = {{.node = 0, .devices = 3}};
    policy_running big[] = {running_run(30, -1, 0, true, 0, three, 1)};
    policy_run after[] = {owned(31, 2, -1, 10, 0), owned(32, 1, -1, 0, 1)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = after, .n_queued = 2, .running = big,
                          .n_running = 1, .backfill_window_ms = 600000};
    expect("run 31 takes the free slot and one of run 30's; run 32 gets nothing now", &s,
           (const char *const[]){"preempt 0 -30", "wait preempted"});
    policy_decision w[2];
    queue_policy_decide(&s, w);
    char *leftover = queue_policy_waiting_for(&s, &after[1], &w[1]);
    CHECK(leftover && strcmp(leftover, "runs being preempted for others to stop (1 CPU slots on this host (1 free of 4))") == 0,
          "run 32 waits for what run 31 leaves of run 30's: %s", leftover ? leftover : "(null)");
    free(leftover);
    queue_policy_free(w, 2);
}

static void test_preemption_across_nodes(void) {
    policy_node nodes[] = {host(0, 2, 0, 0), agent(4, "node-b", 0, 2)};
    policy_hold here[] = {{.node = 0, .devices = 2}}, there[] = {{.node = 4, .devices = 2}};
    policy_running running[] = {running_run(1, -1, 0, true, 100, here, 1), running_run(2, -1, 0, true, 200, there, 1)};
    policy_run q = owned(3, 4, -1, 5, 0);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 2, .here_across = true, .queued = &q, .n_queued = 1,
                         .running = running, .n_running = 2};
    expect("4 ranks on 2 nodes of 2: both runs", &s, (const char *const[]){"preempt* 0,4 -2,1"});
    q.world_size = 2;
    q.nodes_wanted = 0;
    expect("2 ranks fit this host: the run there", &s, (const char *const[]){"preempt 0 -1"});
    q.nodes_wanted = 2;
    expect("2 ranks on 2 nodes: both", &s, (const char *const[]){"preempt* 0,4 -2,1"});
}

static void check_text(const char *what, char *got, const char *want) {
    CHECK(got && strcmp(got, want) == 0, "%s:\n  %s\nwanted\n  %s", what, got ? got : "(null)", want);
    free(got);
}

/* What q waits for when it waits for devices (its decision says so). */
static char *waits_for(const policy_snapshot *s, const policy_run *q, policy_wait why) {
    policy_decision d = {.verb = POLICY_WAIT, .run = q->id, .wait = why};
    return queue_policy_waiting_for(s, q, &d);
}

static void test_waiting_for(void) {
    policy_node nodes[] = {host(1, 2, 0, 0), agent(4, "node-b", 1, 2), agent(7, "node-c", 0, 0)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 3, .here_across = true};
    policy_run here = run(1, CPU, 2, 0), across = run(2, CPU, 4, 0), two = run(3, CPU, 4, 2);
    check_text("this host", waits_for(&s, &here, WAIT_THIS_HOST), "2 CPU slots on this host (1 free of 2)");
    check_text("across nodes", waits_for(&s, &across, WAIT_NODES),
               "4 CPU slots on as few nodes as hold them, as many on each (free now: coord 1 of 2, node-b 1 of 2)");
    check_text("nodes asked for", waits_for(&s, &two, WAIT_NODES),
               "2 nodes with 2 free CPU slots each (free now: coord 1 of 2, node-b 1 of 2)");
    s.n_nodes = 1;
    s.here_across = false;
    check_text("no node at all", waits_for(&s, &across, WAIT_NODES),
               "4 CPU slots on as few nodes as hold them, as many on each (free now: no node other than this host "
               "(which has 2, and takes no part in runs across nodes: serve --advertise ADDR))");

    /* behind a run that comes first, and why it does */
    policy_owner owners[] = {{.name = "alice", .max_devices = -1, .usage = 7200}, {.name = "bob", .max_devices = -1, .usage = 60}};
    policy_run q[] = {owned(4, 2, 1, 0, 50), owned(5, 1, 0, 0, 10)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .owners = owners, .n_owners = 2,
                          .now_ms = 1000};
    policy_decision d[2];
    /* the usages shown to two significant digits: the reason stays while they move a little */
    static const struct {
        double alice, bob;
        const char *what, *shown;
    } usages[] = {{7200, 60, "behind bob's run", "60 device-seconds against 7200"},
                  {7234.6, 61.4, "usages rounded", "61 device-seconds against 7200"},
                  {7251, 61.2, "rounded again", "61 device-seconds against 7300"}};
    for (size_t u = 0; u < sizeof usages / sizeof *usages; u++) {
        owners[0].usage = usages[u].alice;
        owners[1].usage = usages[u].bob;
        queue_policy_decide(&s, d);
        char *want = xasprintf("behind run 4, bob's decayed usage is less (%s), which waits for 2 CPU slots on this "
                               "host (1 free of 2) and has waited longer than the backfill window (0 s)",
                               usages[u].shown);
        check_text(usages[u].what, queue_policy_waiting_for(&s, &q[1], &d[1]), want);
        free(want);
        queue_policy_free(d, 2);
    }
    owners[0].usage = 7200;
    owners[1].usage = 60;
    q[0].priority = 5;
    queue_policy_decide(&s, d);
    check_text("behind a run of a higher priority", queue_policy_waiting_for(&s, &q[1], &d[1]),
               "behind run 4, of a higher priority (5 over 0), which waits for 2 CPU slots on this host (1 free of 2) "
               "and has waited longer than the backfill window (0 s)");
    CHECK(queue_policy_waiting_for(&s, &q[0], &(policy_decision){.verb = POLICY_START}) == NULL,
          "a run that starts waits for nothing");
    queue_policy_free(d, 2);
}

static void test_can_place(void) {
    policy_node nodes[] = {host(0, 2, 0, 0), agent(4, "node-b", 0, 2), agent(7, "node-c", 1, 4)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 3, .here_across = true};
    char err[512] = "";
    policy_run fits_here = run(1, CPU, 2, 0), by_capacity = run(2, CPU, 4, 0), odd = run(3, CPU, 3, 2);
    policy_run too_many = run(4, CPU, 6, 3), too_big = run(5, CPU, 10, 0), four = run(6, CPU, 8, 4);
    CHECK(queue_policy_can_place(&s, &fits_here, err, sizeof err), "this host holds 2 ranks, busy or not");
    CHECK(queue_policy_can_place(&s, &by_capacity, err, sizeof err), "4 ranks: node-c could hold them alone, by "
          "its capacity (1 free now): %s", err);
    CHECK(!queue_policy_can_place(&s, &four, err, sizeof err) &&
              strcmp(err, "needs 4 nodes with 2 CPU slots each, and there are not that many (coord 0 of 2, node-b "
                          "0 of 2, node-c 1 of 4, CPU slots as free of all)") == 0,
          "4 nodes asked for, 3 there: %s", err);
    CHECK(!queue_policy_can_place(&s, &odd, err, sizeof err) &&
              strcmp(err, "distributed.nodes 2 does not divide world_size 3: every node runs as many ranks") == 0,
          "nodes must divide the world size: %s", err);
    CHECK(queue_policy_can_place(&s, &too_many, err, sizeof err), "6 ranks on 3 nodes of 2: there are three");
    CHECK(!queue_policy_can_place(&s, &too_big, err, sizeof err) &&
              strcmp(err, "needs 10 CPU slots, more than this host has (2: --slots), and no set of nodes holds it "
                          "(coord 0 of 2, node-b 0 of 2, node-c 1 of 4, CPU slots as free of all)") == 0,
          "10 ranks fit no set of nodes: %s", err);
    s.here_across = false;
    CHECK(!queue_policy_can_place(&s, &too_many, err, sizeof err), "without this host, 2 nodes are not 3: %s", err);
}

/* "devices 1,3": a decision's reason and the runs it waits behind or for. */
static char *reason_text(const policy_decision *d) {
    static char text[8][160];
    static int next;
    char *t = text[next++ % 8];
    int n = snprintf(t, 160, "%s", d->verb == POLICY_START ? "start" : pending_reason_name(d->reason));
    for (int i = 0; i < d->n_blocked; i++) n += snprintf(t + n, (size_t)(160 - n), "%s%lld", i ? "," : " ", (long long)d->blocked_by[i]);
    return t;
}

static void expect_reasons(const char *what, const policy_snapshot *s, const char *const *want) {
    policy_decision d[16];
    int n = queue_policy_decide(s, d);
    for (int i = 0; i < n; i++)
        CHECK(strcmp(reason_text(&d[i]), want[i]) == 0, "%s: run %lld: %s, wanted %s", what, (long long)d[i].run,
              reason_text(&d[i]), want[i]);
    queue_policy_free(d, n);
}

/* Each pending reason the policy gives, with the runs each waits behind or for. */
static void test_reasons(void) {
    policy_node one[] = {host(0, 1, 0, 0)};
    policy_hold slot[] = {{.node = 0, .devices = 1}};
    policy_owner owners[] = {{.name = "alice", .max_devices = 1, .usage = 3600},
                             {.name = "bob", .max_devices = -1, .usage = 10}};
    policy_running busy[] = {running_run(1, 1, 0, false, 0, slot, 1)};
    /* one slot, busy: the first waits for devices (behind run 1), the second behind it too */
    policy_run two[] = {owned(2, 1, -1, 0, 100), owned(3, 1, -1, 0, 200)};
    policy_snapshot s = {.nodes = one, .n_nodes = 1, .queued = two, .n_queued = 2, .running = busy, .n_running = 1,
                         .owners = owners, .n_owners = 2, .backfill_window_ms = 600000, .now_ms = 300};
    expect_reasons("one slot busy", &s, (const char *const[]){"devices 1", "devices 1,2"});
    /* a higher priority ahead */
    two[1].priority = 5;
    expect_reasons("priority 5 ahead", &s, (const char *const[]){"priority 1,3", "devices 1"});
    two[1].priority = 0;
    /* unequal usage: bob's run goes before alice's */
    policy_run fair[] = {owned(4, 1, 0, 0, 100), owned(5, 1, 1, 0, 200)};
    s.queued = fair;
    owners[0].max_devices = -1;
    expect_reasons("bob's usage is less", &s, (const char *const[]){"fair_share 1,5", "devices 1"});
    policy_decision fd[2];
    queue_policy_decide(&s, fd);
    check_text("fair_share's detail names the run ahead and why", queue_policy_pending_detail(&s, &fair[0], &fd[0]),
               "behind run 5, bob's decayed usage is less (10 device-seconds against 3600), which waits too; then 1 "
               "CPU slots on this host (0 free of 1)");
    check_text("the first one's detail is its waiting_for", queue_policy_pending_detail(&s, &fair[1], &fd[1]),
               "1 CPU slots on this host (0 free of 1)");
    queue_policy_free(fd, 2);
    /* alice at her quota: the run she holds blocks hers, nobody else's */
    owners[0].max_devices = 1;
    busy[0].owner = 0;
    expect_reasons("alice at quota", &s, (const char *const[]){"user_quota 1", "devices 1"});
    busy[0].owner = 1;
    owners[0].max_devices = -1;
    /* a backfill hold: two slots, one free, a 2-rank run that waited its window ahead of a 1-rank one */
    policy_node two_slots[] = {host(1, 2, 0, 0)};
    policy_run hold[] = {owned(6, 2, -1, 0, 0), owned(7, 1, -1, 0, 200)};
    s.nodes = two_slots;
    s.queued = hold;
    s.now_ms = 600000;
    expect_reasons("the free slot is kept for run 6", &s, (const char *const[]){"devices 1", "backfill_reserved 6"});
    s.now_ms = 300;
    expect_reasons("within the window the small one starts", &s, (const char *const[]){"devices 1", "start"});
    /* preempted: run 8 queued again after run 1 took its slot */
    policy_run again[] = {owned(8, 1, 1, 0, 100)};
    again[0].preempted_by = 1;
    s.nodes = one;
    s.queued = again;
    s.n_queued = 1;
    expect_reasons("queued again after a preemption", &s, (const char *const[]){"preempted 1"});
    /* the preemptor waiting for its victim to stop */
    policy_running victim[] = {running_run(9, 1, 0, true, 0, slot, 1)};
    policy_run urgent[] = {owned(10, 1, 1, 50, 100)};
    s.running = victim;
    s.queued = urgent;
    expect_reasons("it preempts run 9 and waits for it", &s, (const char *const[]){"devices 9"});
    victim[0].stopping = true;
    expect_reasons("run 9 is stopping for it", &s, (const char *const[]){"devices 9"});
    /* across nodes: nodes */
    policy_node nodes[] = {host(0, 2, 0, 0), agent(4, "node-b", 0, 2)};
    policy_hold on_b[] = {{.node = 4, .devices = 2}};
    policy_running across[] = {running_run(11, 1, 0, false, 0, on_b, 1)};
    policy_run big[] = {owned(12, 4, -1, 0, 100)};
    s = (policy_snapshot){.nodes = nodes, .n_nodes = 2, .here_across = true, .queued = big, .n_queued = 1,
                          .running = across, .n_running = 1, .owners = owners, .n_owners = 2};
    expect_reasons("4 ranks across 2 nodes, node-b busy", &s, (const char *const[]){"nodes 11"});
    CHECK(strcmp(pending_reason_name(PENDING_SLURM), "slurm") == 0 &&
              strcmp(pending_reason_name(PENDING_RESTART_BACKOFF), "restart_backoff") == 0 &&
              strcmp(pending_reason_name(PENDING_SWEEP_PARALLEL), "sweep_parallel") == 0,
          "the reasons the scheduler gives have their names");
}

/* A running run of priority 0 with `devices` here, started at `started`, its newest
 * checkpoint at `ckpt` (0: none). */
static policy_running ckpt_run(int64_t id, const policy_hold *holds, int64_t started, int64_t ckpt) {
    policy_running r = running_run(id, -1, 0, true, started, holds, 1);
    r.checkpoint_ms = ckpt;
    return r;
}

static void test_victims_least_lost(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 4, 0, 0)};
    policy_hold one[] = {{.node = 0, .devices = 1}}, two[] = {{.node = 0, .devices = 2}};
    /* run 40 checkpointed a second ago, run 41 ten minutes ago; 41 started later */
    policy_running running[] = {ckpt_run(40, two, now - 3600000, now - 1000), ckpt_run(41, two, now - 1800000, now - 600000)};
    policy_run urgent = owned(50, 2, -1, 10, 0);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &urgent, .n_queued = 1, .running = running,
                         .n_running = 2, .now_ms = now};
    CHECK(queue_policy_lost_ms(&s, &running[0]) == 2000 && queue_policy_lost_ms(&s, &running[1]) == 1200000,
          "lost work: 1 s and 600 s times 2 devices (%lld, %lld device ms)",
          (long long)queue_policy_lost_ms(&s, &running[0]), (long long)queue_policy_lost_ms(&s, &running[1]));
    expect("the run that checkpointed a second ago: run 40", &s, (const char *const[]){"preempt 0 -40"});
    s.victims = VICTIMS_LOWEST_PRIORITY;
    expect("the rule before: the most recently started, run 41", &s, (const char *const[]){"preempt 0 -41"});
    s.victims = VICTIMS_LEAST_LOST;
    /* a checkpoint before this attempt's start counts from the start */
    running[0].checkpoint_ms = 0;
    running[0].started_ms = now - 5000;
    CHECK(queue_policy_lost_ms(&s, &running[0]) == 10000, "no checkpoint: since its start (%lld)",
          (long long)queue_policy_lost_ms(&s, &running[0]));
    running[0].checkpoint_ms = now - 7000;
    CHECK(queue_policy_lost_ms(&s, &running[0]) == 10000, "a checkpoint of an earlier attempt: since its start (%lld)",
          (long long)queue_policy_lost_ms(&s, &running[0]));
    /* its checkpoint's write time counts; a run that saves when told loses only that */
    running[0].checkpoint_write_ms = 3000;
    CHECK(queue_policy_lost_ms(&s, &running[0]) == 16000, "with a 3 s write: 8 s times 2 (%lld)",
          (long long)queue_policy_lost_ms(&s, &running[0]));
    running[1].saves_on_notice = true;
    running[1].checkpoint_write_ms = 2000;
    CHECK(queue_policy_lost_ms(&s, &running[1]) == 4000, "saves on notice: its 2 s write times 2 (%lld)",
          (long long)queue_policy_lost_ms(&s, &running[1]));
    expect("run 41 saves when told: it loses 4 s, run 40 16 s", &s, (const char *const[]){"preempt 0 -41"});

    /* two runs of one slot that lose 10 s each before one of two slots that loses 15 s on each */
    policy_running sets[] = {ckpt_run(60, one, now - 100000, now - 10000), ckpt_run(61, one, now - 90000, now - 10000),
                             ckpt_run(62, two, now - 80000, now - 15000)};
    s.running = sets;
    s.n_running = 3;
    expect("runs 60 and 61 lose 20 device-seconds, run 62 alone 30", &s, (const char *const[]){"preempt 0 -61,60"});
    s.victims = VICTIMS_LOWEST_PRIORITY;
    expect("the rule before: the fewest, run 62", &s, (const char *const[]){"preempt 0 -62"});
    s.victims = VICTIMS_LEAST_LOST;
    sets[2].checkpoint_ms = now - 9000;
    expect("run 62 now loses 18: it alone", &s, (const char *const[]){"preempt 0 -62"});
    sets[2].checkpoint_ms = now - 10000;
    expect("20 against 20: the fewest, run 62", &s, (const char *const[]){"preempt 0 -62"});
    /* equal loss, equal count: the lowest priority, then the most recently started */
    urgent.world_size = 1;
    expect("runs 60 and 61 lose as much: the newer, 61", &s, (const char *const[]){"preempt 0 -61"});
    sets[0].priority = -3;
    expect("runs 60 and 61 lose as much: the lower priority, 60", &s, (const char *const[]){"preempt 0 -60"});
    sets[0].priority = 0;
    /* what is not of a lower priority, or not preemptible, is never chosen however little it loses */
    sets[1].checkpoint_ms = now - 10;
    sets[1].priority = 10;
    sets[0].preemptible = false;
    expect("run 61 is of the preemptor's priority, run 60 not preemptible: run 62", &s,
           (const char *const[]){"preempt 0 -62"});
}

/* A run inside its minimum run time is not preempted: its preemptor waits for it,
 * reason priority, naming it; another that is past its own is taken instead. */
static void test_min_runtime(void) {
    const int64_t now = 10000000;
    policy_node nodes[] = {host(0, 2, 0, 0)};
    policy_hold two[] = {{.node = 0, .devices = 2}};
    policy_running running[] = {ckpt_run(70, two, now - 5000, 0)};
    running[0].protected_until_ms = now + 40000;
    policy_run urgent = owned(71, 2, -1, 10, 0);
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = &urgent, .n_queued = 1, .running = running,
                         .n_running = 1, .now_ms = now};
    expect("run 70 is inside its minimum run time: run 71 waits", &s, (const char *const[]){"wait protected -70"});
    expect_reasons("it waits on priority, for run 70", &s, (const char *const[]){"priority 70"});
    policy_decision d[1];
    queue_policy_decide(&s, d);
    check_text("what it waits for", queue_policy_waiting_for(&s, &urgent, &d[0]),
               "run 70, of a lower priority, to pass its minimum run time (min_runtime_s): the first in 40 s (2 CPU "
               "slots on this host (0 free of 2))");
    queue_policy_free(d, 1);
    s.now_ms = now + 40000;
    expect("past it: run 70 is preempted", &s, (const char *const[]){"preempt 0 -70"});
    s.now_ms = now;
    /* a run past its minimum is taken, though it loses more */
    policy_node four[] = {host(0, 4, 0, 0)};
    policy_running both[] = {running[0], ckpt_run(72, two, now - 600000, 0)};
    s.nodes = four;
    s.running = both;
    s.n_running = 2;
    expect("run 72, past its minimum, though it loses 600 s", &s, (const char *const[]){"preempt 0 -72"});
    urgent.world_size = 4;
    expect("both needed, run 70 protected: it waits", &s, (const char *const[]){"wait protected -70"});
    expect_reasons("naming run 70 only", &s, (const char *const[]){"priority 70"});
    urgent.priority = 0;
    expect("a preemptor of the same priority waits for devices, not on run 70", &s, (const char *const[]){"wait here"});
}

int main(void) {
    test_this_host();
    test_across_nodes();
    test_priority_and_fair_share();
    test_quota();
    test_backfill();
    test_preemption();
    test_preemption_across_nodes();
    test_victims_least_lost();
    test_min_runtime();
    test_waiting_for();
    test_can_place();
    test_reasons();
    return test_done("test_queue_policy");
}
