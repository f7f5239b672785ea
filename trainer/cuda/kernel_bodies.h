/* The GPU kernels' per-element (or per-thread) bodies, written once (host_device.h):
 * kernels.cu, cnn_kernels.cu and optim_kernels.cu launch them, one GPU thread per
 * element in grid-stride loops, and the GPU tests' CPU stand-in
 * (tests/support/fake_cuda.c) runs the same functions in plain loops, with the reductions' thread
 * and block structure played out, so that test_gpu_kernels_fake_cuda tests the
 * kernels' code rather than a copy of it. What a launch adds (grids, streams,
 * shared memory, the trees' __syncthreads) is only here in the .cu files. The
 * optimizers' bodies are optim_rules.h's, the dropout generator rng.h's.
 *
 * Arguments follow the launchers' in kernels.h; `i` is the element (or `b` the
 * row, `c` the channel, `t` the thread) a GPU thread takes. */
#ifndef DDPD_TRAINER_CUDA_KERNEL_BODIES_H
#define DDPD_TRAINER_CUDA_KERNEL_BODIES_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "host_device.h"
#include "rng.h"

/* Every kernel's block size; a power of two: the reductions' trees halve it. */
#define KB_THREADS 256

/* The values of activation_kind (run_config.h); model_cuda.c checks they agree. */
enum { KC_ACT_RELU = 0, KC_ACT_GELU = 1, KC_ACT_TANH = 2 };

/* The reductions' fixed shapes, which the memory plan sizes their scratch by:
 * bias-gradient partials, chunks of at most KC_BIAS_GRAD_MAX_CHUNKS per column
 * (KC_BIAS_GRAD_MAX_CHUNKS x cols floats); the gradient norm's per-block partial
 * sums (KC_NORM_BLOCKS doubles); per-channel partial sums, at most
 * KC_CHANNEL_MAX_CHUNKS chunks per channel (2 x KC_CHANNEL_MAX_CHUNKS x C doubles). */
#define KC_BIAS_GRAD_MAX_CHUNKS 256
#define KC_NORM_BLOCKS 512
#define KC_CHANNEL_MAX_CHUNKS 64

/* ---- activations (cpu_kernels.c's) ------------------------------------------------- */

HD_INLINE float kb_gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
HD_INLINE float kb_gelu_grad(float x) {
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    float pdf = expf(-0.5f * x * x) * 0.3989422804014327f; /* 1/sqrt(2 pi) */
    return cdf + x * pdf;
}
HD_INLINE float kb_activate(float x, int act) {
    return act == KC_ACT_RELU ? (x > 0.0f ? x : 0.0f) : act == KC_ACT_TANH ? tanhf(x) : kb_gelu(x);
}

/* ---- the MLP's (kernels.cu) ---------------------------------------------------------- */

/* Element i of rows x pixels: the example's pixel as a float, and its label once. */
HD_INLINE void kb_u8_to_f32_gather(size_t i, float *x, uint8_t *labels_out, const uint8_t *images,
                                   const uint8_t *labels, const uint64_t *indices, size_t first, size_t pixels,
                                   float scale) {
    size_t r = i / pixels, p = i - r * pixels;
    size_t k = indices ? (size_t)indices[r] : first + r;
    x[i] = (float)images[k * pixels + p] * scale;
    if (p == 0 && labels) labels_out[r] = labels[k];
}

/* Element i of rows x cols. */
HD_INLINE void kb_bias_act_forward(size_t i, float *z, float *pre, const float *bias, size_t cols, int act,
                                   int apply_act) {
    float v = z[i] + bias[i % cols];
    if (apply_act) {
        if (pre) pre[i] = v;
        v = kb_activate(v, act);
    }
    z[i] = v;
}

HD_INLINE void kb_act_backward(size_t i, float *dz, const float *out, const float *pre, int act) {
    if (act == KC_ACT_RELU) dz[i] = out[i] > 0.0f ? dz[i] : 0.0f;
    else if (act == KC_ACT_TANH) dz[i] *= 1.0f - out[i] * out[i];
    else dz[i] *= kb_gelu_grad(pre[i]);
}

