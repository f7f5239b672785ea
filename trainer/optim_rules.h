/* The optimizers' update of one element, torch.optim's single-tensor rules step for
 * step, in float (what the tensors hold), with the per-step scalars computed once in
 * double by the caller (adam_factors, sgd_factors in optim.c), as Python computes
 * them before they meet the tensors. One definition for the CPU (optim.c), the GPU
 * (cuda/optim_kernels.cu) and the GPU tests' CPU stand-in (host_device.h). */
#ifndef DDPD_TRAINER_OPTIM_RULES_H
#define DDPD_TRAINER_OPTIM_RULES_H

#include <math.h>

#include "host_device.h"

/* Adam's and AdamW's scalars for one step (see adam_factors). */
typedef struct {
    float b1, one_minus_b1, b2, one_minus_b2; /* beta1, 1 - beta1, ... each rounded from double */
    float step_size;                          /* lr / (1 - beta1^t) */
    float bias2_sqrt;                         /* sqrt(1 - beta2^t) */
    float eps;
    float l2;    /* Adam: weight_decay (added to the gradient); AdamW: 0 */
    float decay; /* AdamW: 1 - lr weight_decay (the parameter's decoupled decay); Adam: 1 */
} adam_scalars;

/* torch's _single_tensor_adam: grad += l2 param; param *= decay;
 * exp_avg = exp_avg beta1 + (1 - beta1) grad; exp_avg_sq = exp_avg_sq beta2 +
 * (1 - beta2) grad grad; param += -step_size exp_avg / (sqrt(exp_avg_sq) /
 * bias2_sqrt + eps), each operation rounded to float in torch's order. */
HD_INLINE void adam_element(const adam_scalars *f, float *p, float g, float *m, float *v) {
    float pi = *p;
    float gi = g + f->l2 * pi;
    pi *= f->decay;
    float mi = f->b1 * *m + f->one_minus_b1 * gi;
    float vi = f->b2 * *v + f->one_minus_b2 * gi * gi;
    *m = mi;
    *v = vi;
    float denom = sqrtf(vi) / f->bias2_sqrt + f->eps;
    *p = pi - f->step_size * mi / denom;
}

/* SGD's scalars for one step (see sgd_factors). */
typedef struct {
    float lr, wd, momentum;
    int nesterov;
    int first; /* the first step: the momentum buffer starts as the gradient */
} sgd_scalars;

/* torch's _single_tensor_sgd (dampening 0): d = grad + wd param; with a momentum
 * buffer (buf not NULL): buf = first ? d : momentum buf + d, d = nesterov ? d +
 * momentum buf : buf; param -= lr d. */
HD_INLINE void sgd_element(const sgd_scalars *f, float *p, float g, float *buf) {
    float d = g + f->wd * *p;
    if (buf) {
        float b = f->first ? d : f->momentum * *buf + d;
        *buf = b;
        d = f->nesterov ? d + f->momentum * b : b;
    }
    *p -= f->lr * d;
}

/* torch.nn.utils.clip_grad_norm_'s factor from the sum of squared gradients (the
 * gradients are scaled by it when it is below 1). */
HD_INLINE double clip_factor(double sum_squares, double max_norm) { return max_norm / (sqrt(sum_squares) + 1e-6); }

#endif
