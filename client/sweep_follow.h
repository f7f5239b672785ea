/* ddpctl sweep follow ID: a sweep followed live to its end over the live feed (GET
 * /events, from the first event the server kept, so nothing between submitting and
 * following is missed): one line per decision of its searcher (a trial made,
 * started, paused, promoted, stopped, finished, the sweep's own), one per epoch a
 * trial's run reports (its metric's value when the epoch has it), and the best
 * trial each time it changes (as GET /sweeps/{id} names it). A broken connection is
 * resumed with Last-Event-ID for up to a minute.
 *
 * Returns EXIT_OK when the sweep succeeded, EXIT_RUN_FAILED when it failed,
 * EXIT_RUN_CANCELED when it was canceled. */
#ifndef DDPD_CLIENT_SWEEP_FOLLOW_H
#define DDPD_CLIENT_SWEEP_FOLLOW_H

#include <stdint.h>

int sweep_follow(int64_t id);

#endif
