/* The network as a sequence of layers (linear, conv2d, batch norm, activation,
 * max-pool, dropout, flatten): its shape, PyTorch's default initialisation, and the
 * forward and backward passes of one batch on the CPU (GEMMs through the BLAS, the
 * rest in cpu_kernels.c). An `mlp` config is a stack of linear layers, each with its
 * activation fused in; a `cnn` config is conv blocks, a flatten, then linear layers.
 *
 * Parameters and gradients each live in ONE flat buffer, laid out layer by layer in
 * REVERSE order (the last layer first, each as weight then bias). Backward produces
 * gradients from the last layer to the first, so the finished part of the gradient
 * buffer is always a prefix: gradient buckets are contiguous ranges that can be
 * reduced as soon as backward has passed them (grad_buckets.h), and backward calls
 * `ready(layer)` as soon as a layer with parameters is complete.
 *
 * Layers with parameters are numbered in forward order (param_index): checkpoints
 * name their tensors layers.N.weight, layers.N.bias with PyTorch's shapes (linear
 * [out, in], conv2d [out, in, k, k]). Batch norm's running statistics are state, not
 * parameters: a separate buffer (`stats`), checkpointed as layers.N.running_mean and
 * layers.N.running_var, never averaged or optimised.
 *
 * Activations: a linear layer's are [rows][features]; the convolution part's are
 * channel-major, [channels][rows][height][width] ("CNHW"), so that a convolution over a
 * chunk of examples is one GEMM writing its output in place, batch norm's statistics
 * are contiguous runs, and a max-pool works on contiguous planes; flatten turns that
 * into [rows][channels * height * width], the order PyTorch's Flatten gives. */
#ifndef DDPD_MODEL_H
#define DDPD_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_kernels.h"
#include "run_config.h"

/* conv blocks (conv, bn, act, pool, dropout) + flatten + (linear, dropout) pairs */
#define MODEL_MAX_LAYERS (5 * RUN_CONFIG_MAX_CONV + 1 + 2 * (RUN_CONFIG_MAX_HIDDEN + 1))
#define MODEL_BN_EPS 1e-5f
#define MODEL_BN_MOMENTUM 0.1f
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
    int cnhw;               /* its input is channel-major (the convolution part) */
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
const char *layer_kind_name(layer_kind k);
/* "conv2d 1->32 k5 s1 p2 relu, maxpool2d 2, ..." */
void model_describe(const model_shape *s, char *out, size_t outlen);

/* PyTorch's defaults, drawn in forward order (each layer's weight, then its bias):
 * Linear and Conv2d weight and bias ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)) (kaiming
 * uniform with a = sqrt(5)); batch norm gamma 1, beta 0, running mean 0 and
 * variance 1. `stats` may be NULL when there are none. */
void model_init_params(const model_shape *s, float *params, float *stats, uint64_t seed);

/* What a pass needs beyond the weights. */
typedef struct {
    int train;                   /* batch norm: batch statistics (and running update); dropout on */
    uint64_t seed;               /* dropout masks: (seed, global_step, example, layer, element) */
    long global_step;
    const size_t *example_ids;   /* each row's index in its dataset (dropout); NULL when not training */
    /* sync batch norm: buf <- sum over ranks of buf (doubles); 0, or -1 when the group failed. */
    int (*allreduce_sum)(void *arg, double *buf, size_t n);
    void *allreduce_arg;
} model_pass;

typedef struct {
    const model_shape *shape;
    int max_rows;
    float *act[MODEL_MAX_LAYERS + 1]; /* act[0]: input; act[l+1]: layer l's output (logits last) */
    float *pre[MODEL_MAX_LAYERS];     /* gelu fused into linear/conv2d: the pre-activation */
    uint8_t *mask[MODEL_MAX_LAYERS];  /* dropout: 1 = kept */
    int32_t *argmax[MODEL_MAX_LAYERS];/* max-pool: where in its input plane each output came from */
    float *bn_mean[MODEL_MAX_LAYERS], *bn_invstd[MODEL_MAX_LAYERS]; /* batch norm: this batch's */
    double *bn_sums;                  /* batch norm: per-channel sums, and the count (2 C + 1) */
    uint64_t *row_keys;               /* dropout: each row's key */
    float *dz, *dz_next;              /* gradient w.r.t. a layer's output, ping-pong */
    float *col, *pad;                 /* conv2d: im2col chunk (or its gradient), one example's padded planes */
    conv_pool_scratch winners;        /* conv2d + max-pool backward (pool_fused) */
    struct conv_dnnl *conv_dnnl[MODEL_MAX_LAYERS]; /* conv2d forward on oneDNN (NULL: im2col + GEMM) */
} model_workspace;

int model_workspace_init(model_workspace *w, const model_shape *s, int max_rows);
/* Runs the convolutions' forward on oneDNN (conv_dnnl.h) rather than im2col + GEMM,
 * which stays the reference; backward is the same either way. -1 and `err` when
 * oneDNN is not built in or cannot run a layer (the workspace then keeps im2col for
 * the layers it could not take). */
int model_workspace_use_onednn(model_workspace *w, char *err, size_t errlen);
/* The oneDNN implementation the convolutions run ("jit:avx512_core"), NULL if none. */
const char *model_workspace_conv_impl(const model_workspace *w);
void model_workspace_free(model_workspace *w);

/* Called during backward as soon as layer l's gradients are complete and backward
 * has read its weights for the last time (the cpu engine updates a reduced bucket's
 * weights in place at once, so a layer's input gradient must come first). */
typedef void (*grad_ready_fn)(void *arg, int layer);

/* Forward of `rows` examples whose inputs are already in w->act[0]. `stats` (the
 * running statistics) are read in evaluation and updated in training. 0, or -1 when
 * a sync batch norm's allreduce failed. */
int model_forward(model_workspace *w, const float *params, float *stats, int rows, const model_pass *pass);

/* Forward + loss + backward of one batch (pass->train must be set). The loss is
 * averaged over `rows` (the rank's batch); *loss_sum gets the summed loss, *correct
 * the hits, both complete before the first `ready` call. Gradients are written (not
 * accumulated) into `grads`; `ready` may be NULL. */
int model_forward_backward(model_workspace *w, const float *params, float *stats, float *grads,
                           const uint8_t *labels, int rows, const model_pass *pass, double *loss_sum, long *correct,
                           grad_ready_fn ready, void *ready_arg);

/* Loss sum and hits of `rows` examples (inputs in w->act[0]) in evaluation mode. */
void model_evaluate(model_workspace *w, const float *params, float *stats, const uint8_t *labels, int rows,
                    double *loss_sum, long *correct);

#endif
