/* The element-wise and reduction kernels of the MLP step on the GPU, each the
 * twin of a CPU reference in cpu_kernels.c (same name with _cuda appended, same
 * math, same argument order where it can be), so one can be held against the
 * other (tests/unit/gpu/test_gpu_kernels.c). The GEMMs go through cuBLAS (model_cuda.c).
 * Each kernel's body is in kernel_bodies.h (and the optimizers' in optim_rules.h),
 * shared with the GPU tests' CPU stand-in.
 *
 * Every launcher enqueues on `stream` and returns cudaGetLastError() (launch
 * errors; faults in the kernel surface at the next synchronisation). Reductions
 * never use atomics: each has a fixed shape (fixed grid, fixed per-thread order,
 * fixed tree), so the same inputs give bit-identical results run after run.
 * Plain C interface; the kernels live in kernels.cu (the MLP's),
 * cnn_kernels.cu (the convolutional layers', twins of trainer/cnn_kernels.h) and
 * optim_kernels.cu (the optimizers' and the norm's). CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_KERNELS_H
#define DDPD_TRAINER_CUDA_KERNELS_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#include "kernel_bodies.h" /* (the shapes below: KC_ACT_*, KC_*_CHUNKS, KC_NORM_BLOCKS) */
#include "optim_rules.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* optim.c's sgd_range loop: sgd_element over every element (buf may be NULL). */
cudaError_t sgd_step_cuda(float *p, const float *g, float *buf, size_t n, sgd_scalars f, cudaStream_t stream);

/* optim.c's adam_range loop: adam_element over every element, with the factors
 * adam_factors computed. */
cudaError_t adam_step_cuda(float *p, const float *g, float *m, float *v, size_t n, adam_scalars f,
                           cudaStream_t stream);

/* clip_grad_norm (optim.c) without leaving the device: *sumsq = sum of g[i]^2 in
 * double (KC_NORM_BLOCKS fixed partials, then a fixed tree), then g *= coef where
 * coef = max_norm / (sqrt(*sumsq) + 1e-6) when coef < 1. */
cudaError_t clip_grad_norm_cuda(float *g, size_t n, double max_norm, double *partials, double *sumsq,
                                cudaStream_t stream);

/* ---- the convolutional layers (cnn_kernels.cu; CPU twins in trainer/cnn_kernels.c) ----
 * Tensors of the convolution part are channel-major, CNHW (see cnn_kernels.h). */


/* k_im2col: colT [n * Ho * Wo][C * k * k] for examples [b0, b0 + n), one thread per
 * entry (zero outside the input). */
cudaError_t k_im2col_cuda(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad,
                          int Ho, int Wo, float *colT, cudaStream_t stream);

/* k_col2im: dx (examples [b0, b0 + n)) += the patches of colT scattered back. One
 * thread per input element gathers the entries that read it, in (ky, kx) order: no
 * atomics. */
cudaError_t k_col2im_cuda(const float *colT, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad,
                          int Ho, int Wo, float *dx, cudaStream_t stream);

/* k_channel_bias_act_forward: z[c][i] += bias[c] (bias may be NULL), then the
 * activation as k_bias_act_forward_cuda. */
cudaError_t k_channel_bias_act_forward_cuda(float *z, float *pre, const float *bias, int C, size_t n, int act,
                                            int apply_act, cudaStream_t stream);

/* k_channel_bias_grad: db[c] = sum of dz[c][0..n) in double (per-channel chunks with
 * a fixed tree each, then the chunks in order, through `partials`). */
cudaError_t k_channel_bias_grad_cuda(float *db, const float *dz, int C, size_t n, double *partials,
                                     cudaStream_t stream);

/* k_act_forward: y = act(x) (y may be x). */
cudaError_t k_act_forward_cuda(float *y, const float *x, size_t n, int act, cudaStream_t stream);

/* k_maxpool_forward (argmax may be NULL: evaluation) and k_maxpool_backward (dx is
 * zeroed first; windows do not overlap, so each input gets at most one gradient). */
