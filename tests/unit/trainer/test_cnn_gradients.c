/* The convolutional layers' gradients against central finite differences of the
 * loss: conv2d with stride and padding (weights, bias, and its input gradient through
 * the layer before), max-pool, batch norm in training mode (per-rank and synchronised
 * over two "ranks" in threads), dropout with its mask held fixed, and whole small
 * CNNs; the order in which layers report their gradients (a growing prefix of the
 * gradient buffer, as the buckets need); the layout and initialisation of the default
 * network; the im2col/col2im pair as adjoints; and dropout's masks as a pure function
 * of (seed, step, example, element). Where the build has oneDNN, the gradient checks
 * run again with the convolutions' forward on it, and its forward is held against
 * im2col + GEMM (the reference) within float rounding, and against itself bit for bit
 * (run again, after its primitives were evicted and rebuilt). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "cnn_kernels.h"
#include "conv_dnnl.h"
#include "ddpd_build_config.h"
#include "model.h"
#include "rng.h"

#define CLASSES 4

static int with_onednn; /* nets run their convolutions' forward on oneDNN */

/* A cnn config: conv blocks given as {channels, kernel, stride, padding, pool, bn, dropout}. */
static run_config cnn_config(const conv_block_config *blocks, int n_blocks, const int *fc, int n_fc,
                             activation_kind act, double fc_dropout, int sync) {
    run_config c;
    memset(&c, 0, sizeof c);
    c.model.type = MODEL_CNN;
    c.model.activation = act;
    for (int i = 0; i < n_blocks; i++) c.model.cnn.conv[i] = blocks[i];
    c.model.cnn.n_conv = n_blocks;
    for (int i = 0; i < n_fc; i++) c.model.cnn.fc[i] = fc[i];
    c.model.cnn.n_fc = n_fc;
    c.model.cnn.dropout = fc_dropout;
    c.model.cnn.batch_norm_stats = sync ? BN_STATS_SYNC : BN_STATS_PER_RANK;
    return c;
}

typedef struct {
    model_shape s;
    model_workspace w;
    float *params, *grads, *stats, *stats0, *x;
    uint8_t *y;
    size_t *ids;
    int rows;
} net;

static void net_init(net *n, const run_config *cfg, int in_c, int hw, int rows, uint64_t seed) {
    char err[256];
    REQUIRE(model_shape_init(&n->s, cfg, in_c, hw, hw, CLASSES, err, sizeof err) == 0, "shape: %s", err);
    REQUIRE(model_workspace_init(&n->w, &n->s, rows) == 0, "workspace");
    if (with_onednn) REQUIRE(model_workspace_use_onednn(&n->w, err, sizeof err) == 0, "oneDNN: %s", err);
    n->rows = rows;
    n->params = malloc(sizeof(float) * n->s.n_params);
    n->grads = calloc(n->s.n_params, sizeof(float)); /* (the alignment padding gets no gradient) */
    n->stats = malloc(sizeof(float) * (n->s.n_stats + 1));
    n->stats0 = malloc(sizeof(float) * (n->s.n_stats + 1));
    model_init_params(&n->s, n->params, n->stats, seed);
    for (size_t i = 0; i < n->s.n_params; i++) n->params[i] *= 1.5f; /* leave the linear region */
    /* batch norm: gamma and beta away from 1 and 0, so that their gradients matter */
    rng_state r;
    rng_seed(&r, seed, 3);
    for (int l = 0; l < n->s.n_layers; l++) {
        const model_layer *L = &n->s.layer[l];
        if (L->kind != LAYER_BATCHNORM2D) continue;
        for (int c = 0; c < L->out_c; c++) {
            n->params[L->w_off + c] = rng_uniform(&r, 0.5f, 1.5f);
            n->params[L->b_off + c] = rng_uniform(&r, -0.5f, 0.5f);
        }
    }
    memcpy(n->stats0, n->stats, sizeof(float) * (n->s.n_stats + 1));
    size_t in = (size_t)rows * n->s.in_dim;
    n->x = malloc(sizeof(float) * in);
    n->y = malloc((size_t)rows);
    n->ids = malloc(sizeof(size_t) * (size_t)rows);
    for (size_t i = 0; i < in; i++) n->x[i] = rng_uniform(&r, -1.0f, 1.0f);
    for (int i = 0; i < rows; i++) n->y[i] = (uint8_t)(i % CLASSES), n->ids[i] = 1000 + (size_t)i * 7;
}

