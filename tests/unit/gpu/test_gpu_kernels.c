/* Each CUDA kernel against its CPU reference (trainer/cuda/kernels.h against
 * trainer/cpu_kernels.h and trainer/cnn_kernels.h, optim_cuda against optim.c,
 * model_cuda's cuBLAS GEMMs against model.c's BLAS, for MLPs and CNNs), forward and
 * backward, within 1e-4 relative (the largest
 * difference over the largest reference magnitude of the buffer); and the
 * reductions bit-identical when run twice. Without a GPU it prints SKIPPED and
 * exits 77, which ctest reports as skipped. */
#include <stdio.h>

#include "check.h"
#include "ddpd_build_config.h"

#if !DDPD_NCCL_BACKEND
int main(void) {
    printf("SKIPPED: no CUDA device (this ddp-trainer build has no CUDA toolkit)\n");
    return 77;
}
#else

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cnn_kernels.h"
#include "collectives.h"
#include "cpu_kernels.h"
#include "cuda/kernels.h"
#include "memory_plan.h"
#include "cuda/model_cuda.h"
#include "cuda/optim_cuda.h"
#include "model.h"
#include "optim.h"
#include "rng.h"

#define TOL 1e-4

static cudaStream_t S;
static double worst;
static rng_state R;

static void cu(cudaError_t e, const char *call) { REQUIRE(e == cudaSuccess, "%s: %s", call, cudaGetErrorString(e)); }
#define CU(call) cu((call), #call)

static void *dalloc(size_t bytes) {
    void *p = NULL;
    CU(cudaMalloc(&p, bytes ? bytes : 1));
    CU(cudaMemset(p, 0, bytes ? bytes : 1));
    return p;
}
static void *to_dev(const void *h, size_t bytes) {
    void *d = dalloc(bytes);
    CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return d;
}
static void put(void *d, const void *h, size_t bytes) { CU(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice)); }
static void get(void *h, const void *d, size_t bytes) {
    CU(cudaStreamSynchronize(S));
    CU(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost));
}
static float *randoms(size_t n, float lo, float hi) {
    float *x = malloc(sizeof(float) * (n ? n : 1));
    for (size_t i = 0; i < n; i++) x[i] = rng_uniform(&R, lo, hi);
    return x;
}

/* The largest difference over the largest reference magnitude; NaN fails. */
static void compare(const char *what, const float *gpu, const float *cpu, size_t n, double tol) {
    double maxref = 0, maxdiff = 0;
    size_t at = 0;
    int nan = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)gpu[i] - (double)cpu[i]);
        if (isnan(d)) nan = 1, at = i;
        if (fabs(cpu[i]) > maxref) maxref = fabs(cpu[i]);
        if (d > maxdiff) maxdiff = d, at = i;
    }
    double rel = nan ? INFINITY : maxref > 0 ? maxdiff / maxref : maxdiff;
    if (rel > worst) worst = rel;
    CHECK(rel <= tol, "%s: relative error %.3g at %zu (gpu %.9g, cpu %.9g)", what, rel, at, n ? gpu[at] : 0.0,
          n ? cpu[at] : 0.0);
    printf("  %-52s relative error %.2e\n", what, rel);
}

static void compare_scalar(const char *what, double gpu, double cpu, double tol) {
    double rel = fabs(gpu - cpu) / (fabs(cpu) > 0 ? fabs(cpu) : 1.0);
    if (isnan(gpu)) rel = INFINITY;
    if (rel > worst) worst = rel;
    CHECK(rel <= tol, "%s: gpu %.12g, cpu %.12g (relative error %.3g)", what, gpu, cpu, rel);
    printf("  %-52s relative error %.2e\n", what, rel);
}

static const char *act_name(int a) { return a == ACT_RELU ? "relu" : a == ACT_GELU ? "gelu" : "tanh"; }

/* k_u8_to_f32 + gather_inputs: exact (the same float product). */
static void test_gather(void) {
    size_t count = 100, pixels = 784;
    int rows = 37;
    uint8_t *images = malloc(count * pixels), *labels = malloc(count), got_labels[64];
    for (size_t i = 0; i < count * pixels; i++) images[i] = (uint8_t)rng_below(&R, 256);
    for (size_t i = 0; i < count; i++) labels[i] = (uint8_t)rng_below(&R, 10);
    uint64_t idx[64];
    for (int i = 0; i < rows; i++) idx[i] = rng_below(&R, count);
    uint8_t *d_images = to_dev(images, count * pixels), *d_labels = to_dev(labels, count), *d_out_labels = dalloc(64);
    uint64_t *d_idx = to_dev(idx, sizeof idx);
    float *d_x = dalloc(sizeof(float) * rows * pixels), *x = malloc(sizeof(float) * rows * pixels),
          *ref = malloc(sizeof(float) * rows * pixels);
    for (int pass = 0; pass < 2; pass++) { /* by indices, then contiguous from 50 */
        CU(k_u8_to_f32_gather_cuda(d_x, d_out_labels, d_images, d_labels, pass ? NULL : d_idx, 50, rows, pixels,
                                   1.0f / 255.0f, S));
        get(x, d_x, sizeof(float) * rows * pixels);
        get(got_labels, d_out_labels, (size_t)rows);
        int labels_ok = 1;
        for (int i = 0; i < rows; i++) {
            size_t k = pass ? 50 + (size_t)i : idx[i];
            k_u8_to_f32(ref + (size_t)i * pixels, images + k * pixels, pixels, 1.0f / 255.0f);
            labels_ok &= got_labels[i] == labels[k];
        }
        CHECK(memcmp(x, ref, sizeof(float) * rows * pixels) == 0, "gather %s: the floats differ",
              pass ? "contiguous" : "by index");
        CHECK(labels_ok, "gather %s: the labels differ", pass ? "contiguous" : "by index");
        printf("  %-52s %s\n", pass ? "u8 -> f32, contiguous rows" : "u8 -> f32, gathered by index",
               "bit-identical");
    }
    cudaFree(d_images), cudaFree(d_labels), cudaFree(d_out_labels), cudaFree(d_idx), cudaFree(d_x);
    free(images), free(labels), free(x), free(ref);
}

