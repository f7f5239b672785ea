/* Reading a server-sent event stream (text/event-stream) with libcurl: the bytes
 * are cut into events as the spec says (fields `event`, `data`, `id`; a blank line
 * dispatches; lines starting with ':' are comments, which ddpd sends as
 * heartbeats), and each event goes to a callback. A stream silent for longer than
 * `idle_s` counts as broken (ddpd sends a comment every 15 s). */
#ifndef DDPD_CLIENT_SSE_READER_H
#define DDPD_CLIENT_SSE_READER_H

#include <stdbool.h>
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

/* A follower's stream read again after it broke, ended (the server stopped) or was
 * answered 503 (the server is stopping): for up to a minute from the break, a second
 * apart. Call after an sse_read that did not end the following: with its rc, *status
 * and err, and whether an event came on that connection. Returns SSE_RETRY (said
 * "reconnecting" at a new break, slept a second), SSE_GIVE_UP_REFUSED (an error answer:
 * err said) or SSE_GIVE_UP_UNREACHABLE (broken too long: said). `before_saying` (may be
 * NULL) clears what the follower shows before a line is written. */
enum { SSE_RETRY = 0, SSE_GIVE_UP_REFUSED = 1, SSE_GIVE_UP_UNREACHABLE = 2 };
typedef struct {
    double broken_since; /* 0: not broken */
    void (*before_saying)(void *cls);
    void *cls;
} sse_retry;
int sse_retry_after(sse_retry *r, int rc, long status, bool heard, const char *err);

#endif
