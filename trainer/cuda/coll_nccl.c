/* The nccl collectives backend and its watchdog: see coll_nccl.h.
 *
 * Two threads touch a communicator: the rank's own thread (collectives, waits)
 * and the watchdog. The rule that keeps them apart: the rank's thread makes every
 * NCCL call holding `call_lock`, and the watchdog aborts (which frees the
 * communicator) only holding it too; everything else they share is atomic. */
#include "coll_nccl.h"
#include "env_seconds.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cuda_check.h"
#include "kernels.h"
#include "log.h"
#include "memory_plan.h"
#include "monotonic.h"

#define WATCHDOG_TICK_MS 50
#define ABORT_LOCK_WAIT_S 2    /* how long the aborter waits for an NCCL call to return before it gives up aborting */
#define EXIT_GRACE_S 10.0      /* after an abort, how long the process has to end on its own before the watchdog ends it
                                  * (DDPD_NCCL_EXIT_GRACE_S overrides it: tests) */

typedef struct {
    coll_comm pub;
    _Atomic(ncclComm_t) nccl;    /* NULL before joining and after an abort */
    cudaStream_t stream;         /* the communication stream */
    void *staging;               /* device: MEMORY_PLAN_COLL_STAGING bytes */
    void *pinned;                /* host, page-locked: as many bytes, for host collectives */
    pthread_mutex_t call_lock;
    pthread_mutex_t reason_lock;
    pthread_t watchdog;
    atomic_int aborted;
    atomic_llong aborted_at;     /* CLOCK_MONOTONIC ns of the abort: the process ends exit_grace_s later */
    int collectives;             /* issue NCCL collectives: world_size > 1, or DDPD_NCCL_FORCE_COLLECTIVES=1 */
    atomic_llong blocked_since;  /* CLOCK_MONOTONIC ns when the rank's thread began a watched wait; 0: none */
    _Atomic(const char *) blocked_what;
    int watch_depth;             /* the rank's thread only */
    double timeout_s;
    double exit_grace_s;         /* EXIT_GRACE_S, or DDPD_NCCL_EXIT_GRACE_S */
    int device;                  /* the rank's CUDA ordinal (the watchdog thread selects it too): its
                                    rank on its host, so also its slot on the run board */
    run_board *board;
    atomic_int has_reason;
    char reason[640];
} nccl_comm;

static nccl_comm *impl(coll_comm *c) { return (nccl_comm *)c->impl; }

/* ---- failure reasons ------------------------------------------------------------ */

static void set_reason(nccl_comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_reason(nccl_comm *c, const char *fmt, ...) {
    pthread_mutex_lock(&c->reason_lock);
    if (!atomic_load(&c->has_reason)) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->reason, sizeof c->reason, fmt, ap);
        va_end(ap);
        atomic_store(&c->has_reason, 1);
    }
    pthread_mutex_unlock(&c->reason_lock);
}

void coll_nccl_set_failure(coll_comm *c, const char *why) { set_reason(impl(c), "%s", why); }

const char *coll_nccl_failure(coll_comm *c) {
    nccl_comm *n = impl(c);
    return atomic_load(&n->has_reason) ? n->reason : "";
}

/* ---- what the watchdog watches ---------------------------------------------------- */

static void watch(nccl_comm *c, const char *what) {
    if (c->watch_depth++ > 0) return;
    atomic_store(&c->blocked_what, what);
    atomic_store(&c->blocked_since, mono_ns());
}

static void unwatch(nccl_comm *c) {
    if (--c->watch_depth > 0) return;
    atomic_store(&c->blocked_since, 0);
}

/* Before an NCCL call on the rank's thread: takes the call lock, refuses when the
 * group was aborted, and watches the call (a blocked connection setup counts). */
static int enter(nccl_comm *c, const char *what) {
    pthread_mutex_lock(&c->call_lock);
    if (atomic_load(&c->aborted) || !atomic_load(&c->nccl)) {
        pthread_mutex_unlock(&c->call_lock);
        set_reason(c, "the NCCL communicator was aborted before %s", what);
        return -1;
    }
    watch(c, what);
    return 0;
}

