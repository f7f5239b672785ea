// The MLP step's kernels on the GPU: launches of kernel_bodies.h's bodies (each the
// twin of a CPU reference in cpu_kernels.c; see kernels.h for what each computes).
// Element-wise kernels are grid-stride loops over size_t indices; the reductions
// have a fixed shape (no atomics), so results are bit-identical run after run.
#include "kernels.h"
#include "launch.cuh"

// ---- k_u8_to_f32 + gather_inputs (engine_cpu.c) ---------------------------------
__global__ void u8_to_f32_gather_kernel(float *x, uint8_t *labels_out, const uint8_t *images, const uint8_t *labels,
                                        const uint64_t *indices, size_t first, size_t n, size_t pixels, float scale) {
    for (size_t i = first_index(); i < n; i += grid_stride())
        kb_u8_to_f32_gather(i, x, labels_out, images, labels, indices, first, pixels, scale);
}

extern "C" cudaError_t k_u8_to_f32_gather_cuda(float *x, uint8_t *labels_out, const uint8_t *images,
                                               const uint8_t *labels, const uint64_t *indices, size_t first, int rows,
                                               size_t pixels, float scale, cudaStream_t stream) {
    size_t n = (size_t)rows * pixels;
    if (rows <= 0 || pixels == 0) return cudaSuccess;
    u8_to_f32_gather_kernel<<<blocks_for(n), THREADS, 0, stream>>>(x, labels_out, images, labels, indices, first, n,
                                                                   pixels, scale);
    return cudaGetLastError();
}

// ---- k_parts_avg (coll_nccl_reduce_scatter_parts_device) ----------------------------
__global__ void parts_avg_kernel(float *dst, const float *src, size_t ld, size_t n, int width, float scale) {
    for (size_t i = first_index(); i < n; i += grid_stride()) kb_parts_avg(i, dst, src, ld, width, scale);
}

extern "C" cudaError_t k_parts_avg_cuda(float *dst, const float *src, size_t ld, size_t n, int width,
                                        cudaStream_t stream) {
    if (n == 0 || width < 1) return cudaSuccess;
    parts_avg_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dst, src, ld, n, width, 1.0f / (float)width);
    return cudaGetLastError();
}

// ---- k_parts_sum_f64 (engine_cuda.c: sync batch norm over batch shards) -------------
__global__ void parts_sum_f64_kernel(double *dst, const double *src, size_t ld, size_t n, int width) {
    for (size_t i = first_index(); i < n; i += grid_stride()) kb_parts_sum_f64(i, dst, src, ld, width);
}

extern "C" cudaError_t k_parts_sum_f64_cuda(double *dst, const double *src, size_t ld, size_t n, int width,
                                            cudaStream_t stream) {
    if (n == 0 || width < 1) return cudaSuccess;
    parts_sum_f64_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dst, src, ld, n, width);
    return cudaGetLastError();
}

// ---- k_bias_act_forward ------------------------------------------------------------
__global__ void bias_act_forward_kernel(float *z, float *pre, const float *bias, size_t n, size_t cols, int act,
                                        int apply_act) {
    for (size_t i = first_index(); i < n; i += grid_stride()) kb_bias_act_forward(i, z, pre, bias, cols, act, apply_act);
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
    for (size_t i = first_index(); i < n; i += grid_stride()) kb_act_backward(i, dz, out, pre, act);
}

extern "C" cudaError_t k_act_backward_cuda(float *dz, const float *out, const float *pre, size_t n, int act,
                                           cudaStream_t stream) {
    if (n == 0) return cudaSuccess;
    act_backward_kernel<<<blocks_for(n), THREADS, 0, stream>>>(dz, out, pre, n, act);
    return cudaGetLastError();
}

// ---- k_bias_grad -------------------------------------------------------------------
// Pass 1: block (x, c) takes chunk c of the rows for consecutive columns, so each
// row's loads are coalesced. Pass 2: one thread per column sums the chunks.
__global__ void bias_grad_partial_kernel(float *partials, const float *dz, int rows, int cols, int chunk_rows) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < cols) kb_bias_grad_partial((int)blockIdx.y, j, partials, dz, rows, cols, chunk_rows);
}

__global__ void bias_grad_finish_kernel(float *db, const float *partials, int chunks, int cols) {
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j < cols) kb_bias_grad_finish(j, db, partials, chunks, cols);
}

extern "C" cudaError_t k_bias_grad_cuda(float *db, const float *dz, int rows, int cols, float *partials,
                                        cudaStream_t stream) {
    if (cols <= 0) return cudaSuccess;
    if (rows < 0) rows = 0;
    int chunk_rows = kb_bias_grad_chunk_rows(rows);
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
    if (b < rows) kb_softmax_xent_row(b, logits, labels, cols, dlogits, grad_scale, row_loss, row_hit);
}

extern "C" cudaError_t k_softmax_xent_cuda(const float *logits, const uint8_t *labels, int rows, int cols,
                                           float *dlogits, float grad_scale, float *row_loss, int *row_hit,
                                           cudaStream_t stream) {
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    softmax_xent_kernel<<<(unsigned)((rows + THREADS - 1) / THREADS), THREADS, 0, stream>>>(
        logits, labels, rows, cols, dlogits, grad_scale, row_loss, row_hit);
    return cudaGetLastError();
}

// One block: each thread's rows in order, then a fixed tree.
__global__ void loss_reduce_kernel(double *out, const float *row_loss, const int *row_hit, int rows,
                                   int accumulate) {
    __shared__ double loss[THREADS];
    __shared__ long long hits[THREADS];
    int t = threadIdx.x;
    kb_loss_thread(t, row_loss, row_hit, rows, &loss[t], &hits[t]);
    __syncthreads();
    for (int half = THREADS / 2; half > 0; half /= 2) {
        if (t < half) {
            loss[t] += loss[t + half];
            hits[t] += hits[t + half];
        }
        __syncthreads();
    }
    if (t == 0) kb_loss_write(out, loss[0], hits[0], rows, accumulate);
}

extern "C" cudaError_t k_loss_reduce_cuda(double *out, const float *row_loss, const int *row_hit, int rows,
                                          int accumulate, cudaStream_t stream) {
    loss_reduce_kernel<<<1, THREADS, 0, stream>>>(out, row_loss, row_hit, rows < 0 ? 0 : rows, accumulate);
    return cudaGetLastError();
}
