/* What a run may hold beyond its devices, decided in one place: its memory (asked in
 * resources.memory_gb, else the server's default in proportion to its devices, never
 * past its owner's --max-memory-gb) and, at submission, whether its owner may ask for
 * that much memory and is within its disk quota. The submission's gate
 * (runs_permitted) calls run_limits_permitted; the scheduler asks run_memory_limit
 * when it starts a part. */
#ifndef DDPD_SERVER_SCHED_RUN_LIMITS_H
#define DDPD_SERVER_SCHED_RUN_LIMITS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"
#include "device_pool.h"
#include "validator.h"

/* resources.memory_gb of a config, in bytes; 0 when not asked (absent, 0, not a number). */
int64_t run_memory_asked(const json_t *config);

/* What `who` may not ask for (403): a memory limit past its --max-memory-gb
 * (/resources/memory_gb), and any run at all while its runs hold more than its disk
 * quota (""). Each added to errs. */
void run_limits_permitted(const json_t *config, const caller *who, schema_errors *errs);

/* The memory limit of a part holding `devices` of the run's `world_size` devices of
 * `pool`: its share of what the run asked (`asked` bytes, 0: the server's default,
 * `per_device` bytes per device of the pool (ddpd serve --run-memory-per-slot), times
 * its devices), never past `owner`'s --max-memory-gb (NULL owner: no such maximum). Its
 * words, for a reason, in `from` ("resources.memory_gb", "ddpd serve
 * --run-memory-per-slot: 2 GiB x 2 CPU slots"). 0: no limit (the server has no
 * default: no memory known). */
int64_t run_memory_limit(int64_t asked, const char *owner, pool_kind pool, int devices, int world_size,
                         int64_t per_device, char *from, size_t fromlen);

/* The processes and threads a part holding `devices` devices may have at once: the
 * server's --max-run-processes (`configured`, -1: not set), else 1024 a device past 4
 * devices, else 4096. */
long run_pids_limit(long configured, int devices);

#endif
