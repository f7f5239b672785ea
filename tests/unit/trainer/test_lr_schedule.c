/* LR schedules: the tutorial's step decay (1e-3 for epochs 0-4, 3e-4 for 5-9),
 * constant, and cosine with warm-up; warm-ups of a fraction of an epoch, and on
 * constant and step, never above the LR. (tests/integration/trainer/test_optim_torch.py holds
 * them against torch.optim.lr_scheduler.) */
#include <math.h>
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

    /* A quarter epoch of 10 steps is 2.5 steps, rounded up to 3: 1/3, 2/3, then the
     * full LR (with 2.5 as the divisor the third step was 1.2 x lr). */
    c = base(LR_COSINE);
    c.train.lr_schedule.warmup_epochs = 0.25;
    CHECK(lr_warmup_steps(&c, 10) == 3, "0.25 epochs of 10 steps: %ld warm-up steps, expected 3", lr_warmup_steps(&c, 10));
    CHECK_NEAR(lr_at(&c, 0, 0, 10), 1e-3 / 3, 1e-15, 0, "fractional warm-up, step 0");
    CHECK_NEAR(lr_at(&c, 0, 1, 10), 2e-3 / 3, 1e-15, 0, "fractional warm-up, step 1");
    CHECK_NEAR(lr_at(&c, 0, 2, 10), 1e-3, 1e-15, 0, "fractional warm-up ends at lr");
    CHECK_NEAR(lr_at(&c, 0, 3, 10), 1e-3, 1e-15, 0, "the cosine starts at lr after it");
    c = base(LR_STEP);
    c.train.lr_schedule.warmup_epochs = 0.3;
    CHECK(lr_warmup_steps(&c, 10) == 3, "0.3 epochs of 10 steps: 3 steps, not %ld", lr_warmup_steps(&c, 10));

    /* No schedule ever exceeds optimizer.lr, whatever the warm-up's fraction. */
    double fractions[] = {0.05, 0.25, 0.3, 0.37, 0.5, 1.0, 1.7, 2.25};
    lr_schedule_kind kinds[] = {LR_CONSTANT, LR_STEP, LR_COSINE};
    for (size_t k = 0; k < 3; k++)
        for (size_t f = 0; f < sizeof fractions / sizeof fractions[0]; f++) {
            c = base(kinds[k]);
            c.train.lr_schedule.warmup_epochs = fractions[f];
            double highest = 0;
            for (int e = 0; e < 10; e++)
                for (long s = 0; s < 7; s++) highest = fmax(highest, lr_at(&c, e, s, 7));
            CHECK(highest <= 1e-3, "schedule %zu, warm-up %g epochs of 7 steps: the LR reaches %.17g > lr", k,
                  fractions[f], highest);
        }

    /* constant and step apply their warm-up too (it was ignored); step's decays stay
     * at their epochs. */
    c = base(LR_CONSTANT);
    c.train.lr_schedule.warmup_epochs = 2;
    CHECK_NEAR(lr_at(&c, 0, 0, 100), 1e-3 / 200, 1e-15, 0, "constant: warm-up from lr/200");
    CHECK_NEAR(lr_at(&c, 1, 99, 100), 1e-3, 1e-15, 0, "constant: full lr at the warm-up's end");
    c = base(LR_STEP);
    c.train.lr_schedule.warmup_epochs = 6;
    CHECK_NEAR(lr_at(&c, 5, 0, 100), 3e-4 * 501.0 / 600.0, 1e-15, 0, "step: the ramp times the decayed LR");
    CHECK_NEAR(lr_at(&c, 6, 0, 100), 3e-4, 1e-15, 0, "step: the decayed LR after the warm-up");
    return test_done("test_lr_schedule");
}
