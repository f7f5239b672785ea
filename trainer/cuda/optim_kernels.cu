// The optimizers' fused updates and the gradient norm on the GPU: launches of
// optim_rules.h's element updates (torch.optim's rules, the CPU's very arithmetic)
// and clip_factor, and of kernel_bodies.h's norm pieces; see kernels.h. The norm is a fixed-shape
// reduction (KC_NORM_BLOCKS partials, then one tree), so clipping gives the same
// bits every run.
#include "kernels.h"
#include "launch.cuh"
#include "optim_rules.h"

// ---- sgd_range (optim.c) -----------------------------------------------------------
__global__ void sgd_step_kernel(float *p, const float *g, float *buf, size_t n, sgd_scalars f) {
    for (size_t i = first_index(); i < n; i += grid_stride()) sgd_element(&f, p + i, g[i], buf ? buf + i : NULL);
}

extern "C" cudaError_t sgd_step_cuda(float *p, const float *g, float *buf, size_t n, sgd_scalars f,
                                     cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    sgd_step_kernel<<<blocks_for(n), THREADS, 0, stream>>>(p, g, buf, n, f);
    return cudaGetLastError();
}

// ---- adam_range (optim.c; Adam and AdamW) --------------------------------------------
__global__ void adam_step_kernel(float *p, const float *g, float *m, float *v, size_t n, adam_scalars f) {
    for (size_t i = first_index(); i < n; i += grid_stride()) adam_element(&f, p + i, g[i], m + i, v + i);
}

extern "C" cudaError_t adam_step_cuda(float *p, const float *g, float *m, float *v, size_t n, adam_scalars f,
                                      cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    adam_step_kernel<<<blocks_for(n), THREADS, 0, stream>>>(p, g, m, v, n, f);
    return cudaGetLastError();
}

// ---- clip_grad_norm (optim.c: grad_sum_squares, clip_coefficient, scale_grads) ----
// Pass 1 (exactly KC_NORM_BLOCKS blocks): each thread's grid-stride share, then the
// block's fixed tree -> partials[block].
__global__ void sumsq_partial_kernel(double *partials, const float *g, size_t n) {
    __shared__ double s[THREADS];
    s[threadIdx.x] = kb_sumsq_thread(g, n, first_index(), grid_stride());
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
    double coef = clip_factor(*sumsq, max_norm);
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