static void leave(nccl_comm *c) {
    unwatch(c);
    pthread_mutex_unlock(&c->call_lock);
}

/* After an NCCL call on the rank's thread, still holding the call lock (the
 * communicator cannot be aborted and freed meanwhile, so NCCL's last error can be
 * asked): records a failure with NCCL's own account. Leaves the call. */
static int nccl_ok(nccl_comm *c, ncclResult_t r, const char *call) {
    if (r != ncclSuccess) {
        char what[512];
        gpu_nccl_error_text(r, ncclGetLastError(atomic_load(&c->nccl)), what, sizeof what);
        set_reason(c, "%s: %s", call, what);
    }
    return r == ncclSuccess ? 0 : -1;
}
static int nccl_done(nccl_comm *c, ncclResult_t r, const char *call) {
    int rc = nccl_ok(c, r, call);
    leave(c);
    return rc;
}

/* The calls of one group (ncclGroupStart .. ncclGroupEnd) inside one enter(): each
 * through nccl_ok, the call left once, by the group's end (or its first failure:
 * the group is not ended then; the run fails and the communicator is aborted). */
static int group_failed(nccl_comm *c) {
    leave(c);
    return -1;
}

static int cuda_ok(nccl_comm *c, cudaError_t e, const char *call) {
    if (e == cudaSuccess) return 0;
    char what[512];
    gpu_cuda_error_text(e, what, sizeof what);
    set_reason(c, "%s: %s", call, what);
    return -1;
}

/* ---- the watchdog --------------------------------------------------------------- */

static void sleep_ms(int ms) {
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&t, &t) != 0 && errno == EINTR) {}
}

/* Ends the process exit_grace_s (EXIT_GRACE_S) after an abort, whatever holds it: a wait that the
 * abort did not release (a hung kernel), ncclCommAbort itself, or a teardown that
 * waits for the GPU. The deadline is the watchdog's own clock, so it holds even
 * when ncclCommAbort never returns (the aborter thread calls it). */
static void exit_after_abort(nccl_comm *c) {
    if ((double)(mono_ns() - atomic_load(&c->aborted_at)) / 1e9 < c->exit_grace_s) return;
    if (c->board) run_board_set_failure(c->board, c->device, c->reason);
    fprintf(stderr, "rank %d: %s; the rank did not end within %.0f s of the abort, ending it\n", c->pub.rank, c->reason,
            c->exit_grace_s);
    _exit(1);
}

/* The aborter: frees the communicator once no NCCL call holds it, which unblocks
 * kernels waiting for peers. A thread of its own, so that the watchdog keeps its
 * exit deadline if ncclCommAbort hangs (it can, when the GPU is wedged). */
static void *aborter_main(void *arg) {
    nccl_comm *c = arg;
    (void)cudaSetDevice(c->device); /* the current device is per thread */
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += ABORT_LOCK_WAIT_S;
    /* When the rank's thread is stuck inside an NCCL call, the lock never comes and
     * the communicator cannot be freed under it: the watchdog's deadline ends it. */
    if (pthread_mutex_timedlock(&c->call_lock, &deadline) == 0) {
        ncclComm_t comm = atomic_exchange(&c->nccl, NULL);
        if (comm) ncclCommAbort(comm);
        pthread_mutex_unlock(&c->call_lock);
    }
    return NULL;
}

static void abort_group(nccl_comm *c) {
    if (c->board) run_board_set_failure(c->board, c->device, c->reason);
    atomic_store(&c->aborted_at, mono_ns());
    atomic_store(&c->aborted, 1);
    pthread_t t;
    if (pthread_create(&t, NULL, aborter_main, c) == 0) pthread_detach(t);
}

