/* A CPU stand-in for the CUDA runtime, cuBLAS and NCCL (one rank), and for the
 * kernels' launchers (kernels.h), so that the GPU backend's host code (the cuda
 * engine, model_cuda's cuBLAS calls, optim_cuda, coll_nccl) runs on a machine
 * without a GPU and can be held against the CPU engine there.
 *
 * Linked into a test executable, these definitions take the place of libcudart's,
 * libcublas's and libnccl's, and of kernels.cu's launchers (the archive member is
 * then never pulled in). Everything runs at once, in call order: streams and
 * events are tokens, "device" memory is host memory. There are DDPD_FAKE_GPUS
 * "GPUs" (default 2) and NCCL works between the ranks that join with one id
 * (the id names a shared memory object: slots and a barrier). cublasSgemm runs as the
 * column-major GEMM it is (OpenBLAS, CblasColMajor), so the row-major trick in
 * model_cuda.c is checked for real. Each kernel runs the very body the .cu files
 * launch (cuda/kernel_bodies.h, optim_rules.h), with the reductions' thread
 * structure played out (the chunks of the bias gradient and of the per-channel
 * sums, the fixed trees of the loss and the norm), so the kernels' arithmetic and
 * index arithmetic are checked; what this cannot check is the CUDA itself (launch
 * shapes, streams, the device's rounding), which the GPU tests do.
 *
 * It behaves as the real ones do where the trainer depends on it:
 * - memory: a device of DDPD_FAKE_GPU_MEMORY_MIB (default 80 GiB), of which the
 *   context holds 300 MiB, a cuBLAS handle 64 MiB and NCCL's connections
 *   DDPD_FAKE_NCCL_BUFFERS_MIB (default 128), taken at ncclCommInitRank with
 *   NCCL_RUNTIME_CONNECT=0, else at the first collective (which fails when they do
 *   not fit); cudaMalloc fails past the total;
 * - ncclGetUniqueId starts a bootstrap thread that lives on (NCCL's does);
 * - cudaDeviceGetPCIBusId numbers the GPUs by PCI bus only with
 *   CUDA_DEVICE_ORDER=PCI_BUS_ID (else the other way round, as FASTEST_FIRST can);
 * - versions (driver, runtime, cuBLAS, NCCL), ncclGetLastError, ncclCommDestroy
 *   (which says on stderr how many collectives the communicator issued).
 *
 * And it fails on demand, for the watchdog's and the failure messages' tests:
 * DDPD_FAKE_CUDA_HANG_AT=N makes the N-th wait (cudaEventSynchronize or
 * cudaStreamSynchronize) block until ncclCommAbort is called (as NCCL's kernels do
 * when a peer is gone), or for ever with DDPD_FAKE_CUDA_HANG_FOREVER=1 (a hung
 * kernel); DDPD_FAKE_NCCL_ASYNC_ERROR_AT=N makes ncclCommGetAsyncError report a
 * remote error from the N-th wait on, and that wait block until the abort;
 * DDPD_FAKE_NCCL_ABORT_HANGS=1 makes ncclCommAbort never return (a wedged GPU);
 * DDPD_FAKE_CUDA_ERROR_AT=N:illegal_address (or :out_of_memory) makes the N-th wait
 * and every later one fail with that error (CUDA's errors are sticky);
 * DDPD_FAKE_NCCL_ERROR_AT=N makes the N-th collective fail with a system error. */
#include <cblas.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <nccl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cuda/kernel_bodies.h"
#include "cuda/kernels.h"
#include "optim_rules.h"

#define MIB (1ull << 20)
#define FAKE_CONTEXT_BYTES (300 * MIB) /* what a context holds before any allocation */
#define FAKE_CUBLAS_BYTES (64 * MIB)   /* a cuBLAS handle's own */

static size_t fake_in_use;

static int env_int(const char *name, int otherwise) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : otherwise;
}

static size_t fake_total(void) {
    const char *v = getenv("DDPD_FAKE_GPU_MEMORY_MIB");
    return v && *v ? (size_t)strtoull(v, NULL, 10) * MIB : 80ull << 30;
}

/* Takes `bytes` of the device (0 when they do not fit: cudaErrorMemoryAllocation). */
static int fake_take(size_t bytes) {
    if (fake_in_use + FAKE_CONTEXT_BYTES + bytes > fake_total()) return 0;
    fake_in_use += bytes;
    return 1;
}

/* ---- hangs and errors on demand ------------------------------------------------------ */

static int waits, hang_at = -1, hang_forever, async_error_at = -1, error_at = -1, configured;
static cudaError_t injected = cudaSuccess, sticky = cudaSuccess;
static atomic_int aborted, async_error;

