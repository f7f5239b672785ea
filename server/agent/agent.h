/* `ddpd agent`: the same binary on each extra node. It registers this node's devices
 * with a coordinator (an ordinary `ddpd serve`), heartbeats once a second, starts
 * and supervises the launchers of the run parts the coordinator places here,
 * forwards their events and logs in each heartbeat, and reports their exits. A
 * coordinator that stays unreachable past the grace stops every part here.
 *
 * One thread, one loop: poll the event socket and its connections, reap the
 * launchers, and every heartbeat send what there is and do what the answer says. */
#ifndef DDPD_SERVER_AGENT_AGENT_H
#define DDPD_SERVER_AGENT_AGENT_H

/* argv[2..] are its options (`ddpd agent --help`). Returns the exit status. */
#include "opt_table.h"

int agent_main(int argc, char **argv);

/* Its settings (`ddpd agent --help`, and `ddpd man`'s AGENT section). */
extern const opt_table AGENT_OPTIONS;

#endif
