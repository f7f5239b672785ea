/* The agent's requests to its coordinator: JSON in, JSON out, over one libcurl
 * handle (kept alive), with the token, and a deadline so that a coordinator that
 * does not answer never stalls the agent's loop for long. */
#ifndef DDPD_SERVER_AGENT_AGENT_HTTP_H
#define DDPD_SERVER_AGENT_AGENT_HTTP_H

#include <jansson.h>
#include <stddef.h>

int agent_http_init(const char *base_url, const char *token);

/* POST `body` (taken) to base_url + path. Returns the HTTP status with the answer's
 * JSON in *reply (NULL when not JSON), or -1 with why in err (no answer). */
long agent_http_post(const char *path, json_t *body, json_t **reply, char *err, size_t errlen);

#endif
