/* Optimizers over the flat parameter buffer, with PyTorch's update rules (so that a
 * config means what it means in torch.optim): SGD (momentum, nesterov), Adam and
 * AdamW, weight decay, and gradient clipping by global norm. */
#ifndef DDPD_OPTIM_H
#define DDPD_OPTIM_H

#include <stddef.h>

#include "run_config.h"

typedef struct {
    optimizer_kind type;
    double momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    size_t n;
    long step;      /* updates done so far (Adam's t) */
    float *state1;  /* sgd: momentum buffer; adam/adamw: exp_avg */
    float *state2;  /* adam/adamw: exp_avg_sq (NULL for sgd) */
} optimizer;

int optimizer_init(optimizer *o, const run_config *cfg, size_t n_params);
void optimizer_free(optimizer *o);
/* One update with learning rate `lr`. */
void optimizer_step(optimizer *o, float *params, float *grads, double lr);

/* torch.nn.utils.clip_grad_norm_: scales grads so their global L2 norm is at most
 * max_norm. Returns the norm before clipping. */
double clip_grad_norm(float *grads, size_t n, double max_norm);

/* Names under which the state is checkpointed ("exp_avg", ...), NULL if unused. */
const char *optimizer_state1_name(const optimizer *o);
const char *optimizer_state2_name(const optimizer *o);

#endif
