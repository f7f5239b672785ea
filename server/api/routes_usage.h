/* The usage route: GET /usage (store/usage_ledger.h says what it counts). */
#ifndef DDPD_SERVER_API_ROUTES_USAGE_H
#define DDPD_SERVER_API_ROUTES_USAGE_H

#include <stddef.h>

#include "http.h"

extern const route usage_routes[];
extern const size_t usage_routes_count;

#endif
