/* What agents forward to the coordinator, delivered where a local trainer's would go.
 *
 * Event streams: each connection a rank (or a launcher) opened to its agent's event
 * socket is a stream; the agent sends its lines in order, numbered from 0, and the
 * relay writes them, once each, on a connection of its own to this server's event
 * socket, so that ingest reads them as it reads a local trainer's (the hello and
 * its secret first, the same parse, the same store ops).
 *
 * Logs: the run's trainer.log (the launcher's output; each forwarded line prefixed
 * "[node NAME] ", beside the local part's own lines) and ranks/rank-N.log, appended
 * in the run directory, once each: every chunk says at which offset of the agent's
 * copy it starts.
 *
 * Both answer with what they expect next, so an agent that retries after a lost
 * answer sends nothing twice. Thread-safe.
 *
 * What sends them is a source: an agent's node (its id, > 0), or a part that reports
 * on its own (a Slurm job's `ddpd part`, a negative id its executor gives it). A
 * source may outlive this server: after a restart it goes on from where it was, so a
 * stream this server does not know comes with its first line (its hello, which
 * ingest needs first), and a log this server does not know starts where its first
 * chunk says. */
#ifndef DDPD_SERVER_EXEC_NODE_RELAY_H
#define DDPD_SERVER_EXEC_NODE_RELAY_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Lines first_seq, first_seq+1, ... of node `node`'s stream `stream` (strings);
 * hello: the stream's first line, when first_seq is past it (NULL: not sent);
 * closed: the connection ended after them. Returns the seq expected next (lines
 * before it already delivered are skipped); 0 for a stream this server does not
 * know that comes without its hello past its start (the source sends it again with
 * its hello). */
int64_t relay_stream(int node, const char *stream, int64_t first_seq, const json_t *lines, const char *hello,
                     bool closed);

/* `text` at byte `offset` of node `node`'s copy of `file` ("trainer.log" or
 * "ranks/rank-N.log") of run `run_id`. Returns the offset expected next, or -1 with
 * why in err (a file name that is none of those, a write that failed). */
int64_t relay_log(int node, const char *node_name, int64_t run_id, const char *file, int64_t offset, const char *text,
                  size_t len, char *err, size_t errlen);

/* A heartbeat's "streams" ([{"id", "seq", "lines", "hello", "closed"}]), relayed; the
 * answer: {"ID": the seq expected next}. */
json_t *relay_streams_json(int node, const json_t *streams);
/* A heartbeat's "logs" ([{"run", "file", "offset", "text"}]), appended; the answer:
 * [{"run", "file", "next_offset"}], or "error" instead of next_offset. */
json_t *relay_logs_json(int node, const char *node_name, const json_t *logs);

/* The node is gone: its streams are closed. */
void relay_node_lost(int node);
/* The run is over: what was kept of its logs' offsets goes. */
void relay_run_ended(int64_t run_id);

#endif
