/* The server's clocks and how it writes times: unix milliseconds for what happened,
 * monotonic milliseconds for deadlines, ISO 8601 UTC for the API. */
#ifndef DDPD_BASE_CLOCK_H
#define DDPD_BASE_CLOCK_H

#include <stdint.h>

int64_t now_ms(void);  /* wall clock, unix milliseconds */
int64_t mono_ms(void); /* monotonic milliseconds, for deadlines */
double mono_s(void);   /* monotonic seconds, for durations */

/* "2024-06-01T12:00:00.123Z" (UTC) into out[32]. */
void format_iso8601(int64_t unix_ms, char out[32]);

#endif
