/* The optimizers and gradient clipping on the GPU: the twins of optim.c's
 * optimizer_step and clip_grad_norm, over device buffers, with the same scalar
 * factors computed the same way on the host (so torch.optim's rules hold on both
 * backends). The hyper-parameters and the step count live in the host-side
 * optimizer struct (the engine's host view); its state1/state2 host buffers are
 * only the checkpoint view, the device states are passed in. CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_OPTIM_CUDA_H
#define DDPD_TRAINER_CUDA_OPTIM_CUDA_H

#include <cuda_runtime_api.h>

#include "cuda_check.h"
#include "optim.h"

/* optimizer_step: one update with learning rate `lr`, enqueued on `stream`;
 * increments o->step. d_state1/d_state2: the device states (NULL when unused). */
int optimizer_step_cuda(optimizer *o, float *d_params, float *d_grads, float *d_state1, float *d_state2, double lr,
                        cudaStream_t stream, gpu_error *ge);

/* clip_grad_norm, enqueued on `stream`; the norm stays on the device (d_sumsq
 * receives its square). d_partials: KC_NORM_BLOCKS doubles of scratch. */
int clip_grad_norm_cuda_step(float *d_grads, size_t n, double max_norm, double *d_partials, double *d_sumsq,
                             cudaStream_t stream, gpu_error *ge);

#endif
