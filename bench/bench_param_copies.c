/* Why the cpu engine keeps a copy of the parameters per rank: two rank processes on
 * the real collectives and optimizer, each step reading all the parameters (what a
 * forward pass does), then updating its half with Adam (the sharded optimizer), with
 * the parameters either one copy in the shared arena (alloc_shared: the owner's
 * stores must take every line back from the peer's cache) or a copy per rank
 * (alloc_mirrored, the half streamed into the peer's copy by mirror_f32). Prints, per
 * way, the median over steps of the slower rank's update and read times.
 * usage: bench_param_copies [PARAMS [STEPS]]   (the default MLP's 535818; 2000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "collectives.h"
#include "optim.h"

#define RANKS 2

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One rank: `steps` times read everything, barrier, update my half, barrier; the
 * times per step into times[0..steps) (update) and times[steps..2*steps) (read). */
static int rank_main(coll_comm *c, int mirrored, size_t n, int steps, double *times) {
    size_t bytes = sizeof(float) * n;
    float *params = mirrored ? c->alloc_mirrored(c, bytes) : c->alloc_shared(c, bytes);
    float *m = c->alloc_shared(c, bytes), *v = c->alloc_shared(c, bytes);
    float *grads = malloc(bytes), *seen = malloc(bytes);
    if (!params || !m || !v || !grads || !seen) return -1;
    for (size_t i = 0; i < n; i++) grads[i] = (float)((i * 2654435761u) % 1000) * 1e-6f - 5e-4f;
    run_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.train.optimizer.type = OPT_ADAM;
    cfg.train.optimizer.beta1 = 0.9;
    cfg.train.optimizer.beta2 = 0.999;
    cfg.train.optimizer.eps = 1e-8;
    optimizer opt;
    optimizer_init_external(&opt, &cfg, n, m, v);
    size_t lo, hi;
    coll_share(n, c->shard_world, c->shard_rank, &lo, &hi);
    for (int s = 0; s < steps; s++) {
        double t0 = now_ms();
        memcpy(seen, params, bytes);
        double t1 = now_ms();
        if (c->shard_barrier(c) != 0) return -1;
        double t2 = now_ms();
        optimizer_update_range(&opt, params, grads, 1e-3, lo, hi);
        if (mirrored && c->mirror_f32(c, params, lo, hi) != 0) return -1;
        optimizer_step_done(&opt);
        times[s] = now_ms() - t2;
        times[steps + s] = t1 - t0;
        if (c->shard_barrier(c) != 0) return -1;
    }
    return 0;
}

static int measure(int mirrored, size_t n, int steps) {
    size_t arena = 4 * (sizeof(float) * n + 4096);
    coll_cpu_group *g = coll_cpu_group_create(RANKS, arena);
    double *times = mmap(NULL, sizeof(double) * 2 * (size_t)steps * RANKS, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!g || times == MAP_FAILED) {
        perror("bench_param_copies: the group's memory");
        return -1;
    }
    for (int r = 0; r < RANKS; r++) {
        pid_t pid = fork();
        if (pid == 0) {
            coll_comm *c = coll_cpu_attach(g, r);
            _exit(c && rank_main(c, mirrored, n, steps, times + (size_t)r * 2 * steps) == 0 ? 0 : 1);
        }
        if (pid < 0) return -1;
    }
    int failed = 0;
    for (int r = 0; r < RANKS; r++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed = 1;
    }
    if (failed) {
        fprintf(stderr, "bench_param_copies: a rank could not allocate %zu parameters in its arena or was killed; "
                        "try fewer PARAMS\n", n);
        return -1;
    }
    double slowest[2][steps];
    for (int k = 0; k < 2; k++)
        for (int s = 0; s < steps; s++) {
            double a = times[k * steps + s], b = times[2 * steps + k * steps + s];
            slowest[k][s] = a > b ? a : b;
        }
    for (int k = 0; k < 2; k++) qsort(slowest[k], (size_t)steps, sizeof(double), by_value);
    printf("{\"parameters\": \"%s\", \"update_ms\": %.4f, \"read_ms\": %.4f, \"count\": %zu, \"steps\": %d}\n",
           mirrored ? "a copy per rank, mirrored" : "one shared copy", slowest[0][steps / 2], slowest[1][steps / 2], n,
           steps);
    munmap(times, sizeof(double) * 2 * (size_t)steps * RANKS);
    coll_cpu_group_destroy(g);
    return 0;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 535818;
    int steps = argc > 2 ? atoi(argv[2]) : 2000;
    if (n < 1024 || steps < 1 || steps > 100000) {
        fprintf(stderr, "usage: bench_param_copies [PARAMS (at least 1024) [STEPS (1-100000)]]\n");
        return 2;
    }
    for (int mirrored = 0; mirrored < 2; mirrored++)
        if (measure(mirrored, n, steps) != 0) return 1;
    return 0;
}
