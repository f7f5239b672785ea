/* Collectives behind one small interface, with one backend per transport: `cpu`
 * (shared memory between the rank processes of one host) and `nccl` (GPUs).
 * Every call is collective: all ranks of the group call it in the same order.
 * Calls return 0, or -1 when the group was aborted (a peer died): the caller then
 * stops training and exits non-zero. */
#ifndef DDPD_TRAINER_COLLECTIVES_H
#define DDPD_TRAINER_COLLECTIVES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct coll_comm coll_comm;

/* The most doubles reduce_scatter_avg_f32_ex carries beside its buffer. */
#define COLL_MAX_SIDE_SUMS 8
/* The most batch shards one rank computes (reduce_scatter_parts_f32_ex). */
#define COLL_MAX_PARTS 64

/* Called by reduce_scatter_avg_f32_ex on [lo, hi) (offsets into its buffer) of the
 * rank's share, once that piece holds its average. */
typedef void (*coll_consume_fn)(void *arg, size_t lo, size_t hi);

struct coll_comm {
    int rank, world_size;
    const char *backend; /* "cpu", "cpu+gloo" (across nodes) or "nccl" */
    /* The hosts the group spans and this rank's host among them (1 and 0 on one
     * host). Ranks are numbered host by host: node k holds ranks k*L .. k*L+L-1. */
    int nodes, node_rank;
    /* Who owns which share in reduce-scatter and all-gather (coll_share(n,
     * shard_world, shard_rank)): the group itself on one host; across nodes, each
     * host keeps a whole copy of what is sharded, split among its own ranks (its
     * local rank among its L ranks). */
    int shard_rank, shard_world;
    /* The run's logical width and this rank's part of it. The global batch is split
     * into `width` batch shards ("parts", numbered 0..width-1), always the same
     * whatever number of processes holds them; this rank computes `parts` of them,
     * first_part .. first_part+parts-1 (coll_parts_of). One part per rank
     * (width == world_size, first_part == rank) unless coll_set_width said otherwise. */
    int width, first_part, parts;
    /* Its backend sums the parts in device memory (nccl: coll_nccl_reduce_scatter_parts_device)
     * rather than through reduce_scatter_parts_f32_ex: coll_set_width may split its width too. */
    bool parts_on_device;
    /* buf <- average over ranks of buf. Fixed summation order (rank 0, 1, ...; across
     * nodes, each host's average over its ranks in rank order, then the average of
     * those in the order of gloo's ring): every rank ends with bit-identical values,
     * the same run after run. */
    int (*allreduce_avg_f32)(coll_comm *c, float *buf, size_t n);
    /* buf <- sum over ranks of buf, in the same fixed order (metrics, counts). */
    int (*allreduce_sum_f64)(coll_comm *c, double *buf, size_t n);
    /* The sharded optimizer's pair (ZeRO stage 1). Reduce-scatter: afterwards this
     * rank's share of buf (coll_share(n, shard_world, shard_rank)) holds the average
     * over ranks, summed in the same fixed order as the all-reduce; the rest of buf is
     * unspecified. All-gather: every share of buf, from its owner in the shard group,
     * into every rank's buf. A peer may
     * read buf until it enters its next collective call: do not write buf before
     * your own next collective call has returned. */
    int (*reduce_scatter_avg_f32)(coll_comm *c, float *buf, size_t n);
    int (*allgather_f32)(coll_comm *c, float *buf, size_t n);
    /* reduce_scatter_avg_f32 with two extras that save a training step separate
     * synchronisations: sums[0..m) (m <= COLL_MAX_SIDE_SUMS; sums may be NULL when m
     * is 0) come back summed over ranks in rank order, exactly as allreduce_sum_f64
     * sums them, on every rank; and `consume` (may be NULL) is called on consecutive
     * pieces of this rank's share, in order, each as soon as it holds its average,
     * while it is still in cache. NULL where a backend lacks it. */
    int (*reduce_scatter_avg_f32_ex)(coll_comm *c, float *buf, size_t n, double *sums, size_t m,
                                     coll_consume_fn consume, void *arg);
    /* The fixed-order reduce-scatter of a run whose ranks compute several batch
     * shards each. This rank's part first_part+j has its buffer at buf + j * stride
     * (j < parts; all in its arena); afterwards this rank's share of buf
     * (coll_part_share) holds, element by element,
     *     ((part_0 + part_1) + ... + part_{width-1}) * (1 / width)
     * summed in part order whatever the number of ranks and whoever holds which part:
     * the same bits on 1 rank or on width ranks (with one part each it is
     * reduce_scatter_avg_f32_ex's rank order). sums[j * m + i] (m <= COLL_MAX_SIDE_SUMS)
     * is side sum i of local part j; afterwards sums[i] is their total over all parts,
     * in part order. `consume` as in reduce_scatter_avg_f32_ex. The rest of the
     * buffers is unspecified. NULL where a backend lacks it (across nodes). */
    int (*reduce_scatter_parts_f32_ex)(coll_comm *c, float *buf, size_t stride, size_t n, double *sums, size_t m,
                                       coll_consume_fn consume, void *arg);
    /* buf on every rank <- buf on `root`. */
    int (*broadcast)(coll_comm *c, void *buf, size_t bytes, int root);
    /* The same for memory from alloc_shared that `root` has written: afterwards every
     * rank reads root's bytes there (one host: a barrier, as the copy is one; across
     * nodes, every other host's copy gets root's). NULL where alloc_shared is. */
    int (*broadcast_shared)(coll_comm *c, void *buf, size_t bytes, int root);
    /* buf <- sum of buf over the ranks that hold one whole copy of what is sharded
     * between them (the shard group above: the group on one host, the host's own
     * ranks across nodes), in rank order: a norm over sharded state. NULL where
     * alloc_shared is. */
    int (*shard_sum_f64)(coll_comm *c, double *buf, size_t n);
    /* A barrier of that same shard group: after it, every share its ranks wrote in
     * alloc_shared memory is in place for all of them. NULL where alloc_shared is. */
    int (*shard_barrier)(coll_comm *c);
    int (*barrier)(coll_comm *c);
    /* Memory for buffers that will be all-reduced (shared memory for cpu, so that
     * peers read it in place without a staging copy). Never freed separately:
     * it lives as long as the group. NULL when the arena is exhausted. */
    void *(*alloc)(coll_comm *c, size_t bytes);
    /* Memory that all ranks of the group share as one copy, at the same address in
     * every rank: for state the ranks update in disjoint shares and all read (the
     * sharded optimizer's parameters and moments need no all-gather then). Every
     * rank calls it in the same order with the same sizes and gets the same block;
     * zeroed when first handed out; never freed separately. NULL where the backend
     * has no such memory, or when it is exhausted. */
    void *(*alloc_shared)(coll_comm *c, size_t bytes);
    /* Memory of which every rank of the shard group holds a copy of its own, that
     * its peers write into through mirror_f32: for state each rank updates in its own
     * share and reads whole (the sharded optimizer's parameters). Unlike one shared
     * copy, no line of it is ever in two cores' caches at once, so the owner's update
     * never waits for its peers' caches to give the lines up. Every rank calls it in
     * the same order with the same sizes; zeroed when first handed out; never freed
     * separately. NULL where alloc_shared is, or when the arena is exhausted. */
    void *(*alloc_mirrored)(coll_comm *c, size_t bytes);
    /* Floats [lo, hi) of my copy of alloc_mirrored memory (buf: its start) into every
     * shard peer's copy, past the caches where the machine can; in place for all after
     * the next shard_barrier. Not collective: each rank mirrors its own share. -1
     * (EINVAL) when buf is not alloc_mirrored memory. */
    int (*mirror_f32)(coll_comm *c, float *buf, size_t lo, size_t hi);
    /* Why the group was aborted, as far as this rank knows ("" when it does not: a
     * peer on this host died, and the launcher says which). NULL where a backend
     * keeps no reason. */
    const char *(*failure)(coll_comm *c);
    /* Counters a backend may keep (0 where it does not): how long this rank waited
     * for its peers inside collectives, and how many times it synchronised with them;
     * across nodes, how long it spent in the calls between hosts (their waits
     * included: over a network, waiting and moving data are one). */
    uint64_t wait_ns, syncs, net_ns;
    void *impl;
};

