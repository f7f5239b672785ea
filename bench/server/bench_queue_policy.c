/* How long the queue policy takes to choose (server/sched/queue_policy.c), in-process:
 * 1000 queued runs of 10 users (priorities -5 to 5, 1 to 4 CPU slots each, a few
 * preemptible running runs, usage and quotas that differ), on this host and 4 agent
 * nodes, decided again and again. Prints the median and the worst of the rounds, the
 * wall time of one decide (the target: at most 1 ms), and the same with a queue of
 * runs that all fit nowhere (every run tries to preempt).
 *
 * Usage: bench_queue_policy [QUEUED] [ROUNDS]   (default 1000 and 2000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "queue_policy.h"

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int by_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void measure(const char *what, const policy_snapshot *s, int rounds) {
    policy_decision *d = malloc((size_t)s->n_queued * sizeof *d);
    double *t = malloc((size_t)rounds * sizeof *t);
    int starts = 0, preempts = 0;
    for (int r = 0; r < rounds; r++) {
        double t0 = now_us();
        queue_policy_decide(s, d);
        t[r] = now_us() - t0;
        if (r == 0)
            for (int i = 0; i < s->n_queued; i++) starts += d[i].verb == POLICY_START, preempts += d[i].verb == POLICY_PREEMPT;
        queue_policy_free(d, s->n_queued);
    }
    qsort(t, (size_t)rounds, sizeof *t, by_double);
    printf("%s: %d queued, %d running: one decide median %.0f us, p99 %.0f us, worst %.0f us (%d start, %d preempt)\n",
           what, s->n_queued, s->n_running, t[rounds / 2], t[rounds * 99 / 100], t[rounds - 1], starts, preempts);
    free(t);
    free(d);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 2000;
    srand(7);
    static const char *names[10] = {"alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi", "ivan", "judy"};
    policy_owner owners[10];
    for (int i = 0; i < 10; i++)
        owners[i] = (policy_owner){.name = names[i], .max_devices = i % 3 == 0 ? 4 : -1, .usage = 1000.0 * (i * 7 % 10)};
    policy_node nodes[5] = {{.id = 0, .name = "coord", .free = {2, 0}, .capacity = {16, 0}}};
    for (int i = 1; i < 5; i++)
        nodes[i] = (policy_node){.id = i * 3, .name = "agent", .free = {1, 0}, .capacity = {8, 0}};
    enum { RUNNING = 40 };
    policy_hold holds[RUNNING];
    policy_running running[RUNNING];
    for (int j = 0; j < RUNNING; j++) {
        holds[j] = (policy_hold){.node = j < 14 ? 0 : 3 * (1 + j % 4), .devices = 1};
        running[j] = (policy_running){.id = 100000 + j, .pool = POOL_CPU, .owner = j % 10, .priority = (j % 7) - 3,
                                      .preemptible = j % 2 == 0, .started_ms = 1000 + j, .n_holds = 1, .holds = &holds[j]};
    }
    policy_run *q = malloc((size_t)n * sizeof *q);
    for (int i = 0; i < n; i++)
        q[i] = (policy_run){.id = i + 1, .pool = POOL_CPU, .world_size = 1 + rand() % 4, .owner = i % 10,
                            .priority = rand() % 11 - 5, .queued_ms = 10000 + i};
    policy_snapshot s = {.nodes = nodes, .n_nodes = 5, .here_across = true, .queued = q, .n_queued = n,
                         .running = running, .n_running = RUNNING, .owners = owners, .n_owners = 10,
                         .backfill_window_ms = 600000, .now_ms = 20000};
    measure("a mixed queue", &s, rounds);
    /* nothing free: each run at the head of its pool looks for runs to preempt */
    for (int i = 0; i < 5; i++) nodes[i].free[POOL_CPU] = 0;
    for (int i = 0; i < n; i++) q[i].world_size = 20; /* more than any node: across nodes, or never */
    measure("nothing fits", &s, rounds / 4 ? rounds / 4 : 1);
    s.backfill_window_ms = 0;
    measure("nothing fits, no backfill", &s, rounds / 4 ? rounds / 4 : 1);
    free(q);
    return 0;
}
