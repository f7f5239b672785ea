/* Unit tests of what the queue policy (server/sched/queue_policy.c) does with a run
 * the server restarts, on hand-made snapshots: a restart that waits out its backoff
 * (distributed.restart_policy.backoff) waits with reason restart_backoff, holds up
 * nobody behind it, and starts once the snapshot's clock passes its end; and the
 * pending text names the backoff's end. Suspect nodes: no run goes to one while
 * another place fits (a run of this host alone goes to an agent node when this host
 * is suspect), a run restarted by retry_elsewhere never (it waits, reason
 * suspect_nodes, naming the node, and holds nobody up), and an excluded node takes no
 * run at all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "queue_policy.h"

#define CPU POOL_CPU

static policy_node host(int cpu_free, int slots) {
    return (policy_node){.id = 0, .name = "coord", .free = {[CPU] = cpu_free}, .capacity = {[CPU] = slots}};
}

static policy_run run(int64_t id, int world_size, int64_t queued_ms) {
    return (policy_run){.id = id, .pool = CPU, .world_size = world_size, .owner = -1, .queued_ms = queued_ms};
}

static void test_backoff(void) {
    policy_node nodes[] = {host(2, 2)};
    /* run 1 restarts after a hang, its backoff until t=5000; run 2, behind it, fits */
    policy_run q[] = {run(1, 2, 100), run(2, 2, 200)};
    q[0].not_before_ms = 5000;
    policy_snapshot s = {.nodes = nodes, .n_nodes = 1, .queued = q, .n_queued = 2, .now_ms = 1000};
    policy_decision d[2];
    queue_policy_decide(&s, d);
    CHECK(d[0].verb == POLICY_WAIT && d[0].wait == WAIT_BACKOFF && d[0].reason == PENDING_RESTART_BACKOFF &&
              d[0].n_blocked == 0,
          "a restart in its backoff waits, reason %s, blocked by %d runs", pending_reason_name(d[0].reason),
          d[0].n_blocked);
    CHECK(strcmp(pending_reason_name(d[0].reason), "restart_backoff") == 0, "its code is restart_backoff");
    CHECK(d[1].verb == POLICY_START, "the run behind it starts on what it would take: it holds nothing up (%d)",
          d[1].verb);
    char *text = queue_policy_waiting_for(&s, &q[0], &d[0]);
    CHECK(text && strstr(text, "distributed.restart_policy.backoff") && strstr(text, "1970-01-01T00:00:05"),
          "what it waits for names the backoff and its end: %s", text ? text : "(none)");
    free(text);
    queue_policy_free(d, 2);

    /* its backoff over: it comes first again (its place in the queue kept) */
    s.now_ms = 5000;
    queue_policy_decide(&s, d);
    CHECK(d[0].verb == POLICY_START && d[1].verb == POLICY_WAIT,
          "past its backoff, the restart starts first and the other waits (%d, %d)", d[0].verb, d[1].verb);
    queue_policy_free(d, 2);
}

static policy_node agent(int id, const char *name, int cpu_free, int slots) {
    return (policy_node){.id = id, .name = name, .free = {[CPU] = cpu_free}, .capacity = {[CPU] = slots}};
}

/* "here", "nodes 0,4", "wait REASON" */
static const char *where(const policy_decision *d) {
    static char text[4][96];
    static int next;
    char *t = text[next++ % 4];
    if (d->verb != POLICY_START) {
        snprintf(t, 96, "wait %s", pending_reason_name(d->reason));
        return t;
    }
    if (!d->across) return "here";
    int n = snprintf(t, 96, "nodes");
    for (int i = 0; i < d->n_nodes; i++) n += snprintf(t + n, (size_t)(96 - n), "%s%d", i ? "," : " ", d->nodes[i]);
    return t;
}

static void expect_where(const char *what, policy_snapshot *s, const char *const *want) {
    policy_decision d[4];
    int n = queue_policy_decide(s, d);
    for (int i = 0; i < n; i++)
        CHECK(strcmp(where(&d[i]), want[i]) == 0, "%s: run %lld: %s, wanted %s", what, (long long)d[i].run,
              where(&d[i]), want[i]);
    queue_policy_free(d, n);
}