/* k_bias_act_forward and k_act_backward for each activation. */
static void test_bias_act(void) {
    int rows = 37, cols = 300;
    size_t n = (size_t)rows * cols;
    float *z0 = randoms(n, -3, 3), *bias = randoms((size_t)cols, -1, 1), *dz0 = randoms(n, -1, 1);
    float *z = malloc(sizeof(float) * n), *pre = malloc(sizeof(float) * n), *dz = malloc(sizeof(float) * n);
    float *gz = malloc(sizeof(float) * n), *gpre = malloc(sizeof(float) * n), *gdz = malloc(sizeof(float) * n);
    float *d_z = dalloc(sizeof(float) * n), *d_pre = dalloc(sizeof(float) * n), *d_dz = dalloc(sizeof(float) * n);
    float *d_bias = to_dev(bias, sizeof(float) * cols);
    char what[96];
    for (int act = ACT_RELU; act <= ACT_TANH; act++) {
        for (int apply = 0; apply <= 1; apply++) {
            int keep_pre = act == ACT_GELU && apply;
            memcpy(z, z0, sizeof(float) * n);
            put(d_z, z0, sizeof(float) * n);
            k_bias_act_forward(z, keep_pre ? pre : NULL, bias, rows, cols, (activation_kind)act, apply);
            CU(k_bias_act_forward_cuda(d_z, keep_pre ? d_pre : NULL, d_bias, rows, cols, act, apply, S));
            get(gz, d_z, sizeof(float) * n);
            snprintf(what, sizeof what, "bias%s forward (%s)", apply ? " + activation" : "", act_name(act));
            compare(what, gz, z, n, TOL);
            if (keep_pre) {
                get(gpre, d_pre, sizeof(float) * n);
                compare("gelu pre-activation", gpre, pre, n, TOL);
            }
        }
        /* Backward from the CPU's forward outputs (the same inputs for both). */
        memcpy(dz, dz0, sizeof(float) * n);
        put(d_dz, dz0, sizeof(float) * n);
        put(d_z, z, sizeof(float) * n);
        if (act == ACT_GELU) put(d_pre, pre, sizeof(float) * n);
        k_act_backward(dz, z, act == ACT_GELU ? pre : NULL, n, (activation_kind)act);
        CU(k_act_backward_cuda(d_dz, d_z, act == ACT_GELU ? d_pre : NULL, n, act, S));
        get(gdz, d_dz, sizeof(float) * n);
        snprintf(what, sizeof what, "activation backward (%s)", act_name(act));
        compare(what, gdz, dz, n, TOL);
    }
    cudaFree(d_z), cudaFree(d_pre), cudaFree(d_dz), cudaFree(d_bias);
    free(z0), free(bias), free(dz0), free(z), free(pre), free(dz), free(gz), free(gpre), free(gdz);
}

/* k_bias_grad over shapes around its chunking (32 rows a chunk, at most 256). */
static void test_bias_grad(void) {
    int shapes[][2] = {{1, 10}, {31, 7}, {37, 300}, {1024, 10}, {8192, 64}, {9000, 17}};
    char what[96];
    float *d_part = dalloc(sizeof(float) * KC_BIAS_GRAD_MAX_CHUNKS * 300);
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int rows = shapes[s][0], cols = shapes[s][1];
        size_t n = (size_t)rows * cols;
        float *dz = randoms(n, -1, 1), *db = malloc(sizeof(float) * cols), *gdb = malloc(sizeof(float) * cols);
        float *d_dz = to_dev(dz, sizeof(float) * n), *d_db = dalloc(sizeof(float) * cols);
        k_bias_grad(db, dz, rows, cols);
        CU(k_bias_grad_cuda(d_db, d_dz, rows, cols, d_part, S));
        get(gdb, d_db, sizeof(float) * cols);
        snprintf(what, sizeof what, "bias gradient (column sums) %d x %d", rows, cols);
        compare(what, gdb, db, (size_t)cols, TOL);
        cudaFree(d_dz), cudaFree(d_db);
        free(dz), free(db), free(gdb);
    }
    cudaFree(d_part);
}

/* k_softmax_xent: dlogits, the loss sum and the hits; and accumulation. */
static void test_softmax_xent(void) {
    int rows = 1000, cols = 10;
    size_t n = (size_t)rows * cols;
    float *logits = randoms(n, -4, 4), *dl = malloc(sizeof(float) * n), *gdl = malloc(sizeof(float) * n);
    uint8_t *labels = malloc((size_t)rows);
    for (int i = 0; i < rows; i++) labels[i] = (uint8_t)rng_below(&R, (uint64_t)cols);
    float *d_logits = to_dev(logits, sizeof(float) * n), *d_dl = dalloc(sizeof(float) * n);
    float *d_row_loss = dalloc(sizeof(float) * rows);
    int *d_row_hit = dalloc(sizeof(int) * rows);
    uint8_t *d_labels = to_dev(labels, (size_t)rows);
    double *d_out = dalloc(sizeof(double) * 3), out[3];
    double loss = 0;
    long correct = 0;
    float scale = 1.0f / (float)rows;
    k_softmax_xent(logits, labels, rows, cols, dl, scale, &loss, &correct);
    CU(k_softmax_xent_cuda(d_logits, d_labels, rows, cols, d_dl, scale, d_row_loss, d_row_hit, S));
    CU(k_loss_reduce_cuda(d_out, d_row_loss, d_row_hit, rows, 0, S));
    get(gdl, d_dl, sizeof(float) * n);
    get(out, d_out, sizeof out);
    compare("softmax cross-entropy backward (dlogits)", gdl, dl, n, TOL);
    compare_scalar("softmax cross-entropy loss sum", out[0], loss, TOL);
    compare_scalar("softmax cross-entropy mean loss", out[2], loss / rows, TOL);
    CHECK(out[1] == (double)correct, "hits: gpu %.0f, cpu %ld", out[1], correct);
    CU(k_loss_reduce_cuda(d_out, d_row_loss, d_row_hit, rows, 1, S)); /* accumulates onto the first */
    double twice[3];
    get(twice, d_out, sizeof twice);
    CHECK(twice[0] == 2 * out[0] && twice[1] == 2 * out[1] && twice[2] == out[2], "accumulate adds loss and hits");
    cudaFree(d_logits), cudaFree(d_dl), cudaFree(d_row_loss), cudaFree(d_row_hit), cudaFree(d_labels), cudaFree(d_out);
    free(logits), free(dl), free(gdl), free(labels);
}

