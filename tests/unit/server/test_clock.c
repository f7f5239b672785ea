/* format_iso8601 against gmtime_r + strftime, the way it wrote every time before it
 * kept each thread's last second: the same text for times in one second, across
 * seconds, days and years, before 1970 and far past 9999, in two threads at once. */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "clock.h"

static void reference(int64_t unix_ms, char out[32]) {
    time_t secs = (time_t)(unix_ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    size_t n = strftime(out, 32, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out + n, 32 - n, ".%03dZ", (int)(((unix_ms % 1000) + 1000) % 1000));
}

static int mismatches(int64_t from, int64_t step, int count) {
    int bad = 0;
    for (int i = 0; i < count; i++) {
        int64_t ms = from + step * i;
        char got[32], want[32];
        format_iso8601(ms, got);
        reference(ms, want);
        if (strcmp(got, want) != 0) {
            if (bad++ < 3) fprintf(stderr, "  %lld ms: %s, not %s\n", (long long)ms, got, want);
        }
    }
    return bad;
}

static void *other_thread(void *arg) {
    (void)arg;
    return (void *)(long)mismatches(1717243200000LL, 7, 200000);
}

/* realtime_in_ms: a deadline ms from now, its nanoseconds always below a second. */
static void deadlines(void) {
    static const int64_t waits[] = {0, 1, 250, 999, 1000, 1001, 2500, 86400000};
    for (size_t i = 0; i < sizeof waits / sizeof *waits; i++) {
        int64_t before = now_ms();
        struct timespec ts = realtime_in_ms(waits[i]);
        int64_t after = now_ms();
        int64_t at = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
        CHECK(ts.tv_nsec >= 0 && ts.tv_nsec < 1000000000L, "%lld ms: nanoseconds in range (%ld)", (long long)waits[i],
              ts.tv_nsec);
        CHECK(at >= before + waits[i] - 1 && at <= after + waits[i], "%lld ms from now: %lld, between %lld and %lld",
              (long long)waits[i], (long long)at, (long long)(before + waits[i]), (long long)(after + waits[i]));
    }
}

int main(void) {
    deadlines();
    char out[32];
    format_iso8601(1717243200123LL, out);
    CHECK(strcmp(out, "2024-06-01T12:00:00.123Z") == 0, "the header's example: %s", out);
    format_iso8601(1717243200999LL, out);
    CHECK(strcmp(out, "2024-06-01T12:00:00.999Z") == 0, "the same second again, its last ms: %s", out);
    format_iso8601(1717243201000LL, out);
    CHECK(strcmp(out, "2024-06-01T12:00:01.000Z") == 0, "the next second: %s", out);
    CHECK(mismatches(1717243199000LL, 1, 5000) == 0, "every ms of five seconds");
    CHECK(mismatches(1703980800000LL - 3000, 997, 20) == 0, "across a year's end");
    CHECK(mismatches(0, 86399999, 400) == 0, "a day apart less a ms, from 1970");
    CHECK(mismatches(-5000, 1, 10000) == 0, "before 1970 (the ms wrap as they did)");
    CHECK(mismatches(253402300799000LL, 500, 6) == 0, "past 9999-12-31T23:59:59");
    CHECK(mismatches(1717243200000LL, 1000, 3) == 0, "back to today after them");
    pthread_t t;
    pthread_create(&t, NULL, other_thread, NULL);
    int here = mismatches(1600000000000LL, 3, 200000);
    void *there;
    pthread_join(t, &there);
    CHECK(here == 0 && (long)there == 0, "two threads at once, each its own second: %d and %ld wrong", here,
          (long)there);
    return test_done("test_clock");
}
