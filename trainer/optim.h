/* Optimizers over the flat parameter buffer, with PyTorch's update rules (so that a
 * config means what it means in torch.optim): SGD (momentum, nesterov), Adam and
 * AdamW, weight decay, and gradient clipping by global norm. */
#ifndef DDPD_TRAINER_OPTIM_H
#define DDPD_TRAINER_OPTIM_H

#include <stddef.h>

#include "optim_rules.h"
#include "run_config.h"

typedef struct {
    optimizer_kind type;
    double momentum, weight_decay, beta1, beta2, eps;
    int nesterov;
    size_t n;
    long step;      /* updates done so far (Adam's t) */
    float *state1;  /* sgd: momentum buffer; adam/adamw: exp_avg */
    float *state2;  /* adam/adamw: exp_avg_sq (NULL for sgd) */
    int owns_state; /* optimizer_free frees the state buffers */
} optimizer;

int optimizer_init(optimizer *o, const run_config *cfg, size_t n_params);
/* How many state buffers of n_params floats the config's optimizer needs (0-2). */
int optimizer_state_count(const run_config *cfg);
/* Sets up an optimizer over state buffers the caller owns (zeroed; NULL where
 * optimizer_state_count says none is needed). */
void optimizer_init_external(optimizer *o, const run_config *cfg, size_t n_params, float *state1, float *state2);
void optimizer_free(optimizer *o);
/* One update with learning rate `lr`. */
void optimizer_step(optimizer *o, float *params, float *grads, double lr);

/* The same update, for elements [lo, hi) only (a rank's shard when the optimizer
 * is sharded over ranks); call optimizer_step_done once every range of the step
 * has been updated. The arithmetic per element does not depend on the ranges. */
void optimizer_update_range(optimizer *o, float *params, const float *grads, double lr, size_t lo, size_t hi);
void optimizer_step_done(optimizer *o);

/* The per-step scalars of the next update (o->step + 1) with learning rate `lr`:
 * what optim_rules.h's element updates take, here and on the GPU (optim_cuda.c). */
void adam_factors(const optimizer *o, double lr, adam_scalars *f);
void sgd_factors(const optimizer *o, double lr, sgd_scalars *f);

/* torch.nn.utils.clip_grad_norm_: scales grads so their global L2 norm is at most
 * max_norm. Returns the norm before clipping. */
double clip_grad_norm(float *grads, size_t n, double max_norm);
/* The pieces of clip_grad_norm for sharded gradients: the sum of squares of a range
 * (to be summed over ranks), and the factor to scale by (1 when within max_norm). */
double grad_sum_squares(const float *grads, size_t n);
float clip_coefficient(double sum_squares, double max_norm);
void scale_grads(float *grads, size_t n, float coef);

/* Names under which the state is checkpointed ("exp_avg", ...), NULL if unused. */
const char *optimizer_state1_name(const optimizer *o);
const char *optimizer_state2_name(const optimizer *o);

#endif
