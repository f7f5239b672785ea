// The convolutional layers' kernels on the GPU: launches of kernel_bodies.h's
// bodies, each the twin of a CPU reference in trainer/cnn_kernels.c (see kernels.h
// for what each computes). Element-wise kernels are grid-stride loops over size_t
// indices; the per-channel reductions have a fixed shape (chunks per channel, a
// fixed tree in each, the chunks summed in order; no atomics), so results are
// bit-identical run after run.
#include "kernels.h"
#include "launch.cuh"

// ---- k_im2col ---------------------------------------------------------------------
__global__ void im2col_kernel(const float *x, int C, int rows, int H, int W, int b0, size_t total, int k, int stride,
                              int pad, int Ho, int Wo, float *colT) {
    for (size_t i = first_index(); i < total; i += grid_stride())
        kb_im2col(i, x, C, rows, H, W, b0, k, stride, pad, Ho, Wo, colT);
}

extern "C" cudaError_t k_im2col_cuda(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride,
                                     int pad, int Ho, int Wo, float *colT, cudaStream_t stream) {
    size_t total = (size_t)n * Ho * Wo * C * k * k;
    if (total == 0) return cudaSuccess;
    im2col_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, C, rows, H, W, b0, total, k, stride, pad, Ho, Wo,
                                                             colT);
    return cudaGetLastError();
}

// ---- k_col2im (a gather: each input element sums the patch entries that read it) ----
__global__ void col2im_kernel(const float *colT, int C, int rows, int H, int W, int b0, size_t n, int k, int stride,
                              int pad, int Ho, int Wo, float *dx) {
    size_t total = (size_t)C * n * H * W;
    for (size_t i = first_index(); i < total; i += grid_stride())
        kb_col2im(i, colT, C, rows, H, W, b0, n, k, stride, pad, Ho, Wo, dx);
}

extern "C" cudaError_t k_col2im_cuda(const float *colT, int C, int rows, int H, int W, int b0, int n, int k, int stride,
                                     int pad, int Ho, int Wo, float *dx, cudaStream_t stream) {
    size_t total = (size_t)C * n * H * W;
    if (total == 0) return cudaSuccess;
    col2im_kernel<<<blocks_for(total), THREADS, 0, stream>>>(colT, C, rows, H, W, b0, (size_t)n, k, stride, pad, Ho,
                                                             Wo, dx);
    return cudaGetLastError();
}

// ---- k_channel_bias_act_forward, k_act_forward ------------------------------------------
__global__ void channel_bias_act_kernel(float *z, float *pre, const float *bias, size_t total, size_t n, int act,
                                        int apply_act) {
    for (size_t i = first_index(); i < total; i += grid_stride()) kb_channel_bias_act(i, z, pre, bias, n, act, apply_act);
}

extern "C" cudaError_t k_channel_bias_act_forward_cuda(float *z, float *pre, const float *bias, int C, size_t n,
                                                       int act, int apply_act, cudaStream_t stream) {
    size_t total = (size_t)C * n;
    if (total == 0 || (!bias && !apply_act)) return cudaSuccess;
    channel_bias_act_kernel<<<blocks_for(total), THREADS, 0, stream>>>(z, pre, bias, total, n, act, apply_act);
    return cudaGetLastError();
}

__global__ void act_forward_kernel(float *y, const float *x, size_t n, int act) {
    for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = kb_activate(x[i], act);
}

extern "C" cudaError_t k_act_forward_cuda(float *y, const float *x, size_t n, int act, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    act_forward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(y, x, n, act);
    return cudaGetLastError();
}

// ---- per-channel sums: k_channel_bias_grad, k_batchnorm_sums, k_batchnorm_backward_sums --
// Pass 1: block (chunk, c), each thread's share, then a fixed tree:
// partials[(q * C + c) * chunks + chunk] for the quantities q of the mode. Pass 2:
// one thread per channel sums its chunks in order.
__global__ void channel_sums_kernel(double *partials, const float *a, const float *x, const float *mean,
                                    const float *invstd, int C, size_t n, int chunks, int mode) {
    __shared__ double s0[THREADS], s1[THREADS];
    int chunk = blockIdx.x, c = blockIdx.y, t = threadIdx.x;
    kb_channel_sums_thread(chunk, c, t, a, x, mean, invstd, n, chunks, mode, &s0[t], &s1[t]);
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            s0[t] += s0[t + half];
            s1[t] += s1[t + half];
        }
        __syncthreads();
    }
    if (t == 0) {
        partials[(size_t)c * chunks + chunk] = s0[0];
        partials[((size_t)C + c) * chunks + chunk] = s1[0];
    }
}