static void configure(void) {
    if (configured) return;
    configured = 1;
    hang_at = env_int("DDPD_FAKE_CUDA_HANG_AT", -1);
    hang_forever = env_int("DDPD_FAKE_CUDA_HANG_FOREVER", 0);
    async_error_at = env_int("DDPD_FAKE_NCCL_ASYNC_ERROR_AT", -1);
    const char *e = getenv("DDPD_FAKE_CUDA_ERROR_AT");
    if (e && *e) {
        error_at = atoi(e);
        const char *kind = strchr(e, ':');
        injected = kind && !strcmp(kind + 1, "out_of_memory") ? cudaErrorMemoryAllocation : cudaErrorIllegalAddress;
    }
}

static cudaError_t fake_wait(void) {
    configure();
    waits++;
    if (waits == error_at) sticky = injected;
    if (waits == async_error_at) atomic_store(&async_error, 1);
    if (waits == hang_at || waits == async_error_at) {
        struct timespec t = {0, 10 * 1000 * 1000};
        while (hang_forever || !atomic_load(&aborted)) nanosleep(&t, NULL);
    }
    return sticky;
}

/* ---- CUDA runtime ----------------------------------------------------------------- */

static int current_device;
/* As CUDA: the GPUs CUDA_VISIBLE_DEVICES leaves (counted simply: one per entry). */
static int fake_gpus(void) {
    int n = env_int("DDPD_FAKE_GPUS", 2);
    const char *cvd = getenv("CUDA_VISIBLE_DEVICES");
    if (!cvd) return n;
    int entries = 0;
    for (const char *c = cvd; *c; c++)
        if (*c != ',' && *c != ' ' && (c == cvd || c[-1] == ',')) entries++;
    return entries < n ? entries : n;
}
cudaError_t cudaGetDeviceCount(int *count) { *count = fake_gpus(); return cudaSuccess; }
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= fake_gpus()) return cudaErrorInvalidDevice;
    current_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *device) { *device = current_device; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(struct cudaDeviceProp *prop, int device) {
    (void)device;
    memset(prop, 0, sizeof *prop);
    strcpy(prop->name, "Fake CPU GPU");
    return cudaSuccess;
}
/* The PCI address of ordinal `device`: fake_gpu_present.c lists GPU i at bus i. The
 * ordinals follow the bus only with CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default,
 * FASTEST_FIRST, may order them otherwise); CUDA_VISIBLE_DEVICES is taken as unset
 * or the identity here. */
cudaError_t cudaDeviceGetPCIBusId(char *bus, int len, int device) {
    int n = env_int("DDPD_FAKE_GPUS", 2);
    const char *order = getenv("CUDA_DEVICE_ORDER");
    int by_bus = order && !strcmp(order, "PCI_BUS_ID");
    if (device < 0 || device >= n) return cudaErrorInvalidDevice;
    snprintf(bus, (size_t)len, "0000:%02X:00.0", by_bus ? device : n - 1 - device);
    return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int *v) { *v = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int *v) { *v = 13000; return cudaSuccess; }
const char *cudaGetErrorString(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    default: return "fake CUDA error";
    }
}
const char *cudaGetErrorName(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    default: return "cudaErrorFake";
    }
}
cudaError_t cudaGetLastError(void) { return sticky; }
cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) { *least = 0, *greatest = -5; return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t *s) { *s = (cudaStream_t)malloc(1); return cudaSuccess; }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) { (void)flags; return cudaStreamCreate(s); }
cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    (void)flags, (void)priority;
    return cudaStreamCreate(s);
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { free(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) { (void)s; return fake_wait(); }
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    (void)s, (void)e, (void)flags;
    return sticky;
}
cudaError_t cudaDeviceSynchronize(void) { return sticky; }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    *e = (cudaEvent_t)malloc(1);
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) { (void)e, (void)s; return sticky; }
cudaError_t cudaEventSynchronize(cudaEvent_t e) { (void)e; return fake_wait(); }
cudaError_t cudaEventDestroy(cudaEvent_t e) { free(e); return cudaSuccess; }

