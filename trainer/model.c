/* The network on the CPU: see model.h for the layers, the parameter layout (and why
 * it is reversed) and the activation layouts. */
#include "model.h"

#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_kernels.h"
#include "conv_dnnl.h"
#include "cpu_kernels.h"
#include "rng.h"

#define RNG_STREAM_INIT 1

static size_t layer_in_size(const model_layer *L) { return (size_t)L->in_c * L->in_h * L->in_w; }

/* --- initialisation ---------------------------------------------------------------------- */

void model_init_params(const model_shape *s, float *params, float *stats, uint64_t seed) {
    rng_state r;
    rng_seed(&r, seed, RNG_STREAM_INIT);
    memset(params, 0, sizeof(float) * s->n_params); /* the alignment padding */
    for (int l = 0; l < s->n_layers; l++) { /* forward order, weight then bias, like PyTorch */
        const model_layer *L = &s->layer[l];
        if (L->kind == LAYER_BATCHNORM2D) {
            for (int c = 0; c < L->out_c; c++) {
                params[L->w_off + c] = 1.0f;
                params[L->b_off + c] = 0.0f;
                if (stats) {
                    stats[L->stat_off + c] = 0.0f;
                    stats[L->stat_off + L->out_c + c] = 1.0f;
                }
            }
            continue;
        }
        if (L->n_w == 0) continue;
        size_t fan_in = L->kind == LAYER_CONV2D ? (size_t)L->in_c * L->kernel * L->kernel : (size_t)L->in_c;
        float bound = 1.0f / sqrtf((float)fan_in);
        for (size_t i = 0; i < L->n_w; i++) params[L->w_off + i] = rng_uniform(&r, -bound, bound);
        for (size_t i = 0; i < L->n_b; i++) params[L->b_off + i] = rng_uniform(&r, -bound, bound);
    }
}

/* --- workspace ------------------------------------------------------------------------------ */

int model_workspace_init(model_workspace *w, const model_shape *s, int max_rows) {
    memset(w, 0, sizeof *w);
    w->shape = s;
    w->max_rows = max_rows;
    size_t rows = (size_t)max_rows;
    w->act[0] = malloc(sizeof(float) * rows * s->in_dim);
    int ok = w->act[0] != NULL;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        size_t n = rows * model_layer_out_size(s, l);
        w->act[l + 1] = malloc(sizeof(float) * n);
        ok &= w->act[l + 1] != NULL;
        int fused_gelu = (L->kind == LAYER_LINEAR || L->kind == LAYER_CONV2D) && L->act == ACT_GELU;
        if (fused_gelu) ok &= (w->pre[l] = malloc(sizeof(float) * n)) != NULL;
        if (L->kind == LAYER_DROPOUT) ok &= (w->mask[l] = malloc(n)) != NULL;
        if (L->kind == LAYER_MAXPOOL2D) ok &= (w->argmax[l] = malloc(sizeof(int32_t) * n)) != NULL;
        if (L->kind == LAYER_BATCHNORM2D) {
            ok &= (w->bn_mean[l] = malloc(sizeof(float) * L->out_c)) != NULL;
            ok &= (w->bn_invstd[l] = malloc(sizeof(float) * L->out_c)) != NULL;
        }
    }
    model_scratch k;
    model_scratch_of(s, &k);
    w->dz = malloc(sizeof(float) * rows * k.widest);
    w->dz_next = malloc(sizeof(float) * rows * k.widest);
    w->bn_sums = malloc(sizeof(double) * (2 * (size_t)k.widest_c + 1));
    w->row_keys = malloc(sizeof(uint64_t) * rows);
    ok &= w->dz && w->dz_next && w->bn_sums && w->row_keys;
    if (k.col)
        ok &= (w->col = calloc(k.col + MODEL_IM2COL_SLACK, sizeof(float))) != NULL &&
              (w->pad = malloc(sizeof(float) * k.pad)) != NULL;
    if (k.winners) {
        conv_pool_scratch *p = &w->winners;
        ok &= (p->pos_start = malloc(sizeof(int32_t) * k.positions)) != NULL &&
              (p->channel = malloc(sizeof(int32_t) * k.winners)) != NULL &&
              (p->grad = malloc(sizeof(float) * k.winners)) != NULL &&
              (p->entry_pos = malloc(sizeof(int32_t) * k.winners)) != NULL &&
              (p->order = malloc(sizeof(int32_t) * k.winners)) != NULL &&
              (p->order_grad = malloc(sizeof(float) * k.winners)) != NULL &&
              (p->row = malloc(sizeof(float) * k.patch)) != NULL && (p->padded = malloc(sizeof(float) * k.pad)) != NULL;
    }
    if (!ok) model_workspace_free(w);
    return ok ? 0 : -1;
}

