/* The GPU step benchmark: samples/s of the cuda engine's training step (the very
 * code ddp-trainer runs: gather, forward, loss, backward, Adam) for an MLP, or the
 * default CNN (--model cnn: 5x5 conv 32, pool, 5x5 conv 64, pool, fc 1024, fc 10),
 * at a few per-rank batch sizes on one GPU, the FLOP rate that step achieves, and
 * the GPU's measured SGEMM peak (cuBLAS, 8192^3 on random data, FP32 as the trainer
 * runs by default) that rate is held against.
 *   bench_gpu_step [--model mlp|cnn] [--batch N]... [--hidden 4096,4096] [--steps N] [--data DIR]
 * Prints one line per measurement and a JSON line per batch ("bench_gpu_step: {...}")
 * for scripts/gpu-check.sh. Without a GPU: SKIPPED, exit 77. */
#include <stdio.h>

#include "ddpd_build_config.h"

#if !DDPD_NCCL_BACKEND
int main(void) {
    printf("SKIPPED: no CUDA device (this build has no CUDA toolkit)\n");
    return 77;
}
#else

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/coll_nccl.h"
#include "cuda/engine_cuda.h"
#include "engine.h"
#include "idx.h"
#include "rng.h"
#include "sampler.h"

#define WARMUP_STEPS 10
#define MAX_BATCHES 8

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "bench_gpu_step: %s: %s\n", what, why);
    exit(1);
}

static void cu(cudaError_t e, const char *call) {
    if (e != cudaSuccess) die(call, cudaGetErrorString(e));
}

static void blas(cublasStatus_t s, const char *call) {
    if (s != CUBLAS_STATUS_SUCCESS) die(call, cublasGetStatusString(s));
}

/* cuBLAS SGEMM m = n = k = `dim` on random data, in `mode`: TFLOP/s, the best of a
 * few timed runs. */
static double sgemm_peak(int dim, cublasMath_t mode) {
    size_t n = (size_t)dim * dim;
    float *a, *b, *c;
    cu(cudaMalloc((void **)&a, n * sizeof(float)), "cudaMalloc");
    cu(cudaMalloc((void **)&b, n * sizeof(float)), "cudaMalloc");
    cu(cudaMalloc((void **)&c, n * sizeof(float)), "cudaMalloc");
    /* Random operands: a GPU multiplying zeros draws less power and may hold a higher
     * clock than it can on real data, which would flatter the peak. */
    float *host = malloc(n * sizeof(float));
    if (!host) die("sgemm_peak", "out of memory");
    rng_state r;
    rng_seed(&r, 8192, 1);
    for (size_t i = 0; i < n; i++) host[i] = rng_uniform(&r, -1.0f, 1.0f);
    cu(cudaMemcpy(a, host, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    for (size_t i = 0; i < n; i++) host[i] = rng_uniform(&r, -1.0f, 1.0f);
    cu(cudaMemcpy(b, host, n * sizeof(float), cudaMemcpyHostToDevice), "cudaMemcpy");
    free(host);
    cublasHandle_t h;
    blas(cublasCreate(&h), "cublasCreate");
    blas(cublasSetMathMode(h, mode), "cublasSetMathMode");
    cudaEvent_t t0, t1;
    cu(cudaEventCreate(&t0), "cudaEventCreate");
    cu(cudaEventCreate(&t1), "cudaEventCreate");
    const float one = 1.0f, zero = 0.0f;
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        int calls = rep == 0 ? 1 : 5; /* the first round warms up */
        cu(cudaEventRecord(t0, 0), "cudaEventRecord");
        for (int i = 0; i < calls; i++)
            blas(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, dim, dim, dim, &one, a, dim, b, dim, &zero, c, dim),
                 "cublasSgemm");
        cu(cudaEventRecord(t1, 0), "cudaEventRecord");
        cu(cudaEventSynchronize(t1), "cudaEventSynchronize");
        float ms = 0;
        cu(cudaEventElapsedTime(&ms, t0, t1), "cudaEventElapsedTime");
        double tflops = 2.0 * dim * (double)dim * dim * calls / (ms * 1e-3) / 1e12;
        if (rep > 0 && tflops > best) best = tflops;
    }
    cudaEventDestroy(t0);
    cudaEventDestroy(t1);
    cublasDestroy(h);
    cudaFree(a), cudaFree(b), cudaFree(c);
    return best;
}

