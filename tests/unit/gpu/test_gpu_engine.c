/* The cuda engine against the cpu engine, whole steps at a time, on one GPU
 * (world size 1, NCCL in this process): the initial parameters bit for bit, the
 * step losses and the parameters after SGD steps within 1e-4 relative, Adam and
 * AdamW losses, evaluation, the host views both ways, the same run twice giving
 * the same bits, the staged data path giving the resident path's bits, and the
 * memory plan refusing a share that is too small; and CNNs (the conv, pool, batch
 * norm and dropout layers, the running statistics coming back to the host). Batch
 * shards (a logical width above the ranks): width 4 on one GPU against the cpu
 * engine's width 4 on one rank, and width 4 on 2 GPUs (this program started again
 * as each rank: --width-rank) giving the very bits of width 4 on one GPU; the same
 * for sync batch norm over the shards (totalled in shard order across the shards of
 * a GPU and across GPUs). Without a GPU it prints SKIPPED and exits 77, which
 * ctest reports as skipped (the multi-GPU case: with fewer than 2 GPUs). */
#include <stdio.h>

#include "check.h"
#include "scratch_dir.h"
#include "ddpd_build_config.h"

#if !DDPD_NCCL_BACKEND
int main(void) {
    printf("SKIPPED: no CUDA device (this ddp-trainer build has no CUDA toolkit)\n");
    return 77;
}
#else

#include <cblas.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "collectives.h"
#include "cuda/coll_nccl.h"
#include "cuda/engine_cuda.h"
#include "memory_plan.h"
#include "engine.h"
#include "rng.h"
#include "sampler.h"

#define TOL 1e-4
#define BATCH 64
#define STEPS 8

static coll_comm *nccl_comm, *cpu_comm;
static idx_dataset train, test;
static double worst;

static idx_dataset synthetic(size_t count, uint64_t seed) {
    idx_dataset d = {.count = count, .rows = 28, .cols = 28, .num_classes = 10};
    rng_state r;
    rng_seed(&r, seed, 5);
    d.images = malloc(count * 784);
    d.labels = malloc(count);
    for (size_t i = 0; i < count; i++) {
        d.labels[i] = (uint8_t)rng_below(&r, 10);
        /* A little structure so that training moves: the label brightens a band. */
        for (size_t p = 0; p < 784; p++)
            d.images[i * 784 + p] = (uint8_t)(rng_below(&r, 128) + ((p / 78) == d.labels[i] ? 127 : 0));
    }
    return d;
}

static run_config config(activation_kind act, optimizer_kind opt, double momentum, double clip) {
    run_config c;
    memset(&c, 0, sizeof c);
    c.seed = 42;
    c.model.hidden[0] = 96;
    c.model.hidden[1] = 48;
    c.model.n_hidden = 2;
    c.model.activation = act;
    c.train.batch_size = BATCH;
    c.train.grad_clip_norm = clip;
    c.train.optimizer.type = opt;
    c.train.optimizer.lr = opt == OPT_SGD ? 0.05 : 0.002; /* rates at which the runs converge */
    c.train.optimizer.momentum = momentum;
    c.train.optimizer.weight_decay = opt == OPT_ADAMW ? 0.01 : 0.0;
    c.train.optimizer.beta1 = 0.9;
    c.train.optimizer.beta2 = 0.999;
    c.train.optimizer.eps = 1e-8;
    c.distributed.world_size = 1;
    c.distributed.gpu_memory_fraction = 1.0;
    c.distributed.bucket_mb = 25;
    return c;
}

/* A small CNN: two conv blocks (the second with batch norm), fc 64 with dropout. */
static run_config cnn_config(optimizer_kind opt, double momentum, int batch_norm, double dropout) {
    run_config c = config(ACT_RELU, opt, momentum, 0);
    c.model.type = MODEL_CNN;
    c.model.cnn.conv[0] = (conv_block_config){8, 5, 1, 2, 2, false, 0};
    c.model.cnn.conv[1] = (conv_block_config){16, 3, 1, 1, 2, batch_norm, 0};
    c.model.cnn.n_conv = 2;
    c.model.cnn.fc[0] = 64;
    c.model.cnn.n_fc = 1;
    c.model.cnn.dropout = dropout;
    return c;
}

