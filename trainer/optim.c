/* Optimizers: see optim.h. The update of one element is optim_rules.h's (torch.optim's
 * single-tensor rules, in float); its scalar factors are computed here, in double. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "host_plan.h"
#include "optim_rules.h"

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

void sgd_factors(const optimizer *o, double lr, sgd_scalars *f) {
    f->lr = (float)lr;
    f->wd = (float)o->weight_decay;
    f->momentum = (float)o->momentum;
    f->nesterov = o->nesterov;
    f->first = o->step == 0;
}

DDPD_VECTOR_CLONES
static void sgd_range(optimizer *o, float *restrict p, const float *restrict g, double lr, size_t lo, size_t hi) {
    sgd_scalars f;
    sgd_factors(o, lr, &f);
    float *restrict buf = o->state1;
    for (size_t i = lo; i < hi; i++) sgd_element(&f, p + i, g[i], buf ? buf + i : NULL);
}

/* In double (Python floats), rounded to float once where they meet the tensors:
 * (1 - beta) computed in float is 1.3e-5 away from torch's for beta2 0.999
 * (1.0f - 0.999f is not 0.001f), which exp_avg_sq would carry for ever. */
void adam_factors(const optimizer *o, double lr, adam_scalars *f) {
    long t = o->step + 1;
    double bias1 = 1.0 - pow(o->beta1, (double)t), bias2 = 1.0 - pow(o->beta2, (double)t);
    f->b1 = (float)o->beta1;
    f->one_minus_b1 = (float)(1.0 - o->beta1);
    f->b2 = (float)o->beta2;
    f->one_minus_b2 = (float)(1.0 - o->beta2);
    f->step_size = (float)(lr / bias1);
    f->bias2_sqrt = (float)sqrt(bias2);
    f->eps = (float)o->eps;
    f->l2 = o->type == OPT_ADAM ? (float)o->weight_decay : 0.0f;
    f->decay = o->type == OPT_ADAMW ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
}

DDPD_VECTOR_CLONES
static void adam_range(optimizer *o, float *restrict p, const float *restrict g, double lr, size_t lo, size_t hi) {
    adam_scalars f;
    adam_factors(o, lr, &f);
    float *restrict m = o->state1, *restrict v = o->state2;
    for (size_t i = lo; i < hi; i++) adam_element(&f, p + i, g[i], m + i, v + i);
}

void optimizer_update_range(optimizer *o, float *params, const float *grads, double lr, size_t lo, size_t hi) {
    if (o->type == OPT_SGD) sgd_range(o, params, grads, lr, lo, hi);
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
    double coef = clip_factor(sum_squares, max_norm);
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
