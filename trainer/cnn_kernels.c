/* CPU reference kernels of the convolutional layers: see cnn_kernels.h. Every
 * reduction runs in a fixed order (in double where it sums a whole batch), so results
 * are bit-for-bit reproducible; hot loops get the AVX2 clone (cpu_kernels.h). */
#include "cnn_kernels.h"

#include <math.h>
#include <string.h>

#include "cpu_kernels.h"
#include "rng.h"

/* --- im2col / col2im ----------------------------------------------------------------
 * Both go through one example's zero-padded planes, so that every patch row is a
 * plain run of k floats (no bounds checks), copied with a size the compiler knows for
 * the usual kernels (3, 5): that makes im2col a small part of a convolution. */

static void fill_padded(const float *restrict x, int C, int rows, int H, int W, int b, int pad, float *restrict padded) {
    int Hp = H + 2 * pad, Wp = W + 2 * pad;
    if (pad > 0) memset(padded, 0, sizeof(float) * (size_t)C * Hp * Wp);
    for (int c = 0; c < C; c++)
        for (int y = 0; y < H; y++)
            memcpy(padded + ((size_t)c * Hp + y + pad) * Wp + pad, x + (((size_t)c * rows + b) * H + y) * W,
                   sizeof(float) * (size_t)W);
}

static inline __attribute__((always_inline)) void gather_patches(const float *restrict padded, int C, int Hp, int Wp,
                                                                 int k, int stride, int Ho, int Wo,
                                                                 float *restrict dst) {
    for (int oy = 0; oy < Ho; oy++)
        for (int ox = 0; ox < Wo; ox++) {
            const float *base = padded + (size_t)oy * stride * Wp + (size_t)ox * stride;
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < k; ky++) {
                    memcpy(dst, base + ((size_t)c * Hp + ky) * Wp, sizeof(float) * (size_t)k);
                    dst += k;
                }
        }
}

DDPD_VECTOR_CLONES
void k_im2col(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad, int Ho, int Wo,
              float *colT, float *padded) {
    int Hp = H + 2 * pad, Wp = W + 2 * pad;
    size_t per_example = (size_t)Ho * Wo * C * k * k;
    for (int b = b0; b < b0 + n; b++) {
        const float *src = padded;
        if (pad == 0 && C == 1) src = x + (size_t)b * H * W; /* one plane, already contiguous */
        else fill_padded(x, C, rows, H, W, b, pad, padded);
        float *dst = colT + (size_t)(b - b0) * per_example;
        switch (k) { /* constant sizes for the usual kernels */
        case 3: gather_patches(src, C, Hp, Wp, 3, stride, Ho, Wo, dst); break;
        case 5: gather_patches(src, C, Hp, Wp, 5, stride, Ho, Wo, dst); break;
        default: gather_patches(src, C, Hp, Wp, k, stride, Ho, Wo, dst); break;
        }
    }
}

static inline __attribute__((always_inline)) void scatter_patches(const float *restrict src, int C, int Hp, int Wp,
                                                                  int k, int stride, int Ho, int Wo,
                                                                  float *restrict padded) {
    for (int oy = 0; oy < Ho; oy++)
        for (int ox = 0; ox < Wo; ox++) {
            float *base = padded + (size_t)oy * stride * Wp + (size_t)ox * stride;
            for (int c = 0; c < C; c++)
                for (int ky = 0; ky < k; ky++) {
                    float *row = base + ((size_t)c * Hp + ky) * Wp;
                    for (int kx = 0; kx < k; kx++) row[kx] += src[kx];
                    src += k;
                }
        }
}

DDPD_VECTOR_CLONES
void k_col2im(const float *colT, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad, int Ho,
              int Wo, float *dx, float *padded) {
    int Hp = H + 2 * pad, Wp = W + 2 * pad;
    size_t per_example = (size_t)Ho * Wo * C * k * k;
    for (int b = b0; b < b0 + n; b++) {
        memset(padded, 0, sizeof(float) * (size_t)C * Hp * Wp);
        const float *src = colT + (size_t)(b - b0) * per_example;
        switch (k) {
        case 3: scatter_patches(src, C, Hp, Wp, 3, stride, Ho, Wo, padded); break;
        case 5: scatter_patches(src, C, Hp, Wp, 5, stride, Ho, Wo, padded); break;
        default: scatter_patches(src, C, Hp, Wp, k, stride, Ho, Wo, padded); break;
        }
        for (int c = 0; c < C; c++)
            for (int y = 0; y < H; y++) {
                float *restrict out = dx + (((size_t)c * rows + b) * H + y) * W;
                const float *restrict in = padded + ((size_t)c * Hp + y + pad) * Wp + pad;
                for (int x = 0; x < W; x++) out[x] += in[x];
            }
    }
}