/* The share [*lo, *hi) of n floats that `rank` owns in reduce-scatter and
 * all-gather: equal parts rounded up to whole cache lines (the last may be short or
 * empty). The same for every backend. */
void coll_share(size_t n, int world_size, int rank, size_t *lo, size_t *hi);

/* Which batch shards of a run of logical width `width` on `ranks` processes `rank`
 * computes: [*first, *first + *count), contiguous, in rank order, as even as can be
 * (rank r: floor(r W / P) to floor((r+1) W / P)). */
void coll_parts_of(int width, int ranks, int rank, int *first, int *count);
/* Sets the comm's logical width (width >= world_size): its rank's parts from
 * coll_parts_of. -1 (EINVAL) when the width is below the ranks or above
 * COLL_MAX_PARTS per rank, or when it is wider than the ranks and the backend has no
 * reduce_scatter_parts_f32_ex (nor sums its parts on its device: parts_on_device). */
int coll_set_width(coll_comm *c, int width);
/* This rank's share [*lo, *hi) of n floats in reduce_scatter_parts_f32_ex: the union
 * of its parts' shares, part s owning coll_share(n, width, s). With one part per rank
 * that is coll_share(n, world_size, rank). */
void coll_part_share(const coll_comm *c, size_t n, size_t *lo, size_t *hi);
/* The same for any rank of a run of `width` shards on `ranks` ranks. */
void coll_part_share_of(size_t n, int width, int ranks, int rank, size_t *lo, size_t *hi);

/* --- cpu backend ---------------------------------------------------------------
 * The launcher creates the group before forking (an anonymous MAP_SHARED mapping:
 * no name, no file, no port); each rank attaches after fork. */
typedef struct coll_cpu_group coll_cpu_group;

/* `arena_bytes` per rank for coll_comm.alloc, and as many again for
 * coll_comm.alloc_shared (pages nobody touches cost no memory). NULL (errno set) on
 * failure. */
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
