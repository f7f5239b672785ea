/* The network's shape: a sequence of layers (linear, conv2d, batch norm, activation,
 * max-pool, dropout, flatten) built from a run config, checked (a kernel or a
 * max-pool that does not fit its input is refused, naming the layer), and the layout
 * of its parameters. An `mlp` config is a stack of linear layers, each with its
 * activation fused in; a `cnn` config is conv blocks, a flatten, then linear layers.
 * No BLAS, no kernels: the server checks a config with it at submission, and the
 * trainer's passes (model.h) run over it.
 *
 * Parameters and gradients each live in ONE flat buffer, laid out layer by layer in
 * REVERSE order (the last layer first, each as weight then bias). Backward produces
 * gradients from the last layer to the first, so the finished part of the gradient
 * buffer is always a prefix: gradient buckets are contiguous ranges that can be
 * reduced as soon as backward has passed them (grad_buckets.h).
 *
 * Layers with parameters are numbered in forward order (param_index): checkpoints
 * name their tensors layers.N.weight, layers.N.bias with PyTorch's shapes (linear
 * [out, in], conv2d [out, in, k, k]). Batch norm's running statistics are state, not
 * parameters: a separate buffer (`stats`), checkpointed as layers.N.running_mean and
 * layers.N.running_var, never averaged or optimised. */
#ifndef DDPD_TRAINER_MODEL_PLAN_MODEL_SHAPE_H
#define DDPD_TRAINER_MODEL_PLAN_MODEL_SHAPE_H

#include <stddef.h>

#include "run_config.h"

/* conv blocks (conv, bn, act, pool, dropout) + flatten + (linear, dropout) pairs */
#define MODEL_MAX_LAYERS (5 * RUN_CONFIG_MAX_CONV + 1 + 2 * (RUN_CONFIG_MAX_HIDDEN + 1))
#define MODEL_NO_ACT (-1)

typedef enum {
    LAYER_LINEAR,
    LAYER_CONV2D,
    LAYER_BATCHNORM2D,
    LAYER_ACTIVATION,
    LAYER_MAXPOOL2D,
    LAYER_DROPOUT,
    LAYER_FLATTEN,
} layer_kind;

typedef struct {
    layer_kind kind;
    int param_index;        /* N of layers.N.* for layers with parameters, else -1 */
    /* One example's input and output: channels x height x width (linear: features x 1 x 1). */
    int in_c, in_h, in_w, out_c, out_h, out_w;
    int kernel, stride, pad; /* conv2d, maxpool2d (pool: stride = kernel, no padding) */
    int act;                /* linear, conv2d: the activation fused after it, or MODEL_NO_ACT;
                               activation: which one (an activation_kind) */
    float p;                /* dropout: the probability of zeroing an element */
    size_t p_begin;         /* where its part of the parameter buffer begins (the padding that aligns
                               its weight included), so the layers' parts tile the buffer */
    size_t w_off, n_w;      /* weight (batch norm: gamma) in the parameter buffer */
    size_t b_off, n_b;      /* bias (batch norm: beta); n_b 0 = none */
    size_t stat_off;        /* batch norm: running mean at stat_off, running variance after it */
    int cnhw;               /* its input is channel-major (the convolution part; model.h) */
    int chunk_rows;         /* conv2d: examples per im2col chunk (its scratch stays in cache) */
    int pool_fused;         /* CPU: a conv2d followed directly by a max-pool, and that max-pool:
                               backward goes from the pool's gradient straight to the
                               convolution's, through the windows' winners only
                               (k_conv_pool_backward) */
} model_layer;

typedef struct {
    model_kind kind;
    int n_layers;
    model_layer layer[MODEL_MAX_LAYERS];
    activation_kind act;
    int in_c, in_h, in_w, in_dim, num_classes;
    int n_param_layers;
    size_t n_params;        /* floats in the parameter buffer (the tensors and their alignment padding) */
    size_t n_stats;         /* floats of batch norm running statistics */
    int sync_bn;            /* batch norm statistics over the global batch (allreduce) */
    int has_dropout;
    int first_trained;      /* backward stops at this layer: nothing before it has parameters */
} model_shape;

/* The MLP in_dim -> hidden... -> num_classes (every layer linear, the activation fused
 * into each hidden one). */
void model_shape_mlp(model_shape *s, int in_dim, const int *hidden, int n_hidden, int num_classes,
                     activation_kind act);
/* The config's model over images of in_c x in_h x in_w; -1 and `err` when the
 * convolutions leave no pixels ("model.cnn.conv[2]: ..."). */
int model_shape_init(model_shape *s, const run_config *cfg, int in_c, int in_h, int in_w, int num_classes,
                     char *err, size_t errlen);
/* Each parameter tensor starts on a MODEL_PARAM_ALIGN-float (256-byte) boundary of
 * the buffer: packed end to end, large matrices were only 8-byte aligned, which
 * can keep cuBLAS off its fastest kernels. The padding is zero and stays zero (no
 * gradient reaches it). */
#define MODEL_PARAM_ALIGN 64
/* Offsets [begin, end) of layer l's part of the flat buffer, its padding included
 * (begin == end: no parameters); the parts tile the buffer, last layer first. */
size_t model_layer_begin(const model_shape *s, int l);
size_t model_layer_end(const model_shape *s, int l);
int model_layer_has_params(const model_shape *s, int l);
/* Floats of one example's output of layer l (l = -1: the input). */
size_t model_layer_out_size(const model_shape *s, int l);
/* The workspace's shared scratch, sized for its largest layer: the widest activation
 * (floats per example) and channel count, and the convolutions' im2col columns and
 * padded planes, and the fused max-pool's winners, positions and patch. What
 * model_workspace_init allocates and host_plan counts. */
typedef struct {
    size_t widest, col, pad, winners, positions, patch;
    int widest_c;
} model_scratch;
void model_scratch_of(const model_shape *s, model_scratch *out);
/* Floats an im2col buffer holds past its patches (`col`), for k_conv_pool_backward's
 * reads. */
#define MODEL_IM2COL_SLACK 32
const char *layer_kind_name(layer_kind k);
/* "conv2d 1->32 k5 s1 p2 relu, maxpool2d 2, ..." */
void model_describe(const model_shape *s, char *out, size_t outlen);

#endif
