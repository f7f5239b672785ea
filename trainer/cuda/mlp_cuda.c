/* The MLP on the GPU: see mlp_cuda.h for the layout and the column-major trick. */
#include "mlp_cuda.h"

#include "kernels.h"

_Static_assert((int)ACT_RELU == (int)KC_ACT_RELU && (int)ACT_GELU == (int)KC_ACT_GELU &&
                   (int)ACT_TANH == (int)KC_ACT_TANH,
               "kernels.h's activation codes must be activation_kind's values");

static const float ONE = 1.0f, ZERO = 0.0f;

int mlp_forward_cuda(mlp_cuda *w, const float *params, int rows) {
    const mlp_shape *s = w->shape;
    for (int l = 0; l < s->n_layers; l++) {
        const mlp_layer *L = &s->layer[l];
        /* Row-major out[rows x out] = in[rows x in] * W^T, W [out x in].
         * Column-major: out^T [out x rows] = W [out x in] * in^T [in x rows], where
         * W is stored as a column-major [in x out] matrix (lda = in), taken with
         * OP_T, and in^T is the column-major [in x rows] matrix (ldb = in), OP_N. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_T, CUBLAS_OP_N, L->out, rows, L->in, &ONE,
                                      params + L->w_off, L->in, w->act[l], L->in, &ZERO, w->act[l + 1], L->out));
        int hidden = l < s->n_layers - 1;
        CUDA_TRY(w->ge, k_bias_act_forward_cuda(w->act[l + 1], w->pre[l], params + L->b_off, rows, L->out, (int)s->act,
                                                hidden, w->stream));
    }
    return 0;
}

int mlp_loss_cuda(mlp_cuda *w, const float *params, const uint8_t *labels, int rows, int with_grad, double *out,
                  int accumulate) {
    const mlp_shape *s = w->shape;
    if (mlp_forward_cuda(w, params, rows) != 0) return -1;
    CUDA_TRY(w->ge, k_softmax_xent_cuda(w->act[s->n_layers], labels, rows, s->num_classes, with_grad ? w->dz : NULL,
                                        1.0f / (float)rows, w->row_loss, w->row_hit, w->stream));
    CUDA_TRY(w->ge, k_loss_reduce_cuda(out, w->row_loss, w->row_hit, rows, accumulate, w->stream));
    return 0;
}

int mlp_backward_cuda(mlp_cuda *w, const float *params, float *grads, int rows, grad_ready_fn ready, void *arg) {
    const mlp_shape *s = w->shape;
    for (int l = s->n_layers - 1; l >= 0; l--) {
        const mlp_layer *L = &s->layer[l];
        /* Row-major dW[out x in] = dz^T[out x rows] * in[rows x in].
         * Column-major: dW^T [in x out] = in^T [in x rows] * dz [rows x out], where
         * in^T is the column-major [in x rows] matrix (lda = in), OP_N, and dz is
         * stored as a column-major [out x rows] matrix (ldb = out), taken with OP_T;
         * the result, column-major [in x out] with ldc = in, is dW row-major. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, L->in, L->out, rows, &ONE, w->act[l], L->in,
                                      w->dz, L->out, &ZERO, grads + L->w_off, L->in));
        CUDA_TRY(w->ge, k_bias_grad_cuda(grads + L->b_off, w->dz, rows, L->out, w->bias_partials, w->stream));
        if (ready) ready(arg, l);
        if (l == 0) break; /* no gradient is needed for the input */
        /* Row-major d(in)[rows x in] = dz[rows x out] * W[out x in].
         * Column-major: d(in)^T [in x rows] = W^T [in x out] * dz^T [out x rows], where
         * W stored row-major is exactly the column-major [in x out] matrix W^T
         * (lda = in), OP_N, and dz is the column-major [out x rows] matrix dz^T
         * (ldb = out), OP_N; ldc = in. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_N, L->in, rows, L->out, &ONE, params + L->w_off,
                                      L->in, w->dz, L->out, &ZERO, w->dz_next, L->in));
        CUDA_TRY(w->ge, k_act_backward_cuda(w->dz_next, w->act[l], w->pre[l - 1], (size_t)rows * L->in, (int)s->act,
                                            w->stream));
        float *t = w->dz;
        w->dz = w->dz_next;
        w->dz_next = t;
    }
    return 0;
}
