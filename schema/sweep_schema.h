/* The sweep's schema (schema/sweep.schema.json, embedded in the binary): what a body of
 * POST /sweeps may hold, its defaults, and what GET /sweeps/{id} shows as its `spec`.
 * The server checks a body against it with the generic validator (validator.h), then
 * what a schema cannot say (server/sweep/sweep_spec.c), and serves it beside
 * /openapi.json, whose SweepSpec refers to it. */
#ifndef DDPD_SCHEMA_SWEEP_SCHEMA_H
#define DDPD_SCHEMA_SWEEP_SCHEMA_H

#include <jansson.h>

/* The schema document (parsed once, owned by this module; never free it). */
const json_t *sweep_schema(void);
/* The schema's text, as embedded at build time. */
const char *sweep_schema_text(void);

#endif
