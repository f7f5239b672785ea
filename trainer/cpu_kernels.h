/* The element-wise and reduction kernels of the MLP step on the CPU (the GEMMs go
 * through the BLAS). They are the reference the CUDA kernels are held against, so
 * each is plain, deterministic (fixed summation order) and documented by its math. */
#ifndef DDPD_TRAINER_CPU_KERNELS_H
#define DDPD_TRAINER_CPU_KERNELS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "run_config.h"

/* Hot loops get AVX-512 and AVX2 clones beside the baseline one, picked at load time,
 * so one binary (and one Docker image) runs everywhere and uses wide vectors where it
 * can (AVX-512: Adam's update, bound by its divisions and square root, is 15% faster
 * than on AVX2 on an AMD EPYC of 2022). Contraction into FMA stays off (-std=c11)
 * and float sums are not reassociated, so every clone rounds identically. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) /* clang 14 mis-links clones across files */
#define DDPD_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define DDPD_VECTOR_CLONES
#endif

/* x[i] = src[i] * scale (pixels to floats). */
void k_u8_to_f32(float *x, const uint8_t *src, size_t n, float scale);

/* z[b, j] += bias[j]; then, when `act_out` is non-NULL-activation: pre <- z (kept for
 * gelu's backward when `pre` is non-NULL) and z <- act(z). rows x cols. */
void k_bias_act_forward(float *z, float *pre, const float *bias, int rows, int cols,
                        activation_kind act, int apply_act);

/* y[i] = act(x[i]); y may be x. */
void k_act_forward(float *y, const float *x, size_t n, activation_kind act);

/* act'(.) of one element, from its output `out` (relu, tanh) or input `pre` (gelu):
 * the factor k_act_backward multiplies by. Inline: it is called once per element. */
static inline float k_act_grad(activation_kind act, float out, float pre) {
    switch (act) {
    case ACT_RELU: return out > 0.0f ? 1.0f : 0.0f;
    case ACT_TANH: return 1.0f - out * out;
    case ACT_GELU: {
        float cdf = 0.5f * (1.0f + erff(pre * 0.70710678118654752440f));
        float pdf = expf(-0.5f * pre * pre) * 0.3989422804014327f; /* 1/sqrt(2 pi) */
        return cdf + pre * pdf;
    }
    }
    return 1.0f;
}

/* dz[i] *= act'(.) given the layer's output `out` (relu, tanh) or its input `pre` (gelu). */
void k_act_backward(float *dz, const float *out, const float *pre, size_t n, activation_kind act);

/* db[j] = sum over rows of dz[b, j], rows summed in order. */
void k_bias_grad(float *db, const float *dz, int rows, int cols);

/* Softmax cross-entropy over `rows` examples of `cols` classes. Writes
 * dlogits = (softmax - onehot) * grad_scale (may be NULL), adds each example's loss
 * to *loss_sum (in order) and the number of argmax hits to *correct. */
void k_softmax_xent(const float *logits, const uint8_t *labels, int rows, int cols,
                    float *dlogits, float grad_scale, double *loss_sum, long *correct);

#endif