static engine *make(const run_config *cfg, coll_comm *comm, int gpu) {
    engine_params p = {.cfg = cfg, .comm = comm, .train = &train, .test = &test, .max_rows = 512};
    char err[1024] = "";
    engine *e = gpu ? engine_cuda_create(&p, err, sizeof err) : engine_cpu_create(&p, err, sizeof err);
    REQUIRE(e != NULL, "engine_%s_create: %s", gpu ? "cuda" : "cpu", err);
    REQUIRE(e->ops->init_params(e, cfg->seed) == 0, "init_params");
    return e;
}

static double rel_error(const float *a, const float *b, size_t n) {
    double maxref = 0, maxdiff = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (isnan(d)) return INFINITY;
        if (d > maxdiff) maxdiff = d;
        if (fabs(b[i]) > maxref) maxref = fabs(b[i]);
    }
    return maxref > 0 ? maxdiff / maxref : maxdiff;
}

/* Runs STEPS steps on both engines; losses[k] of each; returns the largest
 * relative loss difference. */
static double run_steps(engine *g, engine *c, double *gl, double *cl) {
    double lr = g->cfg->train.optimizer.lr;
    dist_sampler s;
    REQUIRE(sampler_init(&s, train.count, 1, 0, 42) == 0, "sampler");
    sampler_set_epoch(&s, 0);
    double worst_loss = 0;
    for (int k = 0; k < STEPS; k++) {
        const size_t *idx = s.indices + (size_t)k * BATCH;
        const int rows = BATCH; /* one batch shard per rank */
        REQUIRE(g->ops->step(g, &idx, &rows, lr, k, &gl[k]) == 0, "cuda step %d: %s", k, coll_nccl_failure(nccl_comm));
        if (c) {
            REQUIRE(c->ops->step(c, &idx, &rows, lr, k, &cl[k]) == 0, "cpu step %d", k);
            double r = fabs(gl[k] - cl[k]) / fabs(cl[k]);
            if (!(r <= worst_loss)) worst_loss = r;
        }
    }
    sampler_free(&s);
    return worst_loss;
}

static void against_cpu(const run_config *cfgp, const char *name) {
    run_config cfg = *cfgp;
    optimizer_kind opt = cfg.train.optimizer.type;
    engine *g = make(&cfg, nccl_comm, 1), *c = make(&cfg, cpu_comm, 0);
    size_t n = g->shape.n_params;
    REQUIRE(g->ops->sync_to_host(g) == 0, "sync_to_host");
    CHECK(memcmp(g->params, c->params, sizeof(float) * n) == 0, "%s: the initial parameters differ", name);
    double gl[STEPS], cl[STEPS];
    double loss_err = run_steps(g, c, gl, cl);
    /* Adam divides by sqrt(v): where a gradient is near zero its update's sign can
     * follow rounding, so its losses are held to a looser bound than SGD's. */
    double loss_tol = opt == OPT_SGD ? TOL : 1e-3;
    CHECK(loss_err <= loss_tol, "%s: step losses differ by %.3g relative (gpu %.9g, cpu %.9g at the last step)", name,
          loss_err, gl[STEPS - 1], cl[STEPS - 1]);
    REQUIRE(g->ops->sync_to_host(g) == 0, "sync_to_host");
    double param_err = rel_error(g->params, c->params, n);
    if (opt == OPT_SGD) {
        CHECK(param_err <= TOL, "%s: parameters after %d steps differ by %.3g relative", name, STEPS, param_err);
        if (param_err > worst) worst = param_err;
    }
    if (loss_err > worst && opt == OPT_SGD) worst = loss_err;
    double gs[2] = {0, 0}, cs[2] = {0, 0};
    size_t from = 0, to = test.count;
    REQUIRE(g->ops->evaluate(g, 1, &from, &to, gs) == 0, "cuda evaluate");
    REQUIRE(c->ops->evaluate(c, 1, &from, &to, cs) == 0, "cpu evaluate");
    double eval_err = fabs(gs[0] - cs[0]) / cs[0];
    CHECK(eval_err <= (opt == OPT_SGD ? TOL : 1e-3), "%s: test loss sums %.9g vs %.9g", name, gs[0], cs[0]);
    CHECK(fabs(gs[1] - cs[1]) <= 2, "%s: test hits %.0f vs %.0f", name, gs[1], cs[1]);
    if (g->shape.n_stats) {
        double stats_err = rel_error(g->stats, c->stats, g->shape.n_stats);
        CHECK(stats_err <= 1e-3, "%s: batch norm running statistics differ by %.3g relative", name, stats_err);
    }
    printf("  %-44s step losses %.2e, params %.2e, test loss %.2e (relative); losses %.4f -> %.4f\n", name, loss_err,
           param_err, eval_err, gl[0], gl[STEPS - 1]);
    g->ops->destroy(g);
    c->ops->destroy(c);
}

