/* The work a preemption throws away under the two rules for choosing victims
 * (queue_policy.h): the rule before (the fewest, the lowest priority, the most recently
 * started) and the least lost work, on the same scenario in one run. The scenario: a
 * box of 8 CPU slots full of preemptible runs of priority 0 (1 or 2 slots each,
 * started up to 4 hours ago, each checkpointing every 1, 5, 15 or 30 minutes or never;
 * one in five a built-in run that checkpoints when told to stop, in 5 s), and a run of
 * priority 10 that needs 2 or 3 slots; 10000 such snapshots from a fixed seed. Each is
 * decided both ways, and the victims' lost device-seconds (queue_policy_lost_ms) summed.
 *
 * Usage: bench_victims [SNAPSHOTS] [SEED] */
#include <stdio.h>
#include <stdlib.h>

#include "queue_policy.h"

#define SLOTS 8

static uint64_t rng_state;
static uint32_t rnd(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (uint32_t)((rng_state * 2685821657736338717ull) >> 32);
}

static int64_t lost_of(const policy_snapshot *s, const policy_decision *d) {
    int64_t sum = 0;
    for (int i = 0; d->verb == POLICY_PREEMPT && i < d->n_preempt; i++)
        for (int j = 0; j < s->n_running; j++)
            if (s->running[j].id == d->preempt[i]) sum += queue_policy_lost_ms(s, &s->running[j]);
    return sum;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10000;
    rng_state = argc > 2 ? strtoull(argv[2], NULL, 10) : 20261207;
    if (!rng_state) rng_state = 1;
    static const int64_t periods_s[] = {60, 300, 900, 1800, 0};
    const int64_t now = 100LL * 24 * 3600 * 1000;
    double lost[2] = {0, 0};
    int preempted[2] = {0, 0}, runs_stopped[2] = {0, 0}, worse = 0, better = 0;
    for (int k = 0; k < n; k++) {
        policy_node host = {.id = 0, .name = "host", .free = {0, 0}, .capacity = {SLOTS, 0}};
        policy_hold holds[SLOTS];
        policy_running running[SLOTS];
        int used = 0, m = 0;
        while (used < SLOTS) {
            int devices = used + 2 <= SLOTS && rnd() % 2 ? 2 : 1;
            holds[m] = (policy_hold){.node = 0, .devices = devices};
            int64_t started = now - (int64_t)(rnd() % (4 * 3600)) * 1000 - 1000;
            int64_t period = periods_s[rnd() % 5] * 1000, ckpt = 0;
            if (period) ckpt = started + (now - started) / period * period;
            bool builtin = rnd() % 5 == 0;
            running[m] = (policy_running){.id = m + 1, .pool = POOL_CPU, .owner = -1, .priority = 0,
                                          .preemptible = true, .started_ms = started, .n_holds = 1, .holds = &holds[m],
                                          .checkpoint_ms = ckpt, .checkpoint_write_ms = builtin ? 5000 : 0,
                                          .saves_on_notice = builtin};
            used += devices;
            m++;
        }
        policy_run urgent = {.id = 100, .pool = POOL_CPU, .world_size = 2 + (int)(rnd() % 2), .owner = -1,
                             .priority = 10, .queued_ms = now};
        policy_snapshot s = {.nodes = &host, .n_nodes = 1, .queued = &urgent, .n_queued = 1, .running = running,
                             .n_running = m, .now_ms = now};
        int64_t got[2];
        for (int rule = 0; rule < 2; rule++) {
            s.victims = rule == 0 ? VICTIMS_LOWEST_PRIORITY : VICTIMS_LEAST_LOST;
            policy_decision d;
            queue_policy_decide(&s, &d);
            got[rule] = lost_of(&s, &d);
            lost[rule] += (double)got[rule] / 1000.0;
            preempted[rule] += d.verb == POLICY_PREEMPT;
            runs_stopped[rule] += d.verb == POLICY_PREEMPT ? d.n_preempt : 0;
            queue_policy_free(&d, 1);
        }
        worse += got[1] > got[0];
        better += got[1] < got[0];
    }
    printf("%d snapshots (8 slots full, a run of priority 10 needing 2 or 3), seed %llu\n", n,
           (unsigned long long)(argc > 2 ? strtoull(argv[2], NULL, 10) : 20261207));
    printf("%-34s %14s %12s %10s\n", "rule", "lost device-s", "per preempt", "runs/pre");
    const char *names[2] = {"lowest priority, newest (before)", "least lost work (now)"};
    for (int rule = 0; rule < 2; rule++)
        printf("%-34s %14.0f %12.1f %10.2f\n", names[rule], lost[rule], preempted[rule] ? lost[rule] / preempted[rule] : 0,
               preempted[rule] ? (double)runs_stopped[rule] / preempted[rule] : 0);
    printf("least lost loses less in %d snapshots, more in %d (must be 0), as much in %d\n", better, worse,
           n - better - worse);
    return worse ? 1 : 0;
}