/* --- the convolutional layers' kernels against trainer/cnn_kernels.c -------------------- */

/* im2col exactly, col2im within TOL, for shapes with stride and padding. */
static void test_im2col(void) {
    int cases[][7] = {/* C, rows, H(=W), k, stride, pad, examples in the chunk */
                      {1, 6, 28, 5, 1, 2, 4}, {32, 3, 14, 5, 1, 2, 2}, {3, 4, 9, 4, 2, 2, 3}, {5, 2, 7, 3, 3, 0, 2}};
    char what[128];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        int C = cases[k][0], rows = cases[k][1], H = cases[k][2], W = H, kk = cases[k][3], s = cases[k][4];
        int pad = cases[k][5], n = cases[k][6], b0 = rows - n;
        int Ho = (H + 2 * pad - kk) / s + 1, Wo = (W + 2 * pad - kk) / s + 1;
        size_t nx = (size_t)C * rows * H * W, ncol = (size_t)n * Ho * Wo * C * kk * kk;
        float *x = randoms(nx, -1, 1), *g = randoms(ncol, -1, 1);
        float *col = malloc(sizeof(float) * ncol), *gcol = malloc(sizeof(float) * ncol);
        float *dx = calloc(nx, sizeof(float)), *gdx = malloc(sizeof(float) * nx);
        float *padded = malloc(sizeof(float) * C * (H + 2 * pad) * (W + 2 * pad));
        float *d_x = to_dev(x, sizeof(float) * nx), *d_col = dalloc(sizeof(float) * ncol), *d_dx = dalloc(sizeof(float) * nx);
        k_im2col(x, C, rows, H, W, b0, n, kk, s, pad, Ho, Wo, col, padded);
        CU(k_im2col_cuda(d_x, C, rows, H, W, b0, n, kk, s, pad, Ho, Wo, d_col, S));
        get(gcol, d_col, sizeof(float) * ncol);
        CHECK(memcmp(gcol, col, sizeof(float) * ncol) == 0, "im2col C%d %dx%d k%d s%d p%d: the patches differ", C, H, W,
              kk, s, pad);
        printf("  %-52s bit-identical\n", "im2col");
        put(d_col, g, sizeof(float) * ncol);
        k_col2im(g, C, rows, H, W, b0, n, kk, s, pad, Ho, Wo, dx, padded);
        CU(k_col2im_cuda(d_col, C, rows, H, W, b0, n, kk, s, pad, Ho, Wo, d_dx, S));
        get(gdx, d_dx, sizeof(float) * nx);
        snprintf(what, sizeof what, "col2im C%d %dx%d k%d stride %d pad %d", C, H, W, kk, s, pad);
        compare(what, gdx, dx, nx, TOL);
        cudaFree(d_x), cudaFree(d_col), cudaFree(d_dx);
        free(x), free(g), free(col), free(gcol), free(dx), free(gdx), free(padded);
    }
}

/* Max-pool (values and indices exactly), batch norm, dropout masks (exactly: the same
 * counter-based draws), flatten, the per-channel bias gradient. */