static void test_against_cpu(activation_kind act, optimizer_kind opt, double momentum, double clip, const char *name) {
    run_config cfg = config(act, opt, momentum, clip);
    against_cpu(&cfg, name);
}

/* The host views both ways: the cpu engine's state into the cuda engine. */
static void test_sync_from_host(void) {
    run_config cfg = config(ACT_RELU, OPT_ADAM, 0, 0);
    engine *g = make(&cfg, nccl_comm, 1), *c = make(&cfg, cpu_comm, 0);
    double cl[STEPS];
    run_steps(c, NULL, cl, NULL); /* train the cpu engine alone */
    size_t n = c->shape.n_params;
    memcpy(g->params, c->params, sizeof(float) * n);
    memcpy(g->opt.state1, c->opt.state1, sizeof(float) * n);
    memcpy(g->opt.state2, c->opt.state2, sizeof(float) * n);
    g->opt.step = c->opt.step;
    REQUIRE(g->ops->sync_from_host(g) == 0, "sync_from_host");
    double gs[2] = {0, 0}, cs[2] = {0, 0};
    size_t from = 0, to = test.count;
    REQUIRE(g->ops->evaluate(g, 1, &from, &to, gs) == 0 && c->ops->evaluate(c, 1, &from, &to, cs) == 0, "evaluate");
    CHECK(fabs(gs[0] - cs[0]) / cs[0] <= TOL, "after sync_from_host: test loss %.9g vs %.9g", gs[0], cs[0]);
    REQUIRE(g->ops->sync_to_host(g) == 0, "sync_to_host");
    CHECK(memcmp(g->params, c->params, sizeof(float) * n) == 0 &&
              memcmp(g->opt.state2, c->opt.state2, sizeof(float) * n) == 0,
          "the state comes back from the device unchanged");
    printf("  %-44s test loss %.9g vs %.9g\n", "sync_from_host, then evaluate", gs[0], cs[0]);
    g->ops->destroy(g);
    c->ops->destroy(c);
}

/* Two runs of the same config: the same losses and parameters, bit for bit. */
static void test_deterministic(double fraction, const char *name) {
    run_config cfg = config(ACT_GELU, OPT_ADAMW, 0, 1.0);
    engine *a = make(&cfg, nccl_comm, 1);
    cfg.distributed.gpu_memory_fraction = fraction;
    engine *b = make(&cfg, nccl_comm, 1);
    double la[STEPS], lb[STEPS];
    run_steps(a, NULL, la, NULL);
    run_steps(b, NULL, lb, NULL);
    REQUIRE(a->ops->sync_to_host(a) == 0 && b->ops->sync_to_host(b) == 0, "sync_to_host");
    CHECK(memcmp(la, lb, sizeof la) == 0, "%s: losses differ (%.17g vs %.17g at the last step)", name, la[STEPS - 1],
          lb[STEPS - 1]);
    CHECK(memcmp(a->params, b->params, sizeof(float) * a->shape.n_params) == 0, "%s: parameters differ", name);
    if (fraction < 1.0) CHECK(!engine_cuda_data_resident(b), "%s: a share below the resident plan stages", name);
    printf("  %-44s %s (data %s / %s)\n", name, "bit-identical",
           engine_cuda_data_resident(a) ? "resident" : "staged", engine_cuda_data_resident(b) ? "resident" : "staged");
    a->ops->destroy(a);
    b->ops->destroy(b);
}

/* A gpu_memory_fraction between the staged and the resident plan's needs. */
static double staging_fraction(void) {
    run_config cfg = config(ACT_GELU, OPT_ADAMW, 0, 1.0);
    model_shape s;
    model_shape_mlp(&s, 784, cfg.model.hidden, cfg.model.n_hidden, 10, cfg.model.activation);
    memory_plan_input in = {.shape = &s, .max_rows = 512, .train = 1, .n_opt_states = 2, .pixels = 784,
                            .train_count = train.count, .test_count = test.count};
    memory_plan resident, staged;
    memory_plan_compute(&in, 0, &resident);
    memory_plan_compute(&in, resident.total_bytes - 1, &staged);
    size_t free_b, total_b;
    REQUIRE(cudaMemGetInfo(&free_b, &total_b) == cudaSuccess, "cudaMemGetInfo");
    return ((double)resident.total_bytes + (double)staged.total_bytes) / 2 / (double)total_b;
}

