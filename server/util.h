/* Small helpers that every part of the server uses: clocks, ISO 8601 times for the
 * API, random secrets for the trainers, allocation that cannot fail, and the
 * server's own log lines (one line per event, with a UTC timestamp and a level, to
 * stderr or a rotated file: server_log.h). */
#ifndef DDPD_SERVER_UTIL_H
#define DDPD_SERVER_UTIL_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* "No value" for the int64 fields that travel between threads (NaN plays that part
 * for doubles: JSON has no NaN, so it never comes from a parsed event). */
#define NO_INT INT64_MIN

int64_t now_ms(void);  /* wall clock, unix milliseconds */
int64_t mono_ms(void); /* monotonic milliseconds, for deadlines */

/* "2024-06-01T12:00:00.123Z" (UTC) into out[32]. */
void format_iso8601(int64_t unix_ms, char out[32]);
/* The same as a JSON string, or JSON null when the time is unknown (0 or NO_INT). */
json_t *json_time(int64_t unix_ms);
json_t *json_int_or_null(int64_t v);  /* null for NO_INT */
json_t *json_real_or_null(double v);  /* null for NaN */

/* 2*nbytes hex digits and a NUL into out, from getrandom(). 0 or -1. */
int random_hex(char *out, size_t nbytes);

void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);        /* NULL stays NULL */
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer (responses built by hand, lines read from sockets). */
typedef struct {
    char *data;
    size_t len, cap;
} buf_t;
void buf_reserve(buf_t *b, size_t extra);
void buf_append(buf_t *b, const void *data, size_t n);
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(buf_t *b);

void log_msg(const char *level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_info(...) log_msg("info", __VA_ARGS__)
#define log_warn(...) log_msg("warning", __VA_ARGS__)
#define log_error(...) log_msg("error", __VA_ARGS__)

#endif