static void test_cnn_layer_kernels(void) {
    int C = 16, rows = 9, H = 13, W = 13, k = 2, Ho = H / k, Wo = W / k;
    size_t planes = (size_t)C * rows, n = (size_t)rows * H * W, nx = (size_t)C * n, ny = planes * Ho * Wo;
    float *x = randoms(nx, -2, 2), *y = malloc(sizeof(float) * ny), *gy = malloc(sizeof(float) * ny);
    int32_t *at = malloc(sizeof(int32_t) * ny), *gat = malloc(sizeof(int32_t) * ny);
    float *d_x = to_dev(x, sizeof(float) * nx), *d_y = dalloc(sizeof(float) * ny);
    int32_t *d_at = dalloc(sizeof(int32_t) * ny);
    k_maxpool_forward(x, y, at, planes, H, W, k, Ho, Wo);
    CU(k_maxpool_forward_cuda(d_x, d_y, d_at, planes, H, W, k, Ho, Wo, S));
    get(gy, d_y, sizeof(float) * ny);
    get(gat, d_at, sizeof(int32_t) * ny);
    CHECK(!memcmp(gy, y, sizeof(float) * ny) && !memcmp(gat, at, sizeof(int32_t) * ny), "max-pool values and indices");
    float *g = randoms(ny, -1, 1), *dx = malloc(sizeof(float) * nx), *gdx = malloc(sizeof(float) * nx);
    float *d_g = to_dev(g, sizeof(float) * ny), *d_dx = dalloc(sizeof(float) * nx);
    k_maxpool_backward(dx, g, at, planes, H, W, Ho, Wo);
    CU(k_maxpool_backward_cuda(d_dx, d_g, d_at, planes, H, W, Ho, Wo, S));
    get(gdx, d_dx, sizeof(float) * nx);
    CHECK(!memcmp(gdx, dx, sizeof(float) * nx), "max-pool backward");
    printf("  %-52s bit-identical\n", "max-pool 2x2 (odd input) forward, indices, backward");

    /* batch norm: sums, statistics with the running update, forward, backward */
    float *gamma = randoms((size_t)C, 0.5f, 1.5f), *beta = randoms((size_t)C, -0.5f, 0.5f);
    float mean[16], invstd[16], rm[16], rv[16], gmean[16], ginvstd[16], grm[16], grv[16];
    for (int c = 0; c < C; c++) rm[c] = 0.1f * c, rv[c] = 1.0f + 0.05f * c;
    double sums[33], gsums[33];
    k_batchnorm_sums(x, C, n, sums);
    sums[2 * C] = (double)n;
    k_batchnorm_stats(sums, C, sums[2 * C], 1e-5f, 0.1f, mean, invstd, rm, rv);
    double *d_sums = dalloc(sizeof(double) * 33), *d_part = dalloc(sizeof(double) * 2 * KC_CHANNEL_MAX_CHUNKS * C);
    float *d_gamma = to_dev(gamma, sizeof(float) * C), *d_beta = to_dev(beta, sizeof(float) * C);
    float *d_mean = dalloc(sizeof(float) * C), *d_invstd = dalloc(sizeof(float) * C);
    float *d_rm = dalloc(sizeof(float) * C), *d_rv = dalloc(sizeof(float) * C);
    float rm0[16], rv0[16];
    for (int c = 0; c < C; c++) rm0[c] = 0.1f * c, rv0[c] = 1.0f + 0.05f * c;
    put(d_rm, rm0, sizeof(float) * C), put(d_rv, rv0, sizeof(float) * C);
    CU(k_batchnorm_sums_cuda(d_x, C, n, d_sums, d_part, S));
    CU(k_batchnorm_stats_cuda(d_sums, C, 1e-5f, 0.1f, d_mean, d_invstd, d_rm, d_rv, S));
    get(gsums, d_sums, sizeof(double) * (2 * C + 1));
    get(gmean, d_mean, sizeof(float) * C), get(ginvstd, d_invstd, sizeof(float) * C);
    get(grm, d_rm, sizeof(float) * C), get(grv, d_rv, sizeof(float) * C);
    CHECK(gsums[2 * C] == (double)n, "the count rides along with the sums");
    compare("batch norm: batch mean", gmean, mean, (size_t)C, TOL);
    compare("batch norm: batch 1/std", ginvstd, invstd, (size_t)C, TOL);
    compare("batch norm: running mean", grm, rm, (size_t)C, TOL);
    compare("batch norm: running variance (unbiased)", grv, rv, (size_t)C, TOL);
    float *bn = malloc(sizeof(float) * nx), *gbn = malloc(sizeof(float) * nx), *d_bn = dalloc(sizeof(float) * nx);
    k_batchnorm_forward(x, bn, gamma, beta, mean, invstd, C, n);
    put(d_mean, mean, sizeof(float) * C), put(d_invstd, invstd, sizeof(float) * C); /* same statistics for both */
    CU(k_batchnorm_forward_cuda(d_x, d_bn, d_gamma, d_beta, d_mean, d_invstd, C, n, S));
    get(gbn, d_bn, sizeof(float) * nx);
    compare("batch norm forward", gbn, bn, nx, TOL);
    float *dy = randoms(nx, -1, 1), *d_dy = to_dev(dy, sizeof(float) * nx);
    float dgamma[16], dbeta[16], gdgamma[16], gdbeta[16];
    float *d_dgamma = dalloc(sizeof(float) * C), *d_dbeta = dalloc(sizeof(float) * C);
    k_batchnorm_backward_sums(dy, x, mean, invstd, C, n, sums);
    sums[2 * C] = (double)n;
    for (int c = 0; c < C; c++) dgamma[c] = (float)sums[C + c], dbeta[c] = (float)sums[c];
    k_batchnorm_backward(dx, dy, x, gamma, mean, invstd, sums, sums[2 * C], C, n);
    CU(k_batchnorm_backward_sums_cuda(d_dy, d_x, d_mean, d_invstd, C, n, d_sums, d_part, d_dgamma, d_dbeta, S));
    CU(k_batchnorm_backward_cuda(d_dx, d_dy, d_x, d_gamma, d_mean, d_invstd, d_sums, C, n, S));
    get(gdgamma, d_dgamma, sizeof(float) * C), get(gdbeta, d_dbeta, sizeof(float) * C);
    get(gdx, d_dx, sizeof(float) * nx);
    compare("batch norm backward: gamma gradient", gdgamma, dgamma, (size_t)C, TOL);
    compare("batch norm backward: beta gradient", gdbeta, dbeta, (size_t)C, TOL);
    compare("batch norm backward: input gradient", gdx, dx, nx, TOL);
    float db[16], gdb[16], *d_db = dalloc(sizeof(float) * C);
    k_channel_bias_grad(db, dy, C, n);
    CU(k_channel_bias_grad_cuda(d_db, d_dy, C, n, d_part, S));
    get(gdb, d_db, sizeof(float) * C);
    compare("per-channel bias gradient", gdb, db, (size_t)C, TOL);

    /* dropout: the same masks bit for bit, channel-major and row-major */
    uint64_t base[9], keys[9];
    for (int b = 0; b < rows; b++) base[b] = rng_dropout_row_key(5, 77, 1000 + (uint64_t)b * 3), keys[b] = rng_dropout_layer_key(base[b], 4);
    uint64_t *d_base = to_dev(base, sizeof base);
    uint8_t *mask = malloc(nx), *gmask = malloc(nx), *d_mask = dalloc(nx);
    for (int major = 1; major >= 0; major--) {
        int CC = major ? C : C * H * W;
        size_t plane = major ? (size_t)H * W : 1;
        k_dropout_forward(bn, mask, x, keys, rows, CC, plane, major, 0.3f);
        CU(k_dropout_forward_cuda(d_bn, d_mask, d_x, d_base, 4, rows, CC, plane, major, 0.3f, S));
        get(gbn, d_bn, sizeof(float) * nx);
        get(gmask, d_mask, nx);
        CHECK(!memcmp(gmask, mask, nx) && !memcmp(gbn, bn, sizeof(float) * nx), "dropout %s: the same masks",
              major ? "channel-major" : "row-major");
        k_dropout_backward(dx, dy, mask, nx, 0.3f);
        CU(k_dropout_backward_cuda(d_dx, d_dy, d_mask, nx, 0.3f, S));
        get(gdx, d_dx, sizeof(float) * nx);
        CHECK(!memcmp(gdx, dx, sizeof(float) * nx), "dropout backward");
    }
    printf("  %-52s bit-identical\n", "dropout masks (counter-based), forward, backward");
    k_flatten(bn, x, C, rows, (size_t)H * W);
    CU(k_flatten_cuda(d_bn, d_x, C, rows, (size_t)H * W, S));
    get(gbn, d_bn, sizeof(float) * nx);
    k_unflatten(dx, bn, C, rows, (size_t)H * W);
    CU(k_unflatten_cuda(d_dx, d_bn, C, rows, (size_t)H * W, S));
    get(gdx, d_dx, sizeof(float) * nx);
    CHECK(!memcmp(gbn, bn, sizeof(float) * nx) && !memcmp(gdx, x, sizeof(float) * nx), "flatten and back");
    printf("  %-52s bit-identical\n", "flatten, unflatten");
    cudaFree(d_x), cudaFree(d_y), cudaFree(d_at), cudaFree(d_g), cudaFree(d_dx), cudaFree(d_sums), cudaFree(d_part);
    cudaFree(d_gamma), cudaFree(d_beta), cudaFree(d_mean), cudaFree(d_invstd), cudaFree(d_rm), cudaFree(d_rv);
    cudaFree(d_bn), cudaFree(d_dy), cudaFree(d_dgamma), cudaFree(d_dbeta), cudaFree(d_db), cudaFree(d_base),
        cudaFree(d_mask);
    free(x), free(y), free(gy), free(at), free(gat), free(g), free(dx), free(gdx), free(gamma), free(beta), free(bn),
        free(gbn), free(dy), free(mask), free(gmask);
}

