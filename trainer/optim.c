/* Optimizers: see optim.h. The update loops follow torch.optim's single-tensor
 * implementations step for step, in float, with the scalar factors in double. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "host_plan.h"

int optimizer_state_count(const run_config *cfg) { return host_plan_optimizer_states(cfg); }

void optimizer_init_external(optimizer *o, const run_config *cfg, size_t n_params, float *state1, float *state2) {
    memset(o, 0, sizeof *o);
    o->type = cfg->train.optimizer.type;
    o->momentum = cfg->train.optimizer.momentum;
    o->weight_decay = cfg->train.optimizer.weight_decay;
    o->beta1 = cfg->train.optimizer.beta1;
    o->beta2 = cfg->train.optimizer.beta2;
    o->eps = cfg->train.optimizer.eps;
    o->nesterov = cfg->train.optimizer.nesterov;
    o->n = n_params;
    o->state1 = state1;
    o->state2 = state2;
}

int optimizer_init(optimizer *o, const run_config *cfg, size_t n_params) {
    int states = optimizer_state_count(cfg);
    size_t n = n_params ? n_params : 1;
    float *s1 = states >= 1 ? calloc(n, sizeof(float)) : NULL;
    float *s2 = states >= 2 ? calloc(n, sizeof(float)) : NULL;
    optimizer_init_external(o, cfg, n_params, s1, s2);
    o->owns_state = 1;
    if ((states >= 1 && !s1) || (states >= 2 && !s2)) {
        optimizer_free(o);
        return -1;
    }
    return 0;
}

void optimizer_free(optimizer *o) {
    if (o->owns_state) {
        free(o->state1);
        free(o->state2);
    }
    o->state1 = o->state2 = NULL;
}

const char *optimizer_state1_name(const optimizer *o) {
    if (!o->state1) return NULL;
    return o->type == OPT_SGD ? "momentum_buffer" : "exp_avg";
}

const char *optimizer_state2_name(const optimizer *o) { return o->state2 ? "exp_avg_sq" : NULL; }

DDPD_VECTOR_CLONES
static void sgd_range(optimizer *o, float *restrict p, const float *restrict g, float lr, size_t lo, size_t hi) {
    float wd = (float)o->weight_decay, mom = (float)o->momentum;
    float *restrict buf = o->state1;
    int first = o->step == 0;
    for (size_t i = lo; i < hi; i++) {
        float d = g[i] + wd * p[i];
        if (buf) {
            buf[i] = first ? d : mom * buf[i] + d;
            d = o->nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}

DDPD_VECTOR_CLONES
static void adam_range(optimizer *o, float *restrict p, const float *restrict g, double lr, size_t lo, size_t hi) {
    long t = o->step + 1;
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    double bias1 = 1.0 - pow(o->beta1, (double)t), bias2 = 1.0 - pow(o->beta2, (double)t);
    float step_size = (float)(lr / bias1), bias2_sqrt = (float)sqrt(bias2), eps = (float)o->eps;
    float l2 = o->type == OPT_ADAM ? (float)o->weight_decay : 0.0f;
    float decay = o->type == OPT_ADAMW ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
    float *restrict m = o->state1, *restrict v = o->state2;
    for (size_t i = lo; i < hi; i++) {
        float gi = g[i] + l2 * p[i];
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step_size * (m[i] / (sqrtf(v[i]) / bias2_sqrt + eps));
    }
}

void optimizer_update_range(optimizer *o, float *params, const float *grads, double lr, size_t lo, size_t hi) {
    if (o->type == OPT_SGD) sgd_range(o, params, grads, (float)lr, lo, hi);
    else adam_range(o, params, grads, lr, lo, hi);
}

void optimizer_step_done(optimizer *o) { o->step++; }

void optimizer_step(optimizer *o, float *params, float *grads, double lr) {
    optimizer_update_range(o, params, grads, lr, 0, o->n);
    optimizer_step_done(o);
}

DDPD_VECTOR_CLONES
double grad_sum_squares(const float *grads, size_t n) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)grads[i] * grads[i];
    return sum;
}

float clip_coefficient(double sum_squares, double max_norm) {
    double coef = max_norm / (sqrt(sum_squares) + 1e-6);
    return coef < 1.0 ? (float)coef : 1.0f;
}

DDPD_VECTOR_CLONES
void scale_grads(float *grads, size_t n, float coef) {
    for (size_t i = 0; i < n; i++) grads[i] *= coef;
}

double clip_grad_norm(float *grads, size_t n, double max_norm) {
    double sum = grad_sum_squares(grads, n);
    float coef = clip_coefficient(sum, max_norm);
    if (coef < 1.0f) scale_grads(grads, n, coef);
    return sqrt(sum);
}