static void net_free(net *n) {
    model_workspace_free(&n->w);
    free(n->params), free(n->grads), free(n->stats), free(n->stats0), free(n->x), free(n->y), free(n->ids);
}

static model_pass train_pass(const net *n) {
    return (model_pass){.train = 1, .seed = 5, .global_step = 11, .example_ids = n->ids};
}

/* The training-mode loss (batch statistics, the fixed dropout masks). */
static double loss_of(net *n) {
    memcpy(n->w.act[0], n->x, sizeof(float) * (size_t)n->rows * n->s.in_dim);
    memcpy(n->stats, n->stats0, sizeof(float) * (n->s.n_stats + 1));
    model_pass pass = train_pass(n);
    REQUIRE(model_forward(&n->w, n->params, n->stats, n->rows, &pass) == 0, "forward");
    double sum = 0;
    long correct = 0;
    /* k_softmax_xent through evaluate's tail: the logits are in place */
    const float *logits = n->w.act[n->s.n_layers];
    for (int b = 0; b < n->rows; b++) {
        const float *row = logits + (size_t)b * CLASSES;
        double max = row[0], s = 0;
        for (int j = 1; j < CLASSES; j++)
            if (row[j] > max) max = row[j];
        for (int j = 0; j < CLASSES; j++) s += exp(row[j] - max);
        sum += log(s) - (row[n->y[b]] - max);
    }
    (void)correct;
    return sum / n->rows;
}

typedef struct {
    const model_shape *s;
    size_t prefix; /* the finished prefix of the gradient buffer so far */
    int order_ok, reports;
} ready_log;

static void on_ready(void *arg, int layer) {
    ready_log *r = arg;
    if (!model_layer_has_params(r->s, layer) || model_layer_begin(r->s, layer) != r->prefix) r->order_ok = 0;
    r->prefix = model_layer_end(r->s, layer);
    r->reports++;
}

static void backward(net *n) {
    memcpy(n->w.act[0], n->x, sizeof(float) * (size_t)n->rows * n->s.in_dim);
    memcpy(n->stats, n->stats0, sizeof(float) * (n->s.n_stats + 1));
    model_pass pass = train_pass(n);
    double loss_sum = 0;
    long correct = 0;
    ready_log log = {&n->s, 0, 1, 0};
    REQUIRE(model_forward_backward(&n->w, n->params, n->stats, n->grads, n->y, n->rows, &pass, &loss_sum, &correct,
                                   on_ready, &log) == 0,
            "forward_backward");
    CHECK(log.order_ok && log.prefix == n->s.n_params && log.reports == n->s.n_param_layers,
          "layers with parameters report once each, last to first, as a growing prefix");
    CHECK_NEAR(loss_sum / n->rows, loss_of(n), 1e-5, 1e-6, "forward_backward's loss = forward's");
}

/* Every parameter's gradient against (L(p + eps) - L(p - eps)) / 2 eps. Kinks (relu,
 * a max-pool's winner changing) can spoil a few differences: `allowed` of them. */
static void check_gradients(net *n, const char *what, float eps, int allowed) {
    backward(n);
    int bad = 0;
    size_t worst_at = 0;
    double worst = 0;
    for (size_t i = 0; i < n->s.n_params; i++) {
        float saved = n->params[i];
        n->params[i] = saved + eps;
        double up = loss_of(n);
        n->params[i] = saved - eps;
        double down = loss_of(n);
        n->params[i] = saved;
        double numeric = (up - down) / (2.0 * eps);
        double err = fabs(numeric - n->grads[i]), tol = 2e-3 + 2e-2 * fabs(numeric);
        if (err > tol) {
            if (bad++ < 4) fprintf(stderr, "  %s: param %zu: analytic %.6g numeric %.6g\n", what, i, n->grads[i], numeric);
        }
        if (err / tol > worst) worst = err / tol, worst_at = i;
    }
    CHECK(bad <= allowed, "%s: %d of %zu gradients disagree with finite differences (allowed %d)", what, bad,
          n->s.n_params, allowed);
    printf("  %-58s %zu parameters, %d off, worst at %zu (%.2f of tolerance)\n", what, n->s.n_params, bad, worst_at,
           worst);
}