static void *watchdog_main(void *arg) {
    nccl_comm *c = arg;
    for (;;) {
        sleep_ms(WATCHDOG_TICK_MS);
        if (atomic_load(&c->aborted)) {
            exit_after_abort(c);
            continue;
        }
        ncclComm_t comm = atomic_load(&c->nccl);
        ncclResult_t async = ncclSuccess;
        if (comm && ncclCommGetAsyncError(comm, &async) == ncclSuccess && async != ncclSuccess &&
            async != ncclInProgress) {
            char what[512];
            gpu_nccl_error_text(async, ncclGetLastError(comm), what, sizeof what);
            set_reason(c, "NCCL reported an asynchronous error: %s; the communicator was aborted", what);
            abort_group(c);
            continue;
        }
        long long since = atomic_load(&c->blocked_since);
        if (since && (double)(mono_ns() - since) / 1e9 > c->timeout_s) {
            const char *what = atomic_load(&c->blocked_what);
            set_reason(c, "%s did not complete within %.0f s (a rank stopped taking part, or the GPU hangs); "
                          "the NCCL communicator was aborted (distributed.collective_timeout_s; rerun with "
                          "NCCL_DEBUG=WARN for NCCL's own account)",
                       what ? what : "a GPU operation", c->timeout_s);
            abort_group(c);
        }
    }
    return NULL;
}

/* ---- waits ------------------------------------------------------------------------- */

int coll_nccl_wait_event(coll_comm *pc, cudaEvent_t ev, const char *what) {
    nccl_comm *c = impl(pc);
    watch(c, what);
    cudaError_t e = cudaEventSynchronize(ev);
    unwatch(c);
    if (atomic_load(&c->aborted)) return -1;
    return cuda_ok(c, e, "cudaEventSynchronize");
}

int coll_nccl_wait_stream(coll_comm *pc, cudaStream_t s, const char *what) {
    nccl_comm *c = impl(pc);
    watch(c, what);
    cudaError_t e = cudaStreamSynchronize(s);
    unwatch(c);
    if (atomic_load(&c->aborted)) return -1;
    return cuda_ok(c, e, "cudaStreamSynchronize");
}

/* ---- device-side collectives (the engine's) -------------------------------------- */

cudaStream_t coll_nccl_stream(coll_comm *c) { return impl(c)->stream; }

static int wait_after(nccl_comm *c, cudaEvent_t after) {
    return after ? cuda_ok(c, cudaStreamWaitEvent(c->stream, after, 0), "cudaStreamWaitEvent") : 0;
}

int coll_nccl_collectives_on(const coll_comm *c) { return ((const nccl_comm *)c->impl)->collectives; }

int coll_nccl_allreduce_avg_device(coll_comm *pc, float *dbuf, size_t n, cudaEvent_t after) {
    nccl_comm *c = impl(pc);
    if (wait_after(c, after) != 0) return -1;
    if (!c->collectives || n == 0) return 0; /* the average over one rank is the buffer itself */
    if (enter(c, "the all-reduce of a gradient bucket") != 0) return -1;
    return nccl_done(c, ncclAllReduce(dbuf, dbuf, n, ncclFloat, ncclAvg, atomic_load(&c->nccl), c->stream),
                     "ncclAllReduce");
}

