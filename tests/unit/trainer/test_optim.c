/* Optimizers against torch.optim's update rules written out in double precision
 * (SGD with momentum and nesterov, Adam with L2 weight decay, AdamW with
 * decoupled decay), Adam's moments to float rounding, and gradient clipping by
 * global norm. (tests/integration/trainer/test_optim_torch.py holds them against torch.optim
 * itself.) */
#include <string.h>

#include "check.h"
#include "optim.h"

#define N 5
#define STEPS 6

static run_config config(optimizer_kind type, double momentum, int nesterov, double wd) {
    run_config c;
    memset(&c, 0, sizeof c);
    c.train.optimizer.type = type;
    c.train.optimizer.momentum = momentum;
    c.train.optimizer.nesterov = nesterov;
    c.train.optimizer.weight_decay = wd;
    c.train.optimizer.beta1 = 0.9;
    c.train.optimizer.beta2 = 0.999;
    c.train.optimizer.eps = 1e-8;
    return c;
}

static double grad_at(int step, int i) { return 0.1 * (i + 1) * (step % 2 ? -1.0 : 1.0) + 0.01 * step; }

static void reference(const run_config *c, double lr, double *p) {
    double buf[N] = {0}, m[N] = {0}, v[N] = {0};
    const double b1 = 0.9, b2 = 0.999, eps = 1e-8, wd = c->train.optimizer.weight_decay;
    for (int t = 1; t <= STEPS; t++) {
        for (int i = 0; i < N; i++) {
            double g = grad_at(t - 1, i);
            if (c->train.optimizer.type == OPT_SGD) {
                double d = g + wd * p[i];
                double mom = c->train.optimizer.momentum;
                if (mom != 0) {
                    buf[i] = t == 1 ? d : mom * buf[i] + d;
                    d = c->train.optimizer.nesterov ? d + mom * buf[i] : buf[i];
                }
                p[i] -= lr * d;
            } else {
                if (c->train.optimizer.type == OPT_ADAM) g += wd * p[i];
                else p[i] *= 1 - lr * wd;
                m[i] = b1 * m[i] + (1 - b1) * g;
                v[i] = b2 * v[i] + (1 - b2) * g * g;
                double mhat_scale = lr / (1 - pow(b1, t));
                double denom = sqrt(v[i]) / sqrt(1 - pow(b2, t)) + eps;
                p[i] -= mhat_scale * m[i] / denom;
            }
        }
    }
}

/* Adam's moments after one step are exact functions of the gradient: exp_avg =
 * (1 - beta1) g, exp_avg_sq = (1 - beta2) g^2. Computed with (1 - beta) in double,
 * as torch does, they are within a float rounding or two of the exact values; with
 * (1 - beta2) computed in float (1.0f - 0.999f) exp_avg_sq was 1.3e-5 off. */
static void check_adam_moments(void) {
    run_config c = config(OPT_ADAM, 0, 0, 0);
    optimizer o;
    REQUIRE(optimizer_init(&o, &c, N) == 0, "init");
    float p[N], g[N];
    for (int i = 0; i < N; i++) p[i] = 0.5f, g[i] = (float)grad_at(3, i);
    optimizer_step(&o, p, g, 1e-3);
    double worst_m = 0, worst_v = 0;
    for (int i = 0; i < N; i++) {
        double m = (1 - 0.9) * g[i], v = (1 - 0.999) * (double)g[i] * g[i];
        worst_m = fmax(worst_m, fabs(o.state1[i] - m) / fabs(m));
        worst_v = fmax(worst_v, fabs(o.state2[i] - v) / fabs(v));
    }
    CHECK(worst_m <= 2.5e-7, "exp_avg after one step: %.3g relative to (1 - beta1) g", worst_m);
    CHECK(worst_v <= 4e-7, "exp_avg_sq after one step: %.3g relative to (1 - beta2) g^2", worst_v);
    optimizer_free(&o);
}

static void check_against_reference(const char *what, run_config c) {
    const double lr = 0.05;
    optimizer o;
    REQUIRE(optimizer_init(&o, &c, N) == 0, "init");
    float p[N], g[N];
    double ref[N];
    for (int i = 0; i < N; i++) p[i] = (float)(ref[i] = 0.5 - 0.2 * i);
    for (int t = 0; t < STEPS; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)grad_at(t, i);
        optimizer_step(&o, p, g, lr);
    }
    reference(&c, lr, ref);
    for (int i = 0; i < N; i++) CHECK_NEAR(p[i], ref[i], 1e-5, 1e-6, what);
    CHECK(o.step == STEPS, "%s: step count %ld", what, o.step);
    optimizer_free(&o);
}

int main(void) {
    check_against_reference("sgd", config(OPT_SGD, 0, 0, 0));
    check_against_reference("sgd+wd", config(OPT_SGD, 0, 0, 0.1));
    check_against_reference("sgd momentum", config(OPT_SGD, 0.9, 0, 0.01));
    check_against_reference("sgd nesterov", config(OPT_SGD, 0.9, 1, 0.01));
    check_against_reference("adam", config(OPT_ADAM, 0, 0, 0));
    check_against_reference("adam+l2", config(OPT_ADAM, 0, 0, 0.1));
    check_against_reference("adamw", config(OPT_ADAMW, 0, 0, 0.1));
    check_adam_moments();

    /* Adam and AdamW differ when weight decay is on. */
    run_config a = config(OPT_ADAM, 0, 0, 0.5), w = config(OPT_ADAMW, 0, 0, 0.5);
    optimizer oa, ow;
    optimizer_init(&oa, &a, 1);
    optimizer_init(&ow, &w, 1);
    float pa = 1, pw = 1, ga = 0.1f, gw = 0.1f;
    optimizer_step(&oa, &pa, &ga, 0.1);
    optimizer_step(&ow, &pw, &gw, 0.1);
    CHECK(fabsf(pa - pw) > 1e-4f, "adam %g vs adamw %g must differ", pa, pw);
    optimizer_free(&oa);
    optimizer_free(&ow);

    float g[4] = {3, 4, 0, 0}; /* norm 5 */
    double norm = clip_grad_norm(g, 4, 1.0);
    CHECK_NEAR(norm, 5.0, 1e-9, 0, "norm before clipping");
    CHECK_NEAR(sqrt(g[0] * g[0] + g[1] * g[1]), 1.0, 1e-5, 0, "clipped to max_norm");
    CHECK_NEAR(g[0] / g[1], 0.75, 1e-6, 0, "direction kept");
    float h[2] = {0.3f, 0.4f};
    clip_grad_norm(h, 2, 1.0);
    CHECK(h[0] == 0.3f && h[1] == 0.4f, "below max_norm: untouched");
    return test_done("test_optim");
}
