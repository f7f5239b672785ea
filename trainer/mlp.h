/* The multi-layer perceptron: its shape, PyTorch's default initialisation, and the
 * forward and backward passes of one batch on the CPU (GEMMs through the BLAS,
 * the rest in cpu_kernels.c).
 *
 * Parameters and gradients each live in one flat buffer, laid out layer by layer
 * in REVERSE order (the last layer first, each as weight [out x in] then bias).
 * Backward produces gradients from the last layer to the first, so the finished
 * part of the gradient buffer is always a prefix: gradient buckets are contiguous
 * ranges that can be reduced as soon as backward has passed them. */
#ifndef DDPD_MLP_H
#define DDPD_MLP_H

#include <stddef.h>
#include <stdint.h>

#include "run_config.h"

#define MLP_MAX_LAYERS (RUN_CONFIG_MAX_HIDDEN + 1)

typedef struct {
    int in, out;
    size_t w_off, b_off; /* offsets (in floats) into the parameter buffer */
} mlp_layer;

typedef struct {
    int n_layers;
    mlp_layer layer[MLP_MAX_LAYERS];
    activation_kind act;
    int in_dim, num_classes;
    size_t n_params;
} mlp_shape;

void mlp_shape_init(mlp_shape *s, int in_dim, const int *hidden, int n_hidden, int num_classes,
                    activation_kind act);
/* Offsets [begin, end) of layer l's parameters in the flat buffer. */
size_t mlp_layer_begin(const mlp_shape *s, int l);
size_t mlp_layer_end(const mlp_shape *s, int l);

/* PyTorch's nn.Linear default: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)). */
void mlp_init_params(const mlp_shape *s, float *params, uint64_t seed);

typedef struct {
    const mlp_shape *shape;
    int max_rows;
    float *act[MLP_MAX_LAYERS + 1]; /* act[0]: input; act[l+1]: layer l's output (logits last) */
    float *pre[MLP_MAX_LAYERS];     /* gelu only: layer l's pre-activation */
    float *dz, *dz_next;            /* gradient w.r.t. a layer's output, ping-pong */
} mlp_workspace;

int mlp_workspace_init(mlp_workspace *w, const mlp_shape *s, int max_rows);
void mlp_workspace_free(mlp_workspace *w);

/* Called during backward as soon as layer l's gradients are complete. */
typedef void (*grad_ready_fn)(void *arg, int layer);

/* Forward of `rows` examples whose inputs are already in w->act[0]. */
void mlp_forward(mlp_workspace *w, const float *params, int rows);

/* Forward + loss + backward of one batch. `grad_scale_rows` is the number of
 * examples the loss is averaged over (the rank's batch). Returns the summed loss
 * of the batch (not averaged) via *loss_sum; gradients are written (not
 * accumulated) into `grads`. `ready` may be NULL. */
void mlp_forward_backward(mlp_workspace *w, const float *params, float *grads, const uint8_t *labels,
                          int rows, double *loss_sum, long *correct, grad_ready_fn ready, void *ready_arg);

/* Loss sum and hits of `rows` examples (inputs in w->act[0]) without gradients. */
void mlp_evaluate(mlp_workspace *w, const float *params, const uint8_t *labels, int rows,
                  double *loss_sum, long *correct);

#endif
