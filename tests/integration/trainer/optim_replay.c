/* optim_replay: runs ddp-trainer's optimizer and LR schedule over given parameters
 * and gradients, for tests/integration/trainer/test_optim_torch.py to hold against torch.optim
 * and torch.optim.lr_scheduler.
 *   optim_replay --config RUN.json --steps-per-epoch S --params P.f32 --grads G.f32
 *                --out OUT.f32 [--gpu]
 * P.f32: n floats; G.f32: one gradient of n floats per step. Each step t (epoch
 * t / S, step t % S) clips the gradient when train.grad_clip_norm is set, then
 * updates with lr_at's LR. OUT.f32 gets the parameters, then the optimizer's state
 * buffers (exp_avg, exp_avg_sq; momentum_buffer). Prints one JSON line: the LR of
 * every step and the state buffers' names. --gpu (builds with CUDA) runs the
 * update on the GPU (optim_cuda.c, optim_kernels.cu): on a GPU, or on the CPU
 * stand-in of tests/support/fake_cuda.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ddpd_build_config.h"
#include "lr_schedule.h"
#include "optim.h"
#include "run_config.h"
#if DDPD_NCCL_BACKEND
#include <cuda_runtime_api.h>

#include "cuda/kernels.h"
#include "cuda/optim_cuda.h"
#endif

static void die(const char *what) {
    fprintf(stderr, "optim_replay: %s\n", what);
    exit(2);
}

static float *read_floats(const char *path, size_t *count) {
    FILE *f = fopen(path, "rb");
    if (!f) die(path);
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)bytes + sizeof(float));
    if (!v || fread(v, 1, (size_t)bytes, f) != (size_t)bytes) die(path);
    fclose(f);
    *count = (size_t)bytes / sizeof(float);
    return v;
}

/* The GPU's update: device copies, the steps, and the results back into p and the
 * optimizer's host state. */
static void replay_gpu(optimizer *o, const run_config *cfg, float *p, const float *grads, size_t steps, long spe,
                       json_t *lrs) {
#if DDPD_NCCL_BACKEND
    size_t n = o->n, bytes = n * sizeof(float);
    float *d_p, *d_g, *d_s[2] = {NULL, NULL};
    double *d_part, *d_sumsq;
    float *host_s[2] = {o->state1, o->state2};
    if (cudaMalloc((void **)&d_p, bytes) || cudaMalloc((void **)&d_g, bytes) ||
        cudaMalloc((void **)&d_part, sizeof(double) * KC_NORM_BLOCKS) || cudaMalloc((void **)&d_sumsq, sizeof(double)))
        die("cudaMalloc");
    for (int k = 0; k < 2; k++)
        if (host_s[k] && (cudaMalloc((void **)&d_s[k], bytes) || cudaMemset(d_s[k], 0, bytes))) die("cudaMalloc");
    cudaStream_t s;
    if (cudaStreamCreate(&s) || cudaMemcpy(d_p, p, bytes, cudaMemcpyHostToDevice)) die("cudaMemcpy");
    gpu_error ge = {{0}};
    for (size_t t = 0; t < steps; t++) {
        double lr = lr_at(cfg, (int)(t / (size_t)spe), (long)(t % (size_t)spe), spe);
        json_array_append_new(lrs, json_real(lr));
        if (cudaMemcpy(d_g, grads + t * n, bytes, cudaMemcpyHostToDevice)) die("cudaMemcpy");
        if (cfg->train.grad_clip_norm > 0 &&
            clip_grad_norm_cuda_step(d_g, n, cfg->train.grad_clip_norm, d_part, d_sumsq, s, &ge) != 0)
            die(ge.msg);
        if (optimizer_step_cuda(o, d_p, d_g, d_s[0], d_s[1], lr, s, &ge) != 0) die(ge.msg);
    }
    if (cudaStreamSynchronize(s) || cudaMemcpy(p, d_p, bytes, cudaMemcpyDeviceToHost)) die("cudaMemcpy");
    for (int k = 0; k < 2; k++)
        if (d_s[k] && cudaMemcpy(host_s[k], d_s[k], bytes, cudaMemcpyDeviceToHost)) die("cudaMemcpy");
#else
    (void)o, (void)cfg, (void)p, (void)grads, (void)steps, (void)spe, (void)lrs;
    die("--gpu: this build has no CUDA");
#endif
}

int main(int argc, char **argv) {
    const char *config = NULL, *params = NULL, *grads_path = NULL, *out = NULL;
    long spe = 0;
    int gpu = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--gpu")) gpu = 1;
        else if (i + 1 < argc && !strcmp(argv[i], "--config")) config = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--steps-per-epoch")) spe = atol(argv[++i]);
        else if (i + 1 < argc && !strcmp(argv[i], "--params")) params = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--grads")) grads_path = argv[++i];
        else if (i + 1 < argc && !strcmp(argv[i], "--out")) out = argv[++i];
        else die("usage: optim_replay --config RUN.json --steps-per-epoch S --params P --grads G --out OUT [--gpu]");
    }
    if (!config || !params || !grads_path || !out || spe < 1) die("--config, --steps-per-epoch, --params, --grads and --out are needed");
    run_config cfg;
    schema_errors errs = {0};
    json_t *doc = NULL;
    if (run_config_load_file(config, &cfg, &doc, &errs) != 0) {
        for (size_t i = 0; i < errs.count; i++) fprintf(stderr, "%s: %s\n", errs.items[i].pointer, errs.items[i].message);
        die("not a valid run config");
    }
    size_t n, total;
    float *p = read_floats(params, &n), *g = read_floats(grads_path, &total);
    if (n == 0 || total % n) die("the gradients are not whole multiples of the parameters");
    size_t steps = total / n;
    optimizer o;
    if (optimizer_init(&o, &cfg, n) != 0) die("out of memory");
    json_t *lrs = json_array();
    if (gpu) {
        replay_gpu(&o, &cfg, p, g, steps, spe, lrs);
    } else {
        for (size_t t = 0; t < steps; t++) {
            double lr = lr_at(&cfg, (int)(t / (size_t)spe), (long)(t % (size_t)spe), spe);
            json_array_append_new(lrs, json_real(lr));
            if (cfg.train.grad_clip_norm > 0) clip_grad_norm(g + t * n, n, cfg.train.grad_clip_norm);
            optimizer_step(&o, p, g + t * n, lr);
        }
    }
    FILE *f = fopen(out, "wb");
    if (!f || fwrite(p, sizeof(float), n, f) != n || (o.state1 && fwrite(o.state1, sizeof(float), n, f) != n) ||
        (o.state2 && fwrite(o.state2, sizeof(float), n, f) != n) || fclose(f) != 0)
        die(out);
    json_t *states = json_array();
    if (optimizer_state1_name(&o)) json_array_append_new(states, json_string(optimizer_state1_name(&o)));
    if (optimizer_state2_name(&o)) json_array_append_new(states, json_string(optimizer_state2_name(&o)));
    json_t *answer = json_pack("{s:o, s:o, s:I}", "lrs", lrs, "states", states, "steps", (json_int_t)o.step);
    char *line = json_dumps(answer, JSON_COMPACT | JSON_REAL_PRECISION(17));
    printf("%s\n", line);
    free(line);
    json_decref(answer);
    json_decref(doc);
    optimizer_free(&o);
    free(p), free(g);
    return 0;
}