int coll_nccl_reduce_scatter_parts_device(coll_comm *pc, float *dbuf, size_t stride, size_t n, float *dscratch,
                                          cudaEvent_t after) {
    nccl_comm *c = impl(pc);
    int width = pc->width, ranks = pc->world_size, me = pc->rank;
    if (wait_after(c, after) != 0) return -1;
    size_t lo, hi;
    coll_part_share_of(n, width, ranks, me, &lo, &hi);
    size_t len = hi - lo;
    if (len == 0 && ranks == 1) return 0;
    for (int j = 0; j < pc->parts; j++) /* my own parts' slices of my share, in their rows */
        if (len && cuda_ok(c, cudaMemcpyAsync(dscratch + (size_t)(pc->first_part + j) * len, dbuf + j * stride + lo,
                                              len * sizeof(float), cudaMemcpyDeviceToDevice, c->stream),
                           "cudaMemcpyAsync") != 0)
            return -1;
    if (ranks > 1 && c->collectives) {
        if (enter(c, "the all-to-all of a gradient bucket's batch shards") != 0) return -1;
        ncclComm_t comm = atomic_load(&c->nccl);
        if (nccl_ok(c, ncclGroupStart(), "ncclGroupStart") != 0) return group_failed(c);
        for (int q = 0; q < ranks; q++) {
            if (q == me) continue;
            size_t qlo, qhi;
            int first, count;
            coll_part_share_of(n, width, ranks, q, &qlo, &qhi);
            coll_parts_of(width, ranks, q, &first, &count);
            for (int j = 0; j < pc->parts && qhi > qlo; j++) /* my parts' slices of q's share, to q */
                if (nccl_ok(c, ncclSend(dbuf + j * stride + qlo, qhi - qlo, ncclFloat, q, comm, c->stream),
                            "ncclSend") != 0)
                    return group_failed(c);
            for (int j = 0; j < count && len; j++) /* q's parts' slices of my share, into their rows */
                if (nccl_ok(c, ncclRecv(dscratch + (size_t)(first + j) * len, len, ncclFloat, q, comm, c->stream),
                            "ncclRecv") != 0)
                    return group_failed(c);
        }
        if (nccl_done(c, ncclGroupEnd(), "ncclGroupEnd") != 0) return -1;
    }
    return cuda_ok(c, k_parts_avg_cuda(dbuf + lo, dscratch, len, len, width, c->stream), "k_parts_avg_cuda");
}

int coll_nccl_allgather_parts_device(coll_comm *pc, float *dbuf, size_t n) {
    nccl_comm *c = impl(pc);
    int width = pc->width, ranks = pc->world_size, me = pc->rank;
    if (ranks == 1 || !c->collectives || n == 0) return 0;
    size_t lo, hi;
    coll_part_share_of(n, width, ranks, me, &lo, &hi);
    if (enter(c, "the all-gather of a gradient bucket's average") != 0) return -1;
    ncclComm_t comm = atomic_load(&c->nccl);
    if (nccl_ok(c, ncclGroupStart(), "ncclGroupStart") != 0) return group_failed(c);
    for (int q = 0; q < ranks; q++) {
        if (q == me) continue;
        size_t qlo, qhi;
        coll_part_share_of(n, width, ranks, q, &qlo, &qhi);
        if (hi > lo && nccl_ok(c, ncclSend(dbuf + lo, hi - lo, ncclFloat, q, comm, c->stream), "ncclSend") != 0)
            return group_failed(c);
        if (qhi > qlo && nccl_ok(c, ncclRecv(dbuf + qlo, qhi - qlo, ncclFloat, q, comm, c->stream), "ncclRecv") != 0)
            return group_failed(c);
    }
    return nccl_done(c, ncclGroupEnd(), "ncclGroupEnd");
}

int coll_nccl_allreduce_sum_f64_device(coll_comm *pc, double *dbuf, size_t n, cudaEvent_t after) {
    nccl_comm *c = impl(pc);
    if (wait_after(c, after) != 0) return -1;
    if (!c->collectives || n == 0) return 0;
    if (enter(c, "the all-reduce of the loss") != 0) return -1;
    return nccl_done(c, ncclAllReduce(dbuf, dbuf, n, ncclDouble, ncclSum, atomic_load(&c->nccl), c->stream),
                     "ncclAllReduce");
}

int coll_nccl_broadcast_device(coll_comm *pc, void *dbuf, size_t bytes, int root, cudaEvent_t after) {
    nccl_comm *c = impl(pc);
    if (wait_after(c, after) != 0) return -1;
    if (!c->collectives || bytes == 0) return 0;
    if (enter(c, "a broadcast") != 0) return -1;
    return nccl_done(c, ncclBroadcast(dbuf, dbuf, bytes, ncclUint8, root, atomic_load(&c->nccl), c->stream),
                     "ncclBroadcast");
}

