/* The server's own log: one line per event, and one per HTTP request, each with a
 * UTC timestamp and a level; lines below the configured level are dropped. It goes
 * to stderr, or to a file that is rotated by size and by day the way a person
 * running a box expects (the tutorial rotates its loguru log daily):
 *
 *   ddpd.log                 the current file
 *   ddpd.log.2024-06-01      the day it covered, renamed when the first line of a
 *   ddpd.log.2024-06-01.1    later day comes, or when a line would take it past
 *                            max_bytes (then .1, .2, ... within one day)
 *
 * and only the newest `keep` rotated files stay. Days are UTC days, like the
 * timestamps. Every line is one write(2) under a mutex, so lines from threads never
 * mix and a crash loses nothing that was logged. This is the server's one logging
 * API: log_debug, log_info, log_warn and log_error. */
#ifndef DDPD_SERVER_BASE_SERVER_LOG_H
#define DDPD_SERVER_BASE_SERVER_LOG_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

typedef struct {
    log_level level;
    const char *file;   /* NULL or "": stderr, never rotated */
    uint64_t max_bytes; /* rotate before a line would take the file past this; 0: no size limit */
    bool daily;         /* rotate when the UTC day changes */
    int keep;           /* rotated files kept, the oldest deleted first; 0: keep them all */
} server_log_config;

#define SERVER_LOG_DEFAULT_MAX_BYTES (100ull << 20)
#define SERVER_LOG_DEFAULT_KEEP 14

/* Fills `out` from the settings as a person writes them (any may be NULL: the
 * default): level "debug".."error" (info), file (stderr), max_bytes "100M" (100 MiB;
 * "0": no size limit), keep "14" (14; "0": keep all). Daily rotation is on for files.
 * 0, or -1 with a sentence naming the bad setting. `out->file` points into `file`. */
int server_log_parse_config(const char *level, const char *file, const char *max_bytes, const char *keep,
                            server_log_config *out, char *err, size_t errlen);

/* Opens the file (creating its directory's file, mode 0640) and starts using it.
 * Until it is called, lines go to stderr at level info. 0, or -1 with a sentence. */
int server_log_setup(const server_log_config *c, char *err, size_t errlen);
/* Back to stderr; closes the file. */
void server_log_shutdown(void);

/* "debug", "info", "warn" (or "warning"), "error". 0, or -1 when unknown. */
int log_level_parse(const char *s, log_level *out);
const char *log_level_name(log_level l);
bool log_enabled(log_level l);

/* "100M", "64k", "1G", "4096": bytes (k, M, G are powers of 1024; base/byte_size.h). 0, or -1. */
int log_parse_size(const char *s, uint64_t *out);

void server_log_vwrite(log_level l, const char *fmt, va_list ap);
void server_log_write(log_level l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define log_debug(...) server_log_write(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) server_log_write(LOG_INFO, __VA_ARGS__)
#define log_warn(...) server_log_write(LOG_WARN, __VA_ARGS__)
#define log_error(...) server_log_write(LOG_ERROR, __VA_ARGS__)

/* One HTTP request, when it is over:
 *   http 127.0.0.1 GET /runs/12 200 812B 1.4ms
 * at info (warn for 5xx). `client` may be NULL. */
void server_log_request(const char *client, const char *method, const char *path, int status, uint64_t bytes,
                        double ms);

/* Tests: the clock the log reads (unix ms); NULL restores the real one. */
void server_log_set_clock(int64_t (*now)(void));

#endif
