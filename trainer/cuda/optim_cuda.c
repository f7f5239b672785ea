/* Optimizers on the GPU: see optim_cuda.h. The factors are optim.c's (adam_factors,
 * sgd_factors), the element updates optim_rules.h's, launched by optim_kernels.cu. */
#include "optim_cuda.h"

#include <math.h>

#include "kernels.h"
#include "memory_plan.h"

_Static_assert(KC_NORM_BLOCKS == MEMORY_PLAN_NORM_BLOCKS, "the plan sizes the norm's scratch");
_Static_assert(KC_BIAS_GRAD_MAX_CHUNKS == MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS, "the plan sizes the bias scratch");

/* sgd_range (optim.c), over every element */
static int sgd_step(optimizer *o, float *p, float *g, float *buf, double lr, cudaStream_t s, gpu_error *ge) {
    sgd_scalars f;
    sgd_factors(o, lr, &f);
    CUDA_TRY(ge, sgd_step_cuda(p, g, buf, o->n, f, s));
    return 0;
}

/* adam_range (optim.c), over every element */
static int adam_step(optimizer *o, float *p, float *g, float *m, float *v, double lr, cudaStream_t s, gpu_error *ge) {
    adam_scalars f;
    adam_factors(o, lr, &f);
    CUDA_TRY(ge, adam_step_cuda(p, g, m, v, o->n, f, s));
    return 0;
}

int optimizer_step_cuda(optimizer *o, float *d_params, float *d_grads, float *d_state1, float *d_state2, double lr,
                        cudaStream_t stream, gpu_error *ge) {
    int rc = o->type == OPT_SGD ? sgd_step(o, d_params, d_grads, d_state1, lr, stream, ge)
                                : adam_step(o, d_params, d_grads, d_state1, d_state2, lr, stream, ge);
    if (rc == 0) o->step++;
    return rc;
}

int clip_grad_norm_cuda_step(float *d_grads, size_t n, double max_norm, double *d_partials, double *d_sumsq,
                             cudaStream_t stream, gpu_error *ge) {
    CUDA_TRY(ge, clip_grad_norm_cuda(d_grads, n, max_norm, d_partials, d_sumsq, stream));
    return 0;
}