static void test_conv_stride_padding(void) {
    /* Two convolutions, so the second one's input gradient (col2im, stride 2, padding
     * 1) reaches the first one's weights. tanh keeps the loss smooth. */
    conv_block_config blocks[] = {{3, 3, 1, 1, 1, false, 0}, {4, 3, 2, 1, 1, false, 0}};
    run_config cfg = cnn_config(blocks, 2, NULL, 0, ACT_TANH, 0, 0);
    net n;
    net_init(&n, &cfg, 2, 7, 5, 1);
    CHECK(n.s.layer[1].out_h == 4 && n.s.layer[1].out_w == 4, "7x7, k3 s2 p1 -> 4x4: %dx%d", n.s.layer[1].out_h,
          n.s.layer[1].out_w);
    check_gradients(&n, "conv2d 2->3 k3 p1, conv2d 3->4 k3 s2 p1, tanh", 1e-2f, 0);
    net_free(&n);

    conv_block_config wide[] = {{2, 5, 1, 2, 1, false, 0}, {3, 4, 3, 0, 1, false, 0}};
    cfg = cnn_config(wide, 2, NULL, 0, ACT_GELU, 0, 0);
    net_init(&n, &cfg, 1, 11, 3, 2);
    check_gradients(&n, "conv2d k5 p2, conv2d k4 s3 (a generic kernel), gelu", 1e-2f, 0);
    net_free(&n);
}

static void test_maxpool(void) {
    conv_block_config blocks[] = {{3, 3, 1, 1, 2, false, 0}, {4, 3, 1, 1, 3, false, 0}};
    run_config cfg = cnn_config(blocks, 2, NULL, 0, ACT_TANH, 0, 0);
    net n;
    net_init(&n, &cfg, 2, 9, 4, 3);
    CHECK(n.s.layer[1].kind == LAYER_MAXPOOL2D && n.s.layer[1].out_h == 4, "9x9 pool 2 -> 4x4 (floor)");
    CHECK(n.s.layer[3].kind == LAYER_MAXPOOL2D && n.s.layer[3].out_h == 1, "4x4 pool 3 -> 1x1");
    check_gradients(&n, "conv, maxpool 2 (odd input), conv, maxpool 3, tanh", 1e-3f, 2);
    net_free(&n);
}

static void test_batchnorm(void) {
    conv_block_config blocks[] = {{3, 3, 1, 1, 1, true, 0}, {4, 3, 1, 0, 2, true, 0}};
    int fc[] = {6};
    run_config cfg = cnn_config(blocks, 2, fc, 1, ACT_TANH, 0, 0);
    net n;
    net_init(&n, &cfg, 1, 6, 5, 4);
    CHECK(n.s.layer[0].n_b == 0 && n.s.layer[1].kind == LAYER_BATCHNORM2D && n.s.n_stats == 2 * (3 + 4),
          "a convolution before batch norm has no bias; running statistics for 7 channels");
    check_gradients(&n, "conv, batchnorm (train), tanh, conv, batchnorm, pool, fc", 1e-3f, 1);
    /* The running statistics moved towards the batch's: mean from 0, variance from 1. */
    loss_of(&n);
    const model_layer *B = &n.s.layer[1];
    int moved = 1;
    for (int c = 0; c < B->out_c; c++)
        moved &= n.stats[B->stat_off + c] != 0.0f && n.stats[B->stat_off + B->out_c + c] != 1.0f;
    CHECK(moved, "training updates the running statistics");
    /* Evaluation normalises with the running statistics: fresh ones (0, 1) make batch
     * norm the affine map gamma x + beta. */
    memcpy(n.stats, n.stats0, sizeof(float) * n.s.n_stats);
    memcpy(n.w.act[0], n.x, sizeof(float) * (size_t)n.rows * n.s.in_dim);
    model_pass eval = {.train = 0};
    model_forward(&n.w, n.params, n.stats, n.rows, &eval);
    const float *in = n.w.act[1], *out = n.w.act[2];
    double worst = 0;
    for (int c = 0; c < B->out_c; c++)
        for (size_t i = 0; i < (size_t)n.rows * B->in_h * B->in_w; i++) {
            size_t at = (size_t)c * n.rows * B->in_h * B->in_w + i;
            double want = n.params[B->w_off + c] * in[at] / sqrt(1.0 + MODEL_BN_EPS) + n.params[B->b_off + c];
            if (fabs(out[at] - want) > worst) worst = fabs(out[at] - want);
        }
    CHECK(worst < 1e-5, "evaluation uses the running statistics (worst %.3g)", worst);
    net_free(&n);
}

