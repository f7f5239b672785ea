// The optimizers' fused updates and the gradient norm on the GPU, each beside the
// name of the loop in optim.c it mirrors (torch.optim's rules): see kernels.h.
// The norm is a fixed-shape reduction (KC_NORM_BLOCKS partials, then one tree),
// so clipping gives the same bits every run.
#include "kernels.h"

#define THREADS 256   // a power of two: the trees below rely on it
#define MAX_BLOCKS 8192

static unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS) b = MAX_BLOCKS;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ size_t first_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

// ---- sgd_range (optim.c) -----------------------------------------------------------
__global__ void sgd_step_kernel(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom,
                                int nesterov, int first) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        float d = g[i] + wd * p[i];
        if (buf) {
            float b = first ? d : mom * buf[i] + d;
            buf[i] = b;
            d = nesterov ? d + mom * b : b;
        }
        p[i] -= lr * d;
    }
}

extern "C" cudaError_t sgd_step_cuda(float *p, const float *g, float *buf, size_t n, float lr, float wd, float mom,
                                     int nesterov, int first, cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    sgd_step_kernel<<<blocks_for(n), THREADS, 0, stream>>>(p, g, buf, n, lr, wd, mom, nesterov, first);
    return cudaGetLastError();
}

// ---- adam_range (optim.c; Adam and AdamW) --------------------------------------------
__global__ void adam_step_kernel(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                                 float step_size, float bias2_sqrt, float eps, float l2, float decay) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        float pi = p[i];
        float gi = g[i] + l2 * pi;
        pi *= decay;
        float mi = b1 * m[i] + (1.0f - b1) * gi;
        float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi - step_size * (mi / (sqrtf(vi) / bias2_sqrt + eps));
    }
}

extern "C" cudaError_t adam_step_cuda(float *p, const float *g, float *m, float *v, size_t n, float b1, float b2,
                                      float step_size, float bias2_sqrt, float eps, float l2, float decay,
                                      cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    adam_step_kernel<<<blocks_for(n), THREADS, 0, stream>>>(p, g, m, v, n, b1, b2, step_size, bias2_sqrt, eps, l2,
                                                            decay);
    return cudaGetLastError();
}

// ---- clip_grad_norm (optim.c: grad_sum_squares, clip_coefficient, scale_grads) ----
// Pass 1 (exactly KC_NORM_BLOCKS blocks): each thread sums g[i]^2 over its
// grid-stride elements in order, then the block's fixed tree -> partials[block].
__global__ void sumsq_partial_kernel(double *partials, const float *g, size_t n) {
    __shared__ double s[THREADS];
    double acc = 0.0;
    for (size_t i = first_index(); i < n; i += grid_stride()) acc += (double)g[i] * g[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = s[0];
}

// Pass 2 (one block): the partials in a fixed order and tree -> *sumsq.
__global__ void sumsq_finish_kernel(double *sumsq, const double *partials, int nparts) {
    __shared__ double s[THREADS];
    double acc = 0.0;
    for (int b = threadIdx.x; b < nparts; b += THREADS) acc += partials[b];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if ((int)threadIdx.x < half) s[threadIdx.x] += s[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) *sumsq = s[0];
}

// Pass 3: every thread derives the same coefficient from *sumsq, as optim.c does.
__global__ void clip_scale_kernel(float *g, size_t n, const double *sumsq, double max_norm) {
    double coef = max_norm / (sqrt(*sumsq) + 1e-6);
    if (coef >= 1.0) return;
    float c = (float)coef;
    for (size_t i = first_index(); i < n; i += grid_stride()) g[i] *= c;
}

extern "C" cudaError_t clip_grad_norm_cuda(float *g, size_t n, double max_norm, double *partials, double *sumsq,
                                           cudaStream_t stream) {
    sumsq_partial_kernel<<<KC_NORM_BLOCKS, THREADS, 0, stream>>>(partials, g, n);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) return e;
    sumsq_finish_kernel<<<1, THREADS, 0, stream>>>(sumsq, partials, KC_NORM_BLOCKS);
    if ((e = cudaGetLastError()) != cudaSuccess) return e;
    if (n == 0) return cudaSuccess;
    clip_scale_kernel<<<blocks_for(n), THREADS, 0, stream>>>(g, n, sumsq, max_norm);
    return cudaGetLastError();
}