/* --- bias, activation ----------------------------------------------------------------- */

DDPD_VECTOR_CLONES
void k_channel_bias_act_forward(float *z, float *pre, const float *bias, int C, size_t n, activation_kind act,
                                int apply_act) {
    for (int c = 0; c < C; c++) {
        float *restrict run = z + (size_t)c * n;
        if (bias) {
            float b = bias[c];
            for (size_t i = 0; i < n; i++) run[i] += b;
        }
        if (!apply_act) continue;
        if (pre) memcpy(pre + (size_t)c * n, run, sizeof(float) * n);
        k_act_forward(run, run, n, act);
    }
}

void k_channel_bias_grad(float *db, const float *dz, int C, size_t n) {
    for (int c = 0; c < C; c++) {
        const float *run = dz + (size_t)c * n;
        double s = 0.0;
        for (size_t i = 0; i < n; i++) s += (double)run[i];
        db[c] = (float)s;
    }
}

/* --- max-pool ------------------------------------------------------------------------------ */

/* 2x2, the usual pool, with the window's four reads spelled out. */
static void maxpool2_forward(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W, int Ho, int Wo) {
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * (size_t)H * W;
        float *out = y + p * (size_t)Ho * Wo;
        int32_t *at = argmax + p * (size_t)Ho * Wo;
        for (int oy = 0; oy < Ho; oy++) {
            const float *r0 = in + (size_t)2 * oy * W, *r1 = r0 + W;
            for (int ox = 0; ox < Wo; ox++) {
                int i = 2 * oy * W + 2 * ox;
                float best = r0[2 * ox];
                int best_at = i;
                if (r0[2 * ox + 1] > best) best = r0[2 * ox + 1], best_at = i + 1;
                if (r1[2 * ox] > best) best = r1[2 * ox], best_at = i + W;
                if (r1[2 * ox + 1] > best) best = r1[2 * ox + 1], best_at = i + W + 1;
                out[oy * Wo + ox] = best;
                at[oy * Wo + ox] = best_at;
            }
        }
    }
}

void k_maxpool_forward(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W, int k, int Ho,
                       int Wo) {
    if (k == 2) {
        maxpool2_forward(x, y, argmax, planes, H, W, Ho, Wo);
        return;
    }
    for (size_t p = 0; p < planes; p++) {
        const float *in = x + p * (size_t)H * W;
        float *out = y + p * (size_t)Ho * Wo;
        int32_t *at = argmax + p * (size_t)Ho * Wo;
        for (int oy = 0; oy < Ho; oy++)
            for (int ox = 0; ox < Wo; ox++) {
                int first = oy * k * W + ox * k, best_at = first;
                float best = in[first];
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        int i = first + ky * W + kx;
                        if (in[i] > best) best = in[i], best_at = i;
                    }
                out[oy * Wo + ox] = best;
                at[oy * Wo + ox] = best_at;
            }
    }
}

void k_maxpool_backward(float *dx, const float *dy, const int32_t *argmax, size_t planes, int H, int W, int Ho,
                        int Wo) {
    memset(dx, 0, sizeof(float) * planes * (size_t)H * W);
    for (size_t p = 0; p < planes; p++) {
        float *d = dx + p * (size_t)H * W;
        const float *g = dy + p * (size_t)Ho * Wo;
        const int32_t *at = argmax + p * (size_t)Ho * Wo;
        for (int o = 0; o < Ho * Wo; o++) d[at[o]] += g[o];
    }
}

/* --- conv2d -> activation -> max-pool, backward, through the winners --------------------- */

/* y[k..end) += sum over the listed rows i of a[i] * x[rows[i]][k..end) (rows of K
 * floats), each element's terms added in list order. The sums stay in registers a tile of 64 (then 32, then 8) floats
 * at a time and y is written once, rather than read and written for every row (which
 * also runs into 4K aliasing between y and the rows). With `overread`, x may be read up
 * to 31 floats past `end` (the values there are loaded, never used), so a short row
 * (a small kernel's K = 25) takes one pass over the rows, not four. (Going through K
 * in column blocks, every row's block before the next, so that the blocks stay in L1,
 * measured slower here: the sums per block are too short.) */
typedef float v8sf __attribute__((vector_size(32)));
/* The same, at any float's alignment, for loads and stores straight from the buffers. */
typedef float v8sf_u __attribute__((vector_size(32), aligned(4), may_alias));
#define LOAD8(p) (*(const v8sf_u *)(p))
#define STORE8(p, v) (*(v8sf_u *)(p) = (v))