/* ---- coll_comm: host buffers staged through the device ---------------------------- */

typedef enum { HOST_ALLREDUCE, HOST_BROADCAST } host_op;

/* One collective over a host buffer of `count` elements, in chunks that fit the
 * staging buffers: host -> pinned -> device, NCCL, device -> pinned -> host. */
static int host_collective(nccl_comm *c, void *buf, size_t count, size_t elem, ncclDataType_t type,
                           ncclRedOp_t op, host_op kind, int root, const char *what) {
    size_t chunk = MEMORY_PLAN_COLL_STAGING / elem;
    int sends = kind == HOST_ALLREDUCE || c->pub.rank == root;
    int receives = kind == HOST_ALLREDUCE || c->pub.rank != root;
    for (size_t off = 0; off < count; off += chunk) {
        size_t n = count - off < chunk ? count - off : chunk, bytes = n * elem;
        char *host = (char *)buf + off * elem;
        if (sends) {
            memcpy(c->pinned, host, bytes);
            if (cuda_ok(c, cudaMemcpyAsync(c->staging, c->pinned, bytes, cudaMemcpyHostToDevice, c->stream),
                        "cudaMemcpyAsync") != 0)
                return -1;
        }
        if (enter(c, what) != 0) return -1;
        ncclComm_t comm = atomic_load(&c->nccl);
        ncclResult_t r = kind == HOST_ALLREDUCE
                             ? ncclAllReduce(c->staging, c->staging, n, type, op, comm, c->stream)
                             : ncclBroadcast(c->staging, c->staging, n, type, root, comm, c->stream);
        if (nccl_done(c, r, kind == HOST_ALLREDUCE ? "ncclAllReduce" : "ncclBroadcast") != 0) return -1;
        if (receives &&
            cuda_ok(c, cudaMemcpyAsync(c->pinned, c->staging, bytes, cudaMemcpyDeviceToHost, c->stream),
                    "cudaMemcpyAsync") != 0)
            return -1;
        if (coll_nccl_wait_stream(&c->pub, c->stream, what) != 0) return -1;
        if (receives) memcpy(host, c->pinned, bytes);
    }
    return 0;
}

static int nccl_allreduce_avg_f32(coll_comm *pc, float *buf, size_t n) {
    if (!impl(pc)->collectives) return 0;
    return host_collective(impl(pc), buf, n, sizeof(float), ncclFloat, ncclAvg, HOST_ALLREDUCE, 0, "an all-reduce");
}

static int nccl_allreduce_sum_f64(coll_comm *pc, double *buf, size_t n) {
    if (!impl(pc)->collectives) return 0;
    return host_collective(impl(pc), buf, n, sizeof(double), ncclDouble, ncclSum, HOST_ALLREDUCE, 0,
                           "an all-reduce");
}

/* The contract asks only that this rank's share end up averaged: averaging the
 * whole buffer gives that, in the all-reduce's order, and NCCL's reduce-scatter
 * would need equal shares, which coll_share's cache-line rounding does not give. */
static int nccl_reduce_scatter_avg_f32(coll_comm *pc, float *buf, size_t n) {
    return nccl_allreduce_avg_f32(pc, buf, n);
}

/* Each rank's share, broadcast by its owner (shares may differ in size). */
static int nccl_allgather_f32(coll_comm *pc, float *buf, size_t n) {
    if (!impl(pc)->collectives) return 0;
    for (int k = 0; k < pc->world_size; k++) {
        size_t lo, hi;
        coll_share(n, pc->world_size, k, &lo, &hi);
        if (hi > lo && host_collective(impl(pc), buf + lo, (hi - lo) * sizeof(float), 1, ncclUint8, ncclSum,
                                       HOST_BROADCAST, k, "an all-gather") != 0)
            return -1;
    }
    return 0;
}

static int nccl_broadcast(coll_comm *pc, void *buf, size_t bytes, int root) {
    if (!impl(pc)->collectives) return 0;
    return host_collective(impl(pc), buf, bytes, 1, ncclUint8, ncclSum, HOST_BROADCAST, root, "a broadcast");
}

