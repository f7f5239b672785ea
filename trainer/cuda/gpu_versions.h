/* The versions of what a GPU run stands on: the NVIDIA driver (its own version, and
 * the CUDA version it supports), the CUDA runtime, cuBLAS and NCCL, as the process
 * loaded them. Logged when a GPU run starts (engine_cuda.c) and printed by the GPU
 * bundle's pre-flight (gpu_preflight). None of it needs a GPU. CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_GPU_VERSIONS_H
#define DDPD_TRAINER_CUDA_GPU_VERSIONS_H

#include <stddef.h>

typedef struct {
    char driver[64];  /* "580.65.06" (/proc/driver/nvidia/version), "" when unknown */
    int driver_cuda;  /* cudaDriverGetVersion: 13000 for CUDA 13.0; 0 without a driver */
    int runtime;      /* cudaRuntimeGetVersion: 13000 */
    int cublas[3];    /* major, minor, patch */
    int nccl;         /* ncclGetVersion: 22703 for 2.27.3 */
} gpu_versions;

void gpu_versions_get(gpu_versions *v);

/* "NVIDIA driver 580.65.06 (CUDA 13.0), CUDA runtime 13.0, cuBLAS 13.0.2, NCCL 2.27.3". */
void gpu_versions_describe(const gpu_versions *v, char *out, size_t outlen);

#endif