// sums[q * C + c] from the partials; sums[2C] = n; optional float copies.
__global__ void channel_sums_finish_kernel(double *sums, const double *partials, int C, size_t n, int chunks,
                                           float *f0, float *f1) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c == 0 && sums) sums[2 * C] = (double)n;
    if (c < C) kb_channel_sums_finish(c, sums, partials, C, chunks, f0, f1);
}

static cudaError_t channel_sums(double *sums, const float *a, const float *x, const float *mean, const float *invstd,
                                int C, size_t n, int mode, double *partials, float *f0, float *f1,
                                cudaStream_t stream) {
    if (C <= 0) return cudaSuccess;
    int chunks = kb_channel_chunks(n);
    channel_sums_kernel<<<dim3((unsigned)chunks, (unsigned)C), THREADS, 0, stream>>>(partials, a, x, mean, invstd, C,
                                                                                      n, chunks, mode);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    channel_sums_finish_kernel<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, stream>>>(sums, partials, C, n,
                                                                                               chunks, f0, f1);
    return cudaGetLastError();
}

extern "C" cudaError_t k_channel_bias_grad_cuda(float *db, const float *dz, int C, size_t n, double *partials,
                                                cudaStream_t stream) {
    return channel_sums(NULL, dz, NULL, NULL, NULL, C, n, KB_SUM_A, partials, db, NULL, stream);
}

extern "C" cudaError_t k_batchnorm_sums_cuda(const float *x, int C, size_t n, double *sums, double *partials,
                                             cudaStream_t stream) {
    return channel_sums(sums, x, NULL, NULL, NULL, C, n, KB_SUM_A_SQUARES, partials, NULL, NULL, stream);
}

extern "C" cudaError_t k_batchnorm_backward_sums_cuda(const float *dy, const float *x, const float *mean,
                                                      const float *invstd, int C, size_t n, double *sums,
                                                      double *partials, float *dgamma, float *dbeta,
                                                      cudaStream_t stream) {
    return channel_sums(sums, dy, x, mean, invstd, C, n, KB_SUM_A_XHAT, partials, dbeta, dgamma, stream);
}

// ---- k_batchnorm_stats, k_batchnorm_running (one thread per channel) ------------------------
__global__ void batchnorm_stats_kernel(const double *sums, int C, float eps, float momentum, float *mean,
                                       float *invstd, float *running_mean, float *running_var) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) kb_batchnorm_stats(c, sums, C, eps, momentum, mean, invstd, running_mean, running_var);
}

extern "C" cudaError_t k_batchnorm_stats_cuda(const double *sums, int C, float eps, float momentum, float *mean,
                                              float *invstd, float *running_mean, float *running_var,
                                              cudaStream_t stream) {
    if (C <= 0) return cudaSuccess;
    batchnorm_stats_kernel<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        sums, C, eps, momentum, mean, invstd, running_mean, running_var);
    return cudaGetLastError();
}

__global__ void batchnorm_running_kernel(const float *running_mean, const float *running_var, float eps, int C,
                                         float *mean, float *invstd) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c < C) kb_batchnorm_running(c, running_mean, running_var, eps, mean, invstd);
}

extern "C" cudaError_t k_batchnorm_running_cuda(const float *running_mean, const float *running_var, float eps, int C,
                                                float *mean, float *invstd, cudaStream_t stream) {
    if (C <= 0) return cudaSuccess;
    batchnorm_running_kernel<<<(unsigned)((C + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        running_mean, running_var, eps, C, mean, invstd);
    return cudaGetLastError();
}

// ---- k_batchnorm_forward, k_batchnorm_backward ------------------------------------------------
__global__ void batchnorm_forward_kernel(const float *x, float *y, const float *gamma, const float *beta,
                                         const float *mean, const float *invstd, size_t total, size_t n) {
    for (size_t i = first_index(); i < total; i += grid_stride())
        kb_batchnorm_forward(i, x, y, gamma, beta, mean, invstd, n);
}

extern "C" cudaError_t k_batchnorm_forward_cuda(const float *x, float *y, const float *gamma, const float *beta,
                                                const float *mean, const float *invstd, int C, size_t n,
                                                cudaStream_t stream) {
    size_t total = (size_t)C * n;
    if (total == 0) return cudaSuccess;
    batchnorm_forward_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, y, gamma, beta, mean, invstd, total, n);
    return cudaGetLastError();
}

__global__ void batchnorm_backward_kernel(float *dx, const float *dy, const float *x, const float *gamma,
                                          const float *mean, const float *invstd, const double *sums, int C,
                                          size_t total, size_t n) {
    for (size_t i = first_index(); i < total; i += grid_stride())
        kb_batchnorm_backward(i, dx, dy, x, gamma, mean, invstd, sums, C, n);
}

