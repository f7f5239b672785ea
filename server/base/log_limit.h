/* A problem that can recur thousands of times a second (accept failing for want of
 * file descriptors, a flood of refused connections) is logged at most once per
 * interval, with how many times it happened in between: the log says what is wrong
 * without growing by a line per failure. Lock-free; any thread. */
#ifndef DDPD_SERVER_BASE_LOG_LIMIT_H
#define DDPD_SERVER_BASE_LOG_LIMIT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct {
    _Atomic int64_t next_ms;  /* monotonic ms: no line before this */
    _Atomic uint64_t skipped; /* calls answered false since the last line */
} log_limit;

#define LOG_LIMIT_INIT {0, 0}

/* True when a line may be written now (then the next is not before interval_ms from
 * now) and *skipped gets how many calls were answered false since the last line;
 * false otherwise (counted). */
bool log_limit_now(log_limit *l, int64_t interval_ms, uint64_t *skipped);

#endif
