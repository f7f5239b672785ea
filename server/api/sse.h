/* Server-sent events over libmicrohttpd: GET /events (every run) and
 * GET /runs/{id}/events (one run), text/event-stream fed by the live feed (feed/feed.h).
 *
 * No thread is parked per client and nothing polls: each stream is a response
 * built with MHD_create_response_from_callback whose callback, when the feed has
 * nothing for it, suspends the connection (MHD_suspend_connection) and returns 0
 * bytes; the feed resumes it (MHD_resume_connection, from the store's writer or the
 * feed's ticker) when there is something. A suspended connection costs a socket and
 * a few hundred bytes. Heartbeat comments (every DDPD_SSE_HEARTBEAT_S seconds, 15 by
 * default) resume it too, so a client that vanished is written to and closed.
 *
 * A client resumes where it left off with the Last-Event-ID header (what browsers
 * send when they reconnect) or ?last_event_id=N (for a first connection that wants
 * the history: 0 replays everything the server has for the run). The stream begins
 * with `retry:` and an `event: ready` whose data says the newest event id; a first
 * connection's `ready` carries that id, so that a reconnect resumes from it.
 *
 * A stream holds its connection as long as its client wants: streams are counted
 * per client address and in all, and one past a cap is a 503 problem that names the
 * cap (and its flag) and says Retry-After. */
#ifndef DDPD_SERVER_API_SSE_H
#define DDPD_SERVER_API_SSE_H

#include <stddef.h>
#include <stdint.h>

#include "http.h"

extern const route sse_routes[];
extern const size_t sse_routes_count;

/* Shutting down, before http_stop: every stream ends, new ones get 503. */
void sse_shutdown(void);

/* At start-up: at most max_streams open streams, per_address of them from one
 * client address (--max-streams, --max-streams-per-address). Without it: no cap. */
void sse_set_limits(unsigned max_streams, unsigned per_address);

typedef struct {
    unsigned open;
    uint64_t refused_per_address, refused_total;
} sse_counters;
void sse_take_counters(sse_counters *out);

#endif
