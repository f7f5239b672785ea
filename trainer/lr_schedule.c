/* LR schedules: see lr_schedule.h. */
#include "lr_schedule.h"

#include <math.h>

double lr_at(const run_config *cfg, int epoch, long step, long steps_per_epoch) {
    double base = cfg->train.optimizer.lr;
    switch (cfg->train.lr_schedule.type) {
    case LR_CONSTANT:
        return base;
    case LR_STEP:
        return base * pow(cfg->train.lr_schedule.gamma, (double)(epoch / cfg->train.lr_schedule.step_epochs));
    case LR_COSINE: {
        double total = (double)cfg->train.epochs * (double)steps_per_epoch;
        double warmup = cfg->train.lr_schedule.warmup_epochs * (double)steps_per_epoch;
        double t = (double)epoch * (double)steps_per_epoch + (double)step;
        if (t < warmup) return base * (t + 1.0) / warmup;
        double min_lr = cfg->train.lr_schedule.min_lr;
        double span = total - warmup;
        double progress = span > 0 ? (t - warmup) / span : 1.0;
        return min_lr + 0.5 * (base - min_lr) * (1.0 + cos(M_PI * progress));
    }
    }
    return base;
}
