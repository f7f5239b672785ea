/* A run's rendezvous over HTTP (exec/rendezvous.h): POST /runs/{id}/rendezvous
 * {"key", "value"} writes a key once, GET /runs/{id}/rendezvous?key=K reads it (404
 * until it is set: the trainers poll). Both take the run's secret as the bearer
 * ("Authorization: Bearer <DDPD_RUN_SECRET>"), not the server's token: the routes
 * are run_secret_auth (http.h). */
#ifndef DDPD_SERVER_API_ROUTES_RENDEZVOUS_H
#define DDPD_SERVER_API_ROUTES_RENDEZVOUS_H

#include <stddef.h>

#include "http.h"

extern const route rendezvous_routes[];
extern const size_t rendezvous_routes_count;

#endif