extern "C" cudaError_t k_batchnorm_backward_cuda(float *dx, const float *dy, const float *x, const float *gamma,
                                                 const float *mean, const float *invstd, const double *sums, int C,
                                                 size_t n, cudaStream_t stream) {
    size_t total = (size_t)C * n;
    if (total == 0) return cudaSuccess;
    batchnorm_backward_kernel<<<blocks_for(total), THREADS, 0, stream>>>(dx, dy, x, gamma, mean, invstd, sums, C,
                                                                         total, n);
    return cudaGetLastError();
}

// ---- k_maxpool_forward, k_maxpool_backward ----------------------------------------------------
__global__ void maxpool_forward_kernel(const float *x, float *y, int32_t *argmax, size_t total, int H, int W, int k,
                                       int Ho, int Wo) {
    for (size_t i = first_index(); i < total; i += grid_stride()) kb_maxpool_forward(i, x, y, argmax, H, W, k, Ho, Wo);
}

extern "C" cudaError_t k_maxpool_forward_cuda(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W,
                                              int k, int Ho, int Wo, cudaStream_t stream) {
    size_t total = planes * Ho * Wo;
    if (total == 0) return cudaSuccess;
    maxpool_forward_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, y, argmax, total, H, W, k, Ho, Wo);
    return cudaGetLastError();
}

__global__ void maxpool_backward_kernel(float *dx, const float *dy, const int32_t *argmax, size_t total, int H, int W,
                                        int Ho, int Wo) {
    for (size_t i = first_index(); i < total; i += grid_stride()) kb_maxpool_backward(i, dx, dy, argmax, H, W, Ho, Wo);
}

extern "C" cudaError_t k_maxpool_backward_cuda(float *dx, const float *dy, const int32_t *argmax, size_t planes, int H,
                                               int W, int Ho, int Wo, cudaStream_t stream) {
    cudaError_t e = cudaMemsetAsync(dx, 0, sizeof(float) * planes * H * W, stream);
    if (e != cudaSuccess) return e;
    size_t total = planes * Ho * Wo;
    if (total == 0) return cudaSuccess;
    maxpool_backward_kernel<<<blocks_for(total), THREADS, 0, stream>>>(dx, dy, argmax, total, H, W, Ho, Wo);
    return cudaGetLastError();
}

// ---- k_dropout_forward, k_dropout_backward ------------------------------------------------------
__global__ void dropout_forward_kernel(float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys,
                                       uint64_t layer, size_t rows, size_t C, size_t plane, int channel_major, float p) {
    size_t total = rows * C * plane;
    for (size_t i = first_index(); i < total; i += grid_stride())
        kb_dropout_forward(i, y, mask, x, row_base_keys, layer, rows, C, plane, channel_major, p);
}

extern "C" cudaError_t k_dropout_forward_cuda(float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys,
                                              int layer, int rows, int C, size_t plane, int channel_major, float p,
                                              cudaStream_t stream) {
    size_t total = (size_t)rows * C * plane;
    if (total == 0) return cudaSuccess;
    dropout_forward_kernel<<<blocks_for(total), THREADS, 0, stream>>>(y, mask, x, row_base_keys, (uint64_t)layer,
                                                                      (size_t)rows, (size_t)C, plane, channel_major, p);
    return cudaGetLastError();
}

__global__ void dropout_backward_kernel(float *dx, const float *dy, const uint8_t *mask, size_t n, float p) {
    for (size_t i = first_index(); i < n; i += grid_stride()) kb_dropout_backward(i, dx, dy, mask, p);
}

extern "C" cudaError_t k_dropout_backward_cuda(float *dx, const float *dy, const uint8_t *mask, size_t n, float p,
                                               cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    dropout_backward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dx, dy, mask, n, p);
    return cudaGetLastError();
}

// ---- k_flatten, k_unflatten (one thread per element of y, and of dx) ------------------------------
__global__ void flatten_kernel(float *y, const float *x, size_t C, size_t rows, size_t plane, int back) {
    size_t total = C * rows * plane;
    for (size_t i = first_index(); i < total; i += grid_stride()) kb_flatten(i, y, x, C, rows, plane, back);
}

extern "C" cudaError_t k_flatten_cuda(float *y, const float *x, int C, int rows, size_t plane, cudaStream_t stream) {
    size_t total = (size_t)C * rows * plane;
    if (total == 0) return cudaSuccess;
    flatten_kernel<<<blocks_for(total), THREADS, 0, stream>>>(y, x, (size_t)C, (size_t)rows, plane, 0);
    return cudaGetLastError();
}

extern "C" cudaError_t k_unflatten_cuda(float *dx, const float *dy, int C, int rows, size_t plane,
                                        cudaStream_t stream) {
    size_t total = (size_t)C * rows * plane;
    if (total == 0) return cudaSuccess;
    flatten_kernel<<<blocks_for(total), THREADS, 0, stream>>>(dx, dy, (size_t)C, (size_t)rows, plane, 1);
    return cudaGetLastError();
}