cudaError_t k_maxpool_forward_cuda(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W, int k,
                                   int Ho, int Wo, cudaStream_t stream);
cudaError_t k_maxpool_backward_cuda(float *dx, const float *dy, const int32_t *argmax, size_t planes, int H, int W,
                                    int Ho, int Wo, cudaStream_t stream);

/* k_batchnorm_sums: sums[c] = sum of x, sums[C + c] = sum of x^2 (double, fixed
 * shape as k_channel_bias_grad_cuda); sums[2C] = n (the count, which a sync batch
 * norm sums over ranks with the rest). */
cudaError_t k_batchnorm_sums_cuda(const float *x, int C, size_t n, double *sums, double *partials,
                                  cudaStream_t stream);

/* k_batchnorm_stats with count = sums[2C]; the running statistics move when
 * running_mean is not NULL. One thread per channel. */
cudaError_t k_batchnorm_stats_cuda(const double *sums, int C, float eps, float momentum, float *mean, float *invstd,
                                   float *running_mean, float *running_var, cudaStream_t stream);

/* k_batchnorm_running: mean and invstd from the running statistics. */
cudaError_t k_batchnorm_running_cuda(const float *running_mean, const float *running_var, float eps, int C,
                                     float *mean, float *invstd, cudaStream_t stream);

/* k_batchnorm_forward. */
cudaError_t k_batchnorm_forward_cuda(const float *x, float *y, const float *gamma, const float *beta,
                                     const float *mean, const float *invstd, int C, size_t n, cudaStream_t stream);

/* k_batchnorm_backward_sums: sums[c] = sum of dy, sums[C + c] = sum of dy * xhat,
 * sums[2C] = n; and this rank's gradients dgamma[c] = (float) sums[C + c], dbeta[c]
 * = (float) sums[c] (as model.c writes them). */
cudaError_t k_batchnorm_backward_sums_cuda(const float *dy, const float *x, const float *mean, const float *invstd,
                                           int C, size_t n, double *sums, double *partials, float *dgamma,
                                           float *dbeta, cudaStream_t stream);

/* k_batchnorm_backward with count = sums[2C]. */
cudaError_t k_batchnorm_backward_cuda(float *dx, const float *dy, const float *x, const float *gamma,
                                      const float *mean, const float *invstd, const double *sums, int C, size_t n,
                                      cudaStream_t stream);

/* k_dropout_forward, with each row's key made on the device from the row's base key
 * (rng_dropout_row_key, made by the host) and the layer (rng_dropout_layer_key). */
cudaError_t k_dropout_forward_cuda(float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys, int layer,
                                   int rows, int C, size_t plane, int channel_major, float p, cudaStream_t stream);

/* k_dropout_backward (dx may be dy). */
cudaError_t k_dropout_backward_cuda(float *dx, const float *dy, const uint8_t *mask, size_t n, float p,
                                    cudaStream_t stream);

/* dst[0, n) <- the average over `width` batch shards of src (shard s's n values at
 * src + s * ld), summed in shard order (kb_parts_avg): the fixed-order reduce-scatter's
 * last step (coll_nccl_reduce_scatter_parts_device). */
cudaError_t k_parts_avg_cuda(float *dst, const float *src, size_t ld, size_t n, int width, cudaStream_t stream);

/* dst[0, n) <- the total over `width` batch shards of their sync batch norm sums
 * (shard s's n doubles at src + s * ld), in shard order (kb_parts_sum_f64). */
cudaError_t k_parts_sum_f64_cuda(double *dst, const double *src, size_t ld, size_t n, int width, cudaStream_t stream);

/* k_flatten and k_unflatten. */
cudaError_t k_flatten_cuda(float *y, const float *x, int C, int rows, size_t plane, cudaStream_t stream);
cudaError_t k_unflatten_cuda(float *dx, const float *dy, int C, int rows, size_t plane, cudaStream_t stream);

#ifdef __cplusplus
}
#endif

#endif