/* --- whole models: model_cuda (cuBLAS GEMMs in the row-major trick + the kernels) against model.c --- */

static int ready_order[MODEL_MAX_LAYERS], ready_count;
static void record_ready(void *arg, int layer) {
    (void)arg;
    if (ready_count < MODEL_MAX_LAYERS) ready_order[ready_count++] = layer;
}

/* One training step's forward and backward of `rows` examples on both, through the
 * device layout the engine uses (the memory plan, carved as engine_cuda.c does). */
static void test_model(const model_shape *s, int rows, const char *name, cublasHandle_t blas) {
    size_t P = s->n_params, in_dim = (size_t)s->in_dim;
    float *params = malloc(sizeof(float) * P), *grads = malloc(sizeof(float) * P), *ggrads = malloc(sizeof(float) * P);
    float *stats = malloc(sizeof(float) * (s->n_stats + 1)), *gstats = malloc(sizeof(float) * (s->n_stats + 1));
    model_init_params(s, params, stats, 7);
    for (int l = 0; l < s->n_layers; l++) /* batch norm: gamma and beta that matter */
        if (s->layer[l].kind == LAYER_BATCHNORM2D)
            for (int c = 0; c < s->layer[l].out_c; c++)
                params[s->layer[l].w_off + c] = rng_uniform(&R, 0.5f, 1.5f),
                params[s->layer[l].b_off + c] = rng_uniform(&R, -0.5f, 0.5f);
    float *input = randoms((size_t)rows * in_dim, 0, 1);
    uint8_t *labels = malloc((size_t)rows);
    size_t *ids = malloc(sizeof(size_t) * (size_t)rows);
    uint64_t *row_keys = malloc(sizeof(uint64_t) * (size_t)rows);
    for (int i = 0; i < rows; i++) {
        labels[i] = (uint8_t)rng_below(&R, 10);
        ids[i] = (size_t)rng_below(&R, 60000);
        row_keys[i] = rng_dropout_row_key(42, 3, ids[i]);
    }
    /* The device copies start from the same parameters and statistics. */
    float *d_params = to_dev(params, sizeof(float) * P), *d_grads = dalloc(sizeof(float) * P);
    float *d_stats = to_dev(stats, sizeof(float) * (s->n_stats + 1));

    model_workspace w;
    REQUIRE(model_workspace_init(&w, s, rows) == 0, "workspace");
    memcpy(w.act[0], input, sizeof(float) * rows * in_dim);
    double loss = 0;
    long correct = 0;
    model_pass pass = {.train = 1, .seed = 42, .global_step = 3, .example_ids = ids};
    REQUIRE(model_forward_backward(&w, params, stats, grads, labels, rows, &pass, &loss, &correct, NULL, NULL) == 0,
            "cpu forward_backward");

    memory_plan_input in = {.shape = s, .max_rows = rows, .train = 1, .pixels = in_dim};
    memory_plan plan;
    memory_plan_compute(&in, 0, &plan);
    char *arena = dalloc(plan.arena_bytes);
#define AT(r) ((void *)((r).bytes ? arena + (r).offset : NULL))
    gpu_error ge = {{0}};
    model_cuda m = {.shape = s, .max_rows = rows, .stream = S, .blas = blas, .ge = &ge};
    for (int l = 0; l <= s->n_layers; l++) m.act[l] = AT(plan.act[l]);
    for (int l = 0; l < s->n_layers; l++) {
        m.pre[l] = AT(plan.pre[l]), m.mask[l] = AT(plan.mask[l]), m.argmax[l] = AT(plan.argmax[l]);
        m.bn_mean[l] = AT(plan.bn_mean[l]), m.bn_invstd[l] = AT(plan.bn_invstd[l]);
    }
    m.dz = AT(plan.dz[0]), m.dz_next = AT(plan.dz[1]), m.col = AT(plan.im2col);
    m.bias_partials = AT(plan.bias_partials), m.channel_partials = AT(plan.channel_partials);
    m.bn_sums = AT(plan.bn_sums), m.row_loss = AT(plan.row_loss), m.row_hit = AT(plan.row_hit);
    uint64_t *d_keys = AT(plan.row_keys);
    double *d_out = AT(plan.scalars), out[3];
#undef AT
    put(m.act[0], input, sizeof(float) * rows * in_dim);
    if (d_keys) put(d_keys, row_keys, sizeof(uint64_t) * (size_t)rows);
    uint8_t *d_labels = to_dev(labels, (size_t)rows);
    model_cuda_pass gpass = {.train = 1, .row_keys = d_keys};
    ready_count = 0;
    int ok = model_loss_cuda(&m, d_params, d_stats, d_labels, rows, 1, d_out, 0, &gpass) == 0 &&
             model_backward_cuda(&m, d_params, d_grads, rows, &gpass, record_ready, NULL) == 0;
    REQUIRE(ok, "model_cuda: %s", ge.msg);
    int last = s->n_layers;
    float *logits = malloc(sizeof(float) * rows * s->num_classes);
    get(logits, m.act[last], sizeof(float) * rows * s->num_classes);
    get(ggrads, d_grads, sizeof(float) * P);
    get(out, d_out, sizeof out);
    get(gstats, d_stats, sizeof(float) * (s->n_stats + 1));

    char what[160];
    snprintf(what, sizeof what, "logits (%s)", name);
    compare(what, logits, w.act[last], (size_t)rows * s->num_classes, TOL);
    snprintf(what, sizeof what, "loss (%s)", name);
    compare_scalar(what, out[0], loss, TOL);
    for (int l = s->n_layers - 1; l >= 0; l--) {
        const model_layer *L = &s->layer[l];
        if (L->kind == LAYER_DROPOUT) {
            uint8_t *gm = malloc((size_t)rows * model_layer_out_size(s, l));
            get(gm, m.mask[l], (size_t)rows * model_layer_out_size(s, l));
            CHECK(!memcmp(gm, w.mask[l], (size_t)rows * model_layer_out_size(s, l)), "%s: layer %d: dropout masks",
                  name, l);
            free(gm);
        }
        if (!model_layer_has_params(s, l)) continue;
        snprintf(what, sizeof what, "%s %d weight gradient (%s)", layer_kind_name(L->kind), l, name);
        compare(what, ggrads + L->w_off, grads + L->w_off, L->n_w, TOL);
        if (L->n_b) {
            snprintf(what, sizeof what, "%s %d bias gradient (%s)", layer_kind_name(L->kind), l, name);
            compare(what, ggrads + L->b_off, grads + L->b_off, L->n_b, TOL);
        }
    }
    if (s->n_stats) {
        snprintf(what, sizeof what, "batch norm running statistics (%s)", name);
        compare(what, gstats, stats, s->n_stats, TOL);
    }
    int order_ok = ready_count == s->n_param_layers;
    for (int i = 0, l = s->n_layers - 1; i < ready_count; i++, l--) {
        while (l >= 0 && !model_layer_has_params(s, l)) l--;
        order_ok &= ready_order[i] == l;
    }
    CHECK(order_ok, "%s: ready() is called once per layer with parameters, from the last to the first", name);

    cudaFree(arena), cudaFree(d_params), cudaFree(d_grads), cudaFree(d_stats), cudaFree(d_labels);
    model_workspace_free(&w);
    free(params), free(grads), free(ggrads), free(stats), free(gstats), free(input), free(labels), free(ids),
        free(row_keys), free(logits);
}

