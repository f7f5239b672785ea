// The convolutional layers' kernels on the GPU, each beside the name of its CPU
// reference in trainer/cnn_kernels.c: see kernels.h for what each computes.
// Element-wise kernels are grid-stride loops over size_t indices; the per-channel
// reductions have a fixed shape (chunks per channel, a fixed tree in each, the
// chunks summed in order; no atomics), so results are bit-identical run after run.
#include "kernels.h"

#define THREADS 256      // a power of two: the trees below rely on it
#define MAX_BLOCKS 8192

static unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS) b = MAX_BLOCKS;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ size_t first_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

// The activations, as in cpu_kernels.c (and kernels.cu).
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float activate(float x, int act) {
    switch (act) {
    case KC_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case KC_ACT_TANH: return tanhf(x);
    default: return gelu(x);
    }
}

// ---- k_im2col ---------------------------------------------------------------------
__global__ void im2col_kernel(const float *x, int C, int rows, int H, int W, int b0, size_t n, int k, int stride,
                              int pad, int Ho, int Wo, float *colT) {
    size_t K = (size_t)C * k * k, positions = (size_t)Ho * Wo, total = n * positions * K;
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t pos = i / K, j = i - pos * K;
        size_t b = b0 + pos / positions, o = pos % positions;
        int oy = (int)(o / Wo), ox = (int)(o % Wo);
        int c = (int)(j / ((size_t)k * k)), r = (int)(j % ((size_t)k * k)), ky = r / k, kx = r % k;
        int iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
        colT[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(((size_t)c * rows + b) * H + iy) * W + ix] : 0.0f;
    }
}

extern "C" cudaError_t k_im2col_cuda(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride,
                                     int pad, int Ho, int Wo, float *colT, cudaStream_t stream) {
    size_t total = (size_t)n * Ho * Wo * C * k * k;
    if (total == 0) return cudaSuccess;
    im2col_kernel<<<blocks_for(total), THREADS, 0, stream>>>(x, C, rows, H, W, b0, (size_t)n, k, stride, pad, Ho, Wo,
                                                             colT);
    return cudaGetLastError();
}

// ---- k_col2im (a gather: each input element sums the patch entries that read it) ----
__global__ void col2im_kernel(const float *colT, int C, int rows, int H, int W, int b0, size_t n, int k, int stride,
                              int pad, int Ho, int Wo, float *dx) {
    size_t K = (size_t)C * k * k, plane = (size_t)H * W, total = (size_t)C * n * plane;
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t c = i / (n * plane), rest = i - c * n * plane, bb = rest / plane, at = rest - bb * plane;
        int iy = (int)(at / W), ix = (int)(at % W);
        float s = 0.0f;
        for (int ky = 0; ky < k; ky++) {
            int ty = iy + pad - ky;
            if (ty < 0 || ty % stride) continue;
            int oy = ty / stride;
            if (oy >= Ho) continue;
            for (int kx = 0; kx < k; kx++) {
                int tx = ix + pad - kx;
                if (tx < 0 || tx % stride) continue;
                int ox = tx / stride;
                if (ox >= Wo) continue;
                s += colT[(bb * Ho * Wo + (size_t)oy * Wo + ox) * K + (c * k + ky) * k + kx];
            }
        }
        dx[((c * rows + b0 + bb) * H + iy) * W + ix] += s;
    }
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
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        float v = z[i] + (bias ? bias[i / n] : 0.0f);
        if (apply_act) {
            if (pre) pre[i] = v;
            v = activate(v, act);
        }
        z[i] = v;
    }
}

extern "C" cudaError_t k_channel_bias_act_forward_cuda(float *z, float *pre, const float *bias, int C, size_t n,
                                                       int act, int apply_act, cudaStream_t stream) {
    size_t total = (size_t)C * n;
    if (total == 0 || (!bias && !apply_act)) return cudaSuccess;
    channel_bias_act_kernel<<<blocks_for(total), THREADS, 0, stream>>>(z, pre, bias, total, n, act, apply_act);
    return cudaGetLastError();
}