static void test_refusal(void) {
    run_config cfg = config(ACT_RELU, OPT_ADAM, 0, 0);
    cfg.distributed.gpu_memory_fraction = 1e-4;
    engine_params p = {.cfg = &cfg, .comm = nccl_comm, .train = &train, .test = &test, .max_rows = 512};
    char err[1024] = "";
    engine *e = engine_cuda_create(&p, err, sizeof err);
    CHECK(e == NULL, "a share of 1e-4 of the GPU is refused");
    CHECK(strstr(err, "needs ") && strstr(err, "its share is") && strstr(err, "gpu_memory_fraction 0.0001"),
          "with both numbers: %s", err);
    printf("  refusal: %s\n", err);
    if (e) e->ops->destroy(e);
}

/* ---- batch shards ---------------------------------------------------------------- */

#define WIDTH 4

/* STEPS steps of a width-WIDTH run on `comm` (its width set): batch shard s takes rows
 * s * BATCH / WIDTH .. of the global batch, whichever rank holds it. losses[k] and the
 * parameters (host view) afterwards. */
static void width_steps(const run_config *cfg, coll_comm *comm, int gpu, double *losses, float *params) {
    engine *e = make(cfg, comm, gpu);
    dist_sampler s;
    REQUIRE(sampler_init(&s, train.count, 1, 0, 42) == 0, "sampler");
    sampler_set_epoch(&s, 0);
    int per = BATCH / WIDTH;
    for (int k = 0; k < STEPS; k++) {
        const size_t *idx[COLL_MAX_PARTS];
        int rows[COLL_MAX_PARTS];
        for (int j = 0; j < comm->parts; j++) {
            idx[j] = s.indices + (size_t)k * BATCH + (size_t)(comm->first_part + j) * (size_t)per;
            rows[j] = per;
        }
        REQUIRE(e->ops->step(e, idx, rows, cfg->train.optimizer.lr, k, &losses[k]) == 0, "%s width step %d: %s",
                gpu ? "cuda" : "cpu", k, gpu ? coll_nccl_failure(comm) : "");
    }
    REQUIRE(e->ops->sync_to_host(e) == 0, "sync_to_host");
    memcpy(params, e->params, sizeof(float) * e->shape.n_params); /* then the running statistics (shard 0's) */
    if (e->shape.n_stats) memcpy(params + e->shape.n_params, e->stats, sizeof(float) * e->shape.n_stats);
    sampler_free(&s);
    e->ops->destroy(e);
}

/* mode 0: the MLP; 1: the CNN, batch norm per shard; 2: the CNN, sync batch norm. */
static run_config width_config(int mode) {
    run_config c = mode ? cnn_config(OPT_SGD, 0.9, 1, 0.3) : config(ACT_GELU, OPT_ADAMW, 0, 1.0);
    if (mode == 2) c.model.cnn.batch_norm_stats = BN_STATS_SYNC;
    c.distributed.world_size = WIDTH;
    return c;
}

/* The floats width_steps gives back: the parameters, then the running statistics. */
static size_t n_params_of(const run_config *cfg) {
    model_shape sh;
    char err[256];
    REQUIRE(model_shape_init(&sh, cfg, 1, 28, 28, 10, err, sizeof err) == 0, "%s", err);
    return sh.n_params + sh.n_stats;
}

static void hex(const void *p, size_t n, char *out) {
    for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", ((const unsigned char *)p)[i]);
}
static void unhex(const char *s, void *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned v = 0;
        sscanf(s + 2 * i, "%2x", &v);
        ((unsigned char *)p)[i] = (unsigned char)v;
    }
}

/* A rank of the 2-GPU run (this program started with --width-rank R HEX OUT MODE):
 * joins the communicator of the rendezvous in HEX, trains, and rank 0 writes the
 * losses and the parameters to OUT. */
