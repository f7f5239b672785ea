/* The loop `ddpd agent` and `ddpd part` both turn: the signals that stop them read
 * from a signalfd, the ranks' event streams served, the parts moved on, and the
 * cadence of their reports to the server (every second; every 200 ms while lines
 * wait to be delivered). What a report says and what a signal does are theirs. */
#ifndef DDPD_SERVER_AGENT_AGENT_LOOP_H
#define DDPD_SERVER_AGENT_AGENT_LOOP_H

#include <stdbool.h>
#include <stdint.h>

typedef struct {
    int sfd;             /* the signalfd of the signals it was opened with */
    int64_t next_report; /* monotonic ms */
} agent_loop;

/* Blocks `signals` (n of them) and reads them from now on through the loop; SIGPIPE
 * is ignored (a server that hangs up is an error of a request, not the end). */
void agent_loop_open(agent_loop *l, const int *signals, int n);
/* One turn: waits up to 100 ms for a signal or a stream, serves the streams and
 * ticks the parts. Returns the signal received (0: none). */
int agent_loop_turn(agent_loop *l);
/* Whether a report is due at `now` (monotonic ms); if so, schedules the next. */
bool agent_loop_report_due(agent_loop *l, int64_t now);

#endif
