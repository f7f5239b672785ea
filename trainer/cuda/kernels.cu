// The MLP step's kernels on the GPU, each beside the name of the CPU reference in
// cpu_kernels.c it mirrors: see kernels.h for what each computes. Element-wise
// kernels are grid-stride loops over size_t indices; the reductions have a fixed
// shape (no atomics), so results are bit-identical run after run.
#include "kernels.h"

#define THREADS 256          // every kernel's block size (a power of two: the trees below rely on it)
#define MAX_BLOCKS 8192      // grid-stride loops need no more

static unsigned blocks_for(size_t n) {
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > MAX_BLOCKS) b = MAX_BLOCKS;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ size_t first_index() { return (size_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ __forceinline__ size_t grid_stride() { return (size_t)gridDim.x * blockDim.x; }

// The activations and their derivatives, as in cpu_kernels.c.
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
__device__ __forceinline__ float gelu_grad(float x) {
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    float pdf = expf(-0.5f * x * x) * 0.3989422804014327f;  // 1/sqrt(2 pi)
    return cdf + x * pdf;
}
__device__ __forceinline__ float activate(float x, int act) {
    switch (act) {
    case KC_ACT_RELU: return x > 0.0f ? x : 0.0f;
    case KC_ACT_TANH: return tanhf(x);
    default: return gelu(x);
    }
}

// ---- k_u8_to_f32 + gather_inputs (engine_cpu.c) ---------------------------------
__global__ void u8_to_f32_gather_kernel(float *x, uint8_t *labels_out, const uint8_t *images, const uint8_t *labels,
                                        const uint64_t *indices, size_t first, size_t rows, size_t pixels,
                                        float scale) {
    size_t n = rows * pixels;
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        size_t r = i / pixels, p = i - r * pixels;
        size_t k = indices ? (size_t)indices[r] : first + r;
        x[i] = (float)images[k * pixels + p] * scale;
        if (p == 0 && labels) labels_out[r] = labels[k];
    }
}

extern "C" cudaError_t k_u8_to_f32_gather_cuda(float *x, uint8_t *labels_out, const uint8_t *images,
                                               const uint8_t *labels, const uint64_t *indices, size_t first, int rows,
                                               size_t pixels, float scale, cudaStream_t stream) {
    size_t n = (size_t)rows * pixels;
    if (rows <= 0 || pixels == 0) return cudaSuccess;
    u8_to_f32_gather_kernel<<<blocks_for(n), THREADS, 0, stream>>>(x, labels_out, images, labels, indices, first,
                                                                   (size_t)rows, pixels, scale);
    return cudaGetLastError();
}

// ---- k_bias_act_forward ------------------------------------------------------------
__global__ void bias_act_forward_kernel(float *z, float *pre, const float *bias, size_t n, size_t cols, int act,
                                        int apply_act) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        float v = z[i] + bias[i % cols];
        if (apply_act) {
            if (pre) pre[i] = v;
            v = activate(v, act);
        }
        z[i] = v;
    }
}

extern "C" cudaError_t k_bias_act_forward_cuda(float *z, float *pre, const float *bias, int rows, int cols, int act,
                                               int apply_act, cudaStream_t stream) {
    size_t n = (size_t)rows * (size_t)cols;
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    bias_act_forward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(z, pre, bias, n, (size_t)cols, act, apply_act);
    return cudaGetLastError();
}

// ---- k_act_backward ----------------------------------------------------------------
__global__ void act_backward_kernel(float *dz, const float *out, const float *pre, size_t n, int act) {
    for (size_t i = first_index(); i < n; i += grid_stride()) {
        switch (act) {
        case KC_ACT_RELU: dz[i] = out[i] > 0.0f ? dz[i] : 0.0f; break;
        case KC_ACT_TANH: dz[i] *= 1.0f - out[i] * out[i]; break;
        default: dz[i] *= gelu_grad(pre[i]); break;
        }
    }
}

extern "C" cudaError_t k_act_backward_cuda(float *dz, const float *out, const float *pre, size_t n, int act,
                                           cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    act_backward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dz, out, pre, n, act);
    return cudaGetLastError();
}

// ---- k_bias_grad -------------------------------------------------------------------
// Pass 1: partials[c, j] = sum of dz[b, j] over the rows b of chunk c, in row order.
// Threads of a block take consecutive columns, so each row's loads are coalesced.
__global__ void bias_grad_partial_kernel(float *partials, const float *dz, int rows, int cols, int chunk_rows) {
    int j = blockIdx.x * blockDim.x + threadIdx.x, c = blockIdx.y;
    if (j >= cols) return;
    int b0 = c * chunk_rows, b1 = min(rows, b0 + chunk_rows);
    float s = 0.0f;
    for (int b = b0; b < b1; b++) s += dz[(size_t)b * cols + j];
    partials[(size_t)c * cols + j] = s;
}