int model_workspace_use_onednn(model_workspace *w, char *err, size_t errlen) {
    const model_shape *s = w->shape;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        if (L->kind != LAYER_CONV2D || w->conv_dnnl[l]) continue;
        conv_dnnl_shape cs = {L->in_c, L->in_h, L->in_w, L->out_c, L->out_h, L->out_w, L->kernel, L->stride, L->pad,
                              L->n_b > 0};
        w->conv_dnnl[l] = conv_dnnl_create(&cs, w->max_rows, err, errlen);
        if (!w->conv_dnnl[l]) return -1;
    }
    return 0;
}

const char *model_workspace_conv_impl(const model_workspace *w) {
    for (int l = 0; l < w->shape->n_layers; l++)
        if (w->conv_dnnl[l]) return conv_dnnl_impl(w->conv_dnnl[l]);
    return NULL;
}

void model_workspace_free(model_workspace *w) {
    for (int l = 0; l <= MODEL_MAX_LAYERS; l++) free(w->act[l]);
    for (int l = 0; l < MODEL_MAX_LAYERS; l++) {
        conv_dnnl_free(w->conv_dnnl[l]);
        free(w->pre[l]);
        free(w->mask[l]);
        free(w->argmax[l]);
        free(w->bn_mean[l]);
        free(w->bn_invstd[l]);
    }
    free(w->bn_sums);
    free(w->row_keys);
    free(w->dz);
    free(w->dz_next);
    free(w->col);
    free(w->pad);
    conv_pool_scratch *k = &w->winners;
    free(k->pos_start), free(k->channel), free(k->grad), free(k->entry_pos), free(k->order), free(k->order_grad);
    free(k->row);
    free(k->padded);
    memset(w, 0, sizeof *w);
}

/* --- forward ---------------------------------------------------------------------------------- */

static int sum_over_ranks(const model_pass *pass, double *buf, size_t n) {
    if (!pass->allreduce_sum) return 0;
    return pass->allreduce_sum(pass->allreduce_arg, buf, n);
}

/* Convolution, on oneDNN when the workspace has it for this layer (bias included),
 * else as GEMMs over chunks of examples: out[co][b, oy, ox] = W[co] . patch. */