/* FLOPs of one training step of `rows` examples (the GEMMs): forward and the
 * weight gradients for every linear and conv2d layer, the input gradient for all
 * but the first. */
static double step_flops(const model_shape *s, int rows) {
    double f = 0;
    for (int l = 0; l < s->n_layers; l++) {
        const model_layer *L = &s->layer[l];
        double mac;
        if (L->kind == LAYER_LINEAR) mac = (double)rows * L->in_c * L->out_c;
        else if (L->kind == LAYER_CONV2D)
            mac = (double)rows * L->out_h * L->out_w * L->out_c * L->in_c * L->kernel * L->kernel;
        else continue;
        f += 2 * mac * (l == s->first_trained ? 2 : 3);
    }
    return f;
}

static idx_dataset load_or_synthesize(const char *dir) {
    idx_dataset d;
    char images[1024], labels[1024], err[512];
    snprintf(images, sizeof images, "%s/train-images-idx3-ubyte.gz", dir);
    snprintf(labels, sizeof labels, "%s/train-labels-idx1-ubyte.gz", dir);
    if (idx_load(NULL, images, labels, 0, &d, err, sizeof err) == 0) {
        printf("data: Fashion-MNIST training set from %s (%zu examples)\n", dir, d.count);
        return d;
    }
    printf("data: synthetic, 60000 examples of 28x28 (%s)\n", err);
    memset(&d, 0, sizeof d);
    d.count = 60000, d.rows = 28, d.cols = 28, d.num_classes = 10;
    d.images = malloc(d.count * 784);
    d.labels = malloc(d.count);
    rng_state r;
    rng_seed(&r, 1, 1);
    for (size_t i = 0; i < d.count * 784; i++) d.images[i] = (uint8_t)rng_below(&r, 256);
    for (size_t i = 0; i < d.count; i++) d.labels[i] = (uint8_t)rng_below(&r, 10);
    return d;
}

