/* The model on the GPU: see model_cuda.h for the layout and the column-major trick.
 * Each layer is model.c's, step for step. */
#include "model_cuda.h"

#include "kernels.h"
#include "memory_plan.h"

_Static_assert((int)ACT_RELU == (int)KC_ACT_RELU && (int)ACT_GELU == (int)KC_ACT_GELU &&
                   (int)ACT_TANH == (int)KC_ACT_TANH,
               "kernels.h's activation codes must be activation_kind's values");
_Static_assert(MEMORY_PLAN_CHANNEL_CHUNKS == KC_CHANNEL_MAX_CHUNKS &&
                   MEMORY_PLAN_BIAS_GRAD_MAX_CHUNKS == KC_BIAS_GRAD_MAX_CHUNKS,
               "the memory plan's scratch sizes must be the kernels'");

static const float ONE = 1.0f, ZERO = 0.0f;

static size_t in_size(const model_layer *L) { return (size_t)L->in_c * L->in_h * L->in_w; }

static int sum_over_ranks(const model_cuda_pass *pass, double *dbuf, size_t n) {
    return pass->allreduce_sum ? pass->allreduce_sum(pass->allreduce_arg, dbuf, n) : 0;
}

/* --- conv2d --------------------------------------------------------------------------- */

static int conv_forward(model_cuda *w, int l, const float *params, const float *in, float *out, int rows) {
    const model_layer *L = &w->shape->layer[l];
    int K = L->in_c * L->kernel * L->kernel, positions = L->out_h * L->out_w;
    int chunk = memory_plan_conv_chunk(L, w->max_rows);
    for (int b0 = 0; b0 < rows; b0 += chunk) {
        int n = rows - b0 < chunk ? rows - b0 : chunk;
        CUDA_TRY(w->ge, k_im2col_cuda(in, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad,
                                      L->out_h, L->out_w, w->col, w->stream));
        /* Row-major out[:, chunk] [co x N] (ld rows*positions) = W [co x K] * colT^T, colT [N x K].
         * Column-major: out^T [N x co] = colT [N x K] * W^T [K x co], where colT is
         * stored as a column-major [K x N] matrix (lda = K), taken with OP_T, and W
         * row-major is the column-major [K x co] matrix W^T (ldb = K), OP_N. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_T, CUBLAS_OP_N, n * positions, L->out_c, K, &ONE, w->col, K,
                                      params + L->w_off, K, &ZERO, out + (size_t)b0 * positions, rows * positions));
    }
    CUDA_TRY(w->ge, k_channel_bias_act_forward_cuda(out, w->pre[l], L->n_b ? params + L->b_off : NULL, L->out_c,
                                                    (size_t)rows * positions, L->act == MODEL_NO_ACT ? 0 : L->act,
                                                    L->act != MODEL_NO_ACT, w->stream));
    return 0;
}

static int conv_backward(model_cuda *w, int l, const float *params, float *grads, const float *in, const float *dz,
                         float *dx, int rows, int need_dx) {
    const model_layer *L = &w->shape->layer[l];
    int K = L->in_c * L->kernel * L->kernel, positions = L->out_h * L->out_w, ld = rows * positions;
    int chunk = memory_plan_conv_chunk(L, w->max_rows);
    if (need_dx) CUDA_TRY(w->ge, cudaMemsetAsync(dx, 0, sizeof(float) * (size_t)rows * in_size(L), w->stream));
    for (int b0 = 0; b0 < rows; b0 += chunk) {
        int n = rows - b0 < chunk ? rows - b0 : chunk;
        const float *dz_chunk = dz + (size_t)b0 * positions;
        const float *beta = b0 ? &ONE : &ZERO;
        CUDA_TRY(w->ge, k_im2col_cuda(in, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad,
                                      L->out_h, L->out_w, w->col, w->stream));
        /* Row-major dW [co x K] (+)= dz[:, chunk] [co x N] * colT [N x K].
         * Column-major: dW^T [K x co] = colT^T [K x N] * dz_chunk^T [N x co], where
         * colT is the column-major [K x N] matrix (lda = K), OP_N, and dz_chunk
         * row-major [co x N] with leading dimension ld is the column-major [N x co]
         * matrix (ldb = ld), OP_N; ldc = K. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_N, K, L->out_c, n * positions, &ONE, w->col, K,
                                      dz_chunk, ld, beta, grads + L->w_off, K));
        if (!need_dx) continue;
        /* Row-major dcolT [N x K] = dz_chunk^T [N x co] * W [co x K].
         * Column-major: dcolT^T [K x N] = W^T [K x co] * dz_chunk [co x N], where W
         * row-major is the column-major [K x co] matrix W^T (lda = K), OP_N, and
         * dz_chunk is stored as a column-major [N x co] matrix (ldb = ld), taken
         * with OP_T; ldc = K. */
        CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, K, n * positions, L->out_c, &ONE,
                                      params + L->w_off, K, dz_chunk, ld, &ZERO, w->col, K));
        CUDA_TRY(w->ge, k_col2im_cuda(w->col, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad,
                                      L->out_h, L->out_w, dx, w->stream));
    }
    if (L->n_b)
        CUDA_TRY(w->ge, k_channel_bias_grad_cuda(grads + L->b_off, dz, L->out_c, (size_t)ld, w->channel_partials,
                                                 w->stream));
    return 0;
}

