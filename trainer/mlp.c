/* The MLP on the CPU: see mlp.h for the parameter layout and why it is reversed. */
#include "mlp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "rng.h"

#define RNG_STREAM_INIT 1

void mlp_shape_init(mlp_shape *s, int in_dim, const int *hidden, int n_hidden, int num_classes,
                    activation_kind act) {
    memset(s, 0, sizeof *s);
    s->n_layers = n_hidden + 1;
    s->act = act;
    s->in_dim = in_dim;
    s->num_classes = num_classes;
    int in = in_dim;
    for (int l = 0; l < s->n_layers; l++) {
        s->layer[l].in = in;
        s->layer[l].out = l < n_hidden ? hidden[l] : num_classes;
        in = s->layer[l].out;
    }
    size_t off = 0;
    for (int l = s->n_layers - 1; l >= 0; l--) {
        mlp_layer *L = &s->layer[l];
        L->w_off = off;
        off += (size_t)L->in * L->out;
        L->b_off = off;
        off += (size_t)L->out;
    }
    s->n_params = off;
}

size_t mlp_layer_begin(const mlp_shape *s, int l) { return s->layer[l].w_off; }
size_t mlp_layer_end(const mlp_shape *s, int l) { return s->layer[l].b_off + (size_t)s->layer[l].out; }

void mlp_init_params(const mlp_shape *s, float *params, uint64_t seed) {
    rng_state r;
    rng_seed(&r, seed, RNG_STREAM_INIT);
    for (int l = 0; l < s->n_layers; l++) { /* forward order, weight then bias, like PyTorch */
        const mlp_layer *L = &s->layer[l];
        float bound = 1.0f / sqrtf((float)L->in);
        for (size_t i = 0; i < (size_t)L->in * L->out; i++) params[L->w_off + i] = rng_uniform(&r, -bound, bound);
        for (int i = 0; i < L->out; i++) params[L->b_off + i] = rng_uniform(&r, -bound, bound);
    }
}

int mlp_workspace_init(mlp_workspace *w, const mlp_shape *s, int max_rows) {
    memset(w, 0, sizeof *w);
    w->shape = s;
    w->max_rows = max_rows;
    size_t widest = (size_t)s->in_dim;
    w->act[0] = malloc(sizeof(float) * (size_t)max_rows * s->in_dim);
    int ok = w->act[0] != NULL;
    for (int l = 0; l < s->n_layers; l++) {
        size_t n = (size_t)max_rows * s->layer[l].out;
        if ((size_t)s->layer[l].out > widest) widest = (size_t)s->layer[l].out;
        w->act[l + 1] = malloc(sizeof(float) * n);
        ok &= w->act[l + 1] != NULL;
        if (s->act == ACT_GELU && l < s->n_layers - 1) {
            w->pre[l] = malloc(sizeof(float) * n);
            ok &= w->pre[l] != NULL;
        }
    }
    w->dz = malloc(sizeof(float) * (size_t)max_rows * widest);
    w->dz_next = malloc(sizeof(float) * (size_t)max_rows * widest);
    ok &= w->dz && w->dz_next;
    if (!ok) mlp_workspace_free(w);
    return ok ? 0 : -1;
}

void mlp_workspace_free(mlp_workspace *w) {
    for (int l = 0; l <= MLP_MAX_LAYERS; l++) free(w->act[l]);
    for (int l = 0; l < MLP_MAX_LAYERS; l++) free(w->pre[l]);
    free(w->dz);
    free(w->dz_next);
    memset(w, 0, sizeof *w);
}

void mlp_forward(mlp_workspace *w, const float *params, int rows) {
    const mlp_shape *s = w->shape;
    for (int l = 0; l < s->n_layers; l++) {
        const mlp_layer *L = &s->layer[l];
        /* out[rows x out] = in[rows x in] * W^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, L->out, L->in, 1.0f, w->act[l], L->in,
                    params + L->w_off, L->in, 0.0f, w->act[l + 1], L->out);
        int hidden = l < s->n_layers - 1;
        k_bias_act_forward(w->act[l + 1], w->pre[l], params + L->b_off, rows, L->out, s->act, hidden);
    }
}

void mlp_forward_backward(mlp_workspace *w, const float *params, float *grads, const uint8_t *labels,
                          int rows, double *loss_sum, long *correct, grad_ready_fn ready, void *ready_arg) {
    const mlp_shape *s = w->shape;
    mlp_forward(w, params, rows);
    int last = s->n_layers - 1;
    k_softmax_xent(w->act[last + 1], labels, rows, s->num_classes, w->dz, 1.0f / (float)rows, loss_sum, correct);
    for (int l = last; l >= 0; l--) {
        const mlp_layer *L = &s->layer[l];
        /* dW[out x in] = dz^T[out x rows] * in[rows x in];  db = column sums of dz */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, L->out, L->in, rows, 1.0f, w->dz, L->out,
                    w->act[l], L->in, 0.0f, grads + L->w_off, L->in);
        k_bias_grad(grads + L->b_off, w->dz, rows, L->out);
        if (ready) ready(ready_arg, l);
        if (l == 0) break; /* no gradient is needed for the input */
        /* d(in)[rows x in] = dz[rows x out] * W[out x in], then through the activation */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, L->in, L->out, 1.0f, w->dz, L->out,
                    params + L->w_off, L->in, 0.0f, w->dz_next, L->in);
        k_act_backward(w->dz_next, w->act[l], w->pre[l - 1], (size_t)rows * L->in, s->act);
        float *t = w->dz;
        w->dz = w->dz_next;
        w->dz_next = t;
    }
}

void mlp_evaluate(mlp_workspace *w, const float *params, const uint8_t *labels, int rows,
                  double *loss_sum, long *correct) {
    mlp_forward(w, params, rows);
    k_softmax_xent(w->act[w->shape->n_layers], labels, rows, w->shape->num_classes, NULL, 0.0f, loss_sum,
                   correct);
}
