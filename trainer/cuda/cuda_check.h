/* Checking every CUDA, cuBLAS and NCCL return code with a message that names the
 * call ("cudaMalloc: out of memory (cudaErrorMemoryAllocation)"). The first
 * failure is kept in a gpu_error; the *_TRY macros return -1 from the calling
 * function after recording it. CUDA builds only. */
#ifndef DDPD_CUDA_CHECK_H
#define DDPD_CUDA_CHECK_H

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

typedef struct {
    char msg[512]; /* "" until the first failure */
} gpu_error;

/* Each returns 0 when `rc` is success, else records "NAME: what" (NAME: the call's
 * text up to its first parenthesis) unless a failure is already recorded, and
 * returns -1. */
int gpu_check_cuda(gpu_error *ge, cudaError_t rc, const char *call);
int gpu_check_cublas(gpu_error *ge, cublasStatus_t rc, const char *call);
int gpu_check_nccl(gpu_error *ge, ncclResult_t rc, const char *call);
/* Records a failure in words (printf-style), unless one is already recorded. */
void gpu_error_set(gpu_error *ge, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define CUDA_TRY(ge, call)                                              \
    do {                                                                \
        if (gpu_check_cuda((ge), (call), #call) != 0) return -1;        \
    } while (0)
#define CUBLAS_TRY(ge, call)                                            \
    do {                                                                \
        if (gpu_check_cublas((ge), (call), #call) != 0) return -1;      \
    } while (0)
#define NCCL_TRY(ge, call)                                              \
    do {                                                                \
        if (gpu_check_nccl((ge), (call), #call) != 0) return -1;        \
    } while (0)

#endif