static void test_dropout(void) {
    conv_block_config blocks[] = {{3, 3, 1, 1, 2, false, 0.25}};
    int fc[] = {8};
    run_config cfg = cnn_config(blocks, 1, fc, 1, ACT_TANH, 0.5, 0);
    net n;
    net_init(&n, &cfg, 1, 6, 4, 5);
    check_gradients(&n, "conv, pool, dropout 0.25, fc, dropout 0.5 (masks fixed)", 1e-3f, 1);
    /* The masks are a pure function of (seed, step, example, layer, element): the same
     * again, others for another step or example; about p of the elements dropped. */
    int l = 2;
    REQUIRE(n.s.layer[l].kind == LAYER_DROPOUT, "layer 2 is dropout");
    size_t size = (size_t)n.rows * model_layer_out_size(&n.s, l);
    uint8_t *first = malloc(size);
    loss_of(&n);
    memcpy(first, n.w.mask[l], size);
    loss_of(&n);
    CHECK(memcmp(first, n.w.mask[l], size) == 0, "the same pass draws the same masks");
    size_t dropped = 0;
    for (size_t i = 0; i < size; i++) dropped += !first[i];
    CHECK(dropped > size / 8 && dropped < size * 3 / 8, "about a quarter dropped: %zu of %zu", dropped, size);
    n.ids[1] += 1; /* another example in row 1: only row 1's mask changes */
    loss_of(&n);
    const model_layer *D = &n.s.layer[l];
    size_t plane = (size_t)D->in_h * D->in_w;
    int row1_changed = 0, others_same = 1;
    for (int c = 0; c < D->in_c; c++)
        for (int b = 0; b < n.rows; b++) {
            int same = !memcmp(first + ((size_t)c * n.rows + b) * plane, n.w.mask[l] + ((size_t)c * n.rows + b) * plane,
                               plane);
            if (b == 1) row1_changed |= !same;
            else others_same &= same;
        }
    CHECK(row1_changed && others_same, "a row's mask follows its example, not its place in the batch");
    /* Evaluation: no dropout at all. */
    memcpy(n.w.act[0], n.x, sizeof(float) * (size_t)n.rows * n.s.in_dim);
    model_pass eval = {.train = 0};
    model_forward(&n.w, n.params, n.stats, n.rows, &eval);
    CHECK(memcmp(n.w.act[l], n.w.act[l + 1], sizeof(float) * size) == 0, "evaluation passes dropout through");
    free(first);
    net_free(&n);
}

static void test_whole_cnns(void) {
    conv_block_config blocks[] = {{4, 5, 1, 2, 2, false, 0}, {6, 3, 1, 1, 2, false, 0}};
    int fc[] = {10};
    run_config cfg = cnn_config(blocks, 2, fc, 1, ACT_RELU, 0, 0);
    net n;
    net_init(&n, &cfg, 1, 12, 6, 6);
    check_gradients(&n, "the classic shape, small: conv5 p2, pool, conv3, pool, fc, relu", 3e-4f, 6);
    net_free(&n);

    conv_block_config mixed[] = {{4, 3, 2, 1, 1, true, 0.2}, {5, 3, 1, 1, 2, false, 0}};
    int fc2[] = {7, 5};
    cfg = cnn_config(mixed, 2, fc2, 2, ACT_GELU, 0.3, 0);
    net_init(&n, &cfg, 2, 10, 5, 7);
    check_gradients(&n, "conv s2 + batchnorm + dropout, conv + pool, 2 fc + dropout, gelu", 1e-2f, 2);
    net_free(&n);
}

