/* Following a run to its end over its event stream (GET /runs/{id}/events, from its
 * first event, so nothing between submitting and following is missed; a resumed
 * run's from its last resume, what came before being an earlier attempt's): on a
 * terminal, a progress bar redrawn in place (epoch, step/total, loss, lr,
 * samples/s, ETA) with the epochs and status changes printed above it; elsewhere,
 * plain lines (each status change and epoch, and progress every 10 s). A broken
 * connection is resumed with Last-Event-ID for up to a minute.
 *
 * Returns the exit status: EXIT_OK only when the run succeeded. */
#ifndef DDPD_CLIENT_FOLLOW_H
#define DDPD_CLIENT_FOLLOW_H

#include <stdbool.h>
#include <stdint.h>

int follow_run(int64_t id, bool tty);

#endif
