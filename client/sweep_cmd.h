/* ddpctl sweep submit|list|show|cancel: sweeps (POST /sweeps and the rest), with a
 * trial table sorted by the sweep's metric. */
#ifndef DDPD_CLIENT_SWEEP_CMD_H
#define DDPD_CLIENT_SWEEP_CMD_H

#include <stdbool.h>

/* args: what follows "sweep" (the verb first); json: print the API's JSON. */
int sweep_command(const char *const *args, int n, bool json);

#endif