static void test_suspects(void) {
    /* node-a (this host, 2 slots, taking part in runs across nodes) and node-b (2) */
    policy_node two[] = {host(2, 2), agent(4, "node-b", 2, 2)};
    two[0].name = "node-a";
    policy_run wide[] = {run(1, 4, 100)};
    policy_snapshot s = {.nodes = two, .n_nodes = 2, .here_across = true, .queued = wide, .n_queued = 1};
    expect_where("both nodes", &s, (const char *const[]){"nodes 0,4"});
    two[1].suspect = true;
    expect_where("node-b suspect, but nothing else holds it", &s, (const char *const[]){"nodes 0,4"});
    wide[0].elsewhere = true;
    expect_where("restarted elsewhere: never node-b", &s, (const char *const[]){"wait suspect_nodes"});
    policy_decision d[2];
    queue_policy_decide(&s, d);
    char *text = queue_policy_waiting_for(&s, &wide[0], &d[0]);
    CHECK(text && strstr(text, "node-b (suspect)") && strstr(text, "ddpd node clear"),
          "what it waits for names node-b and how it is cleared: %s", text ? text : "(none)");
    free(text);
    queue_policy_free(d, 1);
    two[1].suspect = false;
    expect_where("cleared: both nodes again", &s, (const char *const[]){"nodes 0,4"});

    /* it holds nobody up: a run of one slot behind it starts */
    two[1].suspect = true;
    policy_run both[] = {wide[0], run(2, 1, 200)};
    s.queued = both;
    s.n_queued = 2;
    expect_where("a run that waits for a suspect node holds nobody up", &s,
                 (const char *const[]){"wait suspect_nodes", "here"});

    /* this host suspect: a run of this host alone goes to node-b, if it fits there */
    policy_node big[] = {host(4, 4), agent(4, "node-b", 2, 2)};
    policy_run small[] = {run(3, 2, 100)};
    policy_snapshot t = {.nodes = big, .n_nodes = 2, .here_across = true, .queued = small, .n_queued = 1};
    expect_where("this host first", &t, (const char *const[]){"here"});
    big[0].suspect = true;
    expect_where("this host suspect: node-b", &t, (const char *const[]){"nodes 4"});
    big[1].free[CPU] = 0;
    expect_where("this host suspect, node-b full: here after all", &t, (const char *const[]){"here"});
    big[1].free[CPU] = 2;
    big[1].suspect = true;
    expect_where("both suspect: here", &t, (const char *const[]){"here"});
    small[0].elsewhere = true;
    expect_where("both suspect, restarted elsewhere: it waits", &t, (const char *const[]){"wait suspect_nodes"});

    /* excluded: no run at all, whatever else */
    policy_node three[] = {host(1, 1), agent(4, "node-b", 1, 1), agent(5, "node-c", 1, 1)};
    policy_run pair[] = {run(6, 2, 100)};
    policy_snapshot u = {.nodes = three, .n_nodes = 3, .here_across = true, .queued = pair, .n_queued = 1};
    expect_where("three nodes: the first two", &u, (const char *const[]){"nodes 0,4"});
    three[1].excluded = true;
    expect_where("node-b excluded: this host and node-c", &u, (const char *const[]){"nodes 0,5"});
    three[2].excluded = true;
    expect_where("node-b and node-c excluded: it waits", &u, (const char *const[]){"wait suspect_nodes"});
}

/* Suspect devices (not the node) and the places a retry_elsewhere run failed on. */
static void test_devices(void) {
    /* node-a (this host, 2 slots) with one suspect slot free, node-b (2) */
    policy_node two[] = {host(2, 2), agent(4, "node-b", 2, 2)};
    two[0].name = "node-a";
    policy_run one[] = {run(1, 1, 100)};
    policy_snapshot s = {.nodes = two, .n_nodes = 2, .here_across = true, .queued = one, .n_queued = 1};
    two[0].shunned[CPU] = 1;
    expect_where("one suspect slot here: a run of 1 stays here, on the other", &s, (const char *const[]){"here"});
    policy_run pair[] = {run(2, 2, 100)};
    s.queued = pair;
    expect_where("a run of 2 goes to node-b, whose slots are clean", &s, (const char *const[]){"nodes 4"});
    two[1].free[CPU] = 0;
    expect_where("node-b full: here, the suspect slot with it", &s, (const char *const[]){"here"});
    two[1].free[CPU] = 2;
    /* restarted elsewhere after a failure on node-b's cpu:1: never that slot, nor a suspect one */
    const char *failed[] = {"node-b/cpu:1"};
    pair[0].elsewhere = true;
    pair[0].failed_at = failed;
    pair[0].n_failed_at = 1;
    expect_where("elsewhere: neither node has 2 slots it may take", &s, (const char *const[]){"wait suspect_nodes"});
    policy_decision d[2];
    queue_policy_decide(&s, d);
    char *text = queue_policy_waiting_for(&s, &pair[0], &d[0]);
    CHECK(text && strstr(text, "node-b/cpu:1 (its attempt failed there)") && strstr(text, "node-a's suspect devices"),
          "what it waits for names the slot it failed on and the suspect devices: %s", text ? text : "(none)");
    free(text);
    queue_policy_free(d, 1);
    two[0].shunned[CPU] = 0;
    expect_where("node-a cleared: there", &s, (const char *const[]){"here"});
    /* failed on node-a as a whole: node-b, which is clean */
    const char *whole[] = {"node-a"};
    pair[0].failed_at = whole;
    expect_where("failed on node-a as a whole: node-b", &s, (const char *const[]){"nodes 4"});
}

int main(void) {
    test_backoff();
    test_suspects();
    test_devices();
    return test_done("test_restart_placement");
}