static inline __attribute__((always_inline)) void accumulate_rows(float *restrict y, const float *restrict x, int K,
                                                                  const int32_t *restrict rows,
                                                                  const float *restrict a, int n, int k, int end,
                                                                  int overread) {
    for (; k + 64 <= end; k += 64) { /* eight independent sums: loads, not add latency, set the pace */
        v8sf s0 = LOAD8(y + k), s1 = LOAD8(y + k + 8), s2 = LOAD8(y + k + 16), s3 = LOAD8(y + k + 24);
        v8sf s4 = LOAD8(y + k + 32), s5 = LOAD8(y + k + 40), s6 = LOAD8(y + k + 48), s7 = LOAD8(y + k + 56);
        for (int i = 0; i < n; i++) {
            const float *r = x + (size_t)rows[i] * K + k;
            v8sf g = {a[i], a[i], a[i], a[i], a[i], a[i], a[i], a[i]};
            s0 += g * LOAD8(r), s1 += g * LOAD8(r + 8), s2 += g * LOAD8(r + 16), s3 += g * LOAD8(r + 24);
            s4 += g * LOAD8(r + 32), s5 += g * LOAD8(r + 40), s6 += g * LOAD8(r + 48), s7 += g * LOAD8(r + 56);
        }
        STORE8(y + k, s0), STORE8(y + k + 8, s1), STORE8(y + k + 16, s2), STORE8(y + k + 24, s3);
        STORE8(y + k + 32, s4), STORE8(y + k + 40, s5), STORE8(y + k + 48, s6), STORE8(y + k + 56, s7);
    }
    if (k + 32 <= end || (k < end && overread)) { /* up to 32 more in one pass, read past the end when allowed */
        float tail[32] = {0};
        int m = end - k < 32 ? end - k : 32;
        memcpy(tail, y + k, sizeof(float) * (size_t)m);
        v8sf s0 = LOAD8(tail), s1 = LOAD8(tail + 8), s2 = LOAD8(tail + 16), s3 = LOAD8(tail + 24);
        for (int i = 0; i < n; i++) {
            const float *r = x + (size_t)rows[i] * K + k;
            v8sf g = {a[i], a[i], a[i], a[i], a[i], a[i], a[i], a[i]};
            s0 += g * LOAD8(r), s1 += g * LOAD8(r + 8), s2 += g * LOAD8(r + 16), s3 += g * LOAD8(r + 24);
        }
        STORE8(tail, s0), STORE8(tail + 8, s1), STORE8(tail + 16, s2), STORE8(tail + 24, s3);
        memcpy(y + k, tail, sizeof(float) * (size_t)m);
        k += m;
    }
    for (; k + 8 <= end; k += 8) {
        v8sf s = LOAD8(y + k);
        for (int i = 0; i < n; i++) {
            v8sf g = {a[i], a[i], a[i], a[i], a[i], a[i], a[i], a[i]};
            s += g * LOAD8(x + (size_t)rows[i] * K + k);
        }
        STORE8(y + k, s);
    }
    for (; k < end; k++) {
        float s = y[k];
        for (int i = 0; i < n; i++) s += a[i] * x[(size_t)rows[i] * K + k];
        y[k] = s;
    }
}

/* One position's patch gradient into the padded planes (a row of k_col2im). */
static inline __attribute__((always_inline)) void scatter_row(const float *restrict row, int C, int Hp, int Wp,
                                                              int k, float *restrict at) {
    for (int c = 0; c < C; c++)
        for (int ky = 0; ky < k; ky++) {
            float *dst = at + ((size_t)c * Hp + ky) * Wp;
            for (int kx = 0; kx < k; kx++) dst[kx] += row[kx];
            row += k;
        }
}

/* One plane's winners: gz = g * act'(the winner's output, or its pre-activation for
 * gelu) for each window, appended as entries of channel c (the count moves on only
 * when gz is not zero: no branch), and summed into *bias in window order (the zeros
 * change no bit: x + 0 is x). Returns the new entry count. */
static inline __attribute__((always_inline)) int gather_winners(const float *restrict gp, const int32_t *restrict ap,
                                                                const float *restrict op, const float *restrict pp,
                                                                int pooled, int act, int c, conv_pool_scratch *s,
                                                                int entries, double *bias) {
    double sum = *bias;
    for (int o = 0; o < pooled; o++) {
        int pos = ap[o];
        float gz = gp[o];
        if (act == ACT_RELU) { /* g where the output is positive, else 0: by a mask, not a branch */
            uint32_t bits;
            memcpy(&bits, &gz, sizeof bits);
            bits &= -(uint32_t)(op[pos] > 0.0f);
            memcpy(&gz, &bits, sizeof gz);
        }
        else if (act >= 0) gz *= k_act_grad((activation_kind)act, op[pos], pp ? pp[pos] : 0.0f);
        sum += (double)gz;
        s->channel[entries] = c, s->grad[entries] = gz, s->entry_pos[entries] = pos;
        entries += gz != 0.0f;
    }
    *bias = sum;
    return entries;
}