/* The CPU's conv -> activation -> max-pool backward through the windows' winners
 * (pool_fused) against the plain one (max-pool backward into a dense gradient, then
 * the convolution's GEMMs): the same gradients up to summation order. */
static void test_pool_fused_matches_dense(void) {
    conv_block_config blocks[] = {{6, 5, 1, 2, 2, false, 0}, {8, 3, 1, 1, 2, false, 0}};
    int fc[] = {12};
    for (int act = ACT_RELU; act <= ACT_TANH; act++) {
        run_config cfg = cnn_config(blocks, 2, fc, 1, (activation_kind)act, 0, 0);
        net n;
        net_init(&n, &cfg, 1, 12, 20, 8);
        CHECK(n.s.layer[0].pool_fused && n.s.layer[1].pool_fused && n.s.layer[2].pool_fused, "conv, pool pairs fuse");
        backward(&n);
        float *fused = malloc(sizeof(float) * n.s.n_params);
        memcpy(fused, n.grads, sizeof(float) * n.s.n_params);
        for (int l = 0; l < n.s.n_layers; l++) n.s.layer[l].pool_fused = 0;
        backward(&n);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < n.s.n_params; i++) {
            if (fabs(fused[i] - n.grads[i]) > worst) worst = fabs(fused[i] - n.grads[i]);
            if (fabs(n.grads[i]) > scale) scale = fabs(n.grads[i]);
        }
        CHECK(worst <= 1e-5 * scale, "%s: fused and dense backward differ by %.3g (of %.3g)",
              activation_name((activation_kind)act), worst, scale);
        printf("  %-58s %.2e of %.2e\n", act == ACT_RELU ? "conv+pool fused backward vs dense, relu"
                                       : act == ACT_GELU ? "conv+pool fused backward vs dense, gelu"
                                                         : "conv+pool fused backward vs dense, tanh",
               worst, scale);
        free(fused);
        net_free(&n);
    }
}

/* --- sync batch norm over two ranks in threads ------------------------------------------ */

typedef struct {
    pthread_barrier_t barrier;
    double *slot[2];
    size_t n;
} fake_group;

typedef struct {
    fake_group *g;
    int rank;
} fake_comm;

static int fake_allreduce(void *arg, double *buf, size_t n) {
    fake_comm *c = arg;
    memcpy(c->g->slot[c->rank], buf, sizeof(double) * n);
    pthread_barrier_wait(&c->g->barrier);
    for (size_t i = 0; i < n; i++) buf[i] = c->g->slot[0][i] + c->g->slot[1][i];
    pthread_barrier_wait(&c->g->barrier);
    return 0;
}

typedef struct {
    net *n;
    fake_comm comm;
    int use_sync;
    double loss;
} rank_job;

static void *run_rank(void *arg) {
    rank_job *j = arg;
    net *n = j->n;
    memcpy(n->w.act[0], n->x, sizeof(float) * (size_t)n->rows * n->s.in_dim);
    model_pass pass = train_pass(n);
    if (j->use_sync) pass.allreduce_sum = fake_allreduce, pass.allreduce_arg = &j->comm;
    long correct = 0;
    j->loss = 0;
    model_forward_backward(&n->w, n->params, n->stats, n->grads, n->y, n->rows, &pass, &j->loss, &correct, NULL, NULL);
    return NULL;
}

/* Two ranks with half the batch each, gradients averaged: with sync statistics the
 * same as one rank with the whole batch; with per-rank statistics not. */
