/* Reading a server-sent event stream (text/event-stream) with libcurl: the bytes
 * are cut into events as the spec says (fields `event`, `data`, `id`; a blank line
 * dispatches; lines starting with ':' are comments, which ddpd sends as
 * heartbeats), and each event goes to a callback. A stream silent for longer than
 * `idle_s` counts as broken (ddpd sends a comment every 15 s). */
#ifndef DDPD_CLIENT_SSE_READER_H
#define DDPD_CLIENT_SSE_READER_H

#include <stddef.h>
#include <stdint.h>

/* Return non-zero to stop reading. `id` is the event's id, or NULL. */
typedef int (*sse_event_fn)(void *cls, const char *event, const char *id, const char *data);

enum {
    SSE_STOPPED = 1,       /* the callback said stop */
    SSE_ENDED = 0,         /* the server ended the stream */
    SSE_BROKEN = -1,       /* no connection, or it broke: err says how */
    SSE_REFUSED = -2,      /* the server answered with an error: *status and err (its detail) */
};

/* GETs `path` with Last-Event-ID `last_event_id` (< 0: none). */
int sse_read(const char *path, int64_t last_event_id, long idle_s, sse_event_fn fn, void *cls, long *status,
             char *err, size_t errlen);

#endif
