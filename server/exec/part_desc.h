/* What a part that runs elsewhere is told to start: its launcher's description, the
 * same for an agent's part (in a heartbeat's answer) and a batch system's (`ddpd
 * part`, in the answer to its report): the run's config as this host's trainer
 * reads it, its node rank among `nodes` (0: the run is this one part), the secret,
 * world size, whether a command run and a resume, where rank 0's node is (a command
 * run's MASTER_ADDR and MASTER_PORT), the rendezvous, the pool and its devices, and
 * the attempt it starts at (restart_count, restarts_from; a command run's port range). */
#ifndef DDPD_CORE_PART_DESC_H
#define DDPD_CORE_PART_DESC_H

#include <jansson.h>

#include "executor.h"

/* l's run and part, with rank 0's node at master_addr:master_port (NULL, 0: none
 * yet) and `devices` (taken; NULL: none listed). A new reference. */
json_t *part_description(const part_launch *l, const char *master_addr, int master_port, json_t *devices);

#endif
