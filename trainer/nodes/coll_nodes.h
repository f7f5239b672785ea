/* The cpu collectives across nodes (backend "cpu+gloo"): a run of N nodes with L
 * ranks on each, global rank = node * L + local rank. Within a node the ranks share
 * memory (coll_cpu.c, one copy of the parameters per node); between nodes each
 * local rank is linked by gloo to the ranks of the same local rank on the other
 * nodes (gloo_link.h). An all-reduce is hierarchical: reduce-scatter within the node
 * (each local rank averages its share over the node's ranks, in rank order), an
 * all-reduce of that share between the nodes (gloo's ring, L links side by side),
 * then the average of the nodes' averages; an all-reduce also all-gathers the shares
 * within the node. The sharded optimizer shards over the node's ranks (shard_world L):
 * every node updates its own copy identically. Every rank ends with the same bits,
 * run after run. */
#ifndef DDPD_TRAINER_NODES_COLL_NODES_H
#define DDPD_TRAINER_NODES_COLL_NODES_H

#include "collectives.h"
#include "gloo_link.h"

/* `local`: this rank's comm among its node's ranks (coll_cpu_attach); `link`: its
 * link to the same local rank on the other `nodes` nodes (member `node_rank`). The
 * comm takes both and lives until process exit. NULL on no memory. */
coll_comm *coll_nodes_create(coll_comm *local, gloo_link *link, int nodes, int node_rank);

#endif
