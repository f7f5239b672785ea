/* Optimizers: see optim.h. The update loops follow torch.optim's single-tensor
 * implementations step for step, in float, with the scalar factors in double. */
#include "optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"

int optimizer_init(optimizer *o, const run_config *cfg, size_t n_params) {
    memset(o, 0, sizeof *o);
    o->type = cfg->train.optimizer.type;
    o->momentum = cfg->train.optimizer.momentum;
    o->weight_decay = cfg->train.optimizer.weight_decay;
    o->beta1 = cfg->train.optimizer.beta1;
    o->beta2 = cfg->train.optimizer.beta2;
    o->eps = cfg->train.optimizer.eps;
    o->nesterov = cfg->train.optimizer.nesterov;
    o->n = n_params;
    int needs1 = o->type != OPT_SGD || o->momentum != 0.0;
    int needs2 = o->type != OPT_SGD;
    if (needs1 && !(o->state1 = calloc(n_params ? n_params : 1, sizeof(float)))) return -1;
    if (needs2 && !(o->state2 = calloc(n_params ? n_params : 1, sizeof(float)))) return -1;
    return 0;
}

void optimizer_free(optimizer *o) {
    free(o->state1);
    free(o->state2);
    o->state1 = o->state2 = NULL;
}

const char *optimizer_state1_name(const optimizer *o) {
    if (!o->state1) return NULL;
    return o->type == OPT_SGD ? "momentum_buffer" : "exp_avg";
}

const char *optimizer_state2_name(const optimizer *o) { return o->state2 ? "exp_avg_sq" : NULL; }

DDPD_VECTOR_CLONES
static void sgd_step(optimizer *o, float *restrict p, float *restrict g, float lr) {
    float wd = (float)o->weight_decay, mom = (float)o->momentum;
    float *restrict buf = o->state1;
    int first = o->step == 0;
    for (size_t i = 0; i < o->n; i++) {
        float d = g[i] + wd * p[i];
        if (buf) {
            buf[i] = first ? d : mom * buf[i] + d;
            d = o->nesterov ? d + mom * buf[i] : buf[i];
        }
        p[i] -= lr * d;
    }
}

DDPD_VECTOR_CLONES
static void adam_step(optimizer *o, float *restrict p, float *restrict g, double lr) {
    long t = o->step + 1;
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    double bias1 = 1.0 - pow(o->beta1, (double)t), bias2 = 1.0 - pow(o->beta2, (double)t);
    float step_size = (float)(lr / bias1), bias2_sqrt = (float)sqrt(bias2), eps = (float)o->eps;
    float l2 = o->type == OPT_ADAM ? (float)o->weight_decay : 0.0f;
    float decay = o->type == OPT_ADAMW ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
    float *restrict m = o->state1, *restrict v = o->state2;
    for (size_t i = 0; i < o->n; i++) {
        float gi = g[i] + l2 * p[i];
        p[i] *= decay;
        m[i] = b1 * m[i] + (1.0f - b1) * gi;
        v[i] = b2 * v[i] + (1.0f - b2) * gi * gi;
        p[i] -= step_size * (m[i] / (sqrtf(v[i]) / bias2_sqrt + eps));
    }
}

void optimizer_step(optimizer *o, float *params, float *grads, double lr) {
    if (o->type == OPT_SGD) sgd_step(o, params, grads, (float)lr);
    else adam_step(o, params, grads, lr);
    o->step++;
}

DDPD_VECTOR_CLONES
double clip_grad_norm(float *grads, size_t n, double max_norm) {
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) sum += (double)grads[i] * grads[i];
    double norm = sqrt(sum);
    double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) {
        float c = (float)coef;
        for (size_t i = 0; i < n; i++) grads[i] *= c;
    }
    return norm;
}
