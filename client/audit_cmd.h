/* ddpctl audit: the audit log (GET /audit) as a table, or its JSON. */
#ifndef DDPD_CLIENT_AUDIT_CMD_H
#define DDPD_CLIENT_AUDIT_CMD_H

#include <stdbool.h>

/* Each filter NULL: none. An exit status (client_http.h's). */
int audit_command(const char *actor, const char *target, const char *since, const char *limit, bool json);

#endif
