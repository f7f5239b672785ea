/* What a GPU run stands on, by version: see gpu_versions.h. */
#include "gpu_versions.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <ctype.h>
#include <library_types.h>
#include <nccl.h>
#include <stdio.h>
#include <string.h>

/* The first word of the driver's version line that is a version number. */
static void driver_version(char *out, size_t outlen) {
    char line[512];
    out[0] = '\0';
    FILE *f = fopen("/proc/driver/nvidia/version", "r");
    if (!f) return;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    if (!got) return;
    for (char *w = strtok(line, " \t\n"); w; w = strtok(NULL, " \t\n")) {
        size_t digits = strspn(w, "0123456789.");
        if (digits == strlen(w) && isdigit((unsigned char)w[0]) && strchr(w, '.')) {
            snprintf(out, outlen, "%s", w);
            return;
        }
    }
}

void gpu_versions_get(gpu_versions *v) {
    memset(v, 0, sizeof *v);
    driver_version(v->driver, sizeof v->driver);
    if (cudaDriverGetVersion(&v->driver_cuda) != cudaSuccess) v->driver_cuda = 0;
    if (cudaRuntimeGetVersion(&v->runtime) != cudaSuccess) v->runtime = 0;
    cublasGetProperty(MAJOR_VERSION, &v->cublas[0]);
    cublasGetProperty(MINOR_VERSION, &v->cublas[1]);
    cublasGetProperty(PATCH_LEVEL, &v->cublas[2]);
    if (ncclGetVersion(&v->nccl) != ncclSuccess) v->nccl = 0;
}

void gpu_versions_describe(const gpu_versions *v, char *out, size_t outlen) {
    char driver[128];
    if (v->driver_cuda)
        snprintf(driver, sizeof driver, "NVIDIA driver %s (CUDA %d.%d)", v->driver[0] ? v->driver : "of unknown version",
                 v->driver_cuda / 1000, v->driver_cuda % 1000 / 10);
    else
        snprintf(driver, sizeof driver, "no NVIDIA driver%s%s", v->driver[0] ? " for CUDA; kernel module " : "",
                 v->driver);
    snprintf(out, outlen, "%s, CUDA runtime %d.%d, cuBLAS %d.%d.%d, NCCL %d.%d.%d", driver, v->runtime / 1000,
             v->runtime % 1000 / 10, v->cublas[0], v->cublas[1], v->cublas[2], v->nccl / 10000, v->nccl % 10000 / 100,
             v->nccl % 100);
}
