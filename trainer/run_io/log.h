/* The trainer's log: timestamped lines in the run's trainer.log, mirrored on stderr
 * (unless stderr is that very file, as when the server captures the trainer's
 * output into it), and sent as `log` events. The file holds what fits in the run's
 * cap on its logs (log_cap.h); stderr and the events are not capped. */
#ifndef DDPD_TRAINER_RUN_IO_LOG_H
#define DDPD_TRAINER_RUN_IO_LOG_H

#include "events.h"

typedef enum { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR } log_level;

/* `who` prefixes each line ("launcher", "rank 1"). path may be NULL (stderr only). */
void log_open(const char *path, const char *who);
/* Also send log lines as events through `sink` (NULL to stop). */
void log_set_events(event_sink *sink);
void log_msg(log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* True when stderr is a terminal not shared with the log file (progress bars go there). */
int log_stderr_is_tty(void);
/* Called by the progress bar: a line is on stderr that log lines must erase first. */
void log_set_bar_active(int active);
void log_close(void);

#endif