/* Allocations carry their size in front, for cudaMemGetInfo. */
static void *fake_alloc(size_t bytes) {
    if (!fake_take(bytes)) return NULL;
    size_t *p = aligned_alloc(256, 256 + ((bytes + 255) / 256) * 256);
    if (!p) return NULL;
    *p = bytes;
    return (char *)p + 256;
}
static void fake_free(void *q) {
    if (!q) return;
    size_t *p = (size_t *)((char *)q - 256);
    fake_in_use -= *p;
    free(p);
}
cudaError_t cudaMalloc(void **p, size_t bytes) { return (*p = fake_alloc(bytes)) ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaMallocHost(void **p, size_t bytes) { return (*p = malloc(bytes ? bytes : 1)) ? cudaSuccess : cudaErrorMemoryAllocation; }
cudaError_t cudaFree(void *p) { fake_free(p); return cudaSuccess; }
cudaError_t cudaFreeHost(void *p) { free(p); return cudaSuccess; }
cudaError_t cudaMemGetInfo(size_t *free_b, size_t *total) {
    *total = fake_total();
    *free_b = *total - fake_in_use - FAKE_CONTEXT_BYTES;
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind) {
    (void)kind;
    memmove(dst, src, bytes);
    return sticky;
}
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t bytes, enum cudaMemcpyKind kind, cudaStream_t s) {
    (void)s;
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void *p, int value, size_t bytes) { memset(p, value, bytes); return sticky; }
cudaError_t cudaMemsetAsync(void *p, int value, size_t bytes, cudaStream_t s) {
    (void)s;
    return cudaMemset(p, value, bytes);
}

/* ---- cuBLAS ------------------------------------------------------------------------ */

cublasStatus_t cublasCreate_v2(cublasHandle_t *h) {
    if (!fake_take(FAKE_CUBLAS_BYTES)) return CUBLAS_STATUS_ALLOC_FAILED;
    *h = (cublasHandle_t)malloc(1);
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasDestroy_v2(cublasHandle_t h) {
    free(h);
    fake_in_use -= FAKE_CUBLAS_BYTES;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasGetProperty(libraryPropertyType type, int *value) {
    *value = type == MAJOR_VERSION ? 13 : 0;
    return CUBLAS_STATUS_SUCCESS;
}
cublasStatus_t cublasSetStream_v2(cublasHandle_t h, cudaStream_t s) { (void)h, (void)s; return CUBLAS_STATUS_SUCCESS; }
cublasStatus_t cublasSetWorkspace_v2(cublasHandle_t h, void *w, size_t bytes) {
    (void)h;
    return w && bytes && (size_t)w % 256 == 0 ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t mode) { (void)h, (void)mode; return CUBLAS_STATUS_SUCCESS; }
const char *cublasGetStatusString(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "success" : "fake cuBLAS error"; }
const char *cublasGetStatusName(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS ? "CUBLAS_STATUS_SUCCESS" : "CUBLAS_STATUS_FAKE"; }

/* The column-major GEMM cuBLAS computes, with cuBLAS's argument checks. */
cublasStatus_t cublasSgemm_v2(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                              const float *alpha, const float *A, int lda, const float *B, int ldb, const float *beta,
                              float *C, int ldc) {
    (void)h;
    int rows_a = ta == CUBLAS_OP_N ? m : k, rows_b = tb == CUBLAS_OP_N ? k : n;
    if (m < 0 || n < 0 || k < 0 || lda < (rows_a > 1 ? rows_a : 1) || ldb < (rows_b > 1 ? rows_b : 1) ||
        ldc < (m > 1 ? m : 1))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    cblas_sgemm(CblasColMajor, ta == CUBLAS_OP_N ? CblasNoTrans : CblasTrans, tb == CUBLAS_OP_N ? CblasNoTrans : CblasTrans,
                m, n, k, *alpha, A, lda, B, ldb, *beta, C, ldc);
    return CUBLAS_STATUS_SUCCESS;
}

/* ---- NCCL, between forked ranks -------------------------------------------------- */

#define FAKE_MAX_RANKS 8
#define FAKE_SLOT_BYTES (64ull << 20)

typedef struct {
    atomic_int arrived, generation;
    int nranks;
} fake_group;

struct ncclComm {
    fake_group *g;
    int rank, nranks;
    int connected;     /* its connection buffers are taken */
    long collectives;  /* issued, for ncclCommDestroy's line */
};

static char last_error[256];

static char *slot(fake_group *g, int rank) { return (char *)g + 4096 + (size_t)rank * FAKE_SLOT_BYTES; }

static void fake_barrier(fake_group *g, int nranks) {
    int gen = atomic_load(&g->generation);
    if (atomic_fetch_add(&g->arrived, 1) == nranks - 1) {
        atomic_store(&g->arrived, 0);
        atomic_fetch_add(&g->generation, 1);
        return;
    }
    while (atomic_load(&g->generation) == gen) sched_yield();
}

#define FAKE_GROUP_BYTES (4096 + FAKE_MAX_RANKS * FAKE_SLOT_BYTES)

/* NCCL's bootstrap root: a thread that lives as long as the process. */
static void *bootstrap_root(void *arg) {
    (void)arg;
    for (;;) pause();
    return NULL;
}

/* The id names a shared memory object (/dev/shm), so that ranks of other launchers
 * (the "nodes" of a run across nodes, handed the id through the rendezvous) join the
 * same group as forked ones; rank 0 removes the name once all have joined. */
ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    static atomic_int made;
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "/ddpd-fake-nccl-%d-%d", (int)getpid(), atomic_fetch_add(&made, 1));
    int fd = shm_open(id->internal, O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0) return ncclSystemError;
    int ok = ftruncate(fd, FAKE_GROUP_BYTES) == 0;
    close(fd);
    pthread_t t;
    if (ok && pthread_create(&t, NULL, bootstrap_root, NULL) == 0) pthread_detach(t);
    return ok ? ncclSuccess : ncclSystemError;
}

