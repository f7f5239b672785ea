/* The API's routes: the table the router serves, and what the handlers need to
 * know about the server. */
#ifndef DDPD_SERVER_API_ROUTES_H
#define DDPD_SERVER_API_ROUTES_H

#include <stddef.h>

#include "http.h"

/* At start-up (the uptime /healthz says counts from here). */
void routes_init(void);
extern const route api_routes[];
extern const size_t api_routes_count;

#endif
