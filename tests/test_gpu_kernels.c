/* Each CUDA kernel against its CPU reference (trainer/cuda/kernels.h against
 * trainer/cpu_kernels.h, optim_cuda against optim.c, mlp_cuda's cuBLAS GEMMs
 * against mlp.c's BLAS), forward and backward, within 1e-4 relative (the largest
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

#include "cpu_kernels.h"
#include "cuda/kernels.h"
#include "cuda/mlp_cuda.h"
#include "cuda/optim_cuda.h"
#include "mlp.h"
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

static int ready_order[MLP_MAX_LAYERS], ready_count;
static void record_ready(void *arg, int layer) {
    (void)arg;
    if (ready_count < MLP_MAX_LAYERS) ready_order[ready_count++] = layer;
}

/* mlp_cuda (cuBLAS GEMMs in the row-major trick + the kernels) against mlp.c. */
static void test_mlp(int in_dim, const int *hidden, int n_hidden, int rows, activation_kind act, cublasHandle_t blas) {
    mlp_shape s;
    mlp_shape_init(&s, in_dim, hidden, n_hidden, 10, act);
    size_t P = s.n_params;
    float *params = malloc(sizeof(float) * P), *grads = malloc(sizeof(float) * P), *ggrads = malloc(sizeof(float) * P);
    mlp_init_params(&s, params, 7);
    float *input = randoms((size_t)rows * in_dim, 0, 1);
    uint8_t *labels = malloc((size_t)rows);
    for (int i = 0; i < rows; i++) labels[i] = (uint8_t)rng_below(&R, 10);

    mlp_workspace w;
    REQUIRE(mlp_workspace_init(&w, &s, rows) == 0, "workspace");
    memcpy(w.act[0], input, sizeof(float) * rows * in_dim);
    double loss = 0;
    long correct = 0;
    mlp_forward_backward(&w, params, grads, labels, rows, &loss, &correct, NULL, NULL);

    gpu_error ge = {{0}};
    mlp_cuda m = {.shape = &s, .max_rows = rows, .stream = S, .blas = blas, .ge = &ge};
    int widest = in_dim;
    for (int l = 0; l < s.n_layers; l++) {
        if (s.layer[l].out > widest) widest = s.layer[l].out;
        m.act[l + 1] = dalloc(sizeof(float) * rows * s.layer[l].out);
        if (act == ACT_GELU && l < s.n_layers - 1) m.pre[l] = dalloc(sizeof(float) * rows * s.layer[l].out);
    }
    m.act[0] = to_dev(input, sizeof(float) * rows * in_dim);
    m.dz = dalloc(sizeof(float) * rows * widest);
    m.dz_next = dalloc(sizeof(float) * rows * widest);
    m.bias_partials = dalloc(sizeof(float) * KC_BIAS_GRAD_MAX_CHUNKS * widest);
    m.row_loss = dalloc(sizeof(float) * rows);
    m.row_hit = dalloc(sizeof(int) * rows);
    float *d_params = to_dev(params, sizeof(float) * P), *d_grads = dalloc(sizeof(float) * P);
    uint8_t *d_labels = to_dev(labels, (size_t)rows);
    double *d_out = dalloc(sizeof(double) * 3), out[3];
    ready_count = 0;
    int ok = mlp_loss_cuda(&m, d_params, d_labels, rows, 1, d_out, 0) == 0 &&
             mlp_backward_cuda(&m, d_params, d_grads, rows, record_ready, NULL) == 0;
    REQUIRE(ok, "mlp_cuda: %s", ge.msg);
    int last = s.n_layers;
    float *logits = malloc(sizeof(float) * rows * 10);
    get(logits, m.act[last], sizeof(float) * rows * 10);
    get(ggrads, d_grads, sizeof(float) * P);
    get(out, d_out, sizeof out);

    char what[128], dims[64];
    int k = snprintf(dims, sizeof dims, "%d", in_dim);
    for (int l = 0; l < n_hidden; l++) k += snprintf(dims + k, sizeof dims - (size_t)k, "-%d", hidden[l]);
    snprintf(dims + k, sizeof dims - (size_t)k, "-10 x %d rows, %s", rows, act_name(act));
    snprintf(what, sizeof what, "forward GEMMs, logits (%s)", dims);
    compare(what, logits, w.act[last], (size_t)rows * 10, TOL);
    snprintf(what, sizeof what, "loss (%s)", dims);
    compare_scalar(what, out[0], loss, TOL);
    for (int l = s.n_layers - 1; l >= 0; l--) {
        const mlp_layer *L = &s.layer[l];
        snprintf(what, sizeof what, "backward GEMM dW, layer %d (%s)", l, dims);
        compare(what, ggrads + L->w_off, grads + L->w_off, (size_t)L->in * L->out, TOL);
        snprintf(what, sizeof what, "bias gradient, layer %d (%s)", l, dims);
        compare(what, ggrads + L->b_off, grads + L->b_off, (size_t)L->out, TOL);
    }
    int order_ok = ready_count == s.n_layers;
    for (int i = 0; i < ready_count; i++) order_ok &= ready_order[i] == s.n_layers - 1 - i;
    CHECK(order_ok, "ready() is called once per layer, from the last to the first");

    for (int l = 0; l <= s.n_layers; l++) cudaFree(m.act[l]);
    for (int l = 0; l < s.n_layers; l++) cudaFree(m.pre[l]);
    cudaFree(m.dz), cudaFree(m.dz_next), cudaFree(m.bias_partials), cudaFree(m.row_loss), cudaFree(m.row_hit);
    cudaFree(d_params), cudaFree(d_grads), cudaFree(d_labels), cudaFree(d_out);
    mlp_workspace_free(&w);
    free(params), free(grads), free(ggrads), free(input), free(labels), free(logits);
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
    test_optimizers();
    test_clip();
    test_determinism();
    printf("kernels vs the CPU reference: largest relative error %.2e (target %.0e): %s\n", worst, TOL,
           worst <= TOL ? "met" : "MISSED");
    cublasDestroy(blas);
    return test_done("test_gpu_kernels");
}

#endif