/* The bias gradient's chunks: at least 32 rows each, and at most
 * KC_BIAS_GRAD_MAX_CHUNKS of them (the planned scratch): chunk_rows *
 * KC_BIAS_GRAD_MAX_CHUNKS >= rows, so ceil(rows / chunk_rows) chunks fit. */
HD_INLINE int kb_bias_grad_chunk_rows(int rows) {
    int chunk_rows = (rows + KC_BIAS_GRAD_MAX_CHUNKS - 1) / KC_BIAS_GRAD_MAX_CHUNKS;
    return chunk_rows < 32 ? 32 : chunk_rows;
}
/* Pass 1, chunk c and column j: its rows in order. */
HD_INLINE void kb_bias_grad_partial(int c, int j, float *partials, const float *dz, int rows, int cols,
                                    int chunk_rows) {
    int b0 = c * chunk_rows, b1 = rows < b0 + chunk_rows ? rows : b0 + chunk_rows;
    float s = 0.0f;
    for (int b = b0; b < b1; b++) s += dz[(size_t)b * cols + j];
    partials[(size_t)c * cols + j] = s;
}
/* Pass 2, column j: the chunks in order. */
HD_INLINE void kb_bias_grad_finish(int j, float *db, const float *partials, int chunks, int cols) {
    float s = 0.0f;
    for (int c = 0; c < chunks; c++) s += partials[(size_t)c * cols + j];
    db[j] = s;
}

/* Row b: its loss, whether the argmax is its label, and (dlogits not NULL) its
 * gradient, classes in order. */
HD_INLINE void kb_softmax_xent_row(int b, const float *logits, const uint8_t *labels, int cols, float *dlogits,
                                   float grad_scale, float *row_loss, int *row_hit) {
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

/* The loss's one block: thread t's rows t, t + KB_THREADS, ... in order. */
HD_INLINE void kb_loss_thread(int t, const float *row_loss, const int *row_hit, int rows, double *loss,
                              long long *hits) {
    double l = 0.0;
    long long h = 0;
    for (int b = t; b < rows; b += KB_THREADS) {
        l += (double)row_loss[b];
        h += row_hit[b];
    }
    *loss = l;
    *hits = h;
}
/* The tree's result: out[0] the loss sum, out[1] the hits, out[2] the mean. */
HD_INLINE void kb_loss_write(double *out, double loss, long long hits, int rows, int accumulate) {
    if (accumulate) {
        out[0] += loss;
        out[1] += (double)hits;
    } else {
        out[0] = loss;
        out[1] = (double)hits;
        out[2] = rows > 0 ? loss / rows : 0.0;
    }
}

/* ---- batch shards summed in shard order (kernels.cu; the cpu twin: coll_cpu.c) -------- */

/* Element i of a rank's share: the `width` shards' values (shard s's at src[s * ld +
 * i], gathered there by the all-to-all) summed in shard order, ((v_0 + v_1) + ...) *
 * scale, as coll_cpu.c's reduce_avg_f32 sums its parts, so that the bits do not depend
 * on how many ranks hold the shards. No fused multiply-add: a sum, then a product. */
HD_INLINE void kb_parts_avg(size_t i, float *dst, const float *src, size_t ld, int width, float scale) {
    float acc = src[i];
    for (int s = 1; s < width; s++) acc += src[(size_t)s * ld + i];
    dst[i] = width > 1 ? acc * scale : acc;
}

/* Value i of `width` batch shards' sync batch norm sums (shard s's at src + s * ld)
 * totalled in shard order, ((v_0 + 0) + (v_1 + 0)) + ..., as engine_cpu.c's
 * total_over_shards: the same bits whatever the number of ranks holding the shards
 * (each goes through + 0.0, so that a zero's sign never depends on a peer's zero
 * added to it by the sum over ranks that gathered them). */
HD_INLINE void kb_parts_sum_f64(size_t i, double *dst, const double *src, size_t ld, int width) {
    double t = src[i] + 0.0;
    for (int s = 1; s < width; s++) t += src[(size_t)s * ld + i] + 0.0;
    dst[i] = t;
}

/* ---- the gradient norm (optim_kernels.cu) -------------------------------------------- */

/* One thread's grid-stride share of sum g^2: elements first, first + stride, ... */
HD_INLINE double kb_sumsq_thread(const float *g, size_t n, size_t first, size_t stride) {
    double acc = 0.0;
    for (size_t i = first; i < n; i += stride) acc += (double)g[i] * g[i];
    return acc;
}

/* ---- the convolutional layers' (cnn_kernels.cu; CPU twins in cnn_kernels.c) ---------- */

/* Entry i of colT [n * Ho * Wo][C * k * k] for examples [b0, b0 + n). */
HD_INLINE void kb_im2col(size_t i, const float *x, int C, int rows, int H, int W, int b0, int k, int stride, int pad,
                         int Ho, int Wo, float *colT) {
    size_t K = (size_t)C * k * k, positions = (size_t)Ho * Wo;
    size_t pos = i / K, j = i - pos * K;
    size_t b = (size_t)b0 + pos / positions, o = pos % positions;
    int oy = (int)(o / (size_t)Wo), ox = (int)(o % (size_t)Wo);
    int c = (int)(j / ((size_t)k * k)), r = (int)(j % ((size_t)k * k)), ky = r / k, kx = r % k;
    int iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
    colT[i] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(((size_t)c * rows + b) * H + iy) * W + ix] : 0.0f;
}

