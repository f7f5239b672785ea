/* LR schedules: see lr_schedule.h. */
#include "lr_schedule.h"

#include <math.h>

long lr_warmup_steps(const run_config *cfg, long steps_per_epoch) {
    double steps = cfg->train.lr_schedule.warmup_epochs * (double)steps_per_epoch;
    return steps > 0 ? (long)ceil(steps - 1e-9) : 0; /* (the tolerance: 0.1 x 30 steps is 3, not 3.0000000000000004) */
}

/* The schedule's LR at global step t, warm-up aside. */
static double schedule_at(const run_config *cfg, int epoch, double t, double total, double warmup) {
    double base = cfg->train.optimizer.lr;
    switch (cfg->train.lr_schedule.type) {
    case LR_CONSTANT:
        return base;
    case LR_STEP:
        return base * pow(cfg->train.lr_schedule.gamma, (double)(epoch / cfg->train.lr_schedule.step_epochs));
    case LR_COSINE: {
        double min_lr = cfg->train.lr_schedule.min_lr;
        double span = total - warmup;
        double progress = span > 0 ? (t - warmup) / span : 1.0;
        return min_lr + 0.5 * (base - min_lr) * (1.0 + cos(M_PI * progress));
    }
    }
    return base;
}

double lr_at(const run_config *cfg, int epoch, long step, long steps_per_epoch) {
    long warmup = lr_warmup_steps(cfg, steps_per_epoch);
    long t = (long)epoch * steps_per_epoch + step;
    double total = (double)cfg->train.epochs * (double)steps_per_epoch;
    if (t < warmup) {
        /* cosine starts after its warm-up; constant and step are scaled by it, and
         * step's decays stay at their epochs */
        double ramp = (double)(t + 1) / (double)warmup;
        int from_start = cfg->train.lr_schedule.type == LR_COSINE;
        return ramp * (from_start ? cfg->train.optimizer.lr : schedule_at(cfg, epoch, (double)t, total, 0));
    }
    return schedule_at(cfg, epoch, (double)t, total, (double)warmup);
}
