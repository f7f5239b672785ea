/* The agents' executor (executor.h): a part on an agent node is handed to its agent
 * in the answer to its heartbeat (POST /nodes/{id}/heartbeat): the list of the parts
 * the node should run, each with what its launcher needs (the config, its node rank,
 * the secret, its devices, where rank 0 is, the rendezvous). The agent starts what is
 * new in the list and stops what is no longer in it (with its own grace), and says in
 * its next heartbeat which parts exited and how: their ends. A node that sends no
 * heartbeat for the node timeout is lost, and so is every part it ran.
 *
 * Everything is level-triggered: a lost answer is simply sent again. Parts are not
 * taken back after a coordinator's restart: an agent stops those no longer listed. */
#ifndef DDPD_SERVER_EXEC_EXECUTOR_AGENTS_H
#define DDPD_SERVER_EXEC_EXECUTOR_AGENTS_H

#include <jansson.h>
#include <stdint.h>

#include "executor.h"

/* node_timeout_ms: a node silent this long is lost (nodes.h). */
const executor *executor_agents_init(int64_t node_timeout_ms, const executor_hooks *hooks);

/* An agent's heartbeat: `reports` is what it says of the parts it runs ([{run, state:
 * "running"|"exited", exit_code, signal, reason, end_t}]); an exited one has ended.
 * Returns the parts it should be running now (a JSON array, new reference): any
 * other it stops. */
json_t *executor_agents_heartbeat(int node, const json_t *reports);

#endif
