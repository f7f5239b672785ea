/* The monotonic clock, for deadlines and durations, in the unit each use wants: one
 * clock for the server, the trainer, ddp-run and ddpctl. */
#ifndef DDPD_BASE_MONOTONIC_H
#define DDPD_BASE_MONOTONIC_H

#include <stdint.h>

int64_t mono_ns(void); /* monotonic nanoseconds */
int64_t mono_ms(void); /* monotonic milliseconds, for deadlines */
double mono_s(void);   /* monotonic seconds, for durations */

#endif