static void test_mlp(int in_dim, const int *hidden, int n_hidden, int rows, activation_kind act, cublasHandle_t blas) {
    model_shape s;
    model_shape_mlp(&s, in_dim, hidden, n_hidden, 10, act);
    char name[96];
    int k = snprintf(name, sizeof name, "%d", in_dim);
    for (int l = 0; l < n_hidden; l++) k += snprintf(name + k, sizeof name - (size_t)k, "-%d", hidden[l]);
    snprintf(name + k, sizeof name - (size_t)k, "-10 x %d rows, %s", rows, act_name(act));
    test_model(&s, rows, name, blas);
}

/* CNNs: the default network, and one with stride, batch norm, dropout and gelu. */
static void test_cnns(cublasHandle_t blas) {
    run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.model.type = MODEL_CNN;
    cfg.model.activation = ACT_RELU;
    cfg.model.cnn.conv[0] = (conv_block_config){32, 5, 1, 2, 2, false, 0};
    cfg.model.cnn.conv[1] = (conv_block_config){64, 5, 1, 2, 2, false, 0};
    cfg.model.cnn.n_conv = 2;
    cfg.model.cnn.fc[0] = 1024;
    cfg.model.cnn.n_fc = 1;
    model_shape s;
    char err[256];
    REQUIRE(model_shape_init(&s, &cfg, 1, 28, 28, 10, err, sizeof err) == 0, "%s", err);
    test_model(&s, 64, "the default CNN, 64 rows", blas);

    cfg.model.activation = ACT_GELU;
    cfg.model.cnn.conv[0] = (conv_block_config){8, 3, 2, 1, 1, true, 0.2};
    cfg.model.cnn.conv[1] = (conv_block_config){12, 3, 1, 1, 2, true, 0};
    cfg.model.cnn.fc[0] = 40;
    cfg.model.cnn.dropout = 0.5;
    REQUIRE(model_shape_init(&s, &cfg, 1, 28, 28, 10, err, sizeof err) == 0, "%s", err);
    test_model(&s, 50, "CNN, stride 2, batch norm, dropout, gelu", blas);
}

