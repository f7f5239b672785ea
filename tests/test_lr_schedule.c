/* LR schedules: the tutorial's step decay (1e-3 for epochs 0-4, 3e-4 for 5-9),
 * constant, and cosine with warm-up. */
#include <string.h>

#include "check.h"
#include "lr_schedule.h"

static run_config base(lr_schedule_kind kind) {
    run_config c;
    memset(&c, 0, sizeof c);
    c.train.epochs = 10;
    c.train.optimizer.lr = 1e-3;
    c.train.lr_schedule.type = kind;
    c.train.lr_schedule.step_epochs = 5;
    c.train.lr_schedule.gamma = 0.3;
    return c;
}

int main(void) {
    run_config c = base(LR_STEP);
    for (int e = 0; e < 5; e++) CHECK_NEAR(lr_at(&c, e, 0, 100), 1e-3, 1e-12, 0, "step: epochs 0-4");
    for (int e = 5; e < 10; e++) CHECK_NEAR(lr_at(&c, e, 57, 100), 3e-4, 1e-12, 0, "step: epochs 5-9");
    CHECK_NEAR(lr_at(&c, 10, 0, 100), 9e-5, 1e-12, 0, "step: epoch 10");

    c = base(LR_CONSTANT);
    CHECK_NEAR(lr_at(&c, 9, 99, 100), 1e-3, 1e-12, 0, "constant");

    c = base(LR_COSINE);
    c.train.lr_schedule.warmup_epochs = 1;
    c.train.lr_schedule.min_lr = 1e-5;
    CHECK_NEAR(lr_at(&c, 0, 0, 100), 1e-5, 1e-9, 0, "warm-up starts at lr/steps");
    CHECK_NEAR(lr_at(&c, 0, 49, 100), 5e-4, 1e-9, 0, "warm-up halfway");
    CHECK_NEAR(lr_at(&c, 1, 0, 100), 1e-3, 1e-9, 0, "peak after warm-up");
    double mid = lr_at(&c, 5, 50, 100); /* halfway through the decay */
    CHECK_NEAR(mid, 1e-5 + 0.5 * (1e-3 - 1e-5), 1e-9, 0, "cosine midpoint");
    CHECK(lr_at(&c, 9, 99, 100) < 1.1e-5, "cosine ends near min_lr");
    double prev = 1;
    int monotone = 1;
    for (int e = 1; e < 10; e++)
        for (int s = 0; s < 100; s++) {
            double lr = lr_at(&c, e, s, 100);
            if (lr > prev) monotone = 0;
            prev = lr;
        }
    CHECK(monotone, "cosine decays monotonically after warm-up");
    return test_done("test_lr_schedule");
}
