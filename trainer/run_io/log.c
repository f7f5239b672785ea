/* The trainer's log: see log.h. One process writes each line with a single write()
 * on an O_APPEND descriptor, so lines from the launcher and the ranks never mix; every
 * line within the run's cap on its log (log_cap.h). */
#include "log.h"
#include "log_cap.h"

#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int log_fd = -1;
static int mirror_stderr = 1;
static int bar_active;
static char log_who[32] = "ddp-trainer";
static event_sink *log_sink;
static log_cap cap; /* the run's cap on its log (log_cap.h) */

static const char *level_name(log_level l) {
    switch (l) {
    case LOG_DEBUG: return "debug";
    case LOG_INFO: return "info";
    case LOG_WARN: return "warn";
    case LOG_ERROR: return "error";
    }
    return "info";
}

void log_open(const char *path, const char *who) {
    snprintf(log_who, sizeof log_who, "%s", who);
    if (log_fd >= 0) close(log_fd);
    log_fd = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
    log_cap_init(&cap);
    mirror_stderr = 1;
    struct stat a, b;
    if (log_fd >= 0 && fstat(log_fd, &a) == 0 && fstat(STDERR_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
        a.st_ino == b.st_ino)
        mirror_stderr = 0; /* stderr already is the log file */
}

void log_set_events(event_sink *sink) { log_sink = sink; }

int log_stderr_is_tty(void) { return mirror_stderr && isatty(STDERR_FILENO); }

void log_set_bar_active(int active) { bar_active = active; }

void log_msg(log_level level, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    char stamp[32];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%S", &tm);
    char line[2300];
    int n = snprintf(line, sizeof line, "%s.%03ldZ %-5s %s: %s\n", stamp, ts.tv_nsec / 1000000,
                     level_name(level), log_who, msg);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    if (log_fd >= 0) log_cap_write(&cap, log_fd, line, (size_t)n);
    if (mirror_stderr || log_fd < 0) {
        if (bar_active) fputs("\r\033[K", stderr);
        fputs(line, stderr);
        fflush(stderr);
    }
    if (log_sink && level >= LOG_INFO)
        event_emit(log_sink, "log", json_pack("{s:s, s:s}", "level", level_name(level), "msg", msg));
}

void log_close(void) {
    if (log_fd >= 0) close(log_fd);
    log_fd = -1;
    log_sink = NULL;
}