static void test_sync_batchnorm(void) {
    conv_block_config blocks[] = {{3, 3, 1, 1, 2, true, 0}};
    int fc[] = {5};
    for (int sync = 1; sync >= 0; sync--) {
        run_config cfg = cnn_config(blocks, 1, fc, 1, ACT_TANH, 0, sync);
        net whole, half[2];
        net_init(&whole, &cfg, 1, 6, 8, 9);
        for (int r = 0; r < 2; r++) {
            net_init(&half[r], &cfg, 1, 6, 4, 9);
            /* rank r's rows of the whole batch: CNHW with one channel is row-major */
            memcpy(half[r].x, whole.x + (size_t)r * 4 * whole.s.in_dim, sizeof(float) * 4 * whole.s.in_dim);
            memcpy(half[r].y, whole.y + r * 4, 4);
            memcpy(half[r].ids, whole.ids + r * 4, sizeof(size_t) * 4);
        }
        backward(&whole);
        fake_group g = {.n = 64};
        pthread_barrier_init(&g.barrier, NULL, 2);
        double slots[2][64];
        g.slot[0] = slots[0], g.slot[1] = slots[1];
        rank_job jobs[2];
        pthread_t t[2];
        for (int r = 0; r < 2; r++) {
            jobs[r] = (rank_job){.n = &half[r], .comm = {&g, r}, .use_sync = sync};
            pthread_create(&t[r], NULL, run_rank, &jobs[r]);
        }
        for (int r = 0; r < 2; r++) pthread_join(t[r], NULL);
        pthread_barrier_destroy(&g.barrier);
        double worst = 0, scale = 0;
        for (size_t i = 0; i < whole.s.n_params; i++) {
            double avg = 0.5 * ((double)half[0].grads[i] + half[1].grads[i]);
            if (fabs(avg - whole.grads[i]) > worst) worst = fabs(avg - whole.grads[i]);
            if (fabs(whole.grads[i]) > scale) scale = fabs(whole.grads[i]);
        }
        double loss_gap = fabs((jobs[0].loss + jobs[1].loss) / 8 - loss_of(&whole));
        int stats_same = !memcmp(half[0].stats, half[1].stats, sizeof(float) * whole.s.n_stats);
        if (sync) {
            CHECK(worst <= 1e-5 * scale, "sync: 2 ranks x 4 rows give the gradients of 1 rank x 8 (worst %.3g of %.3g)",
                  worst, scale);
            CHECK(loss_gap < 1e-5, "sync: and the loss (%.3g apart)", loss_gap);
            CHECK(stats_same, "sync: both ranks keep the same running statistics");
        } else {
            CHECK(worst > 1e-3 * scale, "per-rank: the halves' statistics differ from the whole's (%.3g)", worst);
            CHECK(!stats_same, "per-rank: each rank's running statistics are its own");
        }
        printf("  %-58s gradients %.2e of %.2e apart, loss %.2e\n",
               sync ? "sync batchnorm, 2 ranks x 4 vs 1 x 8" : "per-rank batchnorm, 2 ranks x 4 vs 1 x 8", worst,
               scale, loss_gap);
        net_free(&whole);
        net_free(&half[0]);
        net_free(&half[1]);
    }
}

/* --- kernels and layout ------------------------------------------------------------------ */

/* <col2im(g), x> = <g, im2col(x)>: the pair are adjoints (for any stride, padding). */
static void test_im2col_adjoint(void) {
    int C = 3, rows = 4, H = 9, W = 7, k = 4, stride = 2, pad = 2, b0 = 1, nb = 2;
    int Ho = (H + 2 * pad - k) / stride + 1, Wo = (W + 2 * pad - k) / stride + 1, K = C * k * k;
    size_t nx = (size_t)C * rows * H * W, ncol = (size_t)nb * Ho * Wo * K;
    float *x = malloc(sizeof(float) * nx), *col = malloc(sizeof(float) * ncol), *g = malloc(sizeof(float) * ncol),
          *dx = calloc(nx, sizeof(float)), *padded = malloc(sizeof(float) * C * (H + 2 * pad) * (W + 2 * pad));
    rng_state r;
    rng_seed(&r, 17, 0);
    for (size_t i = 0; i < nx; i++) x[i] = rng_uniform(&r, -1, 1);
    for (size_t i = 0; i < ncol; i++) g[i] = rng_uniform(&r, -1, 1);
    k_im2col(x, C, rows, H, W, b0, nb, k, stride, pad, Ho, Wo, col, padded);
    k_col2im(g, C, rows, H, W, b0, nb, k, stride, pad, Ho, Wo, dx, padded);
    double a = 0, b = 0;
    for (size_t i = 0; i < ncol; i++) a += (double)g[i] * col[i];
    for (size_t i = 0; i < nx; i++) b += (double)dx[i] * x[i];
    CHECK(fabs(a - b) < 1e-4 * fabs(a), "<g, im2col x> = <col2im g, x>: %.9g vs %.9g", a, b);
    /* one patch by hand: example 1, output (1, 2), channel 2, (ky, kx) = (3, 1) */
    int oy = 1, ox = 2, c = 2, ky = 3, kx = 1, iy = oy * stride + ky - pad, ix = ox * stride + kx - pad;
    float want = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(((size_t)c * rows + 1) * H + iy) * W + ix] : 0.0f;
    CHECK(col[((size_t)(oy * Wo + ox)) * K + (c * k + ky) * k + kx] == want, "a patch entry lands where documented");
    free(x), free(col), free(g), free(dx), free(padded);
}

