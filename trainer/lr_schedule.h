/* Learning-rate schedules: constant; step (x gamma every step_epochs epochs: the
 * tutorial's x0.3 every 5); cosine decay to min_lr; each with an optional linear
 * warm-up. */
#ifndef DDPD_TRAINER_LR_SCHEDULE_H
#define DDPD_TRAINER_LR_SCHEDULE_H

#include "run_config.h"

/* The warm-up in steps: lr_schedule.warmup_epochs x steps_per_epoch rounded up (a
 * fraction of an epoch is allowed). */
long lr_warmup_steps(const run_config *cfg, long steps_per_epoch);

/* The LR for step `step` (0-based, within the epoch) of `epoch`, given the number
 * of steps per epoch. Warm-up: the first W = lr_warmup_steps steps ramp linearly,
 * global step t getting (t + 1) / W of the LR (torch's LinearLR with start_factor
 * 1/W over W - 1 steps): W steps end at the full LR, and no step ever exceeds it.
 * constant and step are scaled by the ramp (step's decays stay at their epochs);
 * cosine starts after it and decays from lr to min_lr over the remaining steps.
 * Without a warm-up, constant and step change only at epoch boundaries. */
double lr_at(const run_config *cfg, int epoch, long step, long steps_per_epoch);

#endif
