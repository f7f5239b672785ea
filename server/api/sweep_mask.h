/* What of a sweep's answer (GET /sweeps/{id}, each sweep of GET /sweeps) only its
 * owner and admins see, by run_mask.h's rule (run_mask_sees_all) and as a command
 * run's answer is masked: its base's env values and its command's arguments, and the
 * values of its parameters that reach them (sweep_spec.h, sweep_param_secret:
 * "env.NAME", a "{placeholder}", a path into env or command), in its spec, in each
 * trial's params and in its best trial's. Anyone else sees the variables' names, the
 * program, how many values and arguments there are, each shown as RUN_MASK_HIDDEN,
 * and "hidden" lists the JSON pointers of what was hidden ("/spec/base/env",
 * "/spec/base/command", "/spec/parameters/KEY": that parameter's values there and in
 * every trial's and the best's params; in GET /sweeps, which has no spec,
 * "/best/params/KEY"). */
#ifndef DDPD_SERVER_API_SWEEP_MASK_H
#define DDPD_SERVER_API_SWEEP_MASK_H

#include <jansson.h>
#include <stdbool.h>

#include "auth.h"

/* Masks `sweep` (one sweep's answer, an object with "owner") in place unless `who`
 * sees all of it. True when something was hidden. */
bool sweep_mask_for(json_t *sweep, const caller *who);

#endif
