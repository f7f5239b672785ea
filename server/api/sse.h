/* Server-sent events over libmicrohttpd: GET /events (every run) and
 * GET /runs/{id}/events (one run), text/event-stream fed by events_feed.
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
 * connection's `ready` carries that id, so that a reconnect resumes from it. */
#ifndef DDPD_SSE_H
#define DDPD_SSE_H

#include <stddef.h>

#include "http.h"

extern const route sse_routes[];
extern const size_t sse_routes_count;

/* Shutting down, before http_stop: every stream ends, new ones get 503. */
void sse_shutdown(void);

#endif
