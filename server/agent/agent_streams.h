/* The agent's event socket: every rank and launcher of a part here reports to it as
 * it would to ddpd's own; each connection is a stream whose whole lines are kept,
 * numbered, until the coordinator says it has them (heartbeat: relay_stream), and
 * its first line (its hello) as long as it lives. Also `ddpd part`'s. */
#ifndef DDPD_SERVER_AGENT_AGENT_STREAMS_H
#define DDPD_SERVER_AGENT_AGENT_STREAMS_H

#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

int agent_streams_open(const char *socket_path, char *err, size_t errlen);
/* Each connection's first line (its hello) names its run: peer_ok says whether the
 * account that connected (SO_PEERCRED) may speak for it; a connection it refuses is
 * dropped, nothing of it forwarded. NULL (the default): every connection is taken. */
void agent_streams_check_peers(bool (*peer_ok)(int64_t run, long uid));
void agent_streams_close(void);

/* The descriptors to poll (the socket and each connection); returns how many. */
int agent_streams_pollfds(struct pollfd *fds, int max);
/* Accepts and reads whatever poll said is ready. */
void agent_streams_serve(const struct pollfd *fds, int n);

/* The heartbeat's "streams": the unacknowledged lines of each stream, at most
 * `budget` bytes in all. */
json_t *agent_streams_batch(size_t budget);
/* The coordinator's answer ({"ID": next_seq}): what it has is let go. */
void agent_streams_acked(const json_t *next);
/* The coordinator may have lost its streams (a heartbeat got no answer: it may have
 * restarted): each stream's next batch carries its first line again (its hello),
 * which a coordinator that does not know the stream opens it with. */
void agent_streams_resend_hellos(void);
/* Whether any line waits to be delivered (a part's exit is reported after). */
bool agent_streams_pending(void);

#endif
