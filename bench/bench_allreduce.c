/* Benchmark of the cpu all-reduce (trainer/coll_cpu.c): 2 forked ranks average a
 * float32 buffer, from arena memory (the trainer's zero-copy path) and from plain
 * malloc'd memory (the staged path), and rank 0 times a memcpy of the same buffer in
 * the same run, since on a shared machine only a ratio measured side by side means
 * anything. One JSON line per (size, source) on stdout.
 *
 * usage: bench_allreduce [--chunk BYTES] [--iters N] [N_FLOATS ...]
 * (default sizes: 16 floats, 2 MiB and 64 MiB) */
#include "collectives.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WORLD 2
#define WARMUP 3
#define MAX_ITERS 200
#define MAX_SIZES 16

enum { SRC_ARENA, SRC_PLAIN, SRC_COUNT };
static const char *src_name[SRC_COUNT] = {"arena", "plain"};

/* What the ranks hand back to the parent, in shared memory. */
typedef struct {
    double allreduce_s[MAX_SIZES][SRC_COUNT][WORLD][MAX_ITERS];
    double memcpy_s[MAX_SIZES][MAX_ITERS];
    int failed;
} results;

typedef struct {
    size_t sizes[MAX_SIZES];
    int nsizes, iters;
    size_t chunk_bytes;
} config;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void fill_ones(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = 1.0f;
}

/* Time `iters` all-reduces of buf, each started right after a barrier. Before each
 * one (untimed) the rank rewrites its buffer, as the backward pass rewrites the
 * gradients: otherwise the lines a rank reduced would still sit in its own cache
 * from the previous iteration and the figure would flatter the all-reduce. */
static void time_allreduce(coll_comm *c, float *buf, size_t n, int iters, double *out, int *failed) {
    for (int i = 0; i < WARMUP; i++) *failed |= c->allreduce_avg_f32(c, buf, n) != 0;
    for (int i = 0; i < iters; i++) {
        fill_ones(buf, n);
        *failed |= c->barrier(c) != 0;
        double t0 = now_s();
        *failed |= c->allreduce_avg_f32(c, buf, n) != 0;
        out[i] = now_s() - t0;
    }
}

static void time_memcpy(float *dst, float *src, size_t n, int iters, double *out) {
    for (int i = 0; i < WARMUP; i++) memcpy(dst, src, n * sizeof(float));
    for (int i = 0; i < iters; i++) {
        fill_ones(src, n); /* same starting state as the all-reduce's */
        double t0 = now_s();
        memcpy(dst, src, n * sizeof(float));
        __asm__ __volatile__("" : : "r"(dst) : "memory"); /* keep the copy */
        out[i] = now_s() - t0;
    }
}

static void rank_main(coll_cpu_group *g, int rank, const config *cfg, results *res) {
    coll_comm *c = coll_cpu_attach(g, rank);
    if (!c) _exit(2);
    size_t max_n = 0;
    for (int s = 0; s < cfg->nsizes; s++) max_n = cfg->sizes[s] > max_n ? cfg->sizes[s] : max_n;
    float *arena = c->alloc(c, max_n * sizeof(float));
    float *plain = malloc(max_n * sizeof(float));
    float *dst = malloc(max_n * sizeof(float));
    if (!arena || !plain || !dst) _exit(3);
    fill_ones(arena, max_n), fill_ones(plain, max_n), fill_ones(dst, max_n); /* fault in */
    int failed = 0;
    for (int s = 0; s < cfg->nsizes; s++) {
        size_t n = cfg->sizes[s];
        time_allreduce(c, arena, n, cfg->iters, res->allreduce_s[s][SRC_ARENA][rank], &failed);
        time_allreduce(c, plain, n, cfg->iters, res->allreduce_s[s][SRC_PLAIN][rank], &failed);
        if (rank == 0) time_memcpy(dst, plain, n, cfg->iters, res->memcpy_s[s]);
        failed |= c->barrier(c) != 0; /* the peer waits (asleep) while rank 0 copies */
    }
    if (failed) res->failed = 1;
    _exit(failed);
}

/* The slower rank's time per iteration, then the median over iterations. */
static double allreduce_median(results *res, int s, int src, int iters) {
    double per_iter[MAX_ITERS];
    for (int i = 0; i < iters; i++) {
        per_iter[i] = 0;
        for (int r = 0; r < WORLD; r++)
            if (res->allreduce_s[s][src][r][i] > per_iter[i]) per_iter[i] = res->allreduce_s[s][src][r][i];
    }
    return median(per_iter, iters);
}

static void report(const config *cfg, size_t chunk_bytes, results *res) {
    for (int s = 0; s < cfg->nsizes; s++) {
        size_t n = cfg->sizes[s];
        double mc = median(res->memcpy_s[s], cfg->iters);
        for (int src = 0; src < SRC_COUNT; src++) {
            double ar = allreduce_median(res, s, src, cfg->iters);
            double busbw = 4.0 * (double)n * 2 * (WORLD - 1) / WORLD / ar / 1e9;
            printf("{\"bench\":\"allreduce_cpu\",\"world\":%d,\"n\":%zu,\"bytes\":%zu,\"src\":\"%s\","
                   "\"chunk_bytes\":%zu,\"iters\":%d,\"allreduce_ms\":%.4f,\"memcpy_ms\":%.4f,"
                   "\"ratio\":%.3f,\"busbw_GBs\":%.2f}\n",
                   WORLD, n, n * sizeof(float), src_name[src], chunk_bytes, cfg->iters, ar * 1e3, mc * 1e3,
                   ar / mc, busbw);
        }
    }
}

static int parse_args(int argc, char **argv, config *cfg) {
    cfg->iters = 20;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
            cfg->chunk_bytes = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
            cfg->iters = atoi(argv[++i]);
        else if (cfg->nsizes < MAX_SIZES && strtoull(argv[i], NULL, 0) > 0)
            cfg->sizes[cfg->nsizes++] = strtoull(argv[i], NULL, 0);
        else
            return -1;
    }
    if (cfg->iters < 1 || cfg->iters > MAX_ITERS) return -1;
    if (cfg->nsizes == 0) {
        const size_t dflt[] = {16, 524288, 16777216};
        for (int s = 0; s < 3; s++) cfg->sizes[cfg->nsizes++] = dflt[s];
    }
    return 0;
}

int main(int argc, char **argv) {
    config cfg = {0};
    if (parse_args(argc, argv, &cfg) != 0) {
        fprintf(stderr, "usage: %s [--chunk BYTES] [--iters N<=%d] [N_FLOATS ...]\n", argv[0], MAX_ITERS);
        return 2;
    }
    size_t max_n = 0;
    for (int s = 0; s < cfg.nsizes; s++) max_n = cfg.sizes[s] > max_n ? cfg.sizes[s] : max_n;
    coll_cpu_group *g = coll_cpu_group_create_tuned(WORLD, max_n * sizeof(float) + 4096, cfg.chunk_bytes);
    results *res = mmap(NULL, sizeof(results), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (!g || res == MAP_FAILED) {
        perror("bench_allreduce: setup");
        return 1;
    }
    pid_t pids[WORLD];
    for (int r = 0; r < WORLD; r++)
        if ((pids[r] = fork()) == 0) rank_main(g, r, &cfg, res);
    int ok = 1;
    for (int r = 0; r < WORLD; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    if (!ok || res->failed) {
        fprintf(stderr, "bench_allreduce: a rank failed\n");
        return 1;
    }
    report(&cfg, coll_cpu_group_chunk_bytes(g), res);
    coll_cpu_group_destroy(g);
    return 0;
}