static int nccl_barrier(coll_comm *pc) {
    if (!impl(pc)->collectives) return 0;
    float one = 1.0f; /* a barrier is a tiny all-reduce: nobody leaves before everyone came */
    return host_collective(impl(pc), &one, 1, sizeof one, ncclFloat, ncclSum, HOST_ALLREDUCE, 0, "a barrier");
}

static void *nccl_alloc(coll_comm *pc, size_t bytes) {
    (void)pc; /* host buffers: these collectives stage them */
    return calloc(1, bytes ? bytes : 1);
}

int coll_is_nccl(const coll_comm *c) { return c && c->backend && strcmp(c->backend, "nccl") == 0; }

/* ---- rendezvous and attach -------------------------------------------------------- */

/* CUDA numbers GPUs fastest first unless told otherwise; nvidia-smi, the driver's
 * listing (gpu_devices.c) and CUDA_VISIBLE_DEVICES' indices go by PCI bus. Set
 * before any process of the run initialises CUDA, so a rank's ordinal is the GPU
 * the run was given (coll_nccl_attach checks it by its bus id). */
static void pci_bus_order(void) {
    const char *was = getenv("CUDA_DEVICE_ORDER");
    if (was && strcmp(was, "PCI_BUS_ID") != 0)
        log_msg(LOG_WARN, "CUDA_DEVICE_ORDER was %s: set to PCI_BUS_ID, so that CUDA numbers the GPUs as nvidia-smi "
                "and CUDA_VISIBLE_DEVICES do", was);
    setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
}

static void rendezvous_devices(nccl_rendezvous *rv, int world_size) {
    memset(rv, 0, sizeof *rv);
    rv->world_size = world_size;
    rv->nodes = 1;
    pci_bus_order();
    gpu_present_scan_host(&rv->present);
    gpu_visible_resolve(getenv("CUDA_VISIBLE_DEVICES"), &rv->present, &rv->visible);
}

int nccl_rendezvous_create(nccl_rendezvous *rv, int world_size, char *why, size_t whylen) {
    rendezvous_devices(rv, world_size);
    /* ncclGetUniqueId starts NCCL's bootstrap thread, which lives on in the
     * launcher: it must not take the signals the launcher waits for
     * (sigtimedwait). A SIGTERM it took unblocked would end the launcher at once,
     * before it stops the ranks and says how the run ended. A thread inherits the
     * mask of the one that creates it. */
    sigset_t launcher_signals, old;
    sigemptyset(&launcher_signals);
    sigaddset(&launcher_signals, SIGTERM);
    sigaddset(&launcher_signals, SIGINT);
    sigaddset(&launcher_signals, SIGHUP);
    sigaddset(&launcher_signals, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &launcher_signals, &old);
    ncclResult_t r = ncclGetUniqueId(&rv->id); /* bootstrap listener only: no CUDA call */
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != ncclSuccess) {
        char what[512];
        gpu_nccl_error_text(r, ncclGetLastError(NULL), what, sizeof what);
        snprintf(why, whylen, "ncclGetUniqueId: %s", what);
        return -1;
    }
    return 0;
}

#define UNIQUE_ID_KEY "nccl/unique-id"

int nccl_rendezvous_across(nccl_rendezvous *rv, int world_size, int nodes, int node_rank, kv_store *kv,
                           int timeout_ms, char *why, size_t whylen) {
    char err[512];
    if (node_rank == 0) {
        if (nccl_rendezvous_create(rv, world_size, why, whylen) != 0) return -1;
        if (kv_put(kv, UNIQUE_ID_KEY, &rv->id, sizeof rv->id, err, sizeof err) != 0) {
            snprintf(why, whylen, "cannot hand NCCL's unique id to the other nodes: %s", err);
            return -1;
        }
    } else {
        rendezvous_devices(rv, world_size); /* the id is node 0's */
        void *id = NULL;
        size_t len = 0;
        if (kv_get(kv, UNIQUE_ID_KEY, timeout_ms, &id, &len, err, sizeof err) != 0 || len != sizeof rv->id) {
            snprintf(why, whylen, "cannot get NCCL's unique id from node 0 (did node 0's part start?): %s",
                     id ? "the rendezvous holds a value of another size" : err);
            free(id);
            return -1;
        }
        memcpy(&rv->id, id, sizeof rv->id);
        free(id);
    }
    rv->nodes = nodes;
    rv->node_rank = node_rank;
    rv->first_rank = node_rank * (world_size / nodes);
    return 0;
}

