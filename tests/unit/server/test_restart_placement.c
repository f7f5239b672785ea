/* Unit tests of what the queue policy (server/sched/queue_policy.c) does with a run
 * the server restarts, on hand-made snapshots: a restart that waits out its backoff
 * (distributed.restart_policy.backoff) waits with reason restart_backoff, holds up
 * nobody behind it, and starts once the snapshot's clock passes its end; and the
 * pending text names the backoff's end. */
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

int main(void) {
    test_backoff();
    return test_done("test_restart_placement");
}
