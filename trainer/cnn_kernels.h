/* The kernels of the convolutional layers on the CPU (the GEMMs go through the BLAS,
 * in model.c): im2col and its adjoint, per-channel bias and activation, max-pool,
 * batch norm, dropout and flatten, forward and backward. They are the reference the
 * CUDA kernels (cuda/cnn_kernels.cu) are held against, so each is plain,
 * deterministic (fixed summation order) and documented by its math.
 *
 * Layout: the convolution part's tensors are channel-major, CNHW: channel c, example
 * b, row y, column x at ((c * rows + b) * H + y) * W + x. A "plane" is one (c, b). */
#ifndef DDPD_TRAINER_CNN_KERNELS_H
#define DDPD_TRAINER_CNN_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "run_config.h"

/* conv2d's im2col for examples [b0, b0 + n) of x (C x rows x H x W): colT gets one
 * row per output position (b, oy, ox), in that order, holding its patch
 * x[c][b][oy*stride + ky - pad][ox*stride + kx - pad] (zero outside) at column
 * (c * k + ky) * k + kx, the order of a weight [out][c][ky][kx]. Ho and Wo are the
 * output's size. `padded`: scratch of C x (H + 2 pad) x (W + 2 pad) floats. */
void k_im2col(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad, int Ho,
              int Wo, float *colT, float *padded);

/* The adjoint of k_im2col: dx[c][b][iy][ix] += every colT entry that k_im2col read
 * from there (examples [b0, b0 + n); dx must hold their previous values, usually 0).
 * `padded` as for k_im2col. Sums in a fixed order (position by position). */
void k_col2im(const float *colT, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad, int Ho,
              int Wo, float *dx, float *padded);

/* z[c][i] += bias[c] for i < n (bias may be NULL); then, when apply_act: pre <- z
 * (when pre is not NULL) and z <- act(z). C runs of n floats. */
void k_channel_bias_act_forward(float *z, float *pre, const float *bias, int C, size_t n, activation_kind act,
                                int apply_act);

/* db[c] = sum of dz[c][0..n), accumulated in double in order. */
void k_channel_bias_grad(float *db, const float *dz, int C, size_t n);

/* Max-pool with a k x k window and stride k over `planes` planes of H x W into Ho x
 * Wo: y = the window's largest value, the first one in row-major order when tied
 * (PyTorch's MaxPool2d); argmax[o] = its index within the input plane. */
void k_maxpool_forward(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W, int k, int Ho, int Wo);

/* dx = 0, then dx[plane][argmax[o]] += dy[o]. */
void k_maxpool_backward(float *dx, const float *dy, const int32_t *argmax, size_t planes, int H, int W, int Ho,
                        int Wo);

/* A convolution's input and output planes (C: input channels). */
typedef struct {
    int C, H, W, k, stride, pad, Ho, Wo;
} conv_geometry;

/* Scratch for k_conv_pool_backward: the winners of one example, grouped by position. */
typedef struct {
    int32_t *pos_start;  /* Ho * Wo + 1: where each position's winners start in `order` */
    int32_t *channel;    /* C_out * pooled: each winner's channel ... */
    float *grad;         /* ... and its gradient gz */
    int32_t *entry_pos;  /* C_out * pooled: a winner's position, before grouping */
    int32_t *order;      /* C_out * pooled: the winners' channels, grouped by position ... */
    float *order_grad;   /* ... and their gradients */
    float *row;          /* C * k * k: one position's patch gradient */
    float *padded;       /* C * (H + 2 pad) * (W + 2 pad) */
} conv_pool_scratch;

/* The backward of conv2d -> activation (act, or -1: none) -> max-pool (windows that
 * do not overlap) for examples [b0, b0 + n), straight from the pool's output gradient
 * g (C_out x rows x pooled). Only each window's winner has a gradient, gz = g *
 * act'(its output `out`, or `pre` for gelu): rather than scattering g into a tensor
 * that is at least three quarters zeros and running dense GEMMs over it, each winner
 * adds gz times its patch (a colT row, as k_im2col laid it out) to its channel's
 * weight gradient dW[c] (K floats; channel by channel, examples and windows in
 * order) and gz to db[c] (double); and, when dx is not NULL, each output position
 * sums gz W[c] over its winners (channels in order) into its patch gradient and
 * scatters it into the example's input gradient, which is written (not added to).
 * colT must be readable for 31 floats past its last patch (MODEL_IM2COL_SLACK, model_shape.h). */
void k_conv_pool_backward(const conv_geometry *geo, int C_out, int rows, int b0, int n, const float *g,
                          const int32_t *argmax, int pooled, const float *out, const float *pre, int act,
                          const float *colT, const float *W, float *dW, double *db, float *dx,
                          conv_pool_scratch *scratch);

/* Batch norm over C runs of n values (one channel's values over the batch):
 * sums[c] = sum of x, sums[C + c] = sum of x^2, in double, in order. */
void k_batchnorm_sums(const float *x, int C, size_t n, double *sums);

/* From sums over `count` values: mean[c], invstd[c] = 1 / sqrt(var + eps) with the
 * biased variance (what the batch is normalised with); when running_mean is not NULL,
 * the running statistics move by momentum towards mean and the unbiased variance
 * (var * count / (count - 1)), as PyTorch does. */
void k_batchnorm_stats(const double *sums, int C, double count, float eps, float momentum, float *mean, float *invstd,
                       float *running_mean, float *running_var);

/* y = gamma[c] * (x - mean[c]) * invstd[c] + beta[c]. */
void k_batchnorm_forward(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
                         const float *invstd, int C, size_t n);

/* Evaluation: mean and invstd from the running statistics. */
void k_batchnorm_running(const float *running_mean, const float *running_var, float eps, int C, float *mean,
                         float *invstd);

/* Backward, first half: sums[c] = sum of dy, sums[C + c] = sum of dy * xhat, where
 * xhat = (x - mean[c]) * invstd[c], in double, in order. Local sums are the gradients
 * of beta and gamma; summed over ranks (sync) they make the input gradient's means. */
void k_batchnorm_backward_sums(const float *dy, const float *x, const float *mean, const float *invstd, int C,
                               size_t n, double *sums);

/* Backward, second half, from sums over `count` values: dx = gamma[c] * invstd[c] *
 * (dy - sum_dy / count - xhat * sum_dy_xhat / count). */
void k_batchnorm_backward(float *dx, const float *dy, const float *x, const float *gamma, const float *mean,
                          const float *invstd, const double *sums, double count, int C, size_t n);

/* Dropout: each row b draws its mask from row_keys[b] (rng_dropout_layer_key) and the
 * element's index within the example (channel-major tensors: c * plane + i; else the
 * feature index): kept when rng_counter_uniform >= p. y = kept ? x / (1 - p) : 0,
 * mask = kept. Channel-major: C x rows x plane; else rows x (C * plane). */
void k_dropout_forward(float *y, uint8_t *mask, const float *x, const uint64_t *row_keys, int rows, int C,
                       size_t plane, int channel_major, float p);

/* dx = mask ? dy / (1 - p) : 0. */
void k_dropout_backward(float *dx, const float *dy, const uint8_t *mask, size_t n, float p);

/* flatten: y[b][c * plane + i] = x[c][b][i] (CNHW to PyTorch's flattened rows), and
 * back for the gradient. */
void k_flatten(float *y, const float *x, int C, int rows, size_t plane);
void k_unflatten(float *dx, const float *dy, int C, int rows, size_t plane);

#endif
