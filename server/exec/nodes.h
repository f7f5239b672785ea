/* The nodes a coordinator knows: each `ddpd agent` that registered (POST /nodes), its
 * address, its devices and which run holds each, and when it was last heard from.
 * The coordinator's own host is not in here (the scheduler's pools are its devices).
 *
 * The registry is memory only: an agent registers again when the coordinator
 * answers that it does not know it (after a restart). A node that has not sent a
 * heartbeat for the node timeout is lost (nodes_take_lost); a node that registers
 * again under its name is the same node, up again, with the devices it says now.
 *
 * Thread-safe (its own lock). The scheduler calls it under its lock (the order is
 * always scheduler, then nodes), the agents' executor (executor_agents.h) outside any
 * other; nothing here calls up. */
#ifndef DDPD_SERVER_EXEC_NODES_H
#define DDPD_SERVER_EXEC_NODES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define NODES_MAX 64
#define NODE_NAME_MAX 64
#define NODE_ADDR_MAX 64
#define NODE_MAX_DEVICES 256

typedef enum { NODE_POOL_CPU, NODE_POOL_GPU } node_pool;

/* How a node registers: its name (unique), the address its ranks are reached at, its
 * CPU slots and GPUs (ids as CUDA_VISIBLE_DEVICES names them). */
typedef struct {
    const char *name, *address;
    int slots;
    const char *const *gpus;
    int n_gpus;
} node_spec;

void nodes_init(int64_t timeout_ms);

/* Registers (or registers again) a node: its id (1, 2, ...), or -1 with why in err
 * (the table is full, or the node's devices are held by runs and it now has fewer). */
int nodes_register(const node_spec *spec, char *err, size_t errlen);

/* A heartbeat from node `id`: false when there is no such node (the agent registers
 * again), or it was declared lost (its runs failed; it registers again). */
bool nodes_heard(int id);

/* The node's name and address (copied), false when unknown. */
bool nodes_describe(int id, char *name, size_t name_len, char *address, size_t address_len);

/* How many devices of the pool node `id` has free; -1 when it is not up. */
int nodes_free(int id, node_pool pool);
/* How many devices of the pool node `id` has in all; -1 when it is not up. */
int nodes_capacity(int id, node_pool pool);
/* The ids of the nodes that are up, in registration order; returns how many. */
int nodes_up(int *ids, int max);

/* Gives `n` free devices of node `id` to `run_id`, those with last[i] set (NULL:
 * none) only when the others do not make n: their indices in *devices. -1 when they
 * are not free. */
int nodes_take(int id, node_pool pool, int n, int64_t run_id, const bool *last, int *devices);
/* Whether device i of the pool of node `id` is free (false: held, or no such device or node up). */
bool nodes_device_free(int id, node_pool pool, int i);
/* Gives back what run_id holds on node `id`. */
void nodes_release(int id, int64_t run_id);
/* The GPU id behind device index i of node `id` ("" for a CPU slot). */
const char *nodes_gpu_id(int id, int i);

/* Nodes not heard from for the timeout, declared lost now (each only once): their
 * ids in *ids, how long each was silent in *silent_ms; returns how many. */
int nodes_take_lost(int64_t now_mono_ms, int *ids, int64_t *silent_ms, int max);

/* GET /nodes: every node with its devices, what is free and when it was last heard. */
json_t *nodes_to_json(void);

#endif
