/* Which collectives backend a run uses (`distributed.backend`), and why, in words
 * the run's log shows. */
#ifndef DDPD_BACKEND_SELECT_H
#define DDPD_BACKEND_SELECT_H

#include <stddef.h>

#include "run_config.h"

/* Returns the backend to use (BACKEND_CPU or BACKEND_NCCL) and writes why into
 * `why`; returns -1 (and `why` says what to do) when the asked backend cannot run. */
int backend_select(const run_config *cfg, char *why, size_t whylen);

#endif