static int width_rank_main(char **argv) {
    int rank = atoi(argv[2]), mode = atoi(argv[5]);
    nccl_rendezvous rv;
    unhex(argv[3], &rv, sizeof rv);
    char why[1024], device[128];
    coll_comm *comm = coll_nccl_attach(&rv, rank, NULL, device, sizeof device, why, sizeof why);
    REQUIRE(comm != NULL, "rank %d: %s", rank, why);
    REQUIRE(coll_set_width(comm, WIDTH) == 0, "coll_set_width");
    train = synthetic(20000, 1);
    test = synthetic(1500, 2);
    run_config cfg = width_config(mode);
    size_t n = n_params_of(&cfg);
    double losses[STEPS];
    float *params = malloc(sizeof(float) * n);
    width_steps(&cfg, comm, 1, losses, params);
    if (rank == 0) {
        FILE *f = fopen(argv[4], "wb");
        REQUIRE(f && fwrite(losses, sizeof losses, 1, f) == 1 && fwrite(params, sizeof(float), n, f) == n &&
                    fclose(f) == 0,
                "writing %s", argv[4]);
    }
    coll_nccl_close(comm);
    free(params);
    return test_done(rank ? "test_gpu_engine (width rank 1)" : "test_gpu_engine (width rank 0)");
}

/* Width 4 on one GPU: against the cpu engine's width 4 on one rank (as close as the
 * GPU follows the cpu elsewhere), then on two GPUs (two processes, two parts each):
 * the same losses and parameters as on one GPU, bit for bit. */
static void test_width(int mode, int devices, const char *self) {
    const char *names[3] = {"width 4: mlp, adamw, clip 1", "width 4: cnn, batch norm per shard, dropout",
                            "width 4: cnn, sync batch norm, dropout"};
    const char *name = names[mode];
    run_config cfg = width_config(mode);
    size_t n = n_params_of(&cfg);
    float *gp = malloc(sizeof(float) * n), *cp = malloc(sizeof(float) * n), *two = malloc(sizeof(float) * n);
    double gl[STEPS], cl[STEPS], tl[STEPS];
    /* the host BLAS on one thread, as the 2-GPU run's ranks have it: on the CPU stand-in
     * it plays cuBLAS, and its sums' order follows its thread count */
    openblas_set_num_threads(1);
    REQUIRE(coll_set_width(nccl_comm, WIDTH) == 0 && coll_set_width(cpu_comm, WIDTH) == 0, "set width");
    CHECK(nccl_comm->parts == WIDTH && nccl_comm->first_part == 0, "one GPU computes all %d shards", WIDTH);
    width_steps(&cfg, nccl_comm, 1, gl, gp);
    width_steps(&cfg, cpu_comm, 0, cl, cp);
    REQUIRE(coll_set_width(nccl_comm, 1) == 0 && coll_set_width(cpu_comm, 1) == 0, "width back to 1");
    double loss_err = 0;
    for (int k = 0; k < STEPS; k++)
        if (fabs(gl[k] - cl[k]) / fabs(cl[k]) > loss_err) loss_err = fabs(gl[k] - cl[k]) / fabs(cl[k]);
    double param_err = rel_error(gp, cp, n);
    CHECK(loss_err <= 1e-3, "%s: step losses differ from the cpu engine's by %.3g relative", name, loss_err);
    CHECK(param_err <= 1e-3, "%s: parameters (and running statistics) differ from the cpu engine's by %.3g relative",
          name, param_err);
    printf("  %-44s vs cpu: step losses %.2e, params %.2e (relative)\n", name, loss_err, param_err);
    if (devices < 2) {
        printf("  %-44s on 2 GPUs: not run (%d GPU)\n", name, devices);
    } else {
        char why[1024], id[2 * sizeof(nccl_rendezvous) + 1], out[600], rank_s[8], cnn_s[8];
        char *dir = scratch_dir_make("gpu-width");
        REQUIRE(dir != NULL, "scratch_dir_make");
        nccl_rendezvous rv;
        REQUIRE(nccl_rendezvous_create(&rv, 2, why, sizeof why) == 0, "%s", why);
        hex(&rv, sizeof rv, id);
        snprintf(out, sizeof out, "%s/rank0.bin", dir);
        snprintf(cnn_s, sizeof cnn_s, "%d", mode);
        pid_t pid[2];
        /* the ranks' host BLAS on one thread each, as this process's (test_width): two
         * processes of spinning BLAS threads on a loaded machine crawl */
        extern char **environ;
        size_t n_env = 0;
        while (environ[n_env]) n_env++;
        char **env = calloc(n_env + 3, sizeof *env);
        REQUIRE(env != NULL, "calloc");
        size_t k = 0;
        for (size_t i = 0; i < n_env; i++)
            if (strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) && strncmp(environ[i], "OMP_NUM_THREADS=", 16))
                env[k++] = environ[i];
        env[k++] = "OPENBLAS_NUM_THREADS=1";
        env[k++] = "OMP_NUM_THREADS=1";
        for (int r = 0; r < 2; r++) {
            snprintf(rank_s, sizeof rank_s, "%d", r);
            char *argv[] = {(char *)self, "--width-rank", rank_s, id, out, cnn_s, NULL};
            REQUIRE(posix_spawn(&pid[r], self, NULL, NULL, argv, env) == 0, "spawning rank %d", r);
        }
        free(env);
        int ok = 1;
        for (int r = 0; r < 2; r++) {
            int st = 0;
            waitpid(pid[r], &st, 0);
            ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
        }
        CHECK(ok, "%s: both ranks of the 2-GPU run succeed", name);
        FILE *f = fopen(out, "rb");
        int read = f && fread(tl, sizeof tl, 1, f) == 1 && fread(two, sizeof(float), n, f) == n;
        if (f) fclose(f);
        scratch_dir_remove(dir);
        free(dir);
        CHECK(read, "%s: rank 0 wrote its results", name);
        if (read) {
            CHECK(memcmp(tl, gl, sizeof tl) == 0, "%s: 2 GPUs' losses are 1 GPU's (%.17g vs %.17g at the last step)",
                  name, tl[STEPS - 1], gl[STEPS - 1]);
            CHECK(memcmp(two, gp, sizeof(float) * n) == 0, "%s: 2 GPUs' parameters and statistics are 1 GPU's, bit for bit", name);
            printf("  %-44s on 2 GPUs: losses and parameters %s\n", name,
                   memcmp(tl, gl, sizeof tl) == 0 && memcmp(two, gp, sizeof(float) * n) == 0 ? "bit-identical"
                                                                                           : "DIFFER");
        }
    }
    free(gp), free(cp), free(two);
}