/* Takes the communicator's connection buffers, once. */
static ncclResult_t fake_connect(struct ncclComm *c) {
    if (c->connected) return ncclSuccess;
    if (!fake_take((size_t)env_int("DDPD_FAKE_NCCL_BUFFERS_MIB", 128) * MIB)) {
        snprintf(last_error, sizeof last_error, "fake NCCL: cannot allocate its connection buffers: out of memory");
        return ncclUnhandledCudaError;
    }
    c->connected = 1;
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
    if (nranks < 1 || nranks > FAKE_MAX_RANKS || rank < 0 || rank >= nranks) return ncclInvalidArgument;
    int fd = shm_open(id.internal, O_RDWR, 0);
    if (fd < 0) return ncclInvalidArgument;
    void *g = mmap(NULL, FAKE_GROUP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    close(fd);
    if (g == MAP_FAILED) return ncclSystemError;
    struct ncclComm *c = calloc(1, sizeof *c);
    c->g = g;
    c->rank = rank, c->nranks = nranks;
    fake_barrier(c->g, nranks); /* every rank has joined */
    if (rank == 0) shm_unlink(id.internal);
    const char *lazy = getenv("NCCL_RUNTIME_CONNECT");
    if (lazy && !strcmp(lazy, "0") && fake_connect(c) != ncclSuccess) return ncclUnhandledCudaError;
    *comm = c;
    return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (env_int("DDPD_FAKE_NCCL_ABORT_HANGS", 0))
        for (;;) pause();
    free(comm);
    atomic_store(&aborted, 1);
    return ncclSuccess;
}
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    fprintf(stderr, "fake NCCL: rank %d of %d destroyed its communicator after %ld collectives\n", comm->rank,
            comm->nranks, comm->collectives);
    free(comm);
    return ncclSuccess;
}
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *e) {
    (void)comm;
    *e = atomic_load(&async_error) ? ncclRemoteError : ncclSuccess;
    return ncclSuccess;
}
const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    default: return "fake NCCL error";
    }
}
const char *ncclGetLastError(ncclComm_t comm) {
    (void)comm;
    return last_error;
}
ncclResult_t ncclGetVersion(int *version) { *version = 22809; return ncclSuccess; }
static size_t nccl_size(ncclDataType_t t) { return t == ncclDouble ? 8 : t == ncclFloat ? 4 : t == ncclUint8 ? 1 : 0; }

/* A collective's start: its connection (at the first, when lazy), and the failure
 * DDPD_FAKE_NCCL_ERROR_AT asks for. */
static ncclResult_t fake_collective(struct ncclComm *c) {
    ncclResult_t r = fake_connect(c);
    if (r != ncclSuccess) return r;
    if (++c->collectives == env_int("DDPD_FAKE_NCCL_ERROR_AT", -1)) {
        snprintf(last_error, sizeof last_error,
                 "fake NCCL: socket recv failed: connection closed by peer (DDPD_FAKE_NCCL_ERROR_AT)");
        return ncclSystemError;
    }
    return ncclSuccess;
}

/* Every rank's contribution in its slot, then each sums them in rank order. */
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t s) {
    (void)s;
    size_t bytes = count * nccl_size(t);
    if (!nccl_size(t) || t == ncclUint8 || bytes > FAKE_SLOT_BYTES || (op != ncclSum && op != ncclAvg))
        return ncclInvalidArgument;
    ncclResult_t r = fake_collective(comm);
    if (r != ncclSuccess) return r;
    memcpy(slot(comm->g, comm->rank), send, bytes);
    fake_barrier(comm->g, comm->nranks);
    for (size_t i = 0; i < count; i++) {
        if (t == ncclFloat) {
            float acc = 0.0f;
            for (int r = 0; r < comm->nranks; r++) acc += ((const float *)slot(comm->g, r))[i];
            ((float *)recv)[i] = op == ncclAvg ? acc / (float)comm->nranks : acc;
        } else {
            double acc = 0.0;
            for (int r = 0; r < comm->nranks; r++) acc += ((const double *)slot(comm->g, r))[i];
            ((double *)recv)[i] = op == ncclAvg ? acc / comm->nranks : acc;
        }
    }
    fake_barrier(comm->g, comm->nranks); /* nobody refills a slot before everyone has read */
    return ncclSuccess;
}
/* Point-to-point, as the fixed-order reduce-scatter's all-to-all and its all-gather
 * use it: inside ncclGroupStart .. ncclGroupEnd only (as there), the sends and
 * receives are recorded, and ncclGroupEnd plays the group out: every rank writes
 * its sends into its slot (a table of {peer, offset, bytes}, then the data), all
 * meet, each receive takes the next unread send of its peer to this rank (NCCL
 * matches a pair's sends and receives in order), all meet again. The group counts
 * as one collective (DDPD_FAKE_NCCL_ERROR_AT fails its ncclGroupEnd). */
