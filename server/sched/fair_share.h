/* Fair share's arithmetic: the decayed usage of an owner, in device-seconds, each
 * second weighing less as it ages (halved every half-life), as Slurm's decayed usage
 * is. Pure functions of their arguments: the scheduler keeps each owner's usage as a
 * value at a time (folded in when a run's span on its devices ends, and stored), and
 * adds the spans still going when it takes a snapshot for the queue policy. */
#ifndef DDPD_SERVER_SCHED_FAIR_SHARE_H
#define DDPD_SERVER_SCHED_FAIR_SHARE_H

#include <stdint.h>

/* `value` as of a time, seen dt_ms later (dt_ms < 0 counts as 0). */
double fair_share_decay(double value, int64_t dt_ms, double half_life_s);

/* What `devices` held from from_ms to to_ms weighs at now_ms (>= to_ms): the
 * integral of devices * 2^-((now - t) / half_life) over the span, in device-seconds.
 * An empty or reversed span weighs 0. */
double fair_share_span(int devices, int64_t from_ms, int64_t to_ms, int64_t now_ms, double half_life_s);

#endif
