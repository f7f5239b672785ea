/* A convolution layer's forward pass on oneDNN (the library PyTorch's CPU
 * convolutions run on), beside the im2col + GEMM path in model.c, which stays the
 * reference the tests hold this one against. oneDNN's direct convolutions work in
 * blocked layouts (channels in groups of 8 or 16): the input and the weights are
 * reordered into the layout the primitive chose, and its output back into the
 * model's channel-major CNHW (see cnn_kernels.h).
 *
 * Primitives depend on the batch size, so each layer keeps a few, one per size it
 * met (the training batch, an epoch's last batch, the evaluation batches).
 * Determinism: a primitive runs a fixed algorithm, so the same machine, library and
 * thread count give the same bits on every run; another CPU may get other kernels
 * (AVX2 rather than AVX-512), which round differently (docs/cpu-performance.md). */
#ifndef DDPD_TRAINER_CONV_DNNL_H
#define DDPD_TRAINER_CONV_DNNL_H

#include <stddef.h>

typedef struct conv_dnnl conv_dnnl;

/* The geometry of one convolution (C in, O out channels, k x k, one stride and
 * padding for both axes) on planes of H x W into Ho x Wo. */
typedef struct {
    int C, H, W, O, Ho, Wo, k, stride, pad;
    int has_bias;
} conv_dnnl_shape;

/* 1 when this build has oneDNN and DDPD_CPU_CONV does not ask for "im2col". */
int conv_dnnl_wanted(void);

/* Threads for oneDNN's parallel regions in this process (its OpenMP runtime). */
void conv_dnnl_set_threads(int threads);

/* A layer's forward on oneDNN, checked by building its primitive for `rows`
 * examples; NULL and a reason in `err` when oneDNN is not built in or cannot run it. */
conv_dnnl *conv_dnnl_create(const conv_dnnl_shape *shape, int rows, char *err, size_t errlen);

/* out (O x rows x Ho x Wo, CNHW) = the convolution of in (C x rows x H x W) with
 * weights [O][C][k][k], plus bias[O] when the shape has one. 0, or -1 when no
 * primitive could be made for this many rows (out untouched: use im2col). */
int conv_dnnl_forward(conv_dnnl *d, const float *in, const float *weights, const float *bias, float *out, int rows);

/* The implementation oneDNN picked ("jit:avx512_core"), for the log. */
const char *conv_dnnl_impl(const conv_dnnl *d);

void conv_dnnl_free(conv_dnnl *d);

#endif