static void conv_forward(model_workspace *w, const model_layer *L, const float *params, const float *in, float *out,
                         int rows) {
    int l = (int)(L - w->shape->layer), K = L->in_c * L->kernel * L->kernel, positions = L->out_h * L->out_w;
    const float *bias = L->n_b ? params + L->b_off : NULL;
    if (w->conv_dnnl[l] && conv_dnnl_forward(w->conv_dnnl[l], in, params + L->w_off, bias, out, rows) == 0) {
        if (L->act != MODEL_NO_ACT)
            k_channel_bias_act_forward(out, w->pre[l], NULL, L->out_c, (size_t)rows * positions,
                                       (activation_kind)L->act, 1);
        return;
    }
    for (int b0 = 0; b0 < rows; b0 += L->chunk_rows) {
        int n = rows - b0 < L->chunk_rows ? rows - b0 : L->chunk_rows;
        k_im2col(in, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad, L->out_h, L->out_w, w->col,
                 w->pad);
        /* out[:, chunk] [co x n*positions] = W [co x K] * colT^T, colT [n*positions x K] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, L->out_c, n * positions, K, 1.0f, params + L->w_off, K,
                    w->col, K, 0.0f, out + (size_t)b0 * positions, rows * positions);
    }
    k_channel_bias_act_forward(out, w->pre[l], bias, L->out_c, (size_t)rows * positions,
                               L->act == MODEL_NO_ACT ? ACT_RELU : (activation_kind)L->act, L->act != MODEL_NO_ACT);
}

/* Training: the batch's per-channel sums and count into w->bn_sums (2 C + 1). */
static size_t batchnorm_forward_sums(model_workspace *w, int l, const float *in, int rows) {
    const model_layer *L = &w->shape->layer[l];
    int C = L->out_c;
    size_t n = (size_t)rows * L->in_h * L->in_w;
    k_batchnorm_sums(in, C, n, w->bn_sums);
    w->bn_sums[2 * C] = (double)n;
    return 2 * (size_t)C + 1;
}

/* The rest of the layer, with the sums in w->bn_sums (training; totalled over ranks
 * or batch shards for sync batch norm). */
static void batchnorm_forward_finish(model_workspace *w, int l, const float *params, float *stats, const float *in,
                                     float *out, int rows, const model_pass *pass) {
    const model_layer *L = &w->shape->layer[l];
    int C = L->out_c;
    size_t n = (size_t)rows * L->in_h * L->in_w;
    float *running_mean = stats + L->stat_off, *running_var = stats + L->stat_off + C;
    if (pass->train) {
        double *sums = w->bn_sums;
        k_batchnorm_stats(sums, C, sums[2 * C], MODEL_BN_EPS, MODEL_BN_MOMENTUM, w->bn_mean[l], w->bn_invstd[l],
                          running_mean, running_var);
    } else {
        k_batchnorm_running(running_mean, running_var, MODEL_BN_EPS, C, w->bn_mean[l], w->bn_invstd[l]);
    }
    k_batchnorm_forward(in, out, params + L->w_off, params + L->b_off, w->bn_mean[l], w->bn_invstd[l], C, n);
}

/* Whether a batch norm layer in this pass needs its sums totalled over the batch's
 * shards before it goes on (sync batch norm, training). */
static int bn_holds(const model_workspace *w, const model_pass *pass) { return w->shape->sync_bn && pass->train; }

static void dropout_forward(model_workspace *w, int l, const float *in, float *out, int rows, const model_pass *pass) {
    const model_layer *L = &w->shape->layer[l];
    size_t size = model_layer_out_size(w->shape, l);
    if (!pass->train || !pass->example_ids) { /* evaluation: the identity */
        memcpy(out, in, sizeof(float) * (size_t)rows * size);
        return;
    }
    for (int b = 0; b < rows; b++)
        w->row_keys[b] = rng_dropout_layer_key(
            rng_dropout_row_key(pass->seed, (uint64_t)pass->global_step, pass->example_ids[b]), (uint64_t)l);
    if (L->cnhw) k_dropout_forward(out, w->mask[l], in, w->row_keys, rows, L->in_c, (size_t)L->in_h * L->in_w, 1, L->p);
    else k_dropout_forward(out, w->mask[l], in, w->row_keys, rows, (int)size, 1, 0, L->p);
}

/* Forward of layer l; a batch norm in training finds its sums in w->bn_sums. */
static void forward_layer(model_workspace *w, int l, const float *params, float *stats, int rows,
                          const model_pass *pass) {
    const model_shape *s = w->shape;
    const model_layer *L = &s->layer[l];
    const float *in = w->act[l];
    float *out = w->act[l + 1];
    switch (L->kind) {
        case LAYER_LINEAR:
            /* out[rows x out] = in[rows x in] * W^T */
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, L->out_c, L->in_c, 1.0f, in, L->in_c,
                        params + L->w_off, L->in_c, 0.0f, out, L->out_c);
            k_bias_act_forward(out, w->pre[l], params + L->b_off, rows, L->out_c,
                               L->act == MODEL_NO_ACT ? s->act : (activation_kind)L->act, L->act != MODEL_NO_ACT);
            break;
        case LAYER_CONV2D: conv_forward(w, L, params, in, out, rows); break;
        case LAYER_BATCHNORM2D: batchnorm_forward_finish(w, l, params, stats, in, out, rows, pass); break;
        case LAYER_ACTIVATION:
            k_act_forward(out, in, (size_t)rows * layer_in_size(L), (activation_kind)L->act);
            break;
        case LAYER_MAXPOOL2D:
            k_maxpool_forward(in, out, w->argmax[l], (size_t)L->in_c * rows, L->in_h, L->in_w, L->kernel, L->out_h,
                              L->out_w);
            break;
        case LAYER_DROPOUT: dropout_forward(w, l, in, out, rows, pass); break;
        case LAYER_FLATTEN: k_flatten(out, in, L->in_c, rows, (size_t)L->in_h * L->in_w); break;
    }
}

int model_forward(model_workspace *w, const float *params, float *stats, int rows, const model_pass *pass) {
    for (int l = 0; l < w->shape->n_layers; l++) {
        if (w->shape->layer[l].kind == LAYER_BATCHNORM2D && pass->train) {
            size_t n = batchnorm_forward_sums(w, l, w->act[l], rows);
            if (w->shape->sync_bn && sum_over_ranks(pass, w->bn_sums, n) != 0) return -1;
        }
        forward_layer(w, l, params, stats, rows, pass);
    }
    return 0;
}

/* --- backward --------------------------------------------------------------------------------- */

/* dW = sum over chunks of dz[:, chunk] * colT; with need_dx, dx = col2im(dz^T W). */
static void conv_backward(model_workspace *w, const model_layer *L, const float *params, float *grads, const float *in,
                          const float *dz, float *dx, int rows, int need_dx) {
    int K = L->in_c * L->kernel * L->kernel, positions = L->out_h * L->out_w;
    if (need_dx) memset(dx, 0, sizeof(float) * (size_t)rows * layer_in_size(L));
    for (int b0 = 0; b0 < rows; b0 += L->chunk_rows) {
        int n = rows - b0 < L->chunk_rows ? rows - b0 : L->chunk_rows;
        const float *dz_chunk = dz + (size_t)b0 * positions;
        k_im2col(in, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad, L->out_h, L->out_w, w->col,
                 w->pad);
        /* dW [co x K] (+)= dz[:, chunk] [co x n*positions] * colT [n*positions x K] */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, L->out_c, K, n * positions, 1.0f, dz_chunk,
                    rows * positions, w->col, K, b0 ? 1.0f : 0.0f, grads + L->w_off, K);
        if (!need_dx) continue;
        /* dcolT [n*positions x K] = dz[:, chunk]^T * W [co x K], then scattered back */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n * positions, K, L->out_c, 1.0f, dz_chunk,
                    rows * positions, params + L->w_off, K, 0.0f, w->col, K);
        k_col2im(w->col, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad, L->out_h, L->out_w, dx,
                 w->pad);
    }
    if (L->n_b) k_channel_bias_grad(grads + L->b_off, dz, L->out_c, (size_t)rows * positions);
}