#define FAKE_MAX_P2P 256
typedef struct {
    void *buf;
    size_t bytes;
    int peer, send;
} fake_p2p;
typedef struct {
    int peer;
    size_t offset, bytes;
} fake_p2p_entry;
static struct {
    int open;
    struct ncclComm *comm;
    int n;
    fake_p2p op[FAKE_MAX_P2P];
} p2p;

ncclResult_t ncclGroupStart(void) {
    if (p2p.open) return ncclInvalidUsage;
    p2p.open = 1, p2p.n = 0, p2p.comm = NULL;
    return ncclSuccess;
}
static ncclResult_t p2p_record(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, int send) {
    if (!p2p.open) {
        snprintf(last_error, sizeof last_error, "fake NCCL: point-to-point outside a group is not played out");
        return ncclInvalidUsage;
    }
    if (!nccl_size(t) || peer < 0 || peer >= comm->nranks || peer == comm->rank || p2p.n == FAKE_MAX_P2P ||
        (p2p.comm && p2p.comm != comm))
        return ncclInvalidArgument;
    p2p.comm = comm;
    p2p.op[p2p.n++] = (fake_p2p){buf, count * nccl_size(t), peer, send};
    return ncclSuccess;
}
ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
    (void)s;
    return p2p_record((void *)send, count, t, peer, comm, 1);
}
ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t t, int peer, ncclComm_t comm, cudaStream_t s) {
    (void)s;
    return p2p_record(recv, count, t, peer, comm, 0);
}
ncclResult_t ncclGroupEnd(void) {
    if (!p2p.open) return ncclInvalidUsage;
    p2p.open = 0;
    struct ncclComm *comm = p2p.comm;
    if (!comm) return ncclSuccess; /* an empty group */
    ncclResult_t r = fake_collective(comm);
    if (r != ncclSuccess) return r;
    char *mine = slot(comm->g, comm->rank);
    fake_p2p_entry *table = (fake_p2p_entry *)(mine + sizeof(int));
    size_t at = sizeof(int) + FAKE_MAX_P2P * sizeof(fake_p2p_entry);
    int sends = 0;
    for (int k = 0; k < p2p.n; k++) {
        fake_p2p *o = &p2p.op[k];
        if (!o->send) continue;
        if (at + o->bytes > FAKE_SLOT_BYTES) return ncclInvalidArgument;
        memcpy(mine + at, o->buf, o->bytes);
        table[sends++] = (fake_p2p_entry){o->peer, at, o->bytes};
        at += o->bytes;
    }
    memcpy(mine, &sends, sizeof sends);
    fake_barrier(comm->g, comm->nranks);
    int taken[FAKE_MAX_RANKS] = {0}; /* sends of each peer to me already matched */
    for (int k = 0; k < p2p.n; k++) {
        fake_p2p *o = &p2p.op[k];
        if (o->send) continue;
        char *theirs = slot(comm->g, o->peer);
        int n;
        memcpy(&n, theirs, sizeof n);
        const fake_p2p_entry *t = (const fake_p2p_entry *)(theirs + sizeof(int));
        int seen = 0, found = 0;
        for (int i = 0; i < n && !found; i++)
            if (t[i].peer == comm->rank && seen++ == taken[o->peer]) {
                if (t[i].bytes != o->bytes) {
                    snprintf(last_error, sizeof last_error,
                             "fake NCCL: rank %d receives %zu bytes from rank %d, which sends %zu", comm->rank, o->bytes,
                             o->peer, t[i].bytes);
                    return ncclInvalidUsage;
                }
                memcpy(o->buf, theirs + t[i].offset, o->bytes);
                taken[o->peer]++;
                found = 1;
            }
        if (!found) {
            snprintf(last_error, sizeof last_error, "fake NCCL: rank %d receives from rank %d, which sends it nothing",
                     comm->rank, o->peer);
            return ncclInvalidUsage;
        }
    }
    fake_barrier(comm->g, comm->nranks); /* nobody refills a slot before everyone has read */
    return ncclSuccess;
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root, ncclComm_t comm,
                           cudaStream_t s) {
    (void)s;
    size_t bytes = count * nccl_size(t);
    if (!nccl_size(t) || bytes > FAKE_SLOT_BYTES || root < 0 || root >= comm->nranks) return ncclInvalidArgument;
    ncclResult_t r = fake_collective(comm);
    if (r != ncclSuccess) return r;
    if (comm->rank == root) memcpy(slot(comm->g, root), send, bytes);
    fake_barrier(comm->g, comm->nranks);
    if (comm->rank != root) memcpy(recv, slot(comm->g, root), bytes);
    fake_barrier(comm->g, comm->nranks);
    return ncclSuccess;
}

