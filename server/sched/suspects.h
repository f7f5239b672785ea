/* Suspect nodes (docs/failures.md): a node where an attempt failed in a way that
 * blames the place, not the script (class infra, collective, hang or crash, with the
 * node the classifier tied it to), is marked suspect with the evidence and the time;
 * no run is placed there while another place fits, and a run restarted by
 * retry_elsewhere never goes there. A node that failed `exclude_after` runs within
 * `window_ms` is excluded: no run goes there at all. Only an admin clears a node
 * (`ddpd node clear NAME`, POST /nodes/{name}/clear). The marks are kept in the state
 * directory (nodes/suspects.json, written by the server), so a restarted server keeps
 * them; `ddpd node clear` leaves a request (nodes/clear/NAME) that the server takes at
 * its next tick, or at its start. Under sched.mu, as the rest of the scheduler. */
#ifndef DDPD_SERVER_SCHED_SUSPECTS_H
#define DDPD_SERVER_SCHED_SUSPECTS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "node_marks.h"

/* The classes that mark a node (failure_class.h's names). */
bool suspect_class(const char *cls);

/* Reads the marks the state directory keeps (nodes/suspects.json) and the clear
 * requests left since; exclude_after failed runs within window_ms exclude a node (0:
 * never excluded). */
void suspects_init_locked(int exclude_after, int64_t window_ms);
/* A failed attempt of run_id, of class cls, tied to `node` (and `device`, NULL: not
 * known), at unix ms `now`: the node marked suspect (or its mark's evidence renewed),
 * and excluded when it has failed enough runs in the window. */
void suspect_mark_locked(const char *node, const char *device, const char *cls, const char *evidence, int64_t run_id,
                         int64_t now);
/* Whether `node` is marked: suspect, and excluded. false for a node not marked. */
bool suspect_of(const char *node, bool *excluded);
/* Clears `node`'s mark (by: who, for the log); false when it had none. */
bool suspect_clear_locked(const char *node, const char *by);
/* The clear requests `ddpd node clear` left: taken. true when one cleared a mark. */
bool suspects_take_requests_locked(void);
/* The marks, for GET /nodes: [{node, device, since, last, class, evidence, run_id,
 * failed_runs, excluded}] (new). */
json_t *suspects_json_locked(void);
/* The mark of one node as that JSON, or NULL. */
json_t *suspect_json_locked(const char *node);

#endif