/* conv2d -> activation -> max-pool: from the pool's gradient g, through the windows'
 * winners only (k_conv_pool_backward); the activation's derivative is applied there. */
static void conv_pool_backward(model_workspace *w, int l, const float *params, float *grads, const float *in,
                               const float *g, float *dx, int rows, int need_dx) {
    const model_layer *L = &w->shape->layer[l], *P = L + 1;
    conv_geometry geo = {L->in_c, L->in_h, L->in_w, L->kernel, L->stride, L->pad, L->out_h, L->out_w};
    int pooled = P->out_h * P->out_w;
    double *db = w->bn_sums;
    memset(grads + L->w_off, 0, sizeof(float) * L->n_w);
    for (int c = 0; c < L->out_c; c++) db[c] = 0.0;
    for (int b0 = 0; b0 < rows; b0 += L->chunk_rows) {
        int n = rows - b0 < L->chunk_rows ? rows - b0 : L->chunk_rows;
        k_im2col(in, L->in_c, rows, L->in_h, L->in_w, b0, n, L->kernel, L->stride, L->pad, L->out_h, L->out_w, w->col,
                 w->pad);
        k_conv_pool_backward(&geo, L->out_c, rows, b0, n, g, w->argmax[l + 1], pooled, w->act[l + 1], w->pre[l],
                             L->act, w->col, params + L->w_off, grads + L->w_off, db, need_dx ? dx : NULL,
                             &w->winners);
    }
    for (size_t c = 0; c < L->n_b; c++) grads[L->b_off + c] = (float)db[c];
}

