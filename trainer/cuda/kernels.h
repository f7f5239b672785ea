/* The element-wise and reduction kernels of the MLP step on the GPU, each the
 * twin of a CPU reference in cpu_kernels.c (same name with _cuda appended, same
 * math, same argument order where it can be), so one can be held against the
 * other (tests/test_gpu_kernels.c). The GEMMs go through cuBLAS (mlp_cuda.c).
 *
 * Every launcher enqueues on `stream` and returns cudaGetLastError() (launch
 * errors; faults in the kernel surface at the next synchronisation). Reductions
 * never use atomics: each has a fixed shape (fixed grid, fixed per-thread order,
 * fixed tree), so the same inputs give bit-identical results run after run.
 * Plain C interface; the kernels live in kernels.cu (the MLP's) and
 * optim_kernels.cu (the optimizers' and the norm's). CUDA builds only. */
#ifndef DDPD_CUDA_KERNELS_H
#define DDPD_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* The values of activation_kind (run_config.h); mlp_cuda.c checks they agree. */
enum { KC_ACT_RELU = 0, KC_ACT_GELU = 1, KC_ACT_TANH = 2 };

/* Bias-gradient partials: chunks of at most this many per column (the scratch
 * buffer holds KC_BIAS_GRAD_MAX_CHUNKS x cols floats). */
#define KC_BIAS_GRAD_MAX_CHUNKS 256
/* Per-block partial sums of the gradient norm (scratch: KC_NORM_BLOCKS doubles). */
#define KC_NORM_BLOCKS 512

/* k_u8_to_f32 (cpu_kernels.c) fused with engine_cpu.c's gather_inputs: for each
 * row r < rows, example k = indices ? indices[r] : first + r;
 * x[r * pixels + p] = images[k * pixels + p] * scale, and labels_out[r] =
 * labels[k] (skipped when `labels` is NULL: the labels are already in place). */
cudaError_t k_u8_to_f32_gather_cuda(float *x, uint8_t *labels_out, const uint8_t *images, const uint8_t *labels,
                                    const uint64_t *indices, size_t first, int rows, size_t pixels, float scale,
                                    cudaStream_t stream);

/* k_bias_act_forward: z[b, j] += bias[j]; when apply_act: pre <- z (if pre is not
 * NULL), z <- act(z). rows x cols. */
cudaError_t k_bias_act_forward_cuda(float *z, float *pre, const float *bias, int rows, int cols, int act,
                                    int apply_act, cudaStream_t stream);

/* k_act_backward: dz[i] *= act'(.) from the layer's output (relu, tanh) or its
 * pre-activation (gelu). */
cudaError_t k_act_backward_cuda(float *dz, const float *out, const float *pre, size_t n, int act,
                                cudaStream_t stream);

/* k_bias_grad: db[j] = sum over rows of dz[b, j]. Two fixed passes: chunks of rows
 * summed in row order into `partials`, then the chunks summed in chunk order. */
cudaError_t k_bias_grad_cuda(float *db, const float *dz, int rows, int cols, float *partials, cudaStream_t stream);

/* k_softmax_xent, first half: per example b, row_loss[b] = its cross-entropy,
 * row_hit[b] = 1 when the argmax is the label; dlogits (may be NULL) =
 * (softmax - onehot) * grad_scale. One thread per example, classes in order. */
cudaError_t k_softmax_xent_cuda(const float *logits, const uint8_t *labels, int rows, int cols, float *dlogits,
                                float grad_scale, float *row_loss, int *row_hit, cudaStream_t stream);

/* k_softmax_xent, second half (its *loss_sum and *correct): out[0] = sum of
 * row_loss (in double), out[1] = sum of row_hit, out[2] = out[0] / rows; with
 * `accumulate`, out[0] and out[1] are added to instead (out[2] untouched). One
 * block, a fixed tree. */
cudaError_t k_loss_reduce_cuda(double *out, const float *row_loss, const int *row_hit, int rows, int accumulate,
                               cudaStream_t stream);

/* optim.c's sgd_range loop: d = g + wd p; with a momentum buffer (buf not NULL):
 * buf = first ? d : mom buf + d, d = nesterov ? d + mom buf : buf; p -= lr d. */
cudaError_t sgd_step_cuda(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom,
                          int nesterov, int first, cudaStream_t stream);

/* optim.c's adam_range loop (Adam: l2 = weight decay, decay = 1; AdamW: l2 = 0,
 * decay = 1 - lr wd), with the scalar factors computed by the caller as there. */
cudaError_t adam_step_cuda(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                           float step_size, float bias2_sqrt, float eps, float l2, float decay, cudaStream_t stream);

/* clip_grad_norm (optim.c) without leaving the device: *sumsq = sum of g[i]^2 in
 * double (KC_NORM_BLOCKS fixed partials, then a fixed tree), then g *= coef where
 * coef = max_norm / (sqrt(*sumsq) + 1e-6) when coef < 1. */
cudaError_t clip_grad_norm_cuda(float *g, size_t n, double max_norm, double *partials, double *sumsq,
                                cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
