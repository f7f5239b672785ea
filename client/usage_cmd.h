/* ddpctl usage: where the device time went (GET /usage) as a table, or its JSON. */
#ifndef DDPD_CLIENT_USAGE_CMD_H
#define DDPD_CLIENT_USAGE_CMD_H

#include <stdbool.h>

/* by: "user", "run" or "day" (NULL: user); from, to: NULL for no bound. An exit status. */
int usage_command(const char *by, const char *from, const char *to, bool json);

#endif
