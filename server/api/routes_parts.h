/* The route of a run's parts that report on their own: a Slurm job's `ddpd part`s
 * (exec/executor_slurm.h). POST /runs/{id}/parts carries, as an agent's heartbeat
 * does, the part's event lines and log chunks, then its launcher's state; it answers
 * with what was taken of them and what the part should run. It takes the run's secret
 * as the bearer, not the server's token: the route is run_secret_auth (http.h). */
#ifndef DDPD_SERVER_API_ROUTES_PARTS_H
#define DDPD_SERVER_API_ROUTES_PARTS_H

#include <stddef.h>

#include "http.h"

extern const route part_routes[];
extern const size_t part_routes_count;

#endif