/* ---- the kernels: kernel_bodies.h's and optim_rules.h's bodies, in loops ------------ *
 * An element-wise kernel is its body for every element in order; a reduction plays
 * out its grid: each thread's share (the same body), then the block's tree. */

#define THREADS KB_THREADS

/* The fixed tree of a block's per-thread partials (the .cu files' __syncthreads loops). */
static double tree_sum(double *s) {
    for (int half = THREADS / 2; half > 0; half /= 2)
        for (int t = 0; t < half; t++) s[t] += s[t + half];
    return s[0];
}

cudaError_t k_u8_to_f32_gather_cuda(float *x, uint8_t *labels_out, const uint8_t *images, const uint8_t *labels,
                                    const uint64_t *indices, size_t first, int rows, size_t pixels, float scale,
                                    cudaStream_t stream) {
    (void)stream;
    size_t n = (size_t)(rows > 0 ? rows : 0) * pixels;
    for (size_t i = 0; i < n; i++) kb_u8_to_f32_gather(i, x, labels_out, images, labels, indices, first, pixels, scale);
    return cudaSuccess;
}

cudaError_t k_bias_act_forward_cuda(float *z, float *pre, const float *bias, int rows, int cols, int act,
                                    int apply_act, cudaStream_t stream) {
    (void)stream;
    if (rows <= 0 || cols <= 0) return cudaSuccess;
    size_t n = (size_t)rows * (size_t)cols;
    for (size_t i = 0; i < n; i++) kb_bias_act_forward(i, z, pre, bias, (size_t)cols, act, apply_act);
    return cudaSuccess;
}

cudaError_t k_parts_sum_f64_cuda(double *dst, const double *src, size_t ld, size_t n, int width, cudaStream_t stream) {
    (void)stream;
    if (width < 1) return cudaSuccess;
    for (size_t i = 0; i < n; i++) kb_parts_sum_f64(i, dst, src, ld, width);
    return cudaSuccess;
}

cudaError_t k_parts_avg_cuda(float *dst, const float *src, size_t ld, size_t n, int width, cudaStream_t stream) {
    (void)stream;
    if (width < 1) return cudaSuccess;
    for (size_t i = 0; i < n; i++) kb_parts_avg(i, dst, src, ld, width, 1.0f / (float)width);
    return cudaSuccess;
}

cudaError_t k_act_backward_cuda(float *dz, const float *out, const float *pre, size_t n, int act, cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < n; i++) kb_act_backward(i, dz, out, pre, act);
    return cudaSuccess;
}

cudaError_t k_bias_grad_cuda(float *db, const float *dz, int rows, int cols, float *partials, cudaStream_t stream) {
    (void)stream;
    if (cols <= 0) return cudaSuccess;
    if (rows < 0) rows = 0;
    int chunk_rows = kb_bias_grad_chunk_rows(rows);
    int chunks = (rows + chunk_rows - 1) / chunk_rows;
    if (chunks > KC_BIAS_GRAD_MAX_CHUNKS) return cudaErrorInvalidValue; /* would overrun the planned scratch */
    for (int c = 0; c < chunks; c++)
        for (int j = 0; j < cols; j++) kb_bias_grad_partial(c, j, partials, dz, rows, cols, chunk_rows);
    for (int j = 0; j < cols; j++) kb_bias_grad_finish(j, db, partials, chunks, cols);
    return cudaSuccess;
}

cudaError_t k_softmax_xent_cuda(const float *logits, const uint8_t *labels, int rows, int cols, float *dlogits,
                                float grad_scale, float *row_loss, int *row_hit, cudaStream_t stream) {
    (void)stream;
    for (int b = 0; b < rows && cols > 0; b++)
        kb_softmax_xent_row(b, logits, labels, cols, dlogits, grad_scale, row_loss, row_hit);
    return cudaSuccess;
}

