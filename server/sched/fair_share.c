/* Fair share's arithmetic: see fair_share.h. */
#include "fair_share.h"

#include <math.h>

double fair_share_decay(double value, int64_t dt_ms, double half_life_s) {
    if (dt_ms <= 0 || half_life_s <= 0) return dt_ms > 0 && half_life_s <= 0 ? 0.0 : value;
    return value * exp2(-((double)dt_ms / 1000.0) / half_life_s);
}

double fair_share_span(int devices, int64_t from_ms, int64_t to_ms, int64_t now_ms, double half_life_s) {
    if (devices <= 0 || to_ms <= from_ms) return 0.0;
    if (now_ms < to_ms) now_ms = to_ms;
    double span_s = (double)(to_ms - from_ms) / 1000.0;
    if (half_life_s <= 0) return 0.0; /* no memory at all: only now counts, and a span is past */
    /* devices * H/ln2 * (2^-(now-to)/H - 2^-(now-from)/H) = what ended at `to`, decayed to now */
    double k = half_life_s / M_LN2;
    double at_end = devices * k * -expm1(-span_s * M_LN2 / half_life_s); /* the span's weight seen at its end */
    return fair_share_decay(at_end, now_ms - to_ms, half_life_s);
}