/* Batch norm backward, first half: this batch's sums (its own gamma and beta
 * gradients) into w->bn_sums; with need_dx, the count too, and the sums then wait
 * (sync batch norm) to be totalled over ranks or batch shards. Its length. */
static size_t batchnorm_backward_sums(model_workspace *w, int l, float *grads, const float *in, const float *dz,
                                      int rows, int need_dx) {
    const model_layer *L = &w->shape->layer[l];
    int C = L->out_c;
    size_t n = (size_t)rows * L->in_h * L->in_w;
    double *sums = w->bn_sums;
    k_batchnorm_backward_sums(dz, in, w->bn_mean[l], w->bn_invstd[l], C, n, sums);
    for (int c = 0; c < C; c++) { /* this rank's gradients; averaged over ranks like any other */
        grads[L->w_off + c] = (float)sums[C + c];
        grads[L->b_off + c] = (float)sums[c];
    }
    if (!need_dx) return 0;
    sums[2 * C] = (double)n;
    return 2 * (size_t)C + 1;
}

/* Second half: the input gradient from the (totalled) sums, then `ready`. */
static void batchnorm_backward_finish(model_workspace *w, int l, const float *params, const float *in,
                                      const float *dz, float *dx, int rows, int need_dx, grad_ready_fn ready,
                                      void *ready_arg) {
    const model_layer *L = &w->shape->layer[l];
    int C = L->out_c;
    size_t n = (size_t)rows * L->in_h * L->in_w;
    double *sums = w->bn_sums;
    if (need_dx)
        k_batchnorm_backward(dx, dz, in, params + L->w_off, w->bn_mean[l], w->bn_invstd[l], sums, sums[2 * C], C,
                             n);
    if (ready) ready(ready_arg, l); /* after the last read of gamma */
}

/* Backward of layer l (a batch norm: its second half). Whether dz and dz_next swap. */
static int backward_layer(model_workspace *w, int l, const float *params, float *grads, int rows,
                          grad_ready_fn ready, void *ready_arg) {
    const model_shape *s = w->shape;
    const model_layer *L = &s->layer[l];
    const float *in = w->act[l], *out = w->act[l + 1];
    int need_dx = l > s->first_trained; /* no gradient is needed for the input */
    size_t n_out = (size_t)rows * model_layer_out_size(s, l);
    int swap = need_dx;
    switch (L->kind) {
    case LAYER_LINEAR:
        if (L->act != MODEL_NO_ACT) k_act_backward(w->dz, out, w->pre[l], n_out, (activation_kind)L->act);
        /* dW[out x in] = dz^T[out x rows] * in[rows x in];  db = column sums of dz */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L->out_c, L->in_c, rows, 1.0f, w->dz, L->out_c, in,
                    L->in_c, 0.0f, grads + L->w_off, L->in_c);
        k_bias_grad(grads + L->b_off, w->dz, rows, L->out_c);
        /* d(in)[rows x in] = dz[rows x out] * W[out x in] */
        if (need_dx)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, L->in_c, L->out_c, 1.0f, w->dz, L->out_c,
                        params + L->w_off, L->in_c, 0.0f, w->dz_next, L->in_c);
        if (ready) ready(ready_arg, l); /* after the last read of W: the engine may update it now */
        break;
    case LAYER_CONV2D:
        if (L->pool_fused) { /* w->dz is the pool's output gradient */
            conv_pool_backward(w, l, params, grads, in, w->dz, w->dz_next, rows, need_dx);
        } else {
            if (L->act != MODEL_NO_ACT) k_act_backward(w->dz, out, w->pre[l], n_out, (activation_kind)L->act);
            conv_backward(w, L, params, grads, in, w->dz, w->dz_next, rows, need_dx);
        }
        if (ready) ready(ready_arg, l);
        break;
    case LAYER_BATCHNORM2D:
        batchnorm_backward_finish(w, l, params, in, w->dz, w->dz_next, rows, need_dx, ready, ready_arg);
        break;
    case LAYER_ACTIVATION: /* relu and tanh from the output, gelu from the input */
        k_act_backward(w->dz, out, in, n_out, (activation_kind)L->act);
        swap = 0;
        break;
    case LAYER_MAXPOOL2D:
        if (L->pool_fused) { /* the convolution before takes the gradient as it is */
            swap = 0;
            break;
        }
        if (need_dx)
            k_maxpool_backward(w->dz_next, w->dz, w->argmax[l], (size_t)L->in_c * rows, L->in_h, L->in_w, L->out_h,
                               L->out_w);
        break;
    case LAYER_DROPOUT:
        k_dropout_backward(w->dz, w->dz, w->mask[l], n_out, L->p);
        swap = 0;
        break;
    case LAYER_FLATTEN:
        if (need_dx) k_unflatten(w->dz_next, w->dz, L->in_c, rows, (size_t)L->in_h * L->in_w);
        break;
    }
    return swap;
}