cudaError_t k_loss_reduce_cuda(double *out, const float *row_loss, const int *row_hit, int rows, int accumulate,
                               cudaStream_t stream) {
    (void)stream;
    double loss[THREADS];
    long long hits[THREADS];
    for (int t = 0; t < THREADS; t++) kb_loss_thread(t, row_loss, row_hit, rows < 0 ? 0 : rows, &loss[t], &hits[t]);
    for (int half = THREADS / 2; half > 0; half /= 2)
        for (int t = 0; t < half; t++) loss[t] += loss[t + half], hits[t] += hits[t + half];
    kb_loss_write(out, loss[0], hits[0], rows < 0 ? 0 : rows, accumulate);
    return cudaSuccess;
}

cudaError_t sgd_step_cuda(float *p, const float *g, float *buf, size_t n, sgd_scalars f, cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < n; i++) sgd_element(&f, p + i, g[i], buf ? buf + i : NULL);
    return cudaSuccess;
}

cudaError_t adam_step_cuda(float *p, const float *g, float *m, float *v, size_t n, adam_scalars f,
                           cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < n; i++) adam_element(&f, p + i, g[i], m + i, v + i);
    return cudaSuccess;
}

cudaError_t clip_grad_norm_cuda(float *g, size_t n, double max_norm, double *partials, double *sumsq,
                                cudaStream_t stream) {
    (void)stream;
    size_t threads = (size_t)KC_NORM_BLOCKS * THREADS;
    double s[THREADS];
    for (int blk = 0; blk < KC_NORM_BLOCKS; blk++) { /* sumsq_partial_kernel */
        for (int t = 0; t < THREADS; t++) s[t] = kb_sumsq_thread(g, n, (size_t)blk * THREADS + t, threads);
        partials[blk] = tree_sum(s);
    }
    for (int t = 0; t < THREADS; t++) { /* sumsq_finish_kernel */
        s[t] = 0.0;
        for (int b = t; b < KC_NORM_BLOCKS; b += THREADS) s[t] += partials[b];
    }
    *sumsq = tree_sum(s);
    double coef = clip_factor(*sumsq, max_norm); /* clip_scale_kernel */
    if (coef < 1.0) {
        float c = (float)coef;
        for (size_t i = 0; i < n; i++) g[i] *= c;
    }
    return cudaSuccess;
}

cudaError_t k_im2col_cuda(const float *x, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad,
                          int Ho, int Wo, float *colT, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)n * Ho * Wo * C * k * k;
    for (size_t i = 0; i < total; i++) kb_im2col(i, x, C, rows, H, W, b0, k, stride, pad, Ho, Wo, colT);
    return cudaSuccess;
}

cudaError_t k_col2im_cuda(const float *colT, int C, int rows, int H, int W, int b0, int n, int k, int stride, int pad,
                          int Ho, int Wo, float *dx, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)C * n * H * W;
    for (size_t i = 0; i < total; i++) kb_col2im(i, colT, C, rows, H, W, b0, (size_t)n, k, stride, pad, Ho, Wo, dx);
    return cudaSuccess;
}

cudaError_t k_channel_bias_act_forward_cuda(float *z, float *pre, const float *bias, int C, size_t n, int act,
                                            int apply_act, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)C * n;
    if (!bias && !apply_act) return cudaSuccess;
    for (size_t i = 0; i < total; i++) kb_channel_bias_act(i, z, pre, bias, n, act, apply_act);
    return cudaSuccess;
}

cudaError_t k_act_forward_cuda(float *y, const float *x, size_t n, int act, cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < n; i++) y[i] = kb_activate(x[i], act);
    return cudaSuccess;
}

/* channel_sums_kernel's grid (chunks x C blocks) and channel_sums_finish_kernel. */
static void channel_sums(double *sums, const float *a, const float *x, const float *mean, const float *invstd, int C,
                         size_t n, int mode, double *partials, float *f0, float *f1) {
    int chunks = kb_channel_chunks(n);
    double s0[THREADS], s1[THREADS];
    for (int c = 0; c < C; c++)
        for (int chunk = 0; chunk < chunks; chunk++) {
            for (int t = 0; t < THREADS; t++)
                kb_channel_sums_thread(chunk, c, t, a, x, mean, invstd, n, chunks, mode, &s0[t], &s1[t]);
            partials[(size_t)c * chunks + chunk] = tree_sum(s0);
            partials[((size_t)C + c) * chunks + chunk] = tree_sum(s1);
        }
    if (sums) sums[2 * C] = (double)n;
    for (int c = 0; c < C; c++) kb_channel_sums_finish(c, sums, partials, C, chunks, f0, f1);
}

cudaError_t k_channel_bias_grad_cuda(float *db, const float *dz, int C, size_t n, double *partials,
                                     cudaStream_t stream) {
    (void)stream;
    channel_sums(NULL, dz, NULL, NULL, NULL, C, n, KB_SUM_A, partials, db, NULL);
    return cudaSuccess;
}

