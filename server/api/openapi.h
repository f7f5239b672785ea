/* The API's own description, served at GET /openapi.json: schema/openapi.json, the
 * OpenAPI 3.1 document, embedded in the binary at build time, so that what ddpd
 * serves is what it was built with. It refers to the run-config and sweep schemas
 * relatively, as run-config.schema.json and sweep.schema.json, which resolve beside it
 * both in the repository and on the server (routes_static.c serves them at
 * /run-config.schema.json and /sweep.schema.json too). */
#ifndef DDPD_SERVER_API_OPENAPI_H
#define DDPD_SERVER_API_OPENAPI_H

#include "http.h"

void openapi_handle(request *rq, response *rs);

#endif