DDPD_VECTOR_CLONES
void k_conv_pool_backward(const conv_geometry *geo, int C_out, int rows, int b0, int n, const float *g,
                          const int32_t *argmax, int pooled, const float *out, const float *pre, int act,
                          const float *colT, const float *W, float *dW, double *db, float *dx,
                          conv_pool_scratch *s) {
    int K = geo->C * geo->k * geo->k, positions = geo->Ho * geo->Wo;
    int Hp = geo->H + 2 * geo->pad, Wp = geo->W + 2 * geo->pad;
    for (int b = b0; b < b0 + n; b++) {
        const float *patches = colT + (size_t)(b - b0) * positions * K;
        int entries = 0;
        for (int c = 0; c < C_out; c++) { /* the winners, channel by channel, windows in order */
            size_t plane = (size_t)c * rows + b;
            const float *gp = g + plane * pooled, *op = out + plane * positions;
            const int32_t *ap = argmax + plane * pooled;
            int first = entries;
            double bias = 0.0;
            /* Without branches: an entry is written for every window and kept (the count
             * moves on) only when gz is not zero. Adding the zeros to the bias sum
             * changes no bit (x + 0 is x), so the sum is the kept winners' sum in order. */
            const float *pp = pre ? pre + plane * positions : NULL;
            switch (act) { /* one loop per activation, so none branches inside */
            case -1: entries = gather_winners(gp, ap, op, pp, pooled, -1, c, s, entries, &bias); break;
            case ACT_RELU: entries = gather_winners(gp, ap, op, pp, pooled, ACT_RELU, c, s, entries, &bias); break;
            default: entries = gather_winners(gp, ap, op, pp, pooled, act, c, s, entries, &bias); break;
            }
            db[c] += bias;
            /* dW[c] += sum of gz * patch over the channel's winners */
            accumulate_rows(dW + (size_t)c * K, patches, K, s->entry_pos + first, s->grad + first, entries - first, 0,
                            K, 1);
        }
        if (!dx) continue;
        /* Group the winners by position (a stable counting sort: channels stay in order). */
        int32_t *start = s->pos_start, *order = s->order;
        memset(start, 0, sizeof(int32_t) * (size_t)(positions + 1));
        for (int e = 0; e < entries; e++) start[s->entry_pos[e] + 1]++;
        for (int p = 0; p < positions; p++) start[p + 1] += start[p];
        for (int e = 0; e < entries; e++) { /* start[p] moves to p's end; shifted back below */
            int at = start[s->entry_pos[e]]++;
            order[at] = s->channel[e];
            s->order_grad[at] = s->grad[e];
        }
        for (int p = positions; p > 0; p--) start[p] = start[p - 1];
        start[0] = 0;
        memset(s->padded, 0, sizeof(float) * (size_t)geo->C * Hp * Wp);
        for (int p = 0; p < positions; p++) {
            int count = start[p + 1] - start[p];
            if (!count) continue;
            float *row = s->row;
            memset(row, 0, sizeof(float) * (size_t)K);
            /* the position's patch gradient: sum of gz * W[c] over its winners */
            accumulate_rows(row, W, K, order + start[p], s->order_grad + start[p], count, 0, K, 0);
            int oy = p / geo->Wo, ox = p % geo->Wo;
            float *at = s->padded + (size_t)oy * geo->stride * Wp + (size_t)ox * geo->stride;
            switch (geo->k) {
            case 3: scatter_row(row, geo->C, Hp, Wp, 3, at); break;
            case 5: scatter_row(row, geo->C, Hp, Wp, 5, at); break;
            default: scatter_row(row, geo->C, Hp, Wp, geo->k, at); break;
            }
        }
        for (int c = 0; c < geo->C; c++)
            for (int y = 0; y < geo->H; y++)
                memcpy(dx + (((size_t)c * rows + b) * geo->H + y) * geo->W,
                       s->padded + ((size_t)c * Hp + y + geo->pad) * Wp + geo->pad, sizeof(float) * (size_t)geo->W);
    }
}

/* --- batch norm ----------------------------------------------------------------------------- */

