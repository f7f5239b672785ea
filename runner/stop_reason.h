/* Why ddpd stops a run rather than cancels it (a sweep's ASHA or median rule, a paused
 * sweep): the server writes the reason to <run_dir>/stop-reason.txt (RUN_DIR_STOP_REASON)
 * before its SIGTERM, so that the launcher's log and its end say that reason, not
 * "canceled by SIGTERM". The launcher removes a stale one when it starts. */
#ifndef DDPD_RUNNER_STOP_REASON_H
#define DDPD_RUNNER_STOP_REASON_H

#include <stdbool.h>
#include <stddef.h>

/* The reason's first line into out (at most n - 1 bytes, valid UTF-8): true when there
 * is one (a regular file, not a link, not empty). */
bool stop_reason_read(const char *run_dir, char *out, size_t n);

/* Removes a reason left from an earlier stop (the run was started again). */
void stop_reason_clear(const char *run_dir);

#endif