static void test_default_network(void) {
    run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    conv_block_config classic[] = {{32, 5, 1, 2, 2, false, 0}, {64, 5, 1, 2, 2, false, 0}};
    int fc[] = {1024};
    cfg = cnn_config(classic, 2, fc, 1, ACT_RELU, 0, 0);
    model_shape s;
    char err[256];
    REQUIRE(model_shape_init(&s, &cfg, 1, 28, 28, 10, err, sizeof err) == 0, "%s", err);
    size_t P = 32 * 25 + 32 + 64 * 32 * 25 + 64 + 7 * 7 * 64 * 1024 + 1024 + 1024 * 10 + 10;
    CHECK(s.n_params >= P && s.n_params - P < 8 * MODEL_PARAM_ALIGN,
          "parameters %zu, expected %zu and at most an alignment's padding a tensor", s.n_params, P);
    CHECK(s.n_layers == 7 && s.n_param_layers == 4, "conv, pool, conv, pool, flatten, fc, fc: %d layers", s.n_layers);
    CHECK(s.layer[4].kind == LAYER_FLATTEN && s.layer[4].out_c == 3136, "flatten to 3136");
    CHECK(s.layer[6].w_off == 0 && s.layer[0].b_off + 32 == s.n_params, "the last layer first, the first last");
    CHECK(s.layer[0].param_index == 0 && s.layer[2].param_index == 1 && s.layer[5].param_index == 2 &&
              s.layer[6].param_index == 3,
          "layers.0 .. layers.3 are the layers with parameters");
    float *p = malloc(sizeof(float) * s.n_params);
    model_init_params(&s, p, NULL, 42);
    float bound = 1.0f / sqrtf(32 * 25), max = 0;
    for (size_t i = s.layer[2].w_off; i < s.layer[2].b_off; i++)
        if (fabsf(p[i]) > max) max = fabsf(p[i]);
    CHECK(max <= bound && max > 0.99f * bound, "conv2 weights within +-1/sqrt(32*5*5): max %g", max);
    free(p);
    char line[512];
    model_describe(&s, line, sizeof line);
    printf("  %s\n", line);
    /* A stack that leaves no pixels is refused with the block's pointer. */
    conv_block_config too_deep[] = {{8, 5, 1, 0, 2, false, 0}, {8, 5, 1, 0, 2, false, 0}, {8, 5, 1, 0, 1, false, 0}};
    cfg = cnn_config(too_deep, 3, fc, 1, ACT_RELU, 0, 0);
    CHECK(model_shape_init(&s, &cfg, 1, 28, 28, 10, err, sizeof err) != 0 && strstr(err, "/model/cnn/conv/2"),
          "28 -> 24 -> 12 -> 8 -> 4 leaves no room for a third 5x5: %s", err);
}

/* One convolution's forward output (act[1]) for the first `rows` examples. */
static void conv_output(net *n, int rows, float *out) {
    memcpy(n->w.act[0], n->x, sizeof(float) * (size_t)rows * n->s.in_dim);
    model_pass eval = {.train = 0};
    REQUIRE(model_forward(&n->w, n->params, n->stats, rows, &eval) == 0, "forward");
    memcpy(out, n->w.act[1], sizeof(float) * (size_t)rows * model_layer_out_size(&n->s, 0));
}