// Pass 2: db[j] = sum of the chunks' partials, in chunk order.
__global__ void bias_grad_finish_kernel(float *db, const float *partials, int chunks, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    float s = 0.0f;
    for (int c = 0; c < chunks; c++) s += partials[(size_t)c * cols + j];
    db[j] = s;
}

extern "C" cudaError_t k_bias_grad_cuda(float *db, const float *dz, int rows, int cols, float *partials,
                                        cudaStream_t stream) {
    if (cols <= 0) return cudaSuccess;
    if (rows < 0) rows = 0;
    // At least 32 rows a chunk, and at most KC_BIAS_GRAD_MAX_CHUNKS chunks:
    // chunk_rows * MAX_CHUNKS >= rows, so chunks = ceil(rows / chunk_rows) <= MAX_CHUNKS.
    int chunk_rows = (rows + KC_BIAS_GRAD_MAX_CHUNKS - 1) / KC_BIAS_GRAD_MAX_CHUNKS;
    if (chunk_rows < 32) chunk_rows = 32;
    int chunks = (rows + chunk_rows - 1) / chunk_rows;
    unsigned col_blocks = (unsigned)((cols + THREADS - 1) / THREADS);
    if (chunks > 0) {
        bias_grad_partial_kernel<<<dim3(col_blocks, (unsigned)chunks), THREADS, 0, stream>>>(partials, dz, rows, cols,
                                                                                            chunk_rows);
        cudaError_t e = cudaGetLastError();
        if (e != cudaSuccess) return e;
    }
    bias_grad_finish_kernel<<<col_blocks, THREADS, 0, stream>>>(db, partials, chunks, cols);
    return cudaGetLastError();
}

// ---- k_softmax_xent ----------------------------------------------------------------
__global__ void softmax_xent_kernel(const float *logits, const uint8_t *labels, int rows, int cols, float *dlogits,
                                    float grad_scale, float *row_loss, int *row_hit) {
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= rows) return;
    const float *row = logits + (size_t)b * cols;
    int argmax = 0;
    float max = row[0];
    for (int j = 1; j < cols; j++)
        if (row[j] > max) max = row[j], argmax = j;
    float sum = 0.0f;
    for (int j = 0; j < cols; j++) sum += expf(row[j] - max);
    float log_sum = logf(sum);
    int y = labels[b];
    row_loss[b] = log_sum - (row[y] - max);
    row_hit[b] = argmax == y;
    if (dlogits) {
        float *drow = dlogits + (size_t)b * cols;
        float inv_sum = 1.0f / sum;
        for (int j = 0; j < cols; j++) drow[j] = expf(row[j] - max) * inv_sum * grad_scale;
        drow[y] -= grad_scale;
    }
}

extern "C" cudaError_t k_softmax_xent_cuda(const float *logits, const uint8_t *labels, int rows, int cols,
                                           float *dlogits, float grad_scale, float *row_loss, int *row_hit,
                                           cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    softmax_xent_kernel<<<(unsigned)((rows + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        logits, labels, rows, cols, dlogits, grad_scale, row_loss, row_hit);
    return cudaGetLastError();
}

// One block: thread t sums rows t, t + THREADS, ... in order, then a fixed tree.
__global__ void loss_reduce_kernel(double *out, const float *row_loss, const int *row_hit, int rows,
                                   int accumulate) {
    __shared__ double loss[THREADS];
    __shared__ long long hits[THREADS];
    int t = threadIdx.x;
    double l = 0.0;
    long long h = 0;
    for (int b = t; b < rows; b += THREADS) {
        l += (double)row_loss[b];
        h += row_hit[b];
    }
    loss[t] = l;
    hits[t] = h;
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            loss[t] += loss[t + half];
            hits[t] += hits[t + half];
        }
        __syncthreads();
    }
    if (t != 0) return;
    if (accumulate) {
        out[0] += loss[0];
        out[1] += (double)hits[0];
    } else {
        out[0] = loss[0];
        out[1] = (double)hits[0];
        out[2] = rows > 0 ? loss[0] / rows : 0.0;
    }
}

extern "C" cudaError_t k_loss_reduce_cuda(double *out, const float *row_loss, const int *row_hit, int rows,
                                          int accumulate, cudaStream_t stream) {
    loss_reduce_kernel<<<1, THREADS, 0, stream>>>(out, row_loss, row_hit, rows < 0 ? 0 : rows, accumulate);
    return cudaGetLastError();
}