/* optimizer_step_cuda against optimizer_step: SGD (plain, momentum, nesterov,
 * weight decay), Adam (with L2 decay) and AdamW, over a few steps. */
static void test_optimizers(void) {
    struct {
        optimizer_kind type;
        double momentum, wd;
        int nesterov;
        const char *name;
    } cases[] = {
        {OPT_SGD, 0, 0, 0, "sgd"},
        {OPT_SGD, 0.9, 1e-2, 0, "sgd momentum 0.9, weight decay 0.01"},
        {OPT_SGD, 0.9, 0, 1, "sgd nesterov 0.9"},
        {OPT_ADAM, 0, 0, 0, "adam"},
        {OPT_ADAM, 0, 1e-2, 0, "adam, weight decay 0.01"},
        {OPT_ADAMW, 0, 1e-2, 0, "adamw, weight decay 0.01"},
    };
    size_t n = 10007;
    char what[128];
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        run_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.train.optimizer.type = cases[c].type;
        cfg.train.optimizer.momentum = cases[c].momentum;
        cfg.train.optimizer.weight_decay = cases[c].wd;
        cfg.train.optimizer.nesterov = cases[c].nesterov;
        cfg.train.optimizer.beta1 = 0.9;
        cfg.train.optimizer.beta2 = 0.999;
        cfg.train.optimizer.eps = 1e-8;
        optimizer oc, og;
        REQUIRE(optimizer_init(&oc, &cfg, n) == 0 && optimizer_init(&og, &cfg, n) == 0, "optimizer_init");
        float *p = randoms(n, -0.5f, 0.5f), *gp = malloc(sizeof(float) * n), *gs = malloc(sizeof(float) * n);
        float *d_p = to_dev(p, sizeof(float) * n), *d_g = dalloc(sizeof(float) * n);
        float *d_s1 = oc.state1 ? dalloc(sizeof(float) * n) : NULL, *d_s2 = oc.state2 ? dalloc(sizeof(float) * n) : NULL;
        gpu_error ge = {{0}};
        for (int step = 0; step < 4; step++) {
            float *g = randoms(n, -0.2f, 0.2f);
            put(d_g, g, sizeof(float) * n);
            double lr = 0.01 * (step + 1);
            optimizer_step(&oc, p, g, lr);
            REQUIRE(optimizer_step_cuda(&og, d_p, d_g, d_s1, d_s2, lr, S, &ge) == 0, "%s", ge.msg);
            free(g);
        }
        CHECK(og.step == oc.step, "step counts");
        get(gp, d_p, sizeof(float) * n);
        snprintf(what, sizeof what, "%s: parameters after 4 steps", cases[c].name);
        compare(what, gp, p, n, TOL);
        if (d_s1) {
            get(gs, d_s1, sizeof(float) * n);
            snprintf(what, sizeof what, "%s: %s", cases[c].name, optimizer_state1_name(&oc));
            compare(what, gs, oc.state1, n, TOL);
        }
        if (d_s2) {
            get(gs, d_s2, sizeof(float) * n);
            snprintf(what, sizeof what, "%s: exp_avg_sq", cases[c].name);
            compare(what, gs, oc.state2, n, TOL);
        }
        cudaFree(d_p), cudaFree(d_g), cudaFree(d_s1), cudaFree(d_s2);
        optimizer_free(&oc), optimizer_free(&og);
        free(p), free(gp), free(gs);
    }
}

/* clip_grad_norm_cuda_step against clip_grad_norm, clipping and not. */
static void test_clip(void) {
    size_t n = 100003;
    double *d_part = dalloc(sizeof(double) * KC_NORM_BLOCKS), *d_sumsq = dalloc(sizeof(double)), sumsq;
    float *g0 = randoms(n, -1, 1), *g = malloc(sizeof(float) * n), *gg = malloc(sizeof(float) * n);
    float *d_g = dalloc(sizeof(float) * n);
    gpu_error ge = {{0}};
    double limits[] = {1.0, 1e9};
    for (int i = 0; i < 2; i++) {
        memcpy(g, g0, sizeof(float) * n);
        put(d_g, g0, sizeof(float) * n);
        double norm = clip_grad_norm(g, n, limits[i]);
        REQUIRE(clip_grad_norm_cuda_step(d_g, n, limits[i], d_part, d_sumsq, S, &ge) == 0, "%s", ge.msg);
        get(gg, d_g, sizeof(float) * n);
        get(&sumsq, d_sumsq, sizeof sumsq);
        compare_scalar(i ? "gradient L2 norm (no clipping)" : "gradient L2 norm", sqrt(sumsq), norm, TOL);
        compare(i ? "gradients, max norm above the norm" : "gradients clipped to norm 1", gg, g, n, TOL);
        if (i) CHECK(memcmp(gg, g0, sizeof(float) * n) == 0, "no clipping leaves the gradients untouched");
    }
    cudaFree(d_part), cudaFree(d_sumsq), cudaFree(d_g);
    free(g0), free(g), free(gg);
}

/* The fixed-order reduce-scatter's sum (k_parts_avg_cuda) against the cpu
 * collectives' (reduce_scatter_parts_f32_ex, all parts on one rank): the same bits,
 * so that a GPU run of a width sums its shards as a CPU run does. */