/* Input element i of (C, n examples, H, W): the sum of the colT entries that read it,
 * in (ky, kx) order, added to dx. */
HD_INLINE void kb_col2im(size_t i, const float *colT, int C, int rows, int H, int W, int b0, size_t n, int k,
                         int stride, int pad, int Ho, int Wo, float *dx) {
    size_t K = (size_t)C * k * k, plane = (size_t)H * W;
    size_t c = i / (n * plane), rest = i - c * n * plane, bb = rest / plane, at = rest - bb * plane;
    int iy = (int)(at / (size_t)W), ix = (int)(at % (size_t)W);
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

/* Element i of C runs of n: the channel's bias (may be NULL), then the activation. */
HD_INLINE void kb_channel_bias_act(size_t i, float *z, float *pre, const float *bias, size_t n, int act,
                                   int apply_act) {
    float v = z[i] + (bias ? bias[i / n] : 0.0f);
    if (apply_act) {
        if (pre) pre[i] = v;
        v = kb_activate(v, act);
    }
    z[i] = v;
}

/* The per-channel sums (the bias gradient, batch norm's statistics and its backward):
 * each channel's run in chunks, thread t of a chunk taking its elements t,
 * t + KB_THREADS, ... in order, a fixed tree per chunk, then the chunks in order. */
enum { KB_SUM_A = 0, KB_SUM_A_SQUARES = 1, KB_SUM_A_XHAT = 2 };

/* Chunks per channel for runs of n (at most KC_CHANNEL_MAX_CHUNKS: the scratch). */
HD_INLINE int kb_channel_chunks(size_t n) {
    size_t chunks = (n + 4 * KB_THREADS - 1) / (4 * KB_THREADS);
    if (chunks > KC_CHANNEL_MAX_CHUNKS) chunks = KC_CHANNEL_MAX_CHUNKS;
    return (int)(chunks ? chunks : 1);
}
/* Thread t of chunk `chunk` of channel c: *q0 = its sum of a, *q1 = of a^2
 * (KB_SUM_A_SQUARES) or of a xhat (KB_SUM_A_XHAT). */
HD_INLINE void kb_channel_sums_thread(int chunk, int c, int t, const float *a, const float *x, const float *mean,
                                      const float *invstd, size_t n, int chunks, int mode, double *q0, double *q1) {
    size_t len = (n + (size_t)chunks - 1) / (size_t)chunks, begin = (size_t)chunk * len;
    size_t end = begin + len < n ? begin + len : n;
    const float *run = a + (size_t)c * n;
    float m = mode == KB_SUM_A_XHAT ? mean[c] : 0.0f, is = mode == KB_SUM_A_XHAT ? invstd[c] : 0.0f;
    double s0 = 0.0, s1 = 0.0;
    for (size_t i = begin + (size_t)t; i < end; i += KB_THREADS) {
        double v = (double)run[i];
        s0 += v;
        if (mode == KB_SUM_A_SQUARES) s1 += v * v;
        else if (mode == KB_SUM_A_XHAT) s1 += v * (double)((x[(size_t)c * n + i] - m) * is);
    }
    *q0 = s0;
    *q1 = s1;
}
/* Channel c: its chunks' partials in order into sums[c], sums[C + c] and the float
 * copies f0[c], f1[c] (each may be NULL). */
HD_INLINE void kb_channel_sums_finish(int c, double *sums, const double *partials, int C, int chunks, float *f0,
                                      float *f1) {
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

/* Channel c's mean and invstd from sums over sums[2C] values; the running
 * statistics move when running_mean is not NULL. */
HD_INLINE void kb_batchnorm_stats(int c, const double *sums, int C, float eps, float momentum, float *mean,
                                  float *invstd, float *running_mean, float *running_var) {
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

HD_INLINE void kb_batchnorm_running(int c, const float *running_mean, const float *running_var, float eps,
                                    float *mean, float *invstd) {
    mean[c] = running_mean[c];
    invstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
}

HD_INLINE void kb_batchnorm_forward(size_t i, const float *x, float *y, const float *gamma, const float *beta,
                                    const float *mean, const float *invstd, size_t n) {
    size_t c = i / n;
    y[i] = gamma[c] * ((x[i] - mean[c]) * invstd[c]) + beta[c];
}

HD_INLINE void kb_batchnorm_backward(size_t i, float *dx, const float *dy, const float *x, const float *gamma,
                                     const float *mean, const float *invstd, const double *sums, int C, size_t n) {
    double count = sums[2 * C];
    size_t c = i / n;
    float m = mean[c], s = invstd[c], scale = gamma[c] * invstd[c];
    float mean_dy = (float)(sums[c] / count), mean_dy_xhat = (float)(sums[C + c] / count);
    float xhat = (x[i] - m) * s;
    dx[i] = scale * (dy[i] - mean_dy - xhat * mean_dy_xhat);
}

/* Output i of planes x Ho x Wo: the window's largest value, the first when tied. */
HD_INLINE void kb_maxpool_forward(size_t i, const float *x, float *y, int32_t *argmax, int H, int W, int k, int Ho,
                                  int Wo) {
    size_t p = i / ((size_t)Ho * Wo);
    int o = (int)(i - p * (size_t)Ho * Wo), oy = o / Wo, ox = o % Wo;
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

/* Output i's gradient to its window's winner (dx zeroed before). */
HD_INLINE void kb_maxpool_backward(size_t i, float *dx, const float *dy, const int32_t *argmax, int H, int W, int Ho,
                                   int Wo) {
    size_t p = i / ((size_t)Ho * Wo);
    dx[p * (size_t)H * W + (size_t)argmax[i]] = dy[i];
}

/* Element i (channel-major: C x rows x plane; else rows x C x plane): kept when its
 * counter-based number (rng.h) under the row's layer key is at least p. */
HD_INLINE void kb_dropout_forward(size_t i, float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys,
                                  uint64_t layer, size_t rows, size_t C, size_t plane, int channel_major, float p) {
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
    uint64_t key = rng_dropout_layer_key(row_base_keys[b], layer);
    int kept = rng_counter_uniform(key, c * plane + j) >= p;
    mask[i] = (uint8_t)kept;
    y[i] = kept ? x[i] * (1.0f / (1.0f - p)) : 0.0f;
}

HD_INLINE void kb_dropout_backward(size_t i, float *dx, const float *dy, const uint8_t *mask, float p) {
    dx[i] = mask[i] ? dy[i] * (1.0f / (1.0f - p)) : 0.0f;
}

/* Element i of y [rows][C * plane] from x [C][rows][plane] (back: the other way). */
HD_INLINE void kb_flatten(size_t i, float *y, const float *x, size_t C, size_t rows, size_t plane, int back) {
    size_t b = i / (C * plane), rest = i - b * C * plane, c = rest / plane, j = rest - c * plane;
    size_t cnhw = (c * rows + b) * plane + j;
    if (back) y[cnhw] = x[i];
    else y[i] = x[cnhw];
}

#endif
