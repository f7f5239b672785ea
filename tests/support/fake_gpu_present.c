/* For ddp-trainer-fake-cuda (tests/gpu.cmake): the driver "lists" DDPD_FAKE_GPUS
 * GPUs (default 2, as fake_cuda.c plays them), so
 * that backend selection, the rendezvous and the ranks take the nccl path on a
 * machine without one. Linked with -Wl,--wrap=gpu_present_scan_host, this replaces
 * the real scan of /proc/driver/nvidia/gpus; fake_cuda.c plays the GPU itself. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu_devices.h"

int __wrap_gpu_present_scan_host(gpu_present *p);

int __wrap_gpu_present_scan_host(gpu_present *p) {
    const char *env = getenv("DDPD_FAKE_GPUS");
    int n = env && *env ? atoi(env) : 2;
    memset(p, 0, sizeof *p);
    for (int i = 0; i < n && i < GPU_MAX; i++) {
        snprintf(p->gpu[i].bus_id, sizeof p->gpu[i].bus_id, "0000:%02x:00.0", i);
        snprintf(p->gpu[i].uuid, sizeof p->gpu[i].uuid, "GPU-%08d-fake-0000-0000-000000000000", i);
        snprintf(p->gpu[i].model, sizeof p->gpu[i].model, "Fake CPU GPU");
        p->count++;
    }
    snprintf(p->source, sizeof p->source, "%d fake GPU%s (tests/support/fake_gpu_present.c)", p->count,
             p->count == 1 ? "" : "s");
    return p->count;
}
