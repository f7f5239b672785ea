/* Backend selection (trainer/backend_select.c), on the CPU: the decision for each
 * asked backend and GPU count, with the reason it gives; then the real selection
 * on this host, and with CUDA_VISIBLE_DEVICES empty (no GPU on any host), where
 * `auto` falls back to cpu and `nccl` is refused with what to do; under ddpd (which
 * empties it for a run on CPU slots) the reason names the placement. In the lean
 * build, `nccl` without ddp-trainer-nccl (a CPU-only build or image) is refused
 * naming the missing GPU backend. */
#include <stdlib.h>
#include <string.h>

#include "backend_select.h"
#include "check.h"
#include "cuda/gpu_devices.h"
#include "ddpd_build_config.h"

static void expect(backend_kind asked, int world, int gpus, int want, const char *has1, const char *has2) {
    char why[1024];
    int got = backend_decide(asked, world, gpus, "NOTE", why, sizeof why);
    CHECK(got == want, "%s, world %d, %d GPUs: got %d, expected %d (%s)", backend_name(asked), world, gpus, got, want,
          why);
    CHECK(!has1 || strstr(why, has1), "reason lacks '%s': %s", has1, why);
    CHECK(!has2 || strstr(why, has2), "reason lacks '%s': %s", has2, why);
    if (asked != BACKEND_CPU) CHECK(strstr(why, "NOTE") != NULL, "the GPU note is in the reason: %s", why);
}

static void test_decide(void) {
    expect(BACKEND_CPU, 4, 8, BACKEND_CPU, "as the config asks", NULL);
    expect(BACKEND_AUTO, 2, 2, BACKEND_NCCL, "auto picked nccl", "one GPU each");
    expect(BACKEND_AUTO, 1, 8, BACKEND_NCCL, "auto picked nccl", NULL);
    expect(BACKEND_AUTO, 4, 0, BACKEND_CPU, "auto picked cpu", "no usable GPU");
    expect(BACKEND_AUTO, 4, 2, BACKEND_CPU, "auto picked cpu", "never share a GPU");
    expect(BACKEND_NCCL, 2, 2, BACKEND_NCCL, "backend nccl", NULL);
    expect(BACKEND_NCCL, 1, 0, -1, "backend nccl", "distributed.backend to \"cpu\"");
    expect(BACKEND_NCCL, 4, 2, -1, "NCCL cannot put two ranks on one GPU", "lower distributed.world_size to 2");
}

static int select_with(backend_kind asked, int world, char *why, size_t n) {
    run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.distributed.backend = asked;
    cfg.distributed.world_size = world;
    return backend_select(&cfg, cfg.distributed.world_size, why, n);
}

static void test_select_here(void) {
    char why[1024];
    gpu_present p;
    int present = gpu_present_scan_host(&p);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    int got = select_with(BACKEND_AUTO, 1, why, sizeof why);
    printf("  here (%s; CUDA_VISIBLE_DEVICES %s): %s\n", p.source, cvd ? cvd : "unset", why);
    if (!DDPD_NCCL_BACKEND || present == 0) {
        CHECK(got == BACKEND_CPU, "auto on a host without a GPU is cpu: %s", why);
        CHECK(strstr(why, "auto picked cpu") != NULL, "with the reason: %s", why);
    }

    /* An empty CUDA_VISIBLE_DEVICES hides every GPU, on any host. */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    got = select_with(BACKEND_AUTO, 2, why, sizeof why);
    printf("  CUDA_VISIBLE_DEVICES='', auto: %s\n", why);
    CHECK(got == BACKEND_CPU && strstr(why, "auto picked cpu"), "auto falls back to cpu: %s", why);
    if (DDPD_NCCL_BACKEND) CHECK(strstr(why, "CUDA_VISIBLE_DEVICES is set but empty") != NULL, "and says why: %s", why);
    got = select_with(BACKEND_NCCL, 2, why, sizeof why);
    printf("  CUDA_VISIBLE_DEVICES='', nccl: %s\n", why);
    CHECK(got == -1, "nccl without a GPU is refused: %s", why);
    CHECK(strstr(why, "nccl") && strstr(why, "distributed.backend"), "naming nccl and what to do: %s", why);
    got = select_with(BACKEND_CPU, 2, why, sizeof why);
    CHECK(got == BACKEND_CPU, "cpu is cpu: %s", why);

    /* ddpd empties it for a run it placed on CPU slots: said as that, not as a warning. */
    setenv("DDPD_RUN_ID", "7", 1);
    got = select_with(BACKEND_AUTO, 2, why, sizeof why);
    printf("  under ddpd, CUDA_VISIBLE_DEVICES='', auto: %s\n", why);
    CHECK(got == BACKEND_CPU && strstr(why, "ddpd gave this run CPU slots") != NULL, "the placement is named: %s", why);
    CHECK(strstr(why, "set but empty") == NULL, "not as a setting that hides every GPU: %s", why);
    unsetenv("DDPD_RUN_ID");
    if (cvd) setenv("CUDA_VISIBLE_DEVICES", cvd, 1);
    else unsetenv("CUDA_VISIBLE_DEVICES");
}

/* The lean ddp-trainer with no ddp-trainer-nccl to hand GPU runs to (here named by a
 * DDPD_TRAINER_NCCL that points at nothing): nccl is refused naming the missing
 * program, whatever the GPUs; auto still runs on the cpu. */
static void test_no_gpu_backend(void) {
    if (DDPD_NCCL_BACKEND) return; /* the GPU build is its own GPU backend */
    char why[1024], path[4096];
    const char *was = getenv("DDPD_TRAINER_NCCL");
    char *saved = was ? strdup(was) : NULL;
    setenv("DDPD_TRAINER_NCCL", "/nonexistent/ddp-trainer-nccl", 1);
    CHECK(backend_nccl_executable(path, sizeof path) == NULL, "no GPU backend is found at a path that is not there");
    int got = select_with(BACKEND_NCCL, 1, why, sizeof why);
    printf("  no ddp-trainer-nccl, nccl: %s\n", why);
    CHECK(got == -1, "nccl without ddp-trainer-nccl is refused: %s", why);
    CHECK(strstr(why, "needs the GPU backend, ddp-trainer-nccl") != NULL, "naming the missing program: %s", why);
    CHECK(strstr(why, "DDPD_TRAINER_NCCL names /nonexistent/ddp-trainer-nccl") != NULL, "and where it looked: %s",
          why);
    CHECK(strstr(why, "distributed.backend to \"cpu\"") != NULL, "and what to do: %s", why);
    got = select_with(BACKEND_AUTO, 1, why, sizeof why);
    CHECK(got == BACKEND_CPU, "auto without ddp-trainer-nccl runs on the cpu: %s", why);
    if (saved) setenv("DDPD_TRAINER_NCCL", saved, 1);
    else unsetenv("DDPD_TRAINER_NCCL");
    free(saved);
}

int main(void) {
    test_decide();
    test_select_here();
    test_no_gpu_backend();
    return test_done("test_gpu_backend_select");
}
