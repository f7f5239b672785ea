/* Where a run across nodes goes: k nodes, each giving it world_size / k devices
 * (every node runs as many ranks, as torchrun's LOCAL_WORLD_SIZE says), all at once
 * or none (gang scheduling). A pure function over what each node has, so the
 * scheduler's rule can be tested alone. */
#ifndef DDPD_SERVER_SCHED_PLACEMENT_H
#define DDPD_SERVER_SCHED_PLACEMENT_H

#include <stdbool.h>

typedef struct {
    int id;       /* 0: the coordinator's own host; else an agent node's id */
    int free;     /* devices of the run's pool free now */
    int capacity; /* and in all */
} place_candidate;

/* Chooses nodes for `world_size` ranks among `c` (in their order: the first that
 * fit are taken). nodes_wanted > 0: exactly that many (it must divide world_size);
 * 0: the fewest that fit. by_capacity: against each node's capacity (could it ever
 * fit?) instead of what is free now. Their ids in out (in node-rank order); returns
 * how many, 0 when the run does not fit. */
int placement_choose(const place_candidate *c, int n, int world_size, int nodes_wanted, bool by_capacity, int *out);

#endif
