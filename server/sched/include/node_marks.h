/* The suspect nodes' marks as the state directory keeps them (server/sched/suspects.h,
 * docs/failures.md), for `ddpd node` (server/cmd/node_cmd.c), which needs no server:
 * it reads the marks the server wrote and leaves a clear request the server takes. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_NODE_MARKS_H
#define DDPD_SERVER_SCHED_INCLUDE_NODE_MARKS_H

#include <jansson.h>
#include <stddef.h>

/* The marks in state_dir/nodes/suspects.json (new; an empty array when there is
 * none yet), or NULL with err. */
json_t *suspects_read_dir(const char *state_dir, char *err, size_t errlen);
/* A request to clear `node`, left in state_dir/nodes/clear/: the server takes it
 * within a second (or at its start). 0, or -1 with err (a name that cannot be a
 * node's, a directory that cannot be made). */
int suspects_request_clear(const char *state_dir, const char *node, char *err, size_t errlen);

#endif
