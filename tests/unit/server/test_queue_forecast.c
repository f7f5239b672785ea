/* Unit tests of the start estimate (server/sched/queue_forecast.c) on hand-made
 * snapshots: one slot and a queue of runs of known lengths start one after another;
 * two slots take two at a time; a run with no expected end leaves the runs that wait
 * on it with none, naming it; a run of unknown length started in the walk does the
 * same to those after it; a higher priority comes first in the walk as it does in the
 * policy; runs being preempted end at once; a quota holds a run until its owner's
 * runs end; the runs past FORECAST_RUNS_MAX are said to be beyond; an elastic run
 * shrunk in the walk goes on with what it keeps. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "queue_forecast.h"

static policy_node host(int cpu_free, int slots) {
    return (policy_node){.id = 0, .name = "coord", .free = {[POOL_CPU] = cpu_free}, .capacity = {[POOL_CPU] = slots}};
}

static policy_run queued(int64_t id, int world_size, int owner, int priority, int64_t queued_ms) {
    return (policy_run){.id = id, .pool = POOL_CPU, .world_size = world_size, .owner = owner, .priority = priority,
                        .queued_ms = queued_ms};
}

static policy_running running(int64_t id, int owner, const policy_hold *holds) {
    return (policy_running){.id = id, .pool = POOL_CPU, .owner = owner, .holds = holds, .n_holds = 1};
}

static void expect_starts(const char *what, const policy_snapshot *s, const int64_t *ends, const int64_t *lens,
                          const int64_t *want_start, const int64_t *want_basis) {
    forecast f[128];
    queue_forecast(s, ends, lens, f);
    for (int i = 0; i < s->n_queued; i++)
        CHECK(f[i].start_ms == want_start[i] && f[i].basis_run == want_basis[i],
              "%s: run %lld starts at %lld (basis %lld), wanted %lld (basis %lld)", what, (long long)s->queued[i].id,
              (long long)f[i].start_ms, (long long)f[i].basis_run, (long long)want_start[i], (long long)want_basis[i]);
}

static void test_one_slot(void) {
    policy_node one[] = {host(0, 1)};
    policy_hold slot[] = {{.node = 0, .devices = 1}};
    policy_running busy[] = {running(1, -1, slot)};
    policy_run q[] = {queued(2, 1, -1, 0, 10), queued(3, 1, -1, 0, 20), queued(4, 1, -1, 0, 30)};
    policy_snapshot s = {.nodes = one, .n_nodes = 1, .queued = q, .n_queued = 3, .running = busy, .n_running = 1,
                         .now_ms = 1000};
    int64_t ends[] = {5000}, lens[] = {2000, 3000, 1000};
    expect_starts("one slot, in order", &s, ends, lens, (int64_t[]){5000, 7000, 10000}, (int64_t[]){0, 0, 0});
    /* run 1 has no expected end: nobody gets an estimate, and each names run 1 */
    ends[0] = -1;
    expect_starts("run 1 with no end", &s, ends, lens, (int64_t[]){-1, -1, -1}, (int64_t[]){1, 1, 1});
    /* run 3's length is not known: run 4 after it gets none, naming run 3 */
    ends[0] = 5000;
    lens[1] = -1;
    expect_starts("run 3 of unknown length", &s, ends, lens, (int64_t[]){5000, 7000, -1}, (int64_t[]){0, 0, 3});
    lens[1] = 3000;
    /* a higher priority goes first in the walk */
    q[2].priority = 9;
    expect_starts("run 4 of priority 9 first", &s, ends, lens, (int64_t[]){6000, 8000, 5000}, (int64_t[]){0, 0, 0});
    q[2].priority = 0;
    /* an end already past: it ends now */
    ends[0] = 500;
    expect_starts("run 1 overdue", &s, ends, lens, (int64_t[]){1000, 3000, 6000}, (int64_t[]){0, 0, 0});
    /* a run being preempted ends at once */
    ends[0] = -1;
    busy[0].stopping = true;
    expect_starts("run 1 stopping", &s, ends, lens, (int64_t[]){1000, 3000, 6000}, (int64_t[]){0, 0, 0});
    CHECK(s.nodes[0].free[POOL_CPU] == 0 && s.n_queued == 3 && s.now_ms == 1000, "the snapshot is not changed");
}