void k_batchnorm_sums(const float *x, int C, size_t n, double *sums) {
    for (int c = 0; c < C; c++) {
        const float *run = x + (size_t)c * n;
        double s = 0.0, q = 0.0;
        for (size_t i = 0; i < n; i++) {
            double v = (double)run[i];
            s += v;
            q += v * v;
        }
        sums[c] = s;
        sums[C + c] = q;
    }
}

void k_batchnorm_stats(const double *sums, int C, double count, float eps, float momentum, float *mean, float *invstd,
                       float *running_mean, float *running_var) {
    for (int c = 0; c < C; c++) {
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
}

void k_batchnorm_running(const float *running_mean, const float *running_var, float eps, int C, float *mean,
                         float *invstd) {
    for (int c = 0; c < C; c++) {
        mean[c] = running_mean[c];
        invstd[c] = (float)(1.0 / sqrt((double)running_var[c] + (double)eps));
    }
}

DDPD_VECTOR_CLONES
void k_batchnorm_forward(const float *x, float *y, const float *gamma, const float *beta, const float *mean,
                         const float *invstd, int C, size_t n) {
    for (int c = 0; c < C; c++) {
        const float *restrict in = x + (size_t)c * n;
        float *restrict out = y + (size_t)c * n;
        float m = mean[c], s = invstd[c], g = gamma[c], b = beta[c];
        for (size_t i = 0; i < n; i++) out[i] = g * ((in[i] - m) * s) + b;
    }
}

void k_batchnorm_backward_sums(const float *dy, const float *x, const float *mean, const float *invstd, int C,
                               size_t n, double *sums) {
    for (int c = 0; c < C; c++) {
        const float *g = dy + (size_t)c * n, *in = x + (size_t)c * n;
        float m = mean[c], s = invstd[c];
        double sd = 0.0, sdx = 0.0;
        for (size_t i = 0; i < n; i++) {
            float xhat = (in[i] - m) * s;
            sd += (double)g[i];
            sdx += (double)g[i] * (double)xhat;
        }
        sums[c] = sd;
        sums[C + c] = sdx;
    }
}

DDPD_VECTOR_CLONES
void k_batchnorm_backward(float *dx, const float *dy, const float *x, const float *gamma, const float *mean,
                          const float *invstd, const double *sums, double count, int C, size_t n) {
    for (int c = 0; c < C; c++) {
        const float *restrict g = dy + (size_t)c * n, *restrict in = x + (size_t)c * n;
        float *restrict out = dx + (size_t)c * n;
        float m = mean[c], s = invstd[c], scale = gamma[c] * invstd[c];
        float mean_dy = (float)(sums[c] / count), mean_dy_xhat = (float)(sums[C + c] / count);
        for (size_t i = 0; i < n; i++) {
            float xhat = (in[i] - m) * s;
            out[i] = scale * (g[i] - mean_dy - xhat * mean_dy_xhat);
        }
    }
}

/* --- dropout ----------------------------------------------------------------------------- */

void k_dropout_forward(float *y, uint8_t *mask, const float *x, const uint64_t *row_keys, int rows, int C,
                       size_t plane, int channel_major, float p) {
    float scale = 1.0f / (1.0f - p);
    for (int c = 0; c < C; c++)
        for (int b = 0; b < rows; b++) {
            size_t at = channel_major ? ((size_t)c * rows + b) * plane : ((size_t)b * C + c) * plane;
            for (size_t i = 0; i < plane; i++) {
                int kept = rng_counter_uniform(row_keys[b], (uint64_t)c * plane + i) >= p;
                mask[at + i] = (uint8_t)kept;
                y[at + i] = kept ? x[at + i] * scale : 0.0f;
            }
        }
}

DDPD_VECTOR_CLONES
void k_dropout_backward(float *dx, const float *dy, const uint8_t *mask, size_t n, float p) {
    float scale = 1.0f / (1.0f - p);
    for (size_t i = 0; i < n; i++) dx[i] = mask[i] ? dy[i] * scale : 0.0f;
}

/* --- flatten ----------------------------------------------------------------------------- */

void k_flatten(float *y, const float *x, int C, int rows, size_t plane) {
    for (int c = 0; c < C; c++)
        for (int b = 0; b < rows; b++)
            memcpy(y + ((size_t)b * C + c) * plane, x + ((size_t)c * rows + b) * plane, sizeof(float) * plane);
}

void k_unflatten(float *dx, const float *dy, int C, int rows, size_t plane) {
    for (int c = 0; c < C; c++)
        for (int b = 0; b < rows; b++)
            memcpy(dx + ((size_t)c * rows + b) * plane, dy + ((size_t)b * C + c) * plane, sizeof(float) * plane);
}
