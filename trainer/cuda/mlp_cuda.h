/* The MLP on the GPU: the twin of mlp.c's forward and backward, with the GEMMs on
 * cuBLAS and the rest in kernels.cu, all enqueued on one stream (nothing here
 * synchronises). Same flat parameter layout as mlp.h (reverse layer order, each
 * weight [out x in] row-major then its bias), so checkpoints and the CPU engine
 * read the very same bytes.
 *
 * cuBLAS is column-major; a row-major matrix M [r x c] is, to it, M^T [c x r] with
 * leading dimension c. So each row-major product C = A B is computed as the
 * column-major C^T = B^T A^T: the operands swap places and keep their own
 * transposition flags (see the comment at each GEMM). CUDA builds only. */
#ifndef DDPD_MLP_CUDA_H
#define DDPD_MLP_CUDA_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdint.h>

#include "cuda_check.h"
#include "mlp.h"

typedef struct {
    const mlp_shape *shape;
    int max_rows;
    cudaStream_t stream;
    cublasHandle_t blas;             /* bound to `stream` */
    /* Device buffers (carved from the engine's arena; see memory_plan.h). */
    float *act[MLP_MAX_LAYERS + 1]; /* act[0]: input; act[l+1]: layer l's output (logits last) */
    float *pre[MLP_MAX_LAYERS];     /* gelu only: hidden layer l's pre-activation */
    float *dz, *dz_next;            /* gradient w.r.t. a layer's output, ping-pong */
    float *bias_partials;
    float *row_loss;
    int *row_hit;
    gpu_error *ge;                  /* where failures are recorded */
} mlp_cuda;

/* mlp_forward: `rows` examples whose inputs are in w->act[0]. */
int mlp_forward_cuda(mlp_cuda *w, const float *params, int rows);

/* mlp_forward, then k_softmax_xent: out[0] loss sum, out[1] hits, out[2] mean loss
 * (see k_loss_reduce_cuda; with `accumulate`, out[0..1] are added to). With
 * `with_grad`, dlogits (averaged over `rows`) go to w->dz for mlp_backward_cuda. */
int mlp_loss_cuda(mlp_cuda *w, const float *params, const uint8_t *labels, int rows, int with_grad, double *out,
                  int accumulate);

/* mlp_forward_backward's backward half, after mlp_loss_cuda(with_grad): writes
 * (not accumulates) the gradients, and calls ready(arg, l) as soon as layer l's
 * gradient work is enqueued, from the last layer to the first. */
int mlp_backward_cuda(mlp_cuda *w, const float *params, float *grads, int rows, grad_ready_fn ready, void *arg);

#endif
