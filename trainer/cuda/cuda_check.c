/* Return-code checks for CUDA, cuBLAS and NCCL: see cuda_check.h. */
#include "cuda_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void record(gpu_error *ge, const char *call, const char *what) {
    if (ge->msg[0]) return;
    size_t name = strcspn(call, "(");
    while (name > 0 && call[name - 1] == ' ') name--;
    snprintf(ge->msg, sizeof ge->msg, "%.*s: %s", (int)name, call, what);
}

int gpu_check_cuda(gpu_error *ge, cudaError_t rc, const char *call) {
    if (rc == cudaSuccess) return 0;
    char what[256];
    snprintf(what, sizeof what, "%s (%s)", cudaGetErrorString(rc), cudaGetErrorName(rc));
    record(ge, call, what);
    return -1;
}

int gpu_check_cublas(gpu_error *ge, cublasStatus_t rc, const char *call) {
    if (rc == CUBLAS_STATUS_SUCCESS) return 0;
    char what[256];
    snprintf(what, sizeof what, "%s (%s)", cublasGetStatusString(rc), cublasGetStatusName(rc));
    record(ge, call, what);
    return -1;
}

int gpu_check_nccl(gpu_error *ge, ncclResult_t rc, const char *call) {
    if (rc == ncclSuccess) return 0;
    char what[256];
    snprintf(what, sizeof what, "%s (NCCL error %d)", ncclGetErrorString(rc), (int)rc);
    record(ge, call, what);
    return -1;
}

void gpu_error_set(gpu_error *ge, const char *fmt, ...) {
    if (ge->msg[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ge->msg, sizeof ge->msg, fmt, ap);
    va_end(ap);
}
