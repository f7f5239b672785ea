/* Event reporting (docs/events.md): each process (rank or launcher) has one sink
 * that stamps events with run, rank, seq and t, appends them to the run's journal
 * (events.jsonl) and sends them to the target: a Unix socket, a file, or standard
 * output ("-"). Lines are buffered and written in batches so that reporting costs a
 * tiny fraction of a step; events a person waits for (status, epoch, checkpoint,
 * end) are flushed at once.
 *
 * A run outlives its server: when the socket goes away (the server was killed or
 * restarted) the sink keeps journaling and tries to reconnect about once a second;
 * on a new connection it first sends its hello again (with the secret), and the
 * server fills whatever it missed from the journal. The secret goes only to the
 * socket, never into the journal or a file. */
#ifndef DDPD_TRAINER_RUN_IO_EVENTS_H
#define DDPD_TRAINER_RUN_IO_EVENTS_H

#include <jansson.h>
#include <stddef.h>

#define EVENT_RANK_LAUNCHER (-1)

typedef struct event_sink event_sink;

/* target: NULL (journal only), "-", a socket path or a file path. secret: the run's
 * secret, added to the hello sent on a socket (NULL when run without a server). A
 * socket that cannot be reached is reported in *warning (if non-NULL) and retried
 * later, so a run never dies because its server is down. Returns NULL (and err)
 * only when the journal cannot be opened. */
event_sink *event_sink_open(const char *target, const char *journal_path, const char *run_id, int rank,
                            const char *secret, char *err, size_t errlen, char *warning, size_t warnlen);

/* Emits an event of `type`; `fields` (stolen, may be NULL) holds its own fields.
 * The first event of every sink must be its "hello". */
void event_emit(event_sink *s, const char *type, json_t *fields);
void event_flush(event_sink *s);
void event_sink_close(event_sink *s);

/* Unix time in milliseconds. */
long long unix_ms(void);

#endif
