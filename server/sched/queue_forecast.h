/* When each queued run is expected to start: the queue policy (queue_policy.h) run
 * forward over a snapshot, each running run ending at its expected time and each run
 * it starts lasting its expected length. A pure function of its input, like the
 * policy: no lock, no I/O, no clock but the snapshot's; tested on hand-made snapshots
 * (tests/unit/server/test_queue_forecast.c), and the scheduler keeps what it says for the
 * answers (never computed on a GET).
 *
 * The walk: decide at the snapshot's time; every run the policy starts starts then
 * (its devices taken, its end at that time plus its length); the runs it preempts
 * and those being preempted end at once (an elastic run it shrinks gives up what it
 * shrinks by at once, and goes on with the rest); when nothing more starts, time moves to the
 * next expected end and the devices it held come free. Fair-share usage stays as the
 * snapshot has it. A run whose start waits on a run with no expected end gets none
 * (start -1), with that run named (`basis_run`); so do the runs beyond the first
 * FORECAST_RUNS_MAX in the start order (basis_run 0, beyond true). */
#ifndef DDPD_SERVER_SCHED_QUEUE_FORECAST_H
#define DDPD_SERVER_SCHED_QUEUE_FORECAST_H

#include <stdbool.h>
#include <stdint.h>

#include "queue_policy.h"

#define FORECAST_RUNS_MAX 64

typedef struct {
    int64_t start_ms;  /* the expected start (the snapshot's clock); -1: none */
    int64_t basis_run; /* start -1: the run with no expected end it waits on (0: none such) */
    bool beyond;       /* start -1: it is past the first FORECAST_RUNS_MAX in the start order */
} forecast;

/* For each of s->queued, into out[i]. running_end_ms[j]: when s->running[j] is expected
 * to end (-1: no expected end); queued_len_ms[i]: how long s->queued[i] runs once
 * started (-1: not known). */
void queue_forecast(const policy_snapshot *s, const int64_t *running_end_ms, const int64_t *queued_len_ms,
                    forecast *out);

#endif
