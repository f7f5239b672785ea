/* The routes agents and people use for nodes: POST /nodes (an agent registers),
 * POST /nodes/{id}/heartbeat (what it forwards and reports, and what it should run),
 * GET /nodes (every node, this host first). */
#ifndef DDPD_SERVER_API_ROUTES_NODES_H
#define DDPD_SERVER_API_ROUTES_NODES_H

#include <stddef.h>

#include "http.h"

extern const route node_routes[];
extern const size_t node_routes_count;

#endif
