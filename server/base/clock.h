/* The server's clocks and how it writes times: unix milliseconds for what happened,
 * monotonic milliseconds for deadlines (base/monotonic.h, every program's), ISO 8601
 * UTC for the API. */
#ifndef DDPD_SERVER_BASE_CLOCK_H
#define DDPD_SERVER_BASE_CLOCK_H

#include <stdint.h>
#include <time.h>

#include "monotonic.h"

int64_t now_ms(void);  /* wall clock, unix milliseconds */

/* The wall-clock time `ms` milliseconds from now, as pthread_cond_timedwait takes
 * its deadline. */
struct timespec realtime_in_ms(int64_t ms);

/* "2024-06-01T12:00:00.123Z" (UTC) into out[32]. */
void format_iso8601(int64_t unix_ms, char out[32]);

#endif
