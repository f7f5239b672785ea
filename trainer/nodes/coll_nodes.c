/* The cpu collectives across nodes: see coll_nodes.h. Every call runs the node's
 * part on the shared-memory comm, then the part between nodes on the gloo link;
 * calls that need one member per node between the nodes (barrier, broadcast) use
 * local rank 0's link, while the node's other ranks wait for it in a local barrier
 * or broadcast. */
#include "coll_nodes.h"
#include "monotonic.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

/* A reduce-scatter hands its result to the consumer in pieces of this many floats,
 * as coll_cpu.c does. */
#define CONSUME_PIECE 16384

typedef struct {
    coll_comm pub;
    coll_comm *local;
    gloo_link *link;
    char failure[512];
} nodes_comm;

static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

/* A call on the node's comm: its counters are this comm's waits and syncs. */
static int here(nodes_comm *c, int rc) {
    c->pub.wait_ns = c->local->wait_ns;
    c->pub.syncs = c->local->syncs;
    return rc;
}

/* A call between the nodes that started at t0: its time, and why it failed. */
static int between(nodes_comm *c, int rc, uint64_t t0) {
    c->pub.net_ns += (uint64_t)mono_ns() - t0;
    c->pub.syncs++;
    if (rc != 0 && !c->failure[0]) snprintf(c->failure, sizeof c->failure, "%s", gloo_link_error(c->link));
    return rc;
}

static int node_of(const nodes_comm *c, int rank) { return rank / c->local->world_size; }

/* My share [lo, hi) of buf, which holds my node's average: the average over every
 * rank (the nodes' averages summed in the ring's order, times 1/nodes); sums[0..m)
 * summed across too, in the same call (one round trip, not two). */
static int average_share_across(nodes_comm *c, float *buf, size_t lo, size_t hi, double *sums, size_t m) {
    uint64_t t0 = (uint64_t)mono_ns();
    int rc = m ? gloo_link_allreduce_sum_f32_f64(c->link, buf + lo, hi - lo, sums, m)
               : gloo_link_allreduce_sum_f32(c->link, buf + lo, hi - lo);
    if (between(c, rc, t0) != 0) return -1;
    const float s = 1.0f / (float)c->pub.nodes;
    for (size_t i = lo; i < hi; i++) buf[i] *= s;
    return 0;
}

static int sum_across_f64(nodes_comm *c, double *buf, size_t n) {
    uint64_t t0 = (uint64_t)mono_ns();
    return between(c, gloo_link_allreduce_sum_f64(c->link, buf, n), t0);
}

static int n_reduce_scatter_avg_f32_ex(coll_comm *pub, float *buf, size_t n, double *sums, size_t m,
                                       coll_consume_fn consume, void *arg) {
    nodes_comm *c = (nodes_comm *)pub;
    if (here(c, c->local->reduce_scatter_avg_f32_ex(c->local, buf, n, sums, m, NULL, NULL)) != 0) return -1;
    size_t lo, hi;
    coll_share(n, pub->shard_world, pub->shard_rank, &lo, &hi);
    if (average_share_across(c, buf, lo, hi, sums, m) != 0) return -1;
    for (size_t o = lo; consume && o < hi; o += CONSUME_PIECE) consume(arg, o, min_size(hi, o + CONSUME_PIECE));
    return 0;
}

static int n_reduce_scatter_avg_f32(coll_comm *pub, float *buf, size_t n) {
    return n_reduce_scatter_avg_f32_ex(pub, buf, n, NULL, 0, NULL, NULL);
}

/* The node's average everywhere, my share of it averaged across, then every share
 * from its owner in the node. */
static int n_allreduce_avg_f32(coll_comm *pub, float *buf, size_t n) {
    nodes_comm *c = (nodes_comm *)pub;
    if (here(c, c->local->allreduce_avg_f32(c->local, buf, n)) != 0) return -1;
    size_t lo, hi;
    coll_share(n, pub->shard_world, pub->shard_rank, &lo, &hi);
    if (average_share_across(c, buf, lo, hi, NULL, 0) != 0) return -1;
    return here(c, c->local->allgather_f32(c->local, buf, n));
}

/* The node's sum, then the sum of those across (each local rank over its own link:
 * the same inputs, the same ring, the same bits). */
static int n_allreduce_sum_f64(coll_comm *pub, double *buf, size_t n) {
    nodes_comm *c = (nodes_comm *)pub;
    if (here(c, c->local->allreduce_sum_f64(c->local, buf, n)) != 0) return -1;
    return sum_across_f64(c, buf, n);
}

static int n_allgather_f32(coll_comm *pub, float *buf, size_t n) {
    nodes_comm *c = (nodes_comm *)pub;
    return here(c, c->local->allgather_f32(c->local, buf, n));
}

