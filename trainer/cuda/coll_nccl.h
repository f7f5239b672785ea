/* The nccl collectives backend: coll_comm (collectives.h) over NCCL, one GPU per
 * rank, plus the device-side calls the cuda engine uses to average gradient
 * buckets on a communication stream while backward runs, and a watchdog thread
 * that turns a hang into a failed run with a reason.
 *
 * Rendezvous: the launcher calls nccl_rendezvous_create before it forks (it gets
 * the ncclUniqueId, which starts NCCL's bootstrap listener in the launcher but
 * does NOT initialise CUDA there, and sets CUDA_DEVICE_ORDER=PCI_BUS_ID); the
 * struct reaches the ranks through the memory fork gives them (no file, no port of
 * ours). Each rank then calls coll_nccl_attach, whose first CUDA call is
 * cudaSetDevice(rank): the rank's local rank within CUDA_VISIBLE_DEVICES.
 *
 * The coll_comm calls take HOST buffers, as on the cpu backend, and stage them
 * through a small device buffer (MEMORY_PLAN_COLL_STAGING bytes). Every wait on
 * the GPU goes through coll_nccl_wait_* so the watchdog sees it: when one lasts
 * longer than the timeout, or NCCL reports an asynchronous error, the watchdog
 * aborts the communicator (ncclCommAbort, from a thread of its own), records why,
 * and the waiting call returns -1; if the process has not ended 10 s after the
 * abort (a hung kernel, or ncclCommAbort itself hangs; DDPD_NCCL_EXIT_GRACE_S sets
 * the 10 s, for tests), the watchdog ends it with
 * the reason on the run board, and the launcher brings the group down.
 *
 * With one rank there is nothing to average and no collective is issued, unless
 * DDPD_NCCL_FORCE_COLLECTIVES=1 (a debug switch): then one GPU runs the comm
 * stream, its events and the watchdog as a run of several does.
 * CUDA builds only. */
#ifndef DDPD_TRAINER_CUDA_COLL_NCCL_H
#define DDPD_TRAINER_CUDA_COLL_NCCL_H

#include <cuda_runtime_api.h>
#include <nccl.h>
#include <stddef.h>

#include "collectives.h"
#include "gpu_devices.h"
#include "kv_store.h"
#include "run_board.h"

/* A collective (or any GPU wait) that takes longer than this fails the run, unless
 * the run sets distributed.collective_timeout_s (nccl_rendezvous.timeout_s); the
 * DDPD_COLLECTIVE_TIMEOUT_S environment variable overrides both (tests). */
#define COLL_NCCL_TIMEOUT_S 60.0

typedef struct {
    ncclUniqueId id;
    int world_size;
    int nodes, node_rank; /* across nodes: how many, and this host's index (else 1 and 0) */
    int first_rank;       /* this host's first rank (else 0): a rank's GPU is rank - first_rank */
    gpu_present present; /* the host's GPUs and which ones the ranks see, for device labels */
    gpu_visible visible;
    double timeout_s;     /* the watchdog's timeout (distributed.collective_timeout_s); 0: COLL_NCCL_TIMEOUT_S */
} nccl_rendezvous;

/* In the launcher, before fork. Never initialises CUDA. 0, or -1 and `why`. */
int nccl_rendezvous_create(nccl_rendezvous *rv, int world_size, char *why, size_t whylen);

/* Across nodes, in each node's launcher, before fork: node 0's makes the id (as
 * nccl_rendezvous_create) and posts it to the run's rendezvous (key
 * "nccl/unique-id"); every other node's waits up to timeout_ms for it there.
 * Node `node_rank` of `nodes` runs ranks node_rank * L .. +L-1 (L = world_size /
 * nodes). 0, or -1 and `why`. */
int nccl_rendezvous_across(nccl_rendezvous *rv, int world_size, int nodes, int node_rank, kv_store *kv,
                           int timeout_ms, char *why, size_t whylen);

/* In rank `rank`'s process (its global rank), before any other CUDA call: selects
 * the device (its rank on this host, within CUDA_VISIBLE_DEVICES; its PCI address
 * must be the one the driver lists for the GPU the run was given), starts the
 * watchdog and joins the communicator (blocks until every rank has joined; NCCL
 * connects to its peers then, NCCL_RUNTIME_CONNECT=0 unless set). `device` gets
 * "cuda:N NAME". `board` (may be NULL) gets the reason if the watchdog has to end
 * the process. NULL and `why` on failure. */
coll_comm *coll_nccl_attach(const nccl_rendezvous *rv, int rank, run_board *board, char *device, size_t devlen,
                            char *why, size_t whylen);

/* True for a comm made by coll_nccl_attach. */
int coll_is_nccl(const coll_comm *c);

/* Whether the comm issues NCCL collectives: with more than one rank, or with
 * DDPD_NCCL_FORCE_COLLECTIVES=1. Without, the engine keeps to one stream. */
int coll_nccl_collectives_on(const coll_comm *c);

/* On the way out of a run that succeeded: ncclCommDestroy (watched). 0 or -1 (why
 * in coll_nccl_failure). */
int coll_nccl_close(coll_comm *c);

/* The communication stream (gradient buckets, the loss) of an nccl comm. */
cudaStream_t coll_nccl_stream(coll_comm *c);

/* Enqueue on the communication stream, after `after` (an event recorded on
 * another stream; NULL: no wait): in-place average over ranks of a device buffer
 * of floats / in-place sum of doubles / broadcast of bytes from `root`. 0 or -1. */
int coll_nccl_allreduce_avg_device(coll_comm *c, float *dbuf, size_t n, cudaEvent_t after);
int coll_nccl_allreduce_sum_f64_device(coll_comm *c, double *dbuf, size_t n, cudaEvent_t after);
int coll_nccl_broadcast_device(coll_comm *c, void *dbuf, size_t bytes, int root, cudaEvent_t after);

/* The fixed-order reduce-scatter of batch shards on the GPU (collectives.h's
 * reduce_scatter_parts_f32_ex; the same bits as the cpu backend's whatever the number
 * of ranks): this rank's parts at dbuf + j * stride (j < c->parts); afterwards its
 * share (coll_part_share) of dbuf holds the average of all c->width parts summed in
 * part order. How: an all-to-all (grouped ncclSend / ncclRecv) brings every part's
 * slice of each rank's share to that rank, in part order, into `dscratch` (width x
 * the share's length floats), then k_parts_avg_cuda sums them there in part order.
 * Enqueued on the communication stream after `after`. 0 or -1. */
int coll_nccl_reduce_scatter_parts_device(coll_comm *c, float *dbuf, size_t stride, size_t n, float *dscratch,
                                          cudaEvent_t after);

/* The all-gather that follows it: every rank's share (coll_part_share) of dbuf
 * [0, n), from its owner, into every rank's dbuf (grouped ncclSend / ncclRecv, as
 * the shares differ in length), on the communication stream. Nothing to move on
 * one rank. 0 or -1. */
int coll_nccl_allgather_parts_device(coll_comm *c, float *dbuf, size_t n);


/* Watched waits (see above): 0, or -1 when the wait failed or the group was
 * aborted (coll_nccl_failure says why). `what` names the wait in the reason. */
int coll_nccl_wait_event(coll_comm *c, cudaEvent_t ev, const char *what);
int coll_nccl_wait_stream(coll_comm *c, cudaStream_t s, const char *what);

/* Records why this rank's GPU work failed (the first reason wins). */
void coll_nccl_set_failure(coll_comm *c, const char *why);
/* The recorded reason, "" if none. */
const char *coll_nccl_failure(coll_comm *c);

#endif
