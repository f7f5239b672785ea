/* Learning-rate schedules: constant; step (x gamma every step_epochs epochs: the
 * tutorial's x0.3 every 5); cosine decay to min_lr after a linear warm-up. */
#ifndef DDPD_LR_SCHEDULE_H
#define DDPD_LR_SCHEDULE_H

#include "run_config.h"

/* The LR for step `step` (0-based, within the epoch) of `epoch`, given the number
 * of steps per epoch. constant and step change only at epoch boundaries; cosine
 * changes every step. */
double lr_at(const run_config *cfg, int epoch, long step, long steps_per_epoch);

#endif
