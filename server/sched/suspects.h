/* Suspect nodes (docs/failures.md): each failure that blames the place, not the
 * script (class infra, collective, hang or crash, with the node the classifier tied
 * it to, and the device of the blamed rank when known), is kept with the evidence and
 * the time. `suspect_after` of them within `window_ms` mark the node suspect, or the
 * device alone when they all happened on that one device: no run is placed there (or
 * given that device) while another place fits, and a run restarted by retry_elsewhere
 * never goes there. A watched node (fewer failures) is kept, not shown. A node that failed `exclude_after` runs within
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
 * requests left since; suspect_after failures within window_ms mark a node (or a
 * device) suspect, exclude_after failed runs exclude it (0: never excluded). */
void suspects_init_locked(int suspect_after, int exclude_after, int64_t window_ms);
/* A failed attempt of run_id (its number `attempt`: told twice, counted once; owner's: NULL, nobody's), of class cls, tied to `node`
 * (and `device` there, "cpu:1", "gpu:UUID"; NULL: not known), at unix ms `now`:
 * counted on the node, which becomes suspect (or the device) at suspect_after within
 * the window, and excluded when it has failed enough runs in the window. */
void suspect_mark_locked(const char *node, const char *device, const char *cls, const char *evidence, int64_t run_id,
                         int attempt, const char *owner, int64_t now);
/* Whether `node` as a whole is marked: suspect, and excluded. false for a node not
 * marked, or only watched, or with suspect devices alone. */
bool suspect_of(const char *node, bool *excluded);
/* Whether `device` of `node` ("cpu:1", "gpu:UUID") is suspect on its own. */
bool suspect_device_of(const char *node, const char *device);
/* Clears `node`'s mark (by: who, for the log); false when it had none. */
bool suspect_clear_locked(const char *node, const char *by);
/* The clear requests `ddpd node clear` left: taken. true when one cleared a mark. */
bool suspects_take_requests_locked(void);
/* The marks in force (suspect or excluded, a node or its devices), for GET /nodes:
 * [{node, state, suspect, device, devices, since, last, class, evidence, run_id,
 * owner, failed_runs, excluded, runs, failures}] (new). */
json_t *suspects_json_locked(void);
/* The mark of one node as that JSON, or NULL. */
json_t *suspect_json_locked(const char *node);
/* The mark of a node that is only watched (fewer failures than make it suspect, the
 * newest within the window) as that JSON, state "watched"; else JSON null (new). */
json_t *watch_json_locked(const char *node);

#endif