void model_cursor_start(model_cursor *c) { *c = (model_cursor){.stage = MODEL_AT_FORWARD, .layer = 0, .held = 0}; }

int model_fb_advance(model_workspace *w, const float *params, float *stats, float *grads, const uint8_t *labels,
                     int rows, const model_pass *pass, double *loss_sum, long *correct, grad_ready_fn ready,
                     void *ready_arg, model_cursor *cur, size_t *held_n) {
    const model_shape *s = w->shape;
    for (; cur->stage == MODEL_AT_FORWARD && cur->layer < s->n_layers; cur->layer++) {
        int l = cur->layer;
        if (s->layer[l].kind == LAYER_BATCHNORM2D && pass->train && !cur->held) {
            size_t n = batchnorm_forward_sums(w, l, w->act[l], rows);
            if (bn_holds(w, pass)) {
                cur->held = 1;
                *held_n = n;
                return 1;
            }
        }
        cur->held = 0;
        forward_layer(w, l, params, stats, rows, pass);
    }
    if (cur->stage == MODEL_AT_FORWARD) {
        int last = s->n_layers - 1;
        k_softmax_xent(w->act[last + 1], labels, rows, s->num_classes, w->dz, 1.0f / (float)rows, loss_sum, correct);
        cur->stage = MODEL_AT_BACKWARD;
        cur->layer = last;
    }
    for (; cur->stage == MODEL_AT_BACKWARD && cur->layer >= s->first_trained; cur->layer--) {
        int l = cur->layer;
        if (s->layer[l].kind == LAYER_BATCHNORM2D && !cur->held) {
            size_t n = batchnorm_backward_sums(w, l, grads, w->act[l], w->dz, rows, l > s->first_trained);
            if (n && bn_holds(w, pass)) {
                cur->held = 1;
                *held_n = n;
                return 1;
            }
        }
        cur->held = 0;
        if (backward_layer(w, l, params, grads, rows, ready, ready_arg)) {
            float *t = w->dz;
            w->dz = w->dz_next;
            w->dz_next = t;
        }
    }
    cur->stage = MODEL_DONE;
    return 0;
}

int model_forward_backward(model_workspace *w, const float *params, float *stats, float *grads, const uint8_t *labels,
                           int rows, const model_pass *pass, double *loss_sum, long *correct, grad_ready_fn ready,
                           void *ready_arg) {
    model_cursor cur;
    size_t n;
    model_cursor_start(&cur);
    while (model_fb_advance(w, params, stats, grads, labels, rows, pass, loss_sum, correct, ready, ready_arg, &cur,
                            &n) == 1)
        if (sum_over_ranks(pass, w->bn_sums, n) != 0) return -1;
    return 0;
}

void model_evaluate(model_workspace *w, const float *params, float *stats, const uint8_t *labels, int rows,
                    double *loss_sum, long *correct) {
    model_pass eval = {.train = 0};
    model_forward(w, params, stats, rows, &eval); /* no collectives in evaluation: it cannot fail */
    k_softmax_xent(w->act[w->shape->n_layers], labels, rows, w->shape->num_classes, NULL, 0.0f, loss_sum, correct);
}
