/* A stand-in for ddp-trainer that only reports: started by ddpd like the real one
 * (--config, --run-dir, --events, DDPD_RUN_ID, DDPD_RUN_SECRET), it says hello as the
 * launcher and as rank 0, then sends N step events (N from the config's name,
 * "ingest-N") as fast as the event socket takes them, one event per line, written
 * in 64 KiB batches as the real trainer batches them; then the launcher's `end`.
 * With a name "metric-N" it sends what a command run's reporter sends instead:
 * `metric` events with loss, lr and a series of the script's own (acc).
 * It writes bench.json in the run directory: when the first and last events were
 * sent (unix ms), so that bench_server.py can time the ingest to the last commit. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static long long unix_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void write_all(int fd, const char *p, size_t n) {
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            perror("bench_ingest_trainer: send");
            exit(1);
        }
        p += w;
        n -= (size_t)w;
    }
}

static int connect_to(const char *path) {
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("bench_ingest_trainer: connect");
        exit(1);
    }
    return fd;
}

int main(int argc, char **argv) {
    const char *config = NULL, *run_dir = NULL, *events = NULL;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--config")) config = argv[i + 1];
        else if (!strcmp(argv[i], "--run-dir")) run_dir = argv[i + 1];
        else if (!strcmp(argv[i], "--events")) events = argv[i + 1];
    }
    const char *run = getenv("DDPD_RUN_ID"), *secret = getenv("DDPD_RUN_SECRET");
    if (!config || !run_dir || !events || !run || !secret) {
        fprintf(stderr, "bench_ingest_trainer: started without the trainer contract's arguments\n");
        return 2;
    }
    json_t *cfg = json_load_file(config, 0, NULL);
    const char *name = cfg ? json_string_value(json_object_get(cfg, "name")) : NULL;
    bool metric = name && !strncmp(name, "metric-", 7);
    long n = name && (metric || !strncmp(name, "ingest-", 7)) ? atol(name + 7) : 0;
    if (n <= 0) {
        fprintf(stderr, "bench_ingest_trainer: the config's name must be ingest-N or metric-N\n");
        return 2;
    }
    char line[512];
    int launcher = connect_to(events), rank0 = connect_to(events);
    int len = snprintf(line, sizeof line,
                       "{\"run\":\"%s\",\"rank\":-1,\"seq\":0,\"t\":%lld,\"type\":\"hello\",\"pid\":%d,\"secret\":\"%s\"}\n",
                       run, unix_ms(), (int)getpid(), secret);
    write_all(launcher, line, (size_t)len);
    len = snprintf(line, sizeof line,
                   "{\"run\":\"%s\",\"rank\":0,\"seq\":0,\"t\":%lld,\"type\":\"hello\",\"pid\":%d,\"host\":\"bench\","
                   "\"device\":\"cpu\",\"world_size\":1,\"epochs\":1,\"steps_per_epoch\":%ld,\"total_steps\":%ld,"
                   "\"secret\":\"%s\"}\n",
                   run, unix_ms(), (int)getpid(), n, n, secret);
    write_all(rank0, line, (size_t)len);

    static char buf[65536];
    size_t used = 0;
    long long t0 = unix_ms();
    for (long g = 1; g <= n; g++) {
        double loss = 2.0 / (1.0 + (double)g / 1000.0) + 0.001 * (double)(g % 7);
        if (metric)
            len = snprintf(line, sizeof line,
                           "{\"run\":\"%s\",\"rank\":0,\"seq\":%ld,\"t\":%lld,\"type\":\"metric\",\"global_step\":%ld,"
                           "\"values\":{\"loss\":%.17g,\"lr\":0.001,\"acc\":%.17g}}\n",
                           run, g, t0 + g / 1000, g, loss, 1.0 - loss / 3.0);
        else
            len = snprintf(line, sizeof line,
                           "{\"run\":\"%s\",\"rank\":0,\"seq\":%ld,\"t\":%lld,\"type\":\"step\",\"epoch\":0,\"step\":%ld,"
                           "\"global_step\":%ld,\"loss\":%.17g,\"lr\":0.001,\"samples_per_s\":%.17g}\n",
                           run, g, t0 + g / 1000, g - 1, g, loss, 50000.0 + (double)(g % 100));
        if (used + (size_t)len > sizeof buf) {
            write_all(rank0, buf, used);
            used = 0;
        }
        memcpy(buf + used, line, (size_t)len);
        used += (size_t)len;
    }
    write_all(rank0, buf, used);
    long long t1 = unix_ms();
    close(rank0);
    len = snprintf(line, sizeof line, "{\"run\":\"%s\",\"rank\":-1,\"seq\":1,\"t\":%lld,\"type\":\"end\",\"status\":\"succeeded\",\"reason\":\"\"}\n",
                   run, unix_ms());
    write_all(launcher, line, (size_t)len);
    close(launcher);

    char path[4096];
    snprintf(path, sizeof path, "%s/bench.json", run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "{\"steps\": %ld, \"first_sent_ms\": %lld, \"last_sent_ms\": %lld}\n", n, t0, t1);
        fclose(f);
    }
    json_decref(cfg);
    return 0;
}