cudaError_t k_batchnorm_sums_cuda(const float *x, int C, size_t n, double *sums, double *partials,
                                  cudaStream_t stream) {
    (void)stream;
    channel_sums(sums, x, NULL, NULL, NULL, C, n, KB_SUM_A_SQUARES, partials, NULL, NULL);
    return cudaSuccess;
}

cudaError_t k_batchnorm_backward_sums_cuda(const float *dy, const float *x, const float *mean, const float *invstd,
                                           int C, size_t n, double *sums, double *partials, float *dgamma,
                                           float *dbeta, cudaStream_t stream) {
    (void)stream;
    channel_sums(sums, dy, x, mean, invstd, C, n, KB_SUM_A_XHAT, partials, dbeta, dgamma);
    return cudaSuccess;
}

cudaError_t k_batchnorm_stats_cuda(const double *sums, int C, float eps, float momentum, float *mean, float *invstd,
                                   float *running_mean, float *running_var, cudaStream_t stream) {
    (void)stream;
    for (int c = 0; c < C; c++) kb_batchnorm_stats(c, sums, C, eps, momentum, mean, invstd, running_mean, running_var);
    return cudaSuccess;
}

cudaError_t k_batchnorm_running_cuda(const float *running_mean, const float *running_var, float eps, int C,
                                     float *mean, float *invstd, cudaStream_t stream) {
    (void)stream;
    for (int c = 0; c < C; c++) kb_batchnorm_running(c, running_mean, running_var, eps, mean, invstd);
    return cudaSuccess;
}

cudaError_t k_batchnorm_forward_cuda(const float *x, float *y, const float *gamma, const float *beta,
                                     const float *mean, const float *invstd, int C, size_t n, cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < (size_t)C * n; i++) kb_batchnorm_forward(i, x, y, gamma, beta, mean, invstd, n);
    return cudaSuccess;
}

cudaError_t k_batchnorm_backward_cuda(float *dx, const float *dy, const float *x, const float *gamma,
                                      const float *mean, const float *invstd, const double *sums, int C, size_t n,
                                      cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < (size_t)C * n; i++) kb_batchnorm_backward(i, dx, dy, x, gamma, mean, invstd, sums, C, n);
    return cudaSuccess;
}

cudaError_t k_maxpool_forward_cuda(const float *x, float *y, int32_t *argmax, size_t planes, int H, int W, int k,
                                   int Ho, int Wo, cudaStream_t stream) {
    (void)stream;
    size_t total = planes * (size_t)Ho * Wo;
    for (size_t i = 0; i < total; i++) kb_maxpool_forward(i, x, y, argmax, H, W, k, Ho, Wo);
    return cudaSuccess;
}

cudaError_t k_maxpool_backward_cuda(float *dx, const float *dy, const int32_t *argmax, size_t planes, int H, int W,
                                    int Ho, int Wo, cudaStream_t stream) {
    (void)stream;
    memset(dx, 0, sizeof(float) * planes * (size_t)H * W);
    size_t total = planes * (size_t)Ho * Wo;
    for (size_t i = 0; i < total; i++) kb_maxpool_backward(i, dx, dy, argmax, H, W, Ho, Wo);
    return cudaSuccess;
}

cudaError_t k_dropout_forward_cuda(float *y, uint8_t *mask, const float *x, const uint64_t *row_base_keys, int layer,
                                   int rows, int C, size_t plane, int channel_major, float p, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)rows * C * plane;
    for (size_t i = 0; i < total; i++)
        kb_dropout_forward(i, y, mask, x, row_base_keys, (uint64_t)layer, (size_t)rows, (size_t)C, plane, channel_major,
                           p);
    return cudaSuccess;
}

cudaError_t k_dropout_backward_cuda(float *dx, const float *dy, const uint8_t *mask, size_t n, float p,
                                    cudaStream_t stream) {
    (void)stream;
    for (size_t i = 0; i < n; i++) kb_dropout_backward(i, dx, dy, mask, p);
    return cudaSuccess;
}

cudaError_t k_flatten_cuda(float *y, const float *x, int C, int rows, size_t plane, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)C * rows * plane;
    for (size_t i = 0; i < total; i++) kb_flatten(i, y, x, (size_t)C, (size_t)rows, plane, 0);
    return cudaSuccess;
}

cudaError_t k_unflatten_cuda(float *dx, const float *dy, int C, int rows, size_t plane, cudaStream_t stream) {
    (void)stream;
    size_t total = (size_t)C * rows * plane;
    for (size_t i = 0; i < total; i++) kb_flatten(i, dx, dy, (size_t)C, (size_t)rows, plane, 1);
    return cudaSuccess;
}