static void test_parts_avg(void) {
    const int widths[] = {1, 2, 3, 4, 8};
    size_t n = 70001, stride = (n + 15) / 16 * 16;
    for (size_t w = 0; w < sizeof widths / sizeof widths[0]; w++) {
        int width = widths[w];
        coll_cpu_group *g = coll_cpu_group_create(1, sizeof(float) * stride * (size_t)width + 4096);
        REQUIRE(g != NULL, "cpu group");
        coll_comm *c = coll_cpu_attach(g, 0);
        REQUIRE(c && coll_set_width(c, width) == 0, "width %d on one rank", width);
        float *parts = c->alloc(c, sizeof(float) * stride * (size_t)width), *src = malloc(sizeof(float) * n * width);
        float *got = malloc(sizeof(float) * n);
        REQUIRE(parts && src && got, "buffers");
        for (int s = 0; s < width; s++) {
            float *x = randoms(n, -1, 1);
            for (size_t i = 0; i < n; i++) x[i] = ldexpf(x[i], (int)(i % 13) - 6); /* orders of magnitude apart */
            memcpy(parts + (size_t)s * stride, x, sizeof(float) * n);
            memcpy(src + (size_t)s * n, x, sizeof(float) * n);
            free(x);
        }
        float *d_src = to_dev(src, sizeof(float) * n * width), *d_dst = dalloc(sizeof(float) * n);
        CU(k_parts_avg_cuda(d_dst, d_src, n, n, width, S));
        get(got, d_dst, sizeof(float) * n);
        REQUIRE(c->reduce_scatter_parts_f32_ex(c, parts, stride, n, NULL, 0, NULL, NULL) == 0, "cpu parts reduce");
        CHECK(memcmp(got, parts, sizeof(float) * n) == 0, "width %d: the GPU's shard-order sum has the cpu's bits",
              width);
        printf("  %-52s bit-identical: %s\n", width == 1 ? "parts average, width 1" : "parts average, width > 1",
               memcmp(got, parts, sizeof(float) * n) == 0 ? "yes" : "NO");
        cudaFree(d_src), cudaFree(d_dst);
        free(src), free(got);
        free(c); /* a rank's comm lives until its process exits; this one is ours: one calloc */
        coll_cpu_group_destroy(g);
    }
}

/* The reductions (bias gradient, loss, norm) twice on the same input: same bits. */
static void test_determinism(void) {
    int rows = 8192, cols = 4096;
    size_t n = (size_t)rows * cols;
    float *dz = randoms(n, -1, 1);
    float *d_dz = to_dev(dz, sizeof(float) * n), *d_db = dalloc(sizeof(float) * cols);
    float *d_part = dalloc(sizeof(float) * KC_BIAS_GRAD_MAX_CHUNKS * cols);
    float *a = malloc(sizeof(float) * cols), *b = malloc(sizeof(float) * cols);
    double *d_np = dalloc(sizeof(double) * KC_NORM_BLOCKS), *d_ss = dalloc(sizeof(double)), s1, s2;
    float *d_loss = dalloc(sizeof(float) * rows);
    int *d_hit = dalloc(sizeof(int) * rows);
    double *d_out = dalloc(sizeof(double) * 3), o1[3], o2[3];
    CU(cudaMemcpy(d_loss, dz, sizeof(float) * rows, cudaMemcpyHostToDevice));
    gpu_error ge = {{0}};
    for (int pass = 0; pass < 2; pass++) {
        CU(k_bias_grad_cuda(d_db, d_dz, rows, cols, d_part, S));
        get(pass ? b : a, d_db, sizeof(float) * cols);
        REQUIRE(clip_grad_norm_cuda_step(d_dz, n, 1e30, d_np, d_ss, S, &ge) == 0, "%s", ge.msg);
        get(pass ? &s2 : &s1, d_ss, sizeof(double));
        CU(k_loss_reduce_cuda(d_out, d_loss, d_hit, rows, 0, S));
        get(pass ? o2 : o1, d_out, sizeof o1);
    }
    CHECK(memcmp(a, b, sizeof(float) * cols) == 0, "bias gradient differs between two runs");
    CHECK(memcmp(&s1, &s2, sizeof s1) == 0, "gradient norm differs between two runs");
    CHECK(memcmp(o1, o2, sizeof o1) == 0, "loss sum differs between two runs");
    printf("  %-52s %s\n", "reductions run twice (8192 x 4096)", "bit-identical");
    cudaFree(d_dz), cudaFree(d_db), cudaFree(d_part), cudaFree(d_np), cudaFree(d_ss), cudaFree(d_loss),
        cudaFree(d_hit), cudaFree(d_out);
    free(dz), free(a), free(b);
}

int main(void) {
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount: 0");
        return 77;
    }
    struct cudaDeviceProp prop;
    CU(cudaGetDeviceProperties(&prop, 0));
    printf("device 0: %s\n", prop.name);
    rng_seed(&R, 1234, 99);
    CU(cudaStreamCreate(&S));
    cublasHandle_t blas;
    REQUIRE(cublasCreate(&blas) == CUBLAS_STATUS_SUCCESS, "cublasCreate");
    REQUIRE(cublasSetStream(blas, S) == CUBLAS_STATUS_SUCCESS, "cublasSetStream");
    REQUIRE(cublasSetMathMode(blas, CUBLAS_DEFAULT_MATH) == CUBLAS_STATUS_SUCCESS, "cublasSetMathMode");

    test_gather();
    test_bias_act();
    test_bias_grad();
    test_softmax_xent();
    int small[] = {33, 17}, wide[] = {256, 128};
    for (int act = ACT_RELU; act <= ACT_TANH; act++) {
        test_mlp(50, small, 2, 29, (activation_kind)act, blas);
        test_mlp(784, wide, 2, 200, (activation_kind)act, blas);
    }
    test_im2col();
    test_cnn_layer_kernels();
    test_cnns(blas);
    test_optimizers();
    test_clip();
    test_parts_avg();
    test_determinism();
    printf("kernels vs the CPU reference: largest relative error %.2e (target %.0e): %s\n", worst, TOL,
           worst <= TOL ? "met" : "MISSED");
    cublasDestroy(blas);
    return test_done("test_gpu_kernels");
}

#endif
