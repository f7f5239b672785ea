/* Clocks: see clock.h. */
#include "clock.h"

#include <stdio.h>
#include <time.h>

int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void format_iso8601(int64_t unix_ms, char out[32]) {
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(((unix_ms % 1000) + 1000) % 1000));
}
