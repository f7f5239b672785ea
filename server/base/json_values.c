/* Missing values in JSON: see json_values.h. */
#include "json_values.h"

#include <math.h>

#include "clock.h"

json_t *json_time(int64_t unix_ms) {
    if (unix_ms == 0 || unix_ms == NO_INT) return json_null();
    char s[32];
    format_iso8601(unix_ms, s);
    return json_string(s);
}

json_t *json_int_or_null(int64_t v) { return v == NO_INT ? json_null() : json_integer(v); }
json_t *json_real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }
json_t *json_string_or_null(const char *s) { return s ? json_string(s) : json_null(); }