__global__ void act_forward_kernel(float *y, const float *x, size_t n, int act) {
    for (size_t i = first_index(); i < n; i += grid_stride()) y[i] = activate(x[i], act);
}

extern "C" cudaError_t k_act_forward_cuda(float *y, const float *x, size_t n, int act, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    act_forward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(y, x, n, act);
    return cudaGetLastError();
}

// ---- per-channel sums: k_channel_bias_grad, k_batchnorm_sums, k_batchnorm_backward_sums --
// Pass 1: block (chunk, c) sums its slice of channel c's run, thread t taking elements
// t, t + THREADS, ... in order, then a fixed tree: partials[(q * C + c) * chunks + chunk]
// for the quantities q of the mode. Pass 2: one thread per channel sums its chunks in
// order.
enum { SUM_A = 0, SUM_A_SQUARES = 1, SUM_A_XHAT = 2 };

static int chunks_for(size_t n) {
    size_t chunks = (n + 4 * THREADS - 1) / (4 * THREADS);
    if (chunks > KC_CHANNEL_MAX_CHUNKS) chunks = KC_CHANNEL_MAX_CHUNKS;
    return (int)(chunks ? chunks : 1);
}

__global__ void channel_sums_kernel(double *partials, const float *a, const float *x, const float *mean,
                                    const float *invstd, int C, size_t n, int chunks, int mode) {
    __shared__ double s0[THREADS], s1[THREADS];
    int chunk = blockIdx.x, c = blockIdx.y, t = threadIdx.x;
    size_t len = (n + chunks - 1) / chunks, begin = (size_t)chunk * len, end = begin + len < n ? begin + len : n;
    const float *run = a + (size_t)c * n;
    double q0 = 0.0, q1 = 0.0;
    float m = mode == SUM_A_XHAT ? mean[c] : 0.0f, is = mode == SUM_A_XHAT ? invstd[c] : 0.0f;
    for (size_t i = begin + t; i < end; i += THREADS) {
        double v = (double)run[i];
        q0 += v;
        if (mode == SUM_A_SQUARES) q1 += v * v;
        else if (mode == SUM_A_XHAT) q1 += v * (double)((x[(size_t)c * n + i] - m) * is);
    }
    s0[t] = q0;
    s1[t] = q1;
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
    if (c >= C) return;
    double q0 = 0.0, q1 = 0.0;
    for (int k = 0; k < chunks; k++) {
        q0 += partials[(size_t)c * chunks + k];
        q1 += partials[((size_t)C + c) * chunks + k];
    }
    if (sums) {
        sums[c] = q0;
        sums[C + c] = q1;
    }
    if (f0) f0[c] = (float)q0;
    if (f1) f1[c] = (float)q1;
}

static cudaError_t channel_sums(double *sums, const float *a, const float *x, const float *mean, const float *invstd,
                                int C, size_t n, int mode, double *partials, float *f0, float *f1,
                                cudaStream_t stream) {
    if (C <= 0) return cudaSuccess;
    int chunks = chunks_for(n);
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
    return channel_sums(NULL, dz, NULL, NULL, NULL, C, n, SUM_A, partials, db, NULL, stream);
}

extern "C" cudaError_t k_batchnorm_sums_cuda(const float *x, int C, size_t n, double *sums, double *partials,
                                             cudaStream_t stream) {
    return channel_sums(sums, x, NULL, NULL, NULL, C, n, SUM_A_SQUARES, partials, NULL, NULL, stream);
}

extern "C" cudaError_t k_batchnorm_backward_sums_cuda(const float *dy, const float *x, const float *mean,
                                                      const float *invstd, int C, size_t n, double *sums,
                                                      double *partials, float *dgamma, float *dbeta,
                                                      cudaStream_t stream) {
    return channel_sums(sums, dy, x, mean, invstd, C, n, SUM_A_XHAT, partials, dbeta, dgamma, stream);
}