/* Within root's node from root; between the nodes from root's node, by the local
 * ranks 0; within every other node from its local rank 0. */
static int n_broadcast(coll_comm *pub, void *buf, size_t bytes, int root) {
    nodes_comm *c = (nodes_comm *)pub;
    int root_node = node_of(c, root), local_root = root % c->local->world_size;
    if (pub->node_rank == root_node && here(c, c->local->broadcast(c->local, buf, bytes, local_root)) != 0) return -1;
    if (pub->shard_rank == 0) {
        uint64_t t0 = (uint64_t)mono_ns();
        if (between(c, gloo_link_broadcast(c->link, buf, bytes, root_node), t0) != 0) return -1;
    }
    if (pub->node_rank != root_node) return here(c, c->local->broadcast(c->local, buf, bytes, 0));
    return 0;
}

/* Root's node's copy is complete once its ranks pass a barrier; local rank 0 of
 * every other node receives it into that node's copy while the others wait. */
static int n_broadcast_shared(coll_comm *pub, void *buf, size_t bytes, int root) {
    nodes_comm *c = (nodes_comm *)pub;
    if (here(c, c->local->barrier(c->local)) != 0) return -1;
    if (pub->shard_rank == 0) {
        uint64_t t0 = (uint64_t)mono_ns();
        if (between(c, gloo_link_broadcast(c->link, buf, bytes, node_of(c, root)), t0) != 0) return -1;
    }
    return here(c, c->local->barrier(c->local));
}

static int n_barrier(coll_comm *pub) {
    nodes_comm *c = (nodes_comm *)pub;
    if (here(c, c->local->barrier(c->local)) != 0) return -1;
    if (pub->shard_rank == 0) {
        uint64_t t0 = (uint64_t)mono_ns();
        if (between(c, gloo_link_barrier(c->link), t0) != 0) return -1;
    }
    return here(c, c->local->barrier(c->local));
}

static int n_shard_sum_f64(coll_comm *pub, double *buf, size_t n) {
    nodes_comm *c = (nodes_comm *)pub;
    return here(c, c->local->allreduce_sum_f64(c->local, buf, n));
}

static int n_shard_barrier(coll_comm *pub) {
    nodes_comm *c = (nodes_comm *)pub;
    return here(c, c->local->barrier(c->local));
}

static void *n_alloc(coll_comm *pub, size_t bytes) {
    nodes_comm *c = (nodes_comm *)pub;
    return c->local->alloc(c->local, bytes);
}

static void *n_alloc_shared(coll_comm *pub, size_t bytes) {
    nodes_comm *c = (nodes_comm *)pub;
    return c->local->alloc_shared(c->local, bytes);
}

/* The shard group is this host's ranks: their copies, and mirroring between them, are the host's own. */
static void *n_alloc_mirrored(coll_comm *pub, size_t bytes) {
    nodes_comm *c = (nodes_comm *)pub;
    return c->local->alloc_mirrored(c->local, bytes);
}

static int n_mirror_f32(coll_comm *pub, float *buf, size_t lo, size_t hi) {
    nodes_comm *c = (nodes_comm *)pub;
    return c->local->mirror_f32(c->local, buf, lo, hi);
}

static const char *n_failure(coll_comm *pub) { return ((nodes_comm *)pub)->failure; }

coll_comm *coll_nodes_create(coll_comm *local, gloo_link *link, int nodes, int node_rank) {
    if (!local || !link) return NULL;
    nodes_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->local = local;
    c->link = link;
    c->pub = (coll_comm){
        .rank = node_rank * local->world_size + local->rank,
        .world_size = nodes * local->world_size,
        .backend = "cpu+gloo",
        .nodes = nodes,
        .node_rank = node_rank,
        .shard_rank = local->rank,
        .shard_world = local->world_size,
        .width = nodes * local->world_size, /* one part per rank: no parts reduce-scatter across nodes */
        .first_part = node_rank * local->world_size + local->rank,
        .parts = 1,
        .allreduce_avg_f32 = n_allreduce_avg_f32,
        .allreduce_sum_f64 = n_allreduce_sum_f64,
        .reduce_scatter_avg_f32 = n_reduce_scatter_avg_f32,
        .allgather_f32 = n_allgather_f32,
        .reduce_scatter_avg_f32_ex = n_reduce_scatter_avg_f32_ex,
        .broadcast = n_broadcast,
        .broadcast_shared = n_broadcast_shared,
        .shard_sum_f64 = n_shard_sum_f64,
        .shard_barrier = n_shard_barrier,
        .barrier = n_barrier,
        .alloc = n_alloc,
        .alloc_shared = n_alloc_shared,
        .alloc_mirrored = n_alloc_mirrored,
        .mirror_f32 = n_mirror_f32,
        .failure = n_failure,
        .impl = c,
    };
    return &c->pub;
}
