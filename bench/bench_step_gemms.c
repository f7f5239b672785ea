/* Times the GEMMs of one MLP training step alone (forward, weight gradients, input
 * gradients but the first layer's, exactly the calls the trainer makes), single
 * threaded, and prints the samples/s they would allow: the ceiling for the step.
 * usage: bench_step_gemms [--seconds S] BATCH IN H1 [H2 ...] CLASSES   (S: 3 by default) */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static float *filled(size_t n) {
    float *p = malloc(sizeof(float) * n);
    for (size_t i = 0; i < n; i++) p[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
    return p;
}

int main(int argc, char **argv) {
    double seconds = 3.0;
    if (argc > 2 && strcmp(argv[1], "--seconds") == 0) {
        seconds = atof(argv[2]);
        argc -= 2, argv += 2;
    }
    if (argc < 4 || seconds <= 0) {
        fprintf(stderr, "usage: bench_step_gemms [--seconds S] BATCH IN H1 [H2 ...] CLASSES\n");
        return 2;
    }
    openblas_set_num_threads(1);
    int B = atoi(argv[1]), L = argc - 3, dims[32];
    for (int i = 0; i <= L && i < 32; i++) dims[i] = atoi(argv[2 + i]);
    float *w[32], *dw[32], *a[33], *d0, *d1;
    int widest = 0;
    for (int l = 0; l <= L; l++) widest = dims[l] > widest ? dims[l] : widest;
    for (int l = 0; l < L; l++) {
        w[l] = filled((size_t)dims[l] * dims[l + 1]);
        dw[l] = filled((size_t)dims[l] * dims[l + 1]);
    }
    for (int l = 0; l <= L; l++) a[l] = filled((size_t)B * dims[l]);
    d0 = filled((size_t)B * widest);
    d1 = filled((size_t)B * widest);
    double flops = 0;
    for (int l = 0; l < L; l++) flops += 2.0 * B * dims[l] * dims[l + 1] * (l == 0 ? 2 : 3);
    int iters = 0;
    double t0 = now(), best = 1e9;
    while (now() - t0 < seconds || iters < 20) {
        double s = now();
        for (int l = 0; l < L; l++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, B, dims[l + 1], dims[l], 1, a[l], dims[l], w[l],
                        dims[l], 0, a[l + 1], dims[l + 1]);
        for (int l = L - 1; l >= 0; l--) {
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, dims[l + 1], dims[l], B, 1, d0, dims[l + 1], a[l],
                        dims[l], 0, dw[l], dims[l]);
            if (l > 0)
                cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, B, dims[l], dims[l + 1], 1, d0, dims[l + 1],
                            w[l], dims[l], 0, d1, dims[l]);
        }
        double dt = now() - s;
        if (dt < best) best = dt;
        iters++;
    }
    double mean = (now() - t0) / iters;
    printf("{\"batch\": %d, \"gemm_step_ms\": %.4f, \"gemm_step_ms_best\": %.4f, \"gflops\": %.2f, "
           "\"gemm_only_samples_per_s\": %.1f}\n",
           B, mean * 1e3, best * 1e3, flops / mean * 1e-9, B / mean);
    return 0;
}
