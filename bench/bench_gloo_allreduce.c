/* Benchmark of the built-in trainer's link between nodes (trainer/nodes/gloo_link.cc:
 * gloo's ring all-reduce over TCP): one process per "node", met through a rendezvous
 * directory both can see. Each process runs this program; rank 0 prints the median
 * seconds of an all-reduce of BYTES of float32 (every call preceded by a barrier, so
 * the time is the collective's and not a late peer's) as one JSON line.
 *
 * usage: bench_gloo_allreduce --kv-dir DIR --rank R --size N --host ADDR [--iface IF]
 *                             [--bytes B] [--iters K]
 * (bench/cross_node.py runs it in two network namespaces) */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gloo_link.h"
#include "kv_store.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *dir = NULL, *host = "127.0.0.1", *iface = NULL;
    int rank = -1, size = 2, iters = 10;
    size_t bytes = (size_t)64 << 20;
    static const struct option opts[] = {{"kv-dir", required_argument, 0, 'k'}, {"rank", required_argument, 0, 'r'},
                                         {"size", required_argument, 0, 's'},   {"host", required_argument, 0, 'h'},
                                         {"iface", required_argument, 0, 'i'},  {"bytes", required_argument, 0, 'b'},
                                         {"iters", required_argument, 0, 'n'},  {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (c) {
        case 'k': dir = optarg; break;
        case 'r': rank = atoi(optarg); break;
        case 's': size = atoi(optarg); break;
        case 'h': host = optarg; break;
        case 'i': iface = optarg; break;
        case 'b': bytes = strtoull(optarg, NULL, 10); break;
        case 'n': iters = atoi(optarg); break;
        default: return 2;
        }
    }
    if (!dir || rank < 0 || rank >= size || iters < 1 || iters > 1000) {
        fprintf(stderr, "usage: bench_gloo_allreduce --kv-dir DIR --rank R --size N --host ADDR [--iface IF] "
                        "[--bytes B] [--iters K]\n");
        return 2;
    }
    char err[1024];
    kv_store *kv = kv_dir_open(dir, err, sizeof err);
    if (!kv) {
        fprintf(stderr, "bench_gloo_allreduce: %s\n", err);
        return 1;
    }
    gloo_link_options o = {.store = kv, .prefix = "bench/", .rank = rank, .size = size, .iface = iface,
                           .hostname = host, .connect_timeout_ms = 60000, .timeout_ms = 120000};
    gloo_link *link = gloo_link_open(&o, err, sizeof err);
    kv->close(kv);
    if (!link) {
        fprintf(stderr, "bench_gloo_allreduce: %s\n", err);
        return 1;
    }
    size_t n = bytes / sizeof(float);
    float *buf = malloc(n * sizeof(float));
    double *took = malloc(sizeof(double) * (size_t)iters);
    if (!buf || !took) return 1;
    for (size_t i = 0; i < n; i++) buf[i] = 1.0f / (float)(i % 1000 + 1);
    for (int w = 0; w < 2; w++) /* warm: connections, page faults */
        if (gloo_link_allreduce_sum_f32(link, buf, n) != 0) goto failed;
    for (int k = 0; k < iters; k++) {
        if (gloo_link_barrier(link) != 0) goto failed;
        double t0 = now_s();
        if (gloo_link_allreduce_sum_f32(link, buf, n) != 0) goto failed;
        took[k] = now_s() - t0;
    }
    qsort(took, (size_t)iters, sizeof *took, by_value);
    if (rank == 0)
        printf("{\"what\": \"gloo_link_allreduce\", \"bytes\": %zu, \"members\": %d, \"median_s\": %.6f, \"min_s\": %.6f, "
               "\"max_s\": %.6f}\n",
               bytes, size, took[iters / 2], took[0], took[iters - 1]);
    gloo_link_close(link);
    return 0;
failed:
    fprintf(stderr, "bench_gloo_allreduce: %s\n", gloo_link_error(link));
    return 1;
}
