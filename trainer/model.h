/* The trainer's model on the CPU, over its shape (model_shape.h): PyTorch's default
 * initialisation, and the forward and backward passes of one batch (GEMMs through
 * the BLAS, the rest in cpu_kernels.c and cnn_kernels.c). Backward calls
 * `ready(layer)` as soon as a layer with parameters is complete, so that its
 * gradient bucket can be reduced at once (the flat buffers' layout: model_shape.h).
 *
 * Activations: a linear layer's are [rows][features]; the convolution part's are
 * channel-major, [channels][rows][height][width] ("CNHW"), so that a convolution over a
 * chunk of examples is one GEMM writing its output in place, batch norm's statistics
 * are contiguous runs, and a max-pool works on contiguous planes; flatten turns that
 * into [rows][channels * height * width], the order PyTorch's Flatten gives. */
#ifndef DDPD_TRAINER_MODEL_H
#define DDPD_TRAINER_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "cnn_kernels.h"
#include "model_shape.h"

#define MODEL_BN_EPS 1e-5f
#define MODEL_BN_MOMENTUM 0.1f

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

/* model_forward_backward in steps, for an engine that computes several batch shards
 * in one process and must total a sync batch norm's sums over all of them (in shard
 * order) before any goes on. */
enum { MODEL_AT_FORWARD, MODEL_AT_BACKWARD, MODEL_DONE };
typedef struct {
    int stage; /* MODEL_AT_FORWARD, MODEL_AT_BACKWARD or MODEL_DONE */
    int layer; /* the layer it is at */
    int held;  /* that layer (a batch norm) waits for its sums' totals */
} model_cursor;

void model_cursor_start(model_cursor *c);
/* Runs the batch's forward, loss and backward on from where `c` is, as
 * model_forward_backward does, until it is done (0) or until a sync batch norm in
 * training needs its sums totalled (1): w->bn_sums[0, *held_n) then hold this batch's
 * own; the caller replaces them with the totals over every rank's (or batch shard's)
 * and calls again. pass->allreduce_sum is not used. */
int model_fb_advance(model_workspace *w, const float *params, float *stats, float *grads, const uint8_t *labels,
                     int rows, const model_pass *pass, double *loss_sum, long *correct, grad_ready_fn ready,
                     void *ready_arg, model_cursor *c, size_t *held_n);

/* Loss sum and hits of `rows` examples (inputs in w->act[0]) in evaluation mode. */
void model_evaluate(model_workspace *w, const float *params, float *stats, const uint8_t *labels, int rows,
                    double *loss_sum, long *correct);

#endif