/* --- forward ------------------------------------------------------------------------------ */

int model_forward_cuda(model_cuda *w, const float *params, float *stats, int rows, const model_cuda_pass *pass) {
    const model_shape *s = w->shape;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        const float *in = w->act[l];
        float *out = w->act[l + 1];
        size_t n_in = (size_t)rows * in_size(L), plane = (size_t)L->in_h * L->in_w;
        switch (L->kind) {
        case LAYER_LINEAR:
            /* Row-major out[rows x out] = in[rows x in] * W^T, W [out x in].
             * Column-major: out^T [out x rows] = W [out x in] * in^T [in x rows], where
             * W is stored as a column-major [in x out] matrix (lda = in), taken with
             * OP_T, and in^T is the column-major [in x rows] matrix (ldb = in), OP_N. */
            CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_T, CUBLAS_OP_N, L->out_c, rows, L->in_c, &ONE,
                                          params + L->w_off, L->in_c, in, L->in_c, &ZERO, out, L->out_c));
            CUDA_TRY(w->ge, k_bias_act_forward_cuda(out, w->pre[l], params + L->b_off, rows, L->out_c,
                                                    L->act == MODEL_NO_ACT ? (int)s->act : L->act,
                                                    L->act != MODEL_NO_ACT, w->stream));
            break;
        case LAYER_CONV2D:
            if (conv_forward(w, l, params, in, out, rows) != 0) return -1;
            break;
        case LAYER_BATCHNORM2D: {
            int C = L->out_c;
            float *running_mean = stats + L->stat_off, *running_var = stats + L->stat_off + C;
            if (pass->train) {
                CUDA_TRY(w->ge, k_batchnorm_sums_cuda(in, C, (size_t)rows * plane, w->bn_sums, w->channel_partials,
                                                      w->stream));
                int held = s->sync_bn ? sum_over_ranks(pass, w->bn_sums, 2 * (size_t)C + 1) : 0;
                if (held != 0) return held; /* -1, or 1: the pass stops here (model_cuda_pass) */
                CUDA_TRY(w->ge, k_batchnorm_stats_cuda(w->bn_sums, C, MODEL_BN_EPS, MODEL_BN_MOMENTUM, w->bn_mean[l],
                                                       w->bn_invstd[l], running_mean, running_var, w->stream));
            } else {
                CUDA_TRY(w->ge, k_batchnorm_running_cuda(running_mean, running_var, MODEL_BN_EPS, C, w->bn_mean[l],
                                                         w->bn_invstd[l], w->stream));
            }
            CUDA_TRY(w->ge, k_batchnorm_forward_cuda(in, out, params + L->w_off, params + L->b_off, w->bn_mean[l],
                                                     w->bn_invstd[l], C, (size_t)rows * plane, w->stream));
            break;
        }
        case LAYER_ACTIVATION: CUDA_TRY(w->ge, k_act_forward_cuda(out, in, n_in, L->act, w->stream)); break;
        case LAYER_MAXPOOL2D:
            CUDA_TRY(w->ge, k_maxpool_forward_cuda(in, out, pass->train ? w->argmax[l] : NULL,
                                                   (size_t)L->in_c * rows, L->in_h, L->in_w, L->kernel, L->out_h,
                                                   L->out_w, w->stream));
            break;
        case LAYER_DROPOUT:
            if (pass->train && pass->row_keys) {
                if (L->cnhw)
                    CUDA_TRY(w->ge, k_dropout_forward_cuda(out, w->mask[l], in, pass->row_keys, l, rows, L->in_c,
                                                           plane, 1, L->p, w->stream));
                else
                    CUDA_TRY(w->ge, k_dropout_forward_cuda(out, w->mask[l], in, pass->row_keys, l, rows,
                                                           (int)in_size(L), 1, 0, L->p, w->stream));
            } else { /* evaluation: the identity */
                CUDA_TRY(w->ge, cudaMemcpyAsync(out, in, sizeof(float) * n_in, cudaMemcpyDeviceToDevice, w->stream));
            }
            break;
        case LAYER_FLATTEN: CUDA_TRY(w->ge, k_flatten_cuda(out, in, L->in_c, rows, plane, w->stream)); break;
        }
    }
    return 0;
}

int model_loss_cuda(model_cuda *w, const float *params, float *stats, const uint8_t *labels, int rows, int with_grad,
                    double *out, int accumulate, const model_cuda_pass *pass) {
    const model_shape *s = w->shape;
    int rc = model_forward_cuda(w, params, stats, rows, pass);
    if (rc != 0) return rc;
    CUDA_TRY(w->ge, k_softmax_xent_cuda(w->act[s->n_layers], labels, rows, s->num_classes, with_grad ? w->dz : NULL,
                                        1.0f / (float)rows, w->row_loss, w->row_hit, w->stream));
    CUDA_TRY(w->ge, k_loss_reduce_cuda(out, w->row_loss, w->row_hit, rows, accumulate, w->stream));
    return 0;
}

