/* The audit log's route: GET /audit (store/audit.h holds what it records). */
#ifndef DDPD_SERVER_API_ROUTES_AUDIT_H
#define DDPD_SERVER_API_ROUTES_AUDIT_H

#include <stddef.h>

#include "http.h"

extern const route audit_routes[];
extern const size_t audit_routes_count;

#endif
