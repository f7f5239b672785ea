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

/* What an error means for the run, and what to do; NULL when CUDA's words say it. */
static const char *cuda_error_hint(cudaError_t rc) {
    switch (rc) {
    case cudaErrorMemoryAllocation:
        return "the GPU ran out of memory (the run's memory plan was checked against what was free at its start: "
               "another process may have taken memory since); lower train.batch_size, or free the GPU";
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorMisalignedAddress:
    case cudaErrorIllegalInstruction:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorAssert:
        return "a kernel faulted; CUDA reports it at the next call that waits for the GPU, which may not be the "
               "kernel at fault: rerun with CUDA_LAUNCH_BLOCKING=1 to stop at the kernel that faulted";
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorDevicesUnavailable:
        return "the GPU failed or is unavailable: see nvidia-smi -q and the kernel log (NVIDIA Xid messages)";
    case cudaErrorInsufficientDriver:
    case cudaErrorNoDevice:
        return "the NVIDIA driver is missing or older than this CUDA runtime needs: see nvidia-smi";
    default:
        return NULL;
    }
}

void gpu_cuda_error_text(cudaError_t rc, char *out, size_t outlen) {
    const char *hint = cuda_error_hint(rc);
    snprintf(out, outlen, "%s (%s)%s%s", cudaGetErrorString(rc), cudaGetErrorName(rc), hint ? ": " : "",
             hint ? hint : "");
}

static const char *nccl_error_hint(ncclResult_t rc) {
    switch (rc) {
    case ncclUnhandledCudaError: return "a CUDA call inside NCCL failed";
    case ncclSystemError:
        return "a system call inside NCCL failed (sockets, or shared memory: a container needs --shm-size of "
               "1 GiB or more)";
    case ncclRemoteError: return "a peer rank failed, or the connection to it broke";
    case ncclInternalError: return "NCCL met an internal error";
    case ncclInvalidArgument:
    case ncclInvalidUsage: return "NCCL refused the call";
    default: return NULL;
    }
}

void gpu_nccl_error_text(ncclResult_t rc, const char *last, char *out, size_t outlen) {
    const char *hint = nccl_error_hint(rc);
    snprintf(out, outlen, "%s (NCCL error %d)%s%s%s%s; rerun with NCCL_DEBUG=WARN for NCCL's own account",
             ncclGetErrorString(rc), (int)rc, hint ? ": " : "", hint ? hint : "", last && last[0] ? ": " : "",
             last && last[0] ? last : "");
}

int gpu_check_cuda(gpu_error *ge, cudaError_t rc, const char *call) {
    if (rc == cudaSuccess) return 0;
    char what[400];
    gpu_cuda_error_text(rc, what, sizeof what);
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
    char what[400];
    gpu_nccl_error_text(rc, ncclGetLastError(NULL), what, sizeof what);
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
