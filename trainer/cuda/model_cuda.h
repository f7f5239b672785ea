/* The model on the GPU: the twin of model.c's forward and backward, with the GEMMs
 * on cuBLAS and the rest in kernels.cu and cnn_kernels.cu, all enqueued on one
 * stream (nothing here synchronises). Same flat parameter layout as model.h (reverse
 * layer order, each weight row-major then its bias) and the same activation layouts
 * (channel-major in the convolution part), so checkpoints and the CPU engine read the
 * very same bytes.
 *
 * cuBLAS is column-major; a row-major matrix M [r x c] is, to it, M^T [c x r] with
 * leading dimension c. So each row-major product C = A B is computed as the
 * column-major C^T = B^T A^T: the operands swap places and keep their own
 * transposition flags (see the comment at each GEMM). A convolution is GEMMs over
 * chunks of examples (memory_plan_conv_chunk), as on the CPU. CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_MODEL_CUDA_H
#define DDPD_TRAINER_CUDA_MODEL_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cuda_check.h"
#include "model.h"

typedef struct {
    const model_shape *shape;
    int max_rows;
    cudaStream_t stream;
    cublasHandle_t blas;               /* bound to `stream` */
    /* Device buffers (carved from the engine's arena; see memory_plan.h). */
    float *act[MODEL_MAX_LAYERS + 1];  /* act[0]: input; act[l+1]: layer l's output (logits last) */
    float *pre[MODEL_MAX_LAYERS];      /* gelu fused into linear/conv2d: the pre-activation */
    uint8_t *mask[MODEL_MAX_LAYERS];   /* dropout (training) */
    int32_t *argmax[MODEL_MAX_LAYERS]; /* max-pool (training) */
    float *bn_mean[MODEL_MAX_LAYERS], *bn_invstd[MODEL_MAX_LAYERS];
    float *dz, *dz_next;               /* gradient w.r.t. a layer's output, ping-pong */
    float *col;                        /* conv2d: one chunk's im2col patches */
    float *bias_partials;
    double *channel_partials, *bn_sums;
    float *row_loss;
    int *row_hit;
    gpu_error *ge;                     /* where failures are recorded */
} model_cuda;

/* What a pass needs beyond the weights (model_pass on the device). */
typedef struct {
    int train;                  /* batch norm: batch statistics and running update; dropout on */
    const uint64_t *row_keys;   /* device: each row's rng_dropout_row_key (training with dropout) */
    /* sync batch norm: dbuf (device doubles) <- its sum over ranks (or batch shards),
     * ordered after the work enqueued so far on the stream and before what follows. 0
     * or -1; or 1: the pass stops there (the forward, loss or backward returns 1), its
     * batch norm layer's own sums in dbuf, to be run again from the start once the
     * totals over every shard are known (engine_cuda.c: several shards on one GPU). */
    int (*allreduce_sum)(void *arg, double *dbuf, size_t n);
    void *allreduce_arg;
} model_cuda_pass;

/* model_forward: `rows` examples whose inputs are in w->act[0]; `stats` (device) are
 * read in evaluation and updated in training. 0, -1, or 1 (held: model_cuda_pass);
 * so do model_loss_cuda and model_backward_cuda. */
int model_forward_cuda(model_cuda *w, const float *params, float *stats, int rows, const model_cuda_pass *pass);

/* model_forward, then k_softmax_xent: out[0] loss sum, out[1] hits, out[2] mean loss
 * (see k_loss_reduce_cuda; with `accumulate`, out[0..1] are added to). With
 * `with_grad`, dlogits (averaged over `rows`) go to w->dz for model_backward_cuda. */
int model_loss_cuda(model_cuda *w, const float *params, float *stats, const uint8_t *labels, int rows, int with_grad,
                    double *out, int accumulate, const model_cuda_pass *pass);

/* model_forward_backward's backward half, after model_loss_cuda(with_grad): writes
 * (not accumulates) the gradients, and calls ready(arg, l) as soon as layer l's
 * gradient work is enqueued, from the last layer with parameters to the first. */
int model_backward_cuda(model_cuda *w, const float *params, float *grads, int rows, const model_cuda_pass *pass,
                        grad_ready_fn ready, void *arg);

#endif