static void test_two_slots(void) {
    policy_node two[] = {host(0, 2)};
    policy_hold slot[] = {{.node = 0, .devices = 1}};
    policy_running busy[] = {running(1, -1, slot), running(2, -1, slot)};
    policy_run q[] = {queued(3, 1, -1, 0, 10), queued(4, 1, -1, 0, 20), queued(5, 2, -1, 0, 30),
                      queued(6, 1, -1, 0, 40)};
    policy_snapshot s = {.nodes = two, .n_nodes = 1, .queued = q, .n_queued = 4, .running = busy, .n_running = 2,
                         .now_ms = 0};
    int64_t ends[] = {1000, 4000}, lens[] = {2000, 2000, 1000, 500};
    /* 3 at 1000 (run 1's slot) to 3000; 4 at 3000 to 5000; run 2 ends 4000; 5 (both) at 5000; 6 after it at 6000 */
    expect_starts("two slots, a 2-rank run holds the pool", &s, ends, lens, (int64_t[]){1000, 3000, 5000, 6000},
                  (int64_t[]){0, 0, 0, 0});
    /* with a backfill window, run 6 (1 rank) goes ahead of run 5 into a free slot */
    s.backfill_window_ms = 1000000;
    expect_starts("backfill within the window", &s, ends, lens, (int64_t[]){1000, 3000, 5000, 4000},
                  (int64_t[]){0, 0, 0, 0});
}

static void test_quota(void) {
    policy_node two[] = {host(1, 2)};
    policy_hold slot[] = {{.node = 0, .devices = 1}};
    policy_owner owners[] = {{.name = "alice", .max_devices = 1}};
    policy_running busy[] = {running(1, 0, slot)};
    policy_run q[] = {queued(2, 1, 0, 0, 10)};
    policy_snapshot s = {.nodes = two, .n_nodes = 1, .queued = q, .n_queued = 1, .running = busy, .n_running = 1,
                         .owners = owners, .n_owners = 1, .now_ms = 0};
    int64_t ends[] = {3000}, lens[] = {1000};
    expect_starts("alice's run waits for her other run's end, a slot free or not", &s, ends, lens, (int64_t[]){3000},
                  (int64_t[]){0});
}

static void test_beyond(void) {
    enum { N = FORECAST_RUNS_MAX + 3 };
    policy_node one[] = {host(1, 1)};
    policy_run q[N];
    int64_t lens[N];
    for (int i = 0; i < N; i++) {
        q[i] = queued(i + 1, 1, -1, 0, i);
        lens[i] = 100;
    }
    policy_snapshot s = {.nodes = one, .n_nodes = 1, .queued = q, .n_queued = N, .now_ms = 0};
    forecast f[N];
    queue_forecast(&s, NULL, lens, f);
    CHECK(f[0].start_ms == 0 && f[FORECAST_RUNS_MAX - 1].start_ms == 100 * (FORECAST_RUNS_MAX - 1),
          "the first %d in order are walked (%lld, %lld)", FORECAST_RUNS_MAX, (long long)f[0].start_ms,
          (long long)f[FORECAST_RUNS_MAX - 1].start_ms);
    CHECK(f[N - 1].start_ms == -1 && f[N - 1].beyond && !f[0].beyond, "the rest are beyond");
}

/* An elastic run of 4 (at least 2) is shrunk for a run of a higher priority and goes
 * on with 2: the run of its own priority behind waits for the urgent one's end. */
static void test_elastic_shrunk(void) {
    policy_node four[] = {host(0, 4)};
    policy_hold all[] = {{.node = 0, .devices = 4}};
    policy_running elastic[] = {running(1, -1, all)};
    elastic[0].preemptible = true;
    elastic[0].saves_on_notice = true;
    elastic[0].min_devices = 2;
    elastic[0].width = 4;
    policy_run q[] = {queued(2, 2, -1, 10, 10), queued(3, 2, -1, 0, 20)};
    policy_snapshot s = {.nodes = four, .n_nodes = 1, .queued = q, .n_queued = 2, .running = elastic, .n_running = 1,
                         .now_ms = 1000};
    int64_t ends[] = {50000}, lens[] = {1000, 1000};
    expect_starts("run 1 shrunk for run 2: run 3 after run 2", &s, ends, lens, (int64_t[]){1000, 2000},
                  (int64_t[]){0, 0});
}

int main(void) {
    test_one_slot();
    test_two_slots();
    test_quota();
    test_beyond();
    test_elastic_shrunk();
    return test_done("test_queue_forecast");
}
