/* What a part that runs elsewhere is told to start (host/part_wire.h, the wire's one
 * writer and reader), made from the scheduler's part_launch: the same for an agent's
 * part (in a heartbeat's answer) and a batch system's (`ddpd part`, in the answer to
 * its report). The run's config is read from the run directory, as this host's
 * trainer reads it, by part_description_add_config: never under the scheduler's
 * lock (an executor's start returns at once), so an executor adds it when it answers
 * the part. */
#ifndef DDPD_SERVER_EXEC_PART_DESC_H
#define DDPD_SERVER_EXEC_PART_DESC_H

#include <jansson.h>
#include <stdbool.h>

#include "executor.h"

/* l's run and part, with rank 0's node at master_addr:master_port (NULL, 0: none
 * yet) and `devices` (taken; NULL: none listed), its config null, and the account
 * its processes run as when l has one (the node switches to it: an agent). A new
 * reference. */
json_t *part_description(const part_launch *l, const char *master_addr, int master_port, json_t *devices);

/* desc's config read from its run's directory, once (true: it has one now). */
bool part_description_add_config(json_t *desc);

#endif
