/* Optimizers on the GPU: see optim_cuda.h. The factor computations below are
 * optim.c's, line for line; the loops are in optim_kernels.cu. */
#include "optim_cuda.h"

#include <math.h>

#include "kernels.h"
#include "memory_plan.h"

_Static_assert(KC_NORM_BLOCKS == MEMORY_PLAN_NORM_BLOCKS, "the plan sizes the norm's scratch");
_Static_assert(KC_BIAS_GRAD_MAX_CHUNKS == MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS, "the plan sizes the bias scratch");

/* sgd_range (optim.c), over every element */
static int sgd_step(optimizer *o, float *p, float *g, float *buf, float lr, cudaStream_t s, gpu_error *ge) {
    float wd = (float)o->weight_decay, mom = (float)o->momentum;
    int first = o->step == 0;
    CUDA_TRY(ge, sgd_step_cuda(p, g, buf, o->n, lr, wd, mom, o->nesterov, first, s));
    return 0;
}

/* adam_range (optim.c), over every element */
static int adam_step(optimizer *o, float *p, float *g, float *m, float *v, double lr, cudaStream_t s, gpu_error *ge) {
    long t = o->step + 1;
    float b1 = (float)o->beta1, b2 = (float)o->beta2;
    double bias1 = 1.0 - pow(o->beta1, (double)t), bias2 = 1.0 - pow(o->beta2, (double)t);
    float step_size = (float)(lr / bias1), bias2_sqrt = (float)sqrt(bias2), eps = (float)o->eps;
    float l2 = o->type == OPT_ADAM ? (float)o->weight_decay : 0.0f;
    float decay = o->type == OPT_ADAMW ? (float)(1.0 - lr * o->weight_decay) : 1.0f;
    CUDA_TRY(ge, adam_step_cuda(p, g, m, v, o->n, b1, b2, step_size, bias2_sqrt, eps, l2, decay, s));
    return 0;
}

int optimizer_step_cuda(optimizer *o, float *d_params, float *d_grads, float *d_state1, float *d_state2, double lr,
                        cudaStream_t stream, gpu_error *ge) {
    int rc = o->type == OPT_SGD ? sgd_step(o, d_params, d_grads, d_state1, (float)lr, stream, ge)
                                : adam_step(o, d_params, d_grads, d_state1, d_state2, lr, stream, ge);
    if (rc == 0) o->step++;
    return rc;
}

int clip_grad_norm_cuda_step(float *d_grads, size_t n, double max_norm, double *d_partials, double *d_sumsq,
                             cudaStream_t stream, gpu_error *ge) {
    CUDA_TRY(ge, clip_grad_norm_cuda(d_grads, n, max_norm, d_partials, d_sumsq, stream));
    return 0;
}