int main(int argc, char **argv) {
    if (argc == 6 && !strcmp(argv[1], "--width-rank")) return width_rank_main(argv);
    int devices = 0;
    cudaError_t e = cudaGetDeviceCount(&devices);
    if (e != cudaSuccess || devices == 0) {
        printf("SKIPPED: no CUDA device (%s)\n", e != cudaSuccess ? cudaGetErrorString(e) : "cudaGetDeviceCount: 0");
        return 77;
    }
    char why[1024], device[128];
    nccl_rendezvous rv;
    REQUIRE(nccl_rendezvous_create(&rv, 1, why, sizeof why) == 0, "%s", why);
    nccl_comm = coll_nccl_attach(&rv, 0, NULL, device, sizeof device, why, sizeof why);
    REQUIRE(nccl_comm != NULL, "%s", why);
    printf("rank 0 on %s\n", device);
    coll_cpu_group *group = coll_cpu_group_create(1, 64u << 20);
    REQUIRE(group != NULL, "coll_cpu_group_create");
    cpu_comm = coll_cpu_attach(group, 0);
    REQUIRE(cpu_comm != NULL, "coll_cpu_attach");
    train = synthetic(20000, 1);
    test = synthetic(1500, 2);

    test_against_cpu(ACT_RELU, OPT_SGD, 0.9, 0, "relu, sgd momentum");
    test_against_cpu(ACT_TANH, OPT_SGD, 0.9, 0.5, "tanh, sgd momentum, clip 0.5");
    test_against_cpu(ACT_GELU, OPT_SGD, 0, 0, "gelu, plain sgd");
    test_against_cpu(ACT_RELU, OPT_ADAM, 0, 0, "relu, adam");
    test_against_cpu(ACT_GELU, OPT_ADAMW, 0, 1.0, "gelu, adamw, clip 1");
    run_config cnn = cnn_config(OPT_SGD, 0.9, 0, 0);
    against_cpu(&cnn, "cnn: conv, pool, conv, pool, fc, sgd momentum");
    cnn = cnn_config(OPT_SGD, 0.9, 1, 0.3);
    against_cpu(&cnn, "cnn: + batch norm, dropout 0.3, sgd momentum");
    cnn = cnn_config(OPT_ADAM, 0, 1, 0.3);
    against_cpu(&cnn, "cnn: + batch norm, dropout 0.3, adam");
    test_sync_from_host();
    test_deterministic(1.0, "the same run twice");
    test_deterministic(staging_fraction(), "staged batches against the resident dataset");
    test_refusal();
    test_width(0, devices, "/proc/self/exe");
    test_width(1, devices, "/proc/self/exe");
    test_width(2, devices, "/proc/self/exe");
    printf("engine vs the CPU engine (SGD): largest relative error %.2e (target %.0e): %s\n", worst, TOL,
           worst <= TOL ? "met" : "MISSED");
    return test_done("test_gpu_engine");
}

#endif