/* A PCI address "DOMAIN:BUS:DEVICE.FUNCTION" (hex, any case, any width) as one
 * number, or -1. */
static long long pci_address(const char *s) {
    unsigned domain, bus, dev, fn;
    if (sscanf(s, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4) return -1;
    return ((long long)domain << 24) | (bus << 16) | (dev << 8) | fn;
}

/* The GPU CUDA gave this rank is the one the driver's listing says it was given
 * (same PCI address): CUDA_DEVICE_ORDER=PCI_BUS_ID makes them agree. 0, or -1 and
 * why. Unknown addresses (MIG, a listing from /dev only) are not checked. */
static int check_bus_id(const nccl_rendezvous *rv, int local, char *why, size_t whylen) {
    int ordinal, physical;
    char bus[64] = "";
    if (gpu_rank_device(&rv->visible, local, &ordinal, &physical) != 0 || physical < 0 ||
        !rv->present.gpu[physical].bus_id[0] || cudaDeviceGetPCIBusId(bus, sizeof bus, local) != cudaSuccess)
        return 0;
    const char *expected = rv->present.gpu[physical].bus_id;
    if (pci_address(bus) < 0 || pci_address(expected) < 0 || pci_address(bus) == pci_address(expected)) return 0;
    snprintf(why, whylen,
             "CUDA's device %d is the GPU at PCI %s, but the run was given GPU %d (PCI %s; CUDA_VISIBLE_DEVICES=%s, "
             "CUDA_DEVICE_ORDER=%s): CUDA numbers the GPUs in another order than the driver's listing",
             local, bus, physical, expected, getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "unset",
             getenv("CUDA_DEVICE_ORDER") ? getenv("CUDA_DEVICE_ORDER") : "unset");
    return -1;
}

coll_comm *coll_nccl_attach(const nccl_rendezvous *rv, int rank, run_board *board, char *device, size_t devlen,
                            char *why, size_t whylen) {
    gpu_error ge = {{0}};
    int local = rank - rv->first_rank;
    /* The first CUDA call of the process: the visible set is already restricted by
     * CUDA_VISIBLE_DEVICES, so the rank's local rank is its device ordinal. */
    if (gpu_check_cuda(&ge, cudaSetDevice(local), "cudaSetDevice") != 0) {
        snprintf(why, whylen, "rank %d cannot use CUDA device %d: %s", rank, local, ge.msg);
        return NULL;
    }
    struct cudaDeviceProp prop;
    if (gpu_check_cuda(&ge, cudaGetDeviceProperties(&prop, local), "cudaGetDeviceProperties") != 0) {
        snprintf(why, whylen, "rank %d: %s", rank, ge.msg);
        return NULL;
    }
    gpu_device_label(&rv->visible, &rv->present, local, prop.name, device, devlen);
    if (check_bus_id(rv, local, why, whylen) != 0) return NULL;

    nccl_comm *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(why, whylen, "rank %d: out of memory", rank);
        return NULL;
    }
    pthread_mutex_init(&c->call_lock, NULL);
    pthread_mutex_init(&c->reason_lock, NULL);
    c->timeout_s = env_seconds("DDPD_COLLECTIVE_TIMEOUT_S", rv->timeout_s > 0 ? rv->timeout_s : COLL_NCCL_TIMEOUT_S);
    c->exit_grace_s = env_seconds("DDPD_NCCL_EXIT_GRACE_S", EXIT_GRACE_S);
    const char *force = getenv("DDPD_NCCL_FORCE_COLLECTIVES");
    c->collectives = rv->world_size > 1 || (force && strcmp(force, "1") == 0);
    c->device = local;
    c->board = board;
    c->pub = (coll_comm){
        .rank = rank,
        .world_size = rv->world_size,
        .backend = "nccl",
        .nodes = rv->nodes,
        .node_rank = rv->node_rank,
        .shard_rank = rank,
        .shard_world = rv->world_size,
        .width = rv->world_size, /* one part per rank unless coll_set_width says otherwise */
        .parts_on_device = true,
        .first_part = rank,
        .parts = 1,
        .allreduce_avg_f32 = nccl_allreduce_avg_f32,
        .allreduce_sum_f64 = nccl_allreduce_sum_f64,
        .reduce_scatter_avg_f32 = nccl_reduce_scatter_avg_f32,
        .allgather_f32 = nccl_allgather_f32,
        .broadcast = nccl_broadcast,
        .barrier = nccl_barrier,
        .alloc = nccl_alloc,
        .failure = coll_nccl_failure,
        .impl = c,
    };
    int least = 0, greatest = 0;
    if (gpu_check_cuda(&ge, cudaDeviceGetStreamPriorityRange(&least, &greatest), "cudaDeviceGetStreamPriorityRange") ||
        /* high priority: bucket all-reduces get SMs promptly while backward's GEMMs run */
        gpu_check_cuda(&ge, cudaStreamCreateWithPriority(&c->stream, cudaStreamNonBlocking, greatest),
                       "cudaStreamCreateWithPriority") ||
        gpu_check_cuda(&ge, cudaMalloc(&c->staging, MEMORY_PLAN_COLL_STAGING), "cudaMalloc") ||
        gpu_check_cuda(&ge, cudaMallocHost(&c->pinned, MEMORY_PLAN_COLL_STAGING), "cudaMallocHost")) {
        snprintf(why, whylen, "rank %d on %s: %s", rank, device, ge.msg);
        return NULL; /* the process exits: its CUDA resources go with it */
    }
    int err = pthread_create(&c->watchdog, NULL, watchdog_main, c);
    if (err != 0) {
        snprintf(why, whylen, "rank %d: cannot start the NCCL watchdog: %s", rank, strerror(err));
        return NULL;
    }
    pthread_detach(c->watchdog);

    /* NCCL connects to its peers when a collective first needs a connection
     * (NCCL_RUNTIME_CONNECT=1, its default), allocating its buffers then: connected
     * at init instead, they are taken before the engine measures what is free for
     * its memory plan. A value the user set stays. */
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    ncclComm_t comm = NULL;
    pthread_mutex_lock(&c->call_lock);
    watch(c, "joining the NCCL communicator (every rank must join)");
    ncclResult_t r = ncclCommInitRank(&comm, rv->world_size, rv->id, rank);
    unwatch(c);
    if (r == ncclSuccess) atomic_store(&c->nccl, comm);
    pthread_mutex_unlock(&c->call_lock);
    if (r != ncclSuccess) {
        char what[512];
        gpu_nccl_error_text(r, ncclGetLastError(NULL), what, sizeof what);
        snprintf(why, whylen, "rank %d on %s: ncclCommInitRank: %s", rank, device, what);
        return NULL;
    }
    return &c->pub;
}

int coll_nccl_close(coll_comm *pc) {
    nccl_comm *c = impl(pc);
    if (enter(c, "closing the NCCL communicator") != 0) return -1;
    ncclComm_t comm = atomic_exchange(&c->nccl, NULL);
    ncclResult_t r = ncclCommDestroy(comm);
    if (r != ncclSuccess) {
        char what[512];
        gpu_nccl_error_text(r, ncclGetLastError(NULL), what, sizeof what);
        set_reason(c, "ncclCommDestroy: %s", what);
    }
    leave(c);
    return r == ncclSuccess ? 0 : -1;
}
