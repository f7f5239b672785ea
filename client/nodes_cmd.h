/* ddpctl nodes: the nodes (GET /nodes) with their devices and what is free, and the
 * marks failures left (suspect or excluded nodes and devices, with the evidence), as
 * tables, or the answer's JSON. */
#ifndef DDPD_CLIENT_NODES_CMD_H
#define DDPD_CLIENT_NODES_CMD_H

#include <stdbool.h>

/* An exit status. */
int nodes_command(bool json);

#endif
