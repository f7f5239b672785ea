/* Checking every CUDA, cuBLAS and NCCL return code with a message that names the
 * call, says what the error is and what to do about it ("cudaMalloc: out of memory
 * (cudaErrorMemoryAllocation): the GPU ran out of memory ..."). The first failure
 * is kept in a gpu_error; the *_TRY macros return -1 from the calling function
 * after recording it. CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_CUDA_CHECK_H
#define DDPD_TRAINER_CUDA_CUDA_CHECK_H

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

/* "an illegal memory access was encountered (cudaErrorIllegalAddress): a kernel
 * faulted; ... rerun with CUDA_LAUNCH_BLOCKING=1 ...": CUDA's words, its name, and
 * what the error means for the run and what to try. */
void gpu_cuda_error_text(cudaError_t rc, char *out, size_t outlen);
/* NCCL's words, its code, NCCL's last error message (`last`, from ncclGetLastError;
 * may be NULL or ""), and the hint to rerun with NCCL_DEBUG=WARN. */
void gpu_nccl_error_text(ncclResult_t rc, const char *last, char *out, size_t outlen);

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