/* oneDNN's convolution forward against im2col + GEMM: many geometries (one input
 * channel, stride, padding, no bias before batch norm, a generic kernel), batch sizes
 * from 1 up; within float rounding of each other, and bit-identical to itself when
 * run again, also after more batch sizes than it caches pushed its primitive out. */
static void test_onednn_matches_im2col(void) {
    if (!DDPD_HAVE_ONEDNN) {
        printf("  oneDNN: not in this build (the im2col path runs every convolution)\n");
        return;
    }
    const struct {
        int in_c, hw, channels, kernel, stride, pad, bn;
    } cases[] = {{1, 28, 32, 5, 1, 2, 0}, {32, 14, 64, 5, 1, 2, 0}, {3, 9, 8, 3, 2, 1, 0}, {4, 10, 6, 3, 1, 0, 1},
                 {2, 11, 5, 4, 3, 0, 0},  {16, 7, 16, 1, 1, 0, 0}, {5, 8, 24, 3, 1, 1, 1}};
    const int row_counts[] = {1, 7, 33};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (size_t r = 0; r < sizeof row_counts / sizeof row_counts[0]; r++) {
            int rows = row_counts[r];
            conv_block_config block = {cases[i].channels, cases[i].kernel, cases[i].stride, cases[i].pad, 1,
                                       cases[i].bn != 0, 0};
            run_config cfg = cnn_config(&block, 1, NULL, 0, ACT_TANH, 0, 0);
            net ref, dn;
            with_onednn = 0;
            net_init(&ref, &cfg, cases[i].in_c, cases[i].hw, rows, 20 + i);
            with_onednn = 1;
            net_init(&dn, &cfg, cases[i].in_c, cases[i].hw, rows, 20 + i);
            with_onednn = 0;
            size_t size = (size_t)rows * model_layer_out_size(&ref.s, 0);
            float *a = malloc(sizeof(float) * size), *b = malloc(sizeof(float) * size),
                  *again = malloc(sizeof(float) * size);
            conv_output(&ref, rows, a);
            conv_output(&dn, rows, b);
            double worst = 0, scale = 0;
            size_t differ = 0;
            for (size_t k = 0; k < size; k++) {
                double d = fabs((double)a[k] - b[k]);
                if (d > worst) worst = d;
                if (fabs(a[k]) > scale) scale = fabs(a[k]);
                differ += a[k] != b[k];
            }
            char what[160];
            snprintf(what, sizeof what, "conv %d->%d k%d s%d p%d%s on %dx%d, %d rows", cases[i].in_c,
                     cases[i].channels, cases[i].kernel, cases[i].stride, cases[i].pad, cases[i].bn ? " (no bias)" : "",
                     cases[i].hw, cases[i].hw, rows);
            CHECK(worst <= 1e-6 * (scale + 1.0), "%s: oneDNN and im2col differ by %.3g (of %.3g)", what, worst, scale);
            for (int extra = rows - 1; extra >= 1 && rows > 1; extra--) conv_output(&dn, extra, again); /* evicts */
            conv_output(&dn, rows, again);
            CHECK(memcmp(b, again, sizeof(float) * size) == 0, "%s: oneDNN gives other bits when run again", what);
            if (r == 0)
                printf("  oneDNN %-48s %.2e of %.2e, %zu of %zu elements not bit-equal to im2col\n", what, worst, scale,
                       differ, size);
            free(a), free(b), free(again);
            net_free(&ref);
            net_free(&dn);
        }
}

/* The gradient checks, with the convolutions' forward on oneDNN (backward is shared). */
static void test_gradients_on_onednn(void) {
    if (!DDPD_HAVE_ONEDNN) return;
    with_onednn = 1;
    printf("  with the convolutions' forward on oneDNN:\n");
    test_conv_stride_padding();
    test_maxpool();
    test_batchnorm();
    test_whole_cnns();
    with_onednn = 0;
}

int main(void) {
    test_default_network();
    test_im2col_adjoint();
    test_conv_stride_padding();
    test_maxpool();
    test_batchnorm();
    test_dropout();
    test_whole_cnns();
    test_pool_fused_matches_dense();
    test_sync_batchnorm();
    test_onednn_matches_im2col();
    test_gradients_on_onednn();
    return test_done("test_cnn_gradients");
}
