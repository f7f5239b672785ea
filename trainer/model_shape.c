/* The network's shape (model.h): its layers from a run config, checked (a kernel or a
 * max-pool that does not fit its input is refused, naming the layer), and the
 * parameter layout. No BLAS, no kernels: the server links this file too, so that a
 * config it accepts at submission is one the trainer can build. */
#include <stdio.h>
#include <string.h>

#include "model.h"

/* An im2col chunk of about 1 MiB stays in L2 between being written and the GEMM. */
#define IM2COL_CHUNK_FLOATS (1u << 18)

const char *layer_kind_name(layer_kind k) {
    static const char *const names[] = {"linear", "conv2d", "batchnorm2d", "activation", "maxpool2d", "dropout",
                                        "flatten"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "unknown";
}

/* --- shape -------------------------------------------------------------------------- */

/* A layer whose input is the previous layer's output (or the model's input), its
 * output the same size until the caller says otherwise. */
static model_layer *add_layer(model_shape *s, layer_kind kind) {
    model_layer *L = &s->layer[s->n_layers++];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->param_index = -1;
    L->act = MODEL_NO_ACT;
    if (s->n_layers == 1) {
        L->in_c = s->in_c, L->in_h = s->in_h, L->in_w = s->in_w;
        L->cnhw = s->kind == MODEL_CNN;
    } else {
        const model_layer *P = L - 1;
        L->in_c = P->out_c, L->in_h = P->out_h, L->in_w = P->out_w;
        L->cnhw = P->cnhw && P->kind != LAYER_FLATTEN;
    }
    L->out_c = L->in_c, L->out_h = L->in_h, L->out_w = L->in_w;
    return L;
}

static void add_linear(model_shape *s, int out, int act) {
    model_layer *L = add_layer(s, LAYER_LINEAR);
    L->in_c = L->in_c * L->in_h * L->in_w, L->in_h = L->in_w = 1;
    L->out_c = out, L->out_h = L->out_w = 1;
    L->act = act;
    L->n_w = (size_t)L->in_c * out;
    L->n_b = (size_t)out;
}

static void add_dropout(model_shape *s, double p) {
    if (p <= 0) return;
    add_layer(s, LAYER_DROPOUT)->p = (float)p;
    s->has_dropout = 1;
}

static size_t align_param(size_t off) { return (off + MODEL_PARAM_ALIGN - 1) / MODEL_PARAM_ALIGN * MODEL_PARAM_ALIGN; }

/* Numbers the layers with parameters, lays the parameters out in reverse layer order
 * (each tensor aligned) and the running statistics in forward order. */
static void finish(model_shape *s) {
    s->n_param_layers = 0;
    s->first_trained = s->n_layers;
    for (int l = 0; l < s->n_layers; l++) {
        model_layer *L = &s->layer[l];
        if (L->n_w == 0) continue;
        L->param_index = s->n_param_layers++;
        if (s->first_trained == s->n_layers) s->first_trained = l;
    }
    for (int l = 0; l + 1 < s->n_layers; l++)
        if (s->layer[l].kind == LAYER_CONV2D && s->layer[l + 1].kind == LAYER_MAXPOOL2D)
            s->layer[l].pool_fused = s->layer[l + 1].pool_fused = 1;
    size_t off = 0;
    for (int l = s->n_layers - 1; l >= 0; l--) {
        model_layer *L = &s->layer[l];
        L->p_begin = off;
        if (L->n_w) off = align_param(off);
        L->w_off = off;
        off += L->n_w;
        if (L->n_b) off = align_param(off);
        L->b_off = off;
        off += L->n_b;
    }
    s->n_params = off;
    s->n_stats = 0;
    for (int l = 0; l < s->n_layers; l++)
        if (s->layer[l].kind == LAYER_BATCHNORM2D) {
            s->layer[l].stat_off = s->n_stats;
            s->n_stats += 2 * (size_t)s->layer[l].out_c;
        }
}

void model_shape_mlp(model_shape *s, int in_dim, const int *hidden, int n_hidden, int num_classes,
                     activation_kind act) {
    memset(s, 0, sizeof *s);
    s->kind = MODEL_MLP;
    s->act = act;
    s->in_c = in_dim, s->in_h = s->in_w = 1;
    s->in_dim = in_dim;
    s->num_classes = num_classes;
    for (int l = 0; l < n_hidden; l++) add_linear(s, hidden[l], (int)act);
    add_linear(s, num_classes, MODEL_NO_ACT);
    finish(s);
}

int model_shape_init(model_shape *s, const run_config *cfg, int in_c, int in_h, int in_w, int num_classes, char *err,
                     size_t errlen) {
    if (cfg->model.type == MODEL_MLP) {
        model_shape_mlp(s, in_c * in_h * in_w, cfg->model.hidden, cfg->model.n_hidden, num_classes,
                        cfg->model.activation);
        return 0;
    }
    memset(s, 0, sizeof *s);
    s->kind = MODEL_CNN;
    s->act = cfg->model.activation;
    s->in_c = in_c, s->in_h = in_h, s->in_w = in_w;
    s->in_dim = in_c * in_h * in_w;
    s->num_classes = num_classes;
    s->sync_bn = cfg->model.cnn.batch_norm_stats == BN_STATS_SYNC;
    for (int i = 0; i < cfg->model.cnn.n_conv; i++) {
        const conv_block_config *b = &cfg->model.cnn.conv[i];
        model_layer *L = add_layer(s, LAYER_CONV2D);
        int h = L->in_h, w = L->in_w;
        if (h + 2 * b->padding < b->kernel || w + 2 * b->padding < b->kernel) {
            snprintf(err, errlen,
                     "/model/cnn/conv/%d: a %dx%d kernel does not fit its input of %dx%d pixels (padding %d): "
                     "use fewer or smaller convolutions or pools, or more padding",
                     i, b->kernel, b->kernel, h, w, b->padding);
            return -1;
        }
        L->kernel = b->kernel, L->stride = b->stride, L->pad = b->padding;
        L->out_c = b->channels;
        L->out_h = (h + 2 * b->padding - b->kernel) / b->stride + 1;
        L->out_w = (w + 2 * b->padding - b->kernel) / b->stride + 1;
        L->act = b->batch_norm ? MODEL_NO_ACT : (int)s->act;
        L->n_w = (size_t)L->out_c * L->in_c * b->kernel * b->kernel;
        L->n_b = b->batch_norm ? 0 : (size_t)L->out_c; /* batch norm's beta does the bias's work */
        size_t per_example = (size_t)L->out_h * L->out_w * L->in_c * b->kernel * b->kernel;
        L->chunk_rows = per_example >= IM2COL_CHUNK_FLOATS ? 1 : (int)(IM2COL_CHUNK_FLOATS / per_example);
        if (b->batch_norm) {
            model_layer *N = add_layer(s, LAYER_BATCHNORM2D);
            N->n_w = N->n_b = (size_t)N->out_c;
            add_layer(s, LAYER_ACTIVATION)->act = (int)s->act;
        }
        if (b->pool > 1) {
            model_layer *P = add_layer(s, LAYER_MAXPOOL2D);
            if (P->in_h < b->pool || P->in_w < b->pool) {
                snprintf(err, errlen,
                         "/model/cnn/conv/%d: a %dx%d max-pool does not fit the convolution's output of %dx%d pixels: "
                         "use fewer or smaller convolutions or pools",
                         i, b->pool, b->pool, P->in_h, P->in_w);
                return -1;
            }
            P->kernel = P->stride = b->pool;
            P->out_h = P->in_h / b->pool, P->out_w = P->in_w / b->pool;
        }
        add_dropout(s, b->dropout);
    }
    model_layer *F = add_layer(s, LAYER_FLATTEN);
    F->out_c = F->in_c * F->in_h * F->in_w, F->out_h = F->out_w = 1;
    for (int i = 0; i < cfg->model.cnn.n_fc; i++) {
        add_linear(s, cfg->model.cnn.fc[i], (int)s->act);
        add_dropout(s, cfg->model.cnn.dropout);
    }
    add_linear(s, num_classes, MODEL_NO_ACT);
    finish(s);
    return 0;
}

size_t model_layer_begin(const model_shape *s, int l) { return s->layer[l].p_begin; }
size_t model_layer_end(const model_shape *s, int l) { return s->layer[l].b_off + s->layer[l].n_b; }
int model_layer_has_params(const model_shape *s, int l) { return s->layer[l].n_w > 0; }

size_t model_layer_out_size(const model_shape *s, int l) {
    if (l < 0) return (size_t)s->in_dim;
    const model_layer *L = &s->layer[l];
    return (size_t)L->out_c * L->out_h * L->out_w;
}

void model_describe(const model_shape *s, char *out, size_t outlen) {
    size_t k = 0;
    out[0] = '\0';
    for (int l = 0; l < s->n_layers && k < outlen; l++) {
        const model_layer *L = &s->layer[l];
        const char *sep = l ? ", " : "";
        int n = 0;
        switch (L->kind) {
        case LAYER_LINEAR: n = snprintf(out + k, outlen - k, "%slinear %d->%d", sep, L->in_c, L->out_c); break;
        case LAYER_CONV2D:
            n = snprintf(out + k, outlen - k, "%sconv2d %d->%d %dx%d/%d pad %d (%dx%d)", sep, L->in_c, L->out_c,
                         L->kernel, L->kernel, L->stride, L->pad, L->out_h, L->out_w);
            break;
        case LAYER_BATCHNORM2D: n = snprintf(out + k, outlen - k, "%sbatchnorm2d %d", sep, L->out_c); break;
        case LAYER_ACTIVATION: n = snprintf(out + k, outlen - k, "%s%s", sep, activation_name(L->act)); break;
        case LAYER_MAXPOOL2D:
            n = snprintf(out + k, outlen - k, "%smaxpool2d %d (%dx%d)", sep, L->kernel, L->out_h, L->out_w);
            break;
        case LAYER_DROPOUT: n = snprintf(out + k, outlen - k, "%sdropout %g", sep, (double)L->p); break;
        case LAYER_FLATTEN: n = snprintf(out + k, outlen - k, "%sflatten %d", sep, L->out_c); break;
        }
        if (n > 0 && (L->kind == LAYER_LINEAR || L->kind == LAYER_CONV2D) && L->act != MODEL_NO_ACT &&
            k + (size_t)n < outlen)
            n += snprintf(out + k + n, outlen - k - n, " %s", activation_name(L->act));
        if (n < 0) break;
        k += (size_t)n;
    }
}

void model_scratch_of(const model_shape *s, model_scratch *out) {
    *out = (model_scratch){.widest = (size_t)s->in_dim, .widest_c = 1};
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        size_t width = model_layer_out_size(s, l);
        if (width > out->widest) out->widest = width;
        if ((L->kind == LAYER_BATCHNORM2D || L->kind == LAYER_CONV2D) && L->out_c > out->widest_c) out->widest_c = L->out_c;
        if (L->kind != LAYER_CONV2D) continue;
        size_t chunk = (size_t)L->chunk_rows * L->out_h * L->out_w * L->in_c * L->kernel * L->kernel;
        size_t planes = (size_t)L->in_c * (L->in_h + 2 * L->pad) * (L->in_w + 2 * L->pad);
        if (chunk > out->col) out->col = chunk;
        if (planes > out->pad) out->pad = planes;
        if (!L->pool_fused) continue;
        size_t per_example = model_layer_out_size(s, l + 1); /* a winner per pooled output */
        size_t k2 = (size_t)L->in_c * L->kernel * L->kernel, positions = (size_t)L->out_h * L->out_w + 1;
        if (per_example > out->winners) out->winners = per_example;
        if (positions > out->positions) out->positions = positions;
        if (k2 > out->patch) out->patch = k2;
    }
}
