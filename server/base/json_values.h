/* Values that may be missing, as they travel between threads and into JSON: NO_INT
 * for int64 fields (NaN plays that part for doubles: JSON has no NaN, so it never
 * comes from a parsed event), written as JSON null. */
#ifndef DDPD_SERVER_BASE_JSON_VALUES_H
#define DDPD_SERVER_BASE_JSON_VALUES_H

#include <jansson.h>
#include <stdint.h>

#define NO_INT INT64_MIN

/* An ISO 8601 string, or null when the time is unknown (0 or NO_INT). */
json_t *json_time(int64_t unix_ms);
json_t *json_int_or_null(int64_t v); /* null for NO_INT */
json_t *json_real_or_null(double v); /* null for NaN and infinities */
json_t *json_string_or_null(const char *s);

/* How the API writes JSON: compact; reals with 16 significant digits, so that a
 * config's 0.9 reads 0.9 (17 would print 0.90000000000000002). */
#define JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(16))

#endif
