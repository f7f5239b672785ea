/* The sweeps' routes (server/sweep/sweep.h): POST /sweeps, GET /sweeps,
 * GET /sweeps/{id}, POST /sweeps/{id}/cancel. */
#ifndef DDPD_SERVER_API_ROUTES_SWEEPS_H
#define DDPD_SERVER_API_ROUTES_SWEEPS_H

#include <stddef.h>

#include "http.h"

extern const route sweep_routes[];
extern const size_t sweep_routes_count;

#endif
