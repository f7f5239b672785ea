/* This host's devices and which run holds each: GPUs (given to a run through
 * CUDA_VISIBLE_DEVICES, named by their ids) and CPU slots (one rank each), two pools.
 * No device is ever given to two runs. No lock of its own: the scheduler's. */
#ifndef DDPD_SERVER_SCHED_INCLUDE_DEVICE_POOL_H
#define DDPD_SERVER_SCHED_INCLUDE_DEVICE_POOL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"

typedef enum { POOL_CPU, POOL_GPU } pool_kind;

const char *pool_name(pool_kind pool); /* "cpu", "gpu" */
const char *pool_unit(pool_kind pool); /* "CPU slots", "GPUs" */

typedef struct {
    int count[2];      /* per pool: how many devices */
    char **gpus;       /* GPU ids, as CUDA_VISIBLE_DEVICES names them */
    int64_t *owner[2]; /* per pool and device: the run holding it, or 0 */
} device_pool;

void device_pool_init(device_pool *d, char **gpus, int n_gpus, int slots);
int device_pool_capacity(const device_pool *d, pool_kind pool);
int device_pool_free(const device_pool *d, pool_kind pool);

/* Gives n free devices of the pool (the caller knows there are) to `run`, those
 * with last[i] set (NULL: none; suspect devices) only when the others do not make n:
 * their indices in devices[0..n), their names appended to `names` ("cpu:0, cpu:1")
 * and to `json` (a JSON array being written: its "[" is there already), the GPU ids
 * to `visible` (CUDA_VISIBLE_DEVICES). */
void device_pool_take(device_pool *d, pool_kind pool, int n, int64_t run, const bool *last, int *devices,
                      buf_t *names, buf_t *json, buf_t *visible);
/* The n devices a run held before a restart, by their names as the store has them
 * ("cpu:3", "gpu:UUID"), given to it again; one this host no longer has, or that is
 * not free, is said in the log and not counted. */
void device_pool_take_named(device_pool *d, pool_kind pool, int64_t run, const json_t *names, int n);
/* Every device of the pool that `run` holds is free again. */
void device_pool_release(device_pool *d, pool_kind pool, int64_t run);

/* A device's name for the store and the log: "cpu:3", "gpu:UUID"; on an agent node
 * (node not NULL), "NODE/cpu:3". */
void device_name(pool_kind pool, const char *node, const char *gpu, int i, char *out, size_t n);

#endif
