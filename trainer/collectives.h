/* Collectives behind one small interface, with one backend per transport: `cpu`
 * (shared memory between the rank processes of one host) now, `nccl` later.
 * Every call is collective: all ranks of the group call it in the same order.
 * Calls return 0, or -1 when the group was aborted (a peer died): the caller then
 * stops training and exits non-zero. */
#ifndef DDPD_COLLECTIVES_H
#define DDPD_COLLECTIVES_H

#include <stddef.h>

typedef struct coll_comm coll_comm;

struct coll_comm {
    int rank, world_size;
    const char *backend; /* "cpu" or "nccl" */
    /* buf <- average over ranks of buf. Fixed summation order (rank 0, 1, ...):
     * every rank ends with bit-identical values. */
    int (*allreduce_avg_f32)(coll_comm *c, float *buf, size_t n);
    /* buf <- sum over ranks of buf, in the same fixed order (metrics, counts). */
    int (*allreduce_sum_f64)(coll_comm *c, double *buf, size_t n);
    /* The sharded optimizer's pair (ZeRO stage 1). Reduce-scatter: afterwards this
     * rank's share of buf (coll_share) holds the average over ranks, summed in the
     * same fixed order as the all-reduce; the rest of buf is unspecified. All-gather:
     * every rank's share of buf, from its owner, into every rank's buf. A peer may
     * read buf until it enters its next collective call: do not write buf before
     * your own next collective call has returned. */
    int (*reduce_scatter_avg_f32)(coll_comm *c, float *buf, size_t n);
    int (*allgather_f32)(coll_comm *c, float *buf, size_t n);
    /* buf on every rank <- buf on `root`. */
    int (*broadcast)(coll_comm *c, void *buf, size_t bytes, int root);
    int (*barrier)(coll_comm *c);
    /* Memory for buffers that will be all-reduced (shared memory for cpu, so that
     * peers read it in place without a staging copy). Never freed separately:
     * it lives as long as the group. NULL when the arena is exhausted. */
    void *(*alloc)(coll_comm *c, size_t bytes);
    void *impl;
};

/* The share [*lo, *hi) of n floats that `rank` owns in reduce-scatter and
 * all-gather: equal parts rounded up to whole cache lines (the last may be short or
 * empty). The same for every backend. */
void coll_share(size_t n, int world_size, int rank, size_t *lo, size_t *hi);

/* --- cpu backend ---------------------------------------------------------------
 * The launcher creates the group before forking (an anonymous MAP_SHARED mapping:
 * no name, no file, no port); each rank attaches after fork. */
typedef struct coll_cpu_group coll_cpu_group;

/* `arena_bytes` per rank for coll_comm.alloc. NULL (errno set) on failure. */
coll_cpu_group *coll_cpu_group_create(int world_size, size_t arena_bytes);
/* In the rank process, after fork. The returned comm lives until process exit. */
coll_comm *coll_cpu_attach(coll_cpu_group *g, int rank);
/* Called by the launcher when a rank died: every rank blocked in (or later
 * entering) a collective returns -1 promptly. Async-signal-safe. */
void coll_cpu_group_abort(coll_cpu_group *g);
/* Unmap (launcher, after all ranks have exited). */
void coll_cpu_group_destroy(coll_cpu_group *g);
/* Like coll_cpu_group_create with an explicit chunk size (the unit that broadcast
 * and the all-reduce of buffers outside the arenas pipeline over; rounded to a
 * multiple of 4 KiB; 0: the default): for benchmarks and tests. */
coll_cpu_group *coll_cpu_group_create_tuned(int world_size, size_t arena_bytes,
                                            size_t chunk_bytes);
/* The group's chunk size in bytes (tests pick sizes around it). */
size_t coll_cpu_group_chunk_bytes(const coll_cpu_group *g);

#endif