int main(int argc, char **argv) {
    int batches[MAX_BATCHES], n_batches = 0, steps = 50, hidden[RUN_CONFIG_MAX_HIDDEN] = {4096, 4096}, n_hidden = 2;
    int cnn = 0;
    const char *data_dir = "/usr/share/datasets/fashion-mnist";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--batch") && i + 1 < argc && n_batches < MAX_BATCHES) batches[n_batches++] = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--model") && i + 1 < argc) cnn = !strcmp(argv[++i], "cnn");
        else if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--data") && i + 1 < argc) data_dir = argv[++i];
        else if (!strcmp(argv[i], "--hidden") && i + 1 < argc) {
            n_hidden = 0;
            for (char *t = strtok(argv[++i], ","); t && n_hidden < RUN_CONFIG_MAX_HIDDEN; t = strtok(NULL, ","))
                hidden[n_hidden++] = atoi(t);
        } else {
            fprintf(stderr, "usage: bench_gpu_step [--model mlp|cnn] [--batch N]... [--hidden 4096,4096] [--steps N] "
                            "[--data DIR]\n");
            return 2;
        }
    }
    if (!n_batches) batches[n_batches++] = 1024, batches[n_batches++] = 8192;

    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount: 0");
        return 77;
    }
    char why[1024], device[128];
    nccl_rendezvous rv;
    if (nccl_rendezvous_create(&rv, 1, why, sizeof why) != 0) die("rendezvous", why);
    coll_comm *comm = coll_nccl_attach(&rv, 0, NULL, device, sizeof device, why, sizeof why);
    if (!comm) die("coll_nccl_attach", why);
    printf("device: %s\n", device);

    double peak = sgemm_peak(8192, CUBLAS_DEFAULT_MATH);
    double peak_tf32 = sgemm_peak(8192, CUBLAS_TF32_TENSOR_OP_MATH);
    printf("cuBLAS SGEMM 8192^3 peak: %.1f TFLOP/s FP32 (TF32 tensor cores: %.1f TFLOP/s, not used by default)\n", peak,
           peak_tf32);

    idx_dataset train = load_or_synthesize(data_dir);
    for (int b = 0; b < n_batches; b++) {
        int batch = batches[b];
        run_config cfg;
        memset(&cfg, 0, sizeof cfg);
        cfg.seed = 42;
        memcpy(cfg.model.hidden, hidden, sizeof hidden);
        cfg.model.n_hidden = n_hidden;
        cfg.model.activation = ACT_RELU;
        if (cnn) { /* the schema's default: the classic 2-conv network */
            cfg.model.type = MODEL_CNN;
            cfg.model.cnn.conv[0] = (conv_block_config){32, 5, 1, 2, 2, false, 0};
            cfg.model.cnn.conv[1] = (conv_block_config){64, 5, 1, 2, 2, false, 0};
            cfg.model.cnn.n_conv = 2;
            cfg.model.cnn.fc[0] = 1024;
            cfg.model.cnn.n_fc = 1;
        }
        cfg.train.batch_size = batch;
        cfg.train.optimizer.type = OPT_ADAM;
        cfg.train.optimizer.lr = 1e-3;
        cfg.train.optimizer.beta1 = 0.9;
        cfg.train.optimizer.beta2 = 0.999;
        cfg.train.optimizer.eps = 1e-8;
        cfg.distributed.world_size = 1;
        cfg.distributed.gpu_memory_fraction = 1.0;
        cfg.distributed.bucket_mb = 25;
        engine_params p = {.cfg = &cfg, .comm = comm, .train = &train, .test = &train,
                           .max_rows = batch > 512 ? batch : 512};
        char err[1024];
        engine *eng = engine_cuda_create(&p, err, sizeof err);
        if (!eng) die("engine_cuda_create", err);
        if (eng->ops->init_params(eng, cfg.seed) != 0) die("init_params", coll_nccl_failure(comm));
        dist_sampler s;
        if (sampler_init(&s, train.count, 1, 0, cfg.seed) != 0) die("sampler_init", "out of memory");
        long per_epoch = (long)(train.count / (size_t)batch), epoch = 0, k = 0;
        sampler_set_epoch(&s, 0);
        double loss = 0, t0 = 0;
        for (int i = 0; i < WARMUP_STEPS + steps; i++) {
            if (i == WARMUP_STEPS) {
                cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
                t0 = now_s();
            }
            if (k == per_epoch) sampler_set_epoch(&s, (int)++epoch), k = 0;
            const size_t *idx = s.indices + (size_t)k * batch;
            if (eng->ops->step(eng, &idx, &batch, 1e-3, i, &loss) != 0)
                die("step", coll_nccl_failure(comm));
            k++;
        }
        cu(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
        double secs = now_s() - t0;
        double sps = steps * (double)batch / secs, tflops = step_flops(&eng->shape, batch) * steps / secs / 1e12;
        char dims[128];
        int n = snprintf(dims, sizeof dims, "%s %d", cnn ? "CNN" : "MLP", eng->shape.in_dim);
        for (int l = 0; l < eng->shape.n_layers && !cnn; l++)
            n += snprintf(dims + n, sizeof dims - (size_t)n, "-%d", eng->shape.layer[l].out_c);
        if (cnn) snprintf(dims + n, sizeof dims - (size_t)n, "-c32-c64-1024-10");
        printf("ddp-trainer step, %s, Adam, batch %d: %.0f samples/s, %.2f ms/step, %.1f TFLOP/s "
               "(%.0f%% of the SGEMM peak), last loss %.4f\n",
               dims, batch, sps, secs / steps * 1e3, tflops, 100 * tflops / peak, loss);
        printf("bench_gpu_step: {\"model\": \"%s\", \"batch\": %d, \"samples_per_s\": %.1f, \"step_ms\": %.4f, "
               "\"tflops\": %.3f, \"sgemm_peak_tflops\": %.3f, \"efficiency\": %.4f, \"device\": \"%s\"}\n",
               cnn ? "cnn" : "mlp", batch, sps, secs / steps * 1e3, tflops, peak, tflops / peak, device);
        sampler_free(&s);
        eng->ops->destroy(eng);
    }
    return 0;
}

#endif
