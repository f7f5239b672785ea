/* Unit tests of the queue policy (server/core/queue_policy.c), today's rule on
 * hand-made snapshots, with no process, socket or clock: first come first served per
 * pool; a run of this host alone waits for this host's devices even when agents have
 * room; a run that does not fit blocks those behind it in its pool, not the other
 * pool's; across nodes, the first nodes that fit in order (this host first when it
 * takes part), the fewest unless distributed.nodes asks for a number; what a start
 * takes is not free for the runs after it; the running runs and the owners and
 * priorities change nothing today and nothing is preempted; the snapshot is not
 * changed; what a waiting run is told it waits for, and why a run can never be
 * placed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    return (policy_run){.id = id, .pool = pool, .world_size = world_size, .nodes_wanted = nodes_wanted};
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
    int n = snprintf(t, 128, "%s%s", verb_name(d->verb), d->verb == POLICY_START && d->across ? "*" : "");
    const char *why = d->wait == WAIT_THIS_HOST ? " here" : d->wait == WAIT_NODES ? " nodes" : "";
    if (d->verb == POLICY_WAIT && d->wait == WAIT_BEHIND)
        snprintf(t + n, (size_t)(128 - n), ">%lld", (long long)d->behind);
    else if (d->verb == POLICY_WAIT)
        snprintf(t + n, (size_t)(128 - n), "%s", why);
    for (int i = 0; d->verb == POLICY_START && i < d->n_nodes; i++)
        n += snprintf(t + n, (size_t)(128 - n), "%s%d", i ? "," : " ", d->nodes[i]);
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
        CHECK(d[i].verb != POLICY_PREEMPT && !d[i].n_preempt, "%s: today's rule preempts nothing", what);
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

static void test_running_owners_priorities(void) {
    /* Today's rule looks at none of these: the same decisions with or without them. */
    policy_node nodes[] = {host(1, 4, 0, 0)};
    policy_hold holds[] = {{.node = 0, .devices = 3}};
    policy_running running[] = {{.id = 1, .pool = CPU, .owner = "alice", .priority = 0, .n_holds = 1, .holds = holds}};
    policy_run q[] = {run(2, CPU, 2, 0), run(3, CPU, 1, 0)};
    q[1].owner = "bob";
    q[1].priority = 9;
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .running = running,
                         .n_running = 1, .now_ms = 1234};
    expect("first come first served, whoever owns it and whatever its priority", &s,
           (const char *const[]){"wait here", "wait>2"});
}

static void check_text(const char *what, char *got, const char *want) {
    CHECK(got && strcmp(got, want) == 0, "%s:\n  %s\nwanted\n  %s", what, got ? got : "(null)", want);
    free(got);
}

static void test_waiting_for(void) {
    policy_node nodes[] = {host(1, 2, 0, 0), agent(4, "node-b", 1, 2), agent(7, "node-c", 0, 0)};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 3, .here_across = true};
    policy_run here = run(1, CPU, 2, 0), across = run(2, CPU, 4, 0), two = run(3, CPU, 4, 2);
    check_text("this host", queue_policy_waiting_for(&s, &here), "2 CPU slots on this host (1 free of 2)");
    check_text("across nodes", queue_policy_waiting_for(&s, &across),
               "4 CPU slots on as few nodes as hold them, as many on each (free now: coord 1 of 2, node-b 1 of 2)");
    check_text("nodes asked for", queue_policy_waiting_for(&s, &two),
               "2 nodes with 2 free CPU slots each (free now: coord 1 of 2, node-b 1 of 2)");
    s.n_nodes = 1;
    s.here_across = false;
    check_text("no node at all", queue_policy_waiting_for(&s, &across),
               "4 CPU slots on as few nodes as hold them, as many on each (free now: no node other than this host "
               "(which has 2, and takes no part in runs across nodes: serve --advertise ADDR))");
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

int main(void) {
    test_this_host();
    test_across_nodes();
    test_running_owners_priorities();
    test_waiting_for();
    test_can_place();
    return test_done("test_queue_policy");
}
