/* The cap on a run's stored points (ddpd serve --max-points-per-run): a count per live
 * run of the points its events would store (a step's row and each of its series'
 * values, an epoch's row), kept by ingest's thread alone, so that a point costs no
 * query: a run's count starts from what the store holds of it (one query, the first
 * time the run is seen) and goes on in memory until the run ends. */
#ifndef DDPD_SERVER_FEED_POINT_CAP_H
#define DDPD_SERVER_FEED_POINT_CAP_H

#include <stdbool.h>
#include <stdint.h>

#include "op_types.h"

/* Whether run `id` may store `points` more under `cap` (0: no cap): true, counted;
 * false when that would pass it (nothing counted), *first then true the first time,
 * and *stored what the run holds. */
bool point_cap_take(int64_t id, int64_t points, int64_t cap, bool *first, int64_t *stored);

/* Run `id` has ended: its count goes. */
void point_cap_forget(int64_t id);
/* Every count goes (ingest stops). */
void point_cap_clear(void);

#endif
