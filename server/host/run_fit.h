/* Does a built-in run fit its model and this host? Checked at submission with the
 * trainer's own code (model_shape_init, host_plan.h), from the dataset's headers: a
 * CNN whose kernel or max-pool does not fit its input is refused naming the layer,
 * and a CPU run whose host-memory plan exceeds its share of the host (world_size of
 * the CPU slots) is refused naming both numbers. A data file that is not IDX is
 * left to the trainer, which fails the run naming it (as before). */
#ifndef DDPD_SERVER_HOST_RUN_FIT_H
#define DDPD_SERVER_HOST_RUN_FIT_H

#include <jansson.h>
#include <stdbool.h>

#include "validator.h"

/* resolved: the config with its defaults and its data paths made absolute (what the
 * trainer gets). cpu: the run goes to the CPU pool of `slots` slots. */
void run_fit_check(const json_t *resolved, bool cpu, int slots, schema_errors *errs);

#endif
