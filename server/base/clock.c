/* Clocks: see clock.h. */
#include "clock.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct timespec realtime_in_ms(int64_t ms) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t ns = ts.tv_nsec + (ms % 1000) * 1000000LL;
    ts.tv_sec += (time_t)(ms / 1000 + ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    return ts;
}

/* Each thread keeps its last second's "YYYY-MM-DDTHH:MM:SS": every request's log line
 * and every answer's times are written with one, mostly within the same second, and
 * gmtime_r + strftime + snprintf cost more than the rest of a cached GET's log line. */
static __thread int64_t last_secs = INT64_MIN;
static __thread char last_text[24];
static __thread size_t last_len;

void format_iso8601(int64_t unix_ms, char out[32]) {
    int64_t secs = unix_ms / 1000;
    if (secs != last_secs) {
        time_t t = (time_t)secs;
        struct tm tm;
        gmtime_r(&t, &tm);
        size_t n = strftime(last_text, sizeof last_text, "%Y-%m-%dT%H:%M:%S", &tm);
        if (n == 0) { /* longer than the copy holds (a year of many digits): written in full */
            n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
            snprintf(out + n, 32 - n, ".%03dZ", (int)(((unix_ms % 1000) + 1000) % 1000));
            last_secs = INT64_MIN;
            return;
        }
        last_secs = secs;
        last_len = n;
    }
    int ms = (int)(((unix_ms % 1000) + 1000) % 1000);
    memcpy(out, last_text, last_len);
    char *p = out + last_len;
    *p++ = '.';
    *p++ = (char)('0' + ms / 100);
    *p++ = (char)('0' + ms / 10 % 10);
    *p++ = (char)('0' + ms % 10);
    *p++ = 'Z';
    *p = '\0';
}
