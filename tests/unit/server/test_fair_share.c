/* Unit tests of fair share's arithmetic (server/sched/fair_share.c): a value halves
 * every half-life; a span's weight is its device-seconds when the half-life is long,
 * less when it is short, and decays as the span ages; spans add up (two halves weigh
 * what the whole does), so folding a run's usage in pieces changes nothing. */
#include <math.h>
#include <stdbool.h>
#include <stdio.h>

#include "check.h"
#include "fair_share.h"

static bool near(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(1.0, fabs(b)); }

int main(void) {
    const double H = 3600;
    CHECK(near(fair_share_decay(100, 3600 * 1000LL, H), 50), "one half-life halves: %g", fair_share_decay(100, 3600000, H));
    CHECK(near(fair_share_decay(100, 7200 * 1000LL, H), 25), "two quarter");
    CHECK(fair_share_decay(100, 0, H) == 100 && fair_share_decay(100, -5, H) == 100, "no time, no decay");

    /* 2 devices for an hour with a half-life of an hour: 2 * H/ln2 * (1 - 1/2) */
    double hour = fair_share_span(2, 0, 3600 * 1000LL, 3600 * 1000LL, H);
    CHECK(near(hour, 2 * H / M_LN2 * 0.5), "an hour of 2 devices weighs %g", hour);
    CHECK(hour < 7200 && hour > 3600, "less than its 7200 device-seconds, more than half: %g", hour);
    /* a long half-life: nearly the device-seconds */
    double ten_s = fair_share_span(3, 0, 10000, 10000, 1e9);
    CHECK(fabs(ten_s - 30) < 1e-6, "3 devices for 10 s, no decay to speak of: %g", ten_s);
    /* seen a half-life later, it weighs half */
    double later = fair_share_span(2, 0, 3600 * 1000LL, 7200 * 1000LL, H);
    CHECK(near(later, hour / 2), "the same span an hour later: %g (half of %g)", later, hour);
    /* two halves weigh the whole */
    double a = fair_share_span(2, 0, 1800 * 1000LL, 3600 * 1000LL, H), b = fair_share_span(2, 1800 * 1000LL, 3600 * 1000LL, 3600 * 1000LL, H);
    CHECK(near(a + b, hour), "two halves %g + %g = the whole %g", a, b, hour);
    /* folding: the first half decayed to the end and the second added */
    double folded = fair_share_decay(fair_share_span(2, 0, 1800 * 1000LL, 1800 * 1000LL, H), 1800 * 1000LL, H) + b;
    CHECK(near(folded, hour), "folded in pieces: %g", folded);
    CHECK(fair_share_span(2, 10, 10, 10, H) == 0 && fair_share_span(2, 20, 10, 30, H) == 0 &&
              fair_share_span(0, 0, 1000, 1000, H) == 0,
          "an empty or reversed span, or no device, weighs nothing");
    return test_done("test_fair_share");
}