// ---- k_batchnorm_stats, k_batchnorm_running ------------------------------------------------
__global__ void batchnorm_stats_kernel(const double *sums, int C, float eps, float momentum, float *mean,
                                       float *invstd, float *running_mean, float *running_var) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double count = sums[2 * C];
    double m = sums[c] / count;
    double var = sums[C + c] / count - m * m;
    if (var < 0.0) var = 0.0;
    mean[c] = (float)m;
    invstd[c] = (float)(1.0 / sqrt(var + (double)eps));
    if (running_mean) {
        float unbiased = (float)(count > 1.0 ? var * count / (count - 1.0) : var);
        running_mean[c] = (1.0f - momentum) * running_mean[c] + momentum * (float)m;
        running_var[c] = (1.0f - momentum) * running_var[c] + momentum * unbiased;
    }
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
    if (c >= C) return;
    mean[c] = running_mean[c];
    invstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
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
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t c = i / n;
        y[i] = gamma[c] * ((x[i] - mean[c]) * invstd[c]) + beta[c];
    }
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
    double count = sums[2 * C];
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t c = i / n;
        float m = mean[c], s = invstd[c], scale = gamma[c] * invstd[c];
        float mean_dy = (float)(sums[c] / count), mean_dy_xhat = (float)(sums[C + c] / count);
        float xhat = (x[i] - m) * s;
        dx[i] = scale * (dy[i] - mean_dy - xhat * mean_dy_xhat);
    }
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
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t p = i / ((size_t)Ho * Wo);
        int o = (int)(i - p * Ho * Wo), oy = o / Wo, ox = o % Wo;
        const float *in = x + p * (size_t)H * W;
        int first = oy * k * W + ox * k, best_at = first;
        float best = in[first];
        for (int ky = 0; ky < k; ky++)
            for (int kx = 0; kx < k; kx++) {
                int at = first + ky * W + kx;
                if (in[at] > best) best = in[at], best_at = at;
            }
        y[i] = best;
        if (argmax) argmax[i] = best_at;
    }
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
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t p = i / ((size_t)Ho * Wo);
        dx[p * (size_t)H * W + argmax[i]] = dy[i];
    }
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
// rng.h's counter-based generator, the same integer arithmetic.
__device__ __forceinline__ uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
__device__ __forceinline__ float counter_uniform(uint64_t key, uint64_t counter) {
    return (float)(mix64(key ^ (counter * 0x9e3779b97f4a7c15ULL)) >> 40) * (1.0f / 16777216.0f);
}

__global__ void dropout_forward_kernel(float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys,
                                       uint64_t layer, size_t rows, size_t C, size_t plane, int channel_major, float p) {
    size_t total = rows * C * plane;
    float scale = 1.0f / (1.0f - p);
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t c, b, j;
        if (channel_major) {
            c = i / (rows * plane);
            size_t rest = i - c * rows * plane;
            b = rest / plane, j = rest - b * plane;
        } else {
            b = i / (C * plane);
            size_t rest = i - b * C * plane;
            c = rest / plane, j = rest - c * plane;
        }
        uint64_t key = mix64(row_base_keys[b] ^ (layer + 0x2545f4914f6cdd1dULL)); // rng_dropout_layer_key
        int kept = counter_uniform(key, c * plane + j) >= p;
        mask[i] = (uint8_t)kept;
        y[i] = kept ? x[i] * scale : 0.0f;
    }
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
    float scale = 1.0f / (1.0f - p);
    for (size_t i = first_index(); i < n; i += grid_stride()) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

extern "C" cudaError_t k_dropout_backward_cuda(float *dx, const float *dy, const uint8_t *mask, size_t n, float p,
                                               cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    dropout_backward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dx, dy, mask, n, p);
    return cudaGetLastError();
}

// ---- k_flatten, k_unflatten ----------------------------------------------------------------------
// y[b][c * plane + j] = x[c][b][j]; one thread per element of y (and of dx).
__global__ void flatten_kernel(float *y, const float *x, size_t C, size_t rows, size_t plane, int back) {
    size_t total = C * rows * plane;
    for (size_t i = first_index(); i < total; i += grid_stride()) {
        size_t b = i / (C * plane), rest = i - b * C * plane, c = rest / plane, j = rest - c * plane;
        size_t cnhw = (c * rows + b) * plane + j;
        if (back) y[cnhw] = x[i];
        else y[i] = x[cnhw];
    }
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