/* --- backward --------------------------------------------------------------------------------- */

int model_backward_cuda(model_cuda *w, const float *params, float *grads, int rows, const model_cuda_pass *pass,
                        grad_ready_fn ready, void *arg) {
    const model_shape *s = w->shape;
    for (int l = s->n_layers - 1; l >= s->first_trained; l--) {
        const model_layer *L = &s->layer[l];
        const float *in = w->act[l], *out = w->act[l + 1];
        int need_dx = l > s->first_trained; /* no gradient is needed for the input */
        size_t n_out = (size_t)rows * model_layer_out_size(s, l), plane = (size_t)L->in_h * L->in_w;
        int swap = need_dx;
        switch (L->kind) {
        case LAYER_LINEAR:
            if (L->act != MODEL_NO_ACT)
                CUDA_TRY(w->ge, k_act_backward_cuda(w->dz, out, w->pre[l], n_out, L->act, w->stream));
            /* Row-major dW[out x in] = dz^T[out x rows] * in[rows x in].
             * Column-major: dW^T [in x out] = in^T [in x rows] * dz [rows x out], where
             * in^T is the column-major [in x rows] matrix (lda = in), OP_N, and dz is
             * stored as a column-major [out x rows] matrix (ldb = out), taken with OP_T;
             * the result, column-major [in x out] with ldc = in, is dW row-major. */
            CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_T, L->in_c, L->out_c, rows, &ONE, in,
                                          L->in_c, w->dz, L->out_c, &ZERO, grads + L->w_off, L->in_c));
            CUDA_TRY(w->ge,
                     k_bias_grad_cuda(grads + L->b_off, w->dz, rows, L->out_c, w->bias_partials, w->stream));
            if (ready) ready(arg, l);
            /* Row-major d(in)[rows x in] = dz[rows x out] * W[out x in].
             * Column-major: d(in)^T [in x rows] = W^T [in x out] * dz^T [out x rows], where
             * W stored row-major is exactly the column-major [in x out] matrix W^T
             * (lda = in), OP_N, and dz is the column-major [out x rows] matrix dz^T
             * (ldb = out), OP_N; ldc = in. */
            if (need_dx)
                CUBLAS_TRY(w->ge, cublasSgemm(w->blas, CUBLAS_OP_N, CUBLAS_OP_N, L->in_c, rows, L->out_c, &ONE,
                                              params + L->w_off, L->in_c, w->dz, L->out_c, &ZERO, w->dz_next,
                                              L->in_c));
            break;
        case LAYER_CONV2D:
            if (L->act != MODEL_NO_ACT)
                CUDA_TRY(w->ge, k_act_backward_cuda(w->dz, out, w->pre[l], n_out, L->act, w->stream));
            if (conv_backward(w, l, params, grads, in, w->dz, w->dz_next, rows, need_dx) != 0) return -1;
            if (ready) ready(arg, l);
            break;
        case LAYER_BATCHNORM2D: {
            int C = L->out_c;
            CUDA_TRY(w->ge, k_batchnorm_backward_sums_cuda(w->dz, in, w->bn_mean[l], w->bn_invstd[l], C,
                                                           (size_t)rows * plane, w->bn_sums, w->channel_partials,
                                                           grads + L->w_off, grads + L->b_off, w->stream));
            if (ready) ready(arg, l);
            if (!need_dx) break;
            int held = s->sync_bn ? sum_over_ranks(pass, w->bn_sums, 2 * (size_t)C + 1) : 0;
            if (held != 0) return held; /* -1, or 1: the pass stops here (model_cuda_pass) */
            CUDA_TRY(w->ge, k_batchnorm_backward_cuda(w->dz_next, w->dz, in, params + L->w_off, w->bn_mean[l],
                                                      w->bn_invstd[l], w->bn_sums, C, (size_t)rows * plane,
                                                      w->stream));
            break;
        }
        case LAYER_ACTIVATION: /* relu and tanh from the output, gelu from the input */
            CUDA_TRY(w->ge, k_act_backward_cuda(w->dz, out, in, n_out, L->act, w->stream));
            swap = 0;
            break;
        case LAYER_MAXPOOL2D:
            if (need_dx)
                CUDA_TRY(w->ge, k_maxpool_backward_cuda(w->dz_next, w->dz, w->argmax[l], (size_t)L->in_c * rows,
                                                        L->in_h, L->in_w, L->out_h, L->out_w, w->stream));
            break;
        case LAYER_DROPOUT:
            CUDA_TRY(w->ge, k_dropout_backward_cuda(w->dz, w->dz, w->mask[l], n_out, L->p, w->stream));
            swap = 0;
            break;
        case LAYER_FLATTEN:
            if (need_dx) CUDA_TRY(w->ge, k_unflatten_cuda(w->dz_next, w->dz, L->in_c, rows, plane, w->stream));
            break;
        }
        if (swap) {
            float *t = w->dz;
            w->dz = w->dz_next;
            w->dz_next = t;
        }
    }
    return 0;
}
