/* Progress-posting collectives: see comm_watch.h. One relaxed atomic add and one
 * clock read per call: nothing next to the collective itself. */
#include "comm_watch.h"

#include <stdlib.h>

typedef struct {
    coll_comm pub;
    coll_comm *inner;
    run_board *board;
    int slot; /* the rank's slot on its host's board */
} watched;

static coll_comm *enter(coll_comm *c) {
    watched *w = (watched *)c;
    run_board_enter_collective(w->board, w->slot);
    return w->inner;
}

/* The backend's counters, seen through the wrapper as they are after the call. */
static int leave(coll_comm *c, const coll_comm *in, int rc) {
    c->wait_ns = in->wait_ns;
    c->syncs = in->syncs;
    c->net_ns = in->net_ns;
    return rc;
}

static int w_allreduce_avg_f32(coll_comm *c, float *buf, size_t n) {
    coll_comm *in = enter(c);
    return leave(c, in, in->allreduce_avg_f32(in, buf, n));
}
static int w_allreduce_sum_f64(coll_comm *c, double *buf, size_t n) {
    coll_comm *in = enter(c);
    return leave(c, in, in->allreduce_sum_f64(in, buf, n));
}
static int w_reduce_scatter_avg_f32(coll_comm *c, float *buf, size_t n) {
    coll_comm *in = enter(c);
    return leave(c, in, in->reduce_scatter_avg_f32(in, buf, n));
}
static int w_allgather_f32(coll_comm *c, float *buf, size_t n) {
    coll_comm *in = enter(c);
    return leave(c, in, in->allgather_f32(in, buf, n));
}
static int w_broadcast(coll_comm *c, void *buf, size_t bytes, int root) {
    coll_comm *in = enter(c);
    return leave(c, in, in->broadcast(in, buf, bytes, root));
}
static int w_barrier(coll_comm *c) {
    coll_comm *in = enter(c);
    return leave(c, in, in->barrier(in));
}
static int w_reduce_scatter_avg_f32_ex(coll_comm *c, float *buf, size_t n, double *sums, size_t m,
                                       coll_consume_fn consume, void *arg) {
    coll_comm *in = enter(c);
    return leave(c, in, in->reduce_scatter_avg_f32_ex(in, buf, n, sums, m, consume, arg));
}
static int w_reduce_scatter_parts_f32_ex(coll_comm *c, float *buf, size_t stride, size_t n, double *sums,
                                          size_t m, coll_consume_fn consume, void *arg) {
    coll_comm *in = enter(c);
    return leave(c, in, in->reduce_scatter_parts_f32_ex(in, buf, stride, n, sums, m, consume, arg));
}
static int w_broadcast_shared(coll_comm *c, void *buf, size_t bytes, int root) {
    coll_comm *in = enter(c);
    return leave(c, in, in->broadcast_shared(in, buf, bytes, root));
}
static int w_shard_sum_f64(coll_comm *c, double *buf, size_t n) {
    coll_comm *in = enter(c);
    return leave(c, in, in->shard_sum_f64(in, buf, n));
}
static int w_shard_barrier(coll_comm *c) {
    coll_comm *in = enter(c);
    return leave(c, in, in->shard_barrier(in));
}
static const char *w_failure(coll_comm *c) {
    coll_comm *in = ((watched *)c)->inner;
    return in->failure(in);
}
static void *w_alloc(coll_comm *c, size_t bytes) {
    coll_comm *in = ((watched *)c)->inner;
    return in->alloc(in, bytes);
}
static void *w_alloc_shared(coll_comm *c, size_t bytes) {
    coll_comm *in = ((watched *)c)->inner;
    return in->alloc_shared(in, bytes);
}
static void *w_alloc_mirrored(coll_comm *c, size_t bytes) {
    coll_comm *in = ((watched *)c)->inner;
    return in->alloc_mirrored(in, bytes);
}
static int w_mirror_f32(coll_comm *c, float *buf, size_t lo, size_t hi) { /* never waits: nothing to watch */
    coll_comm *in = ((watched *)c)->inner;
    return in->mirror_f32(in, buf, lo, hi);
}

coll_comm *comm_watch_wrap(coll_comm *inner, run_board *board, int slot) {
    if (!inner) return NULL;
    watched *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->inner = inner;
    w->board = board;
    w->slot = slot;
    w->pub = *inner;
    w->pub.allreduce_avg_f32 = w_allreduce_avg_f32;
    w->pub.allreduce_sum_f64 = w_allreduce_sum_f64;
    w->pub.reduce_scatter_avg_f32 = w_reduce_scatter_avg_f32;
    w->pub.allgather_f32 = w_allgather_f32;
    w->pub.broadcast = w_broadcast;
    w->pub.barrier = w_barrier;
    w->pub.alloc = w_alloc;
    /* the optional calls stay NULL where the backend lacks them */
    w->pub.reduce_scatter_avg_f32_ex = inner->reduce_scatter_avg_f32_ex ? w_reduce_scatter_avg_f32_ex : NULL;
    w->pub.reduce_scatter_parts_f32_ex = inner->reduce_scatter_parts_f32_ex ? w_reduce_scatter_parts_f32_ex : NULL;
    w->pub.alloc_shared = inner->alloc_shared ? w_alloc_shared : NULL;
    w->pub.alloc_mirrored = inner->alloc_mirrored ? w_alloc_mirrored : NULL;
    w->pub.mirror_f32 = inner->mirror_f32 ? w_mirror_f32 : NULL;
    w->pub.broadcast_shared = inner->broadcast_shared ? w_broadcast_shared : NULL;
    w->pub.shard_sum_f64 = inner->shard_sum_f64 ? w_shard_sum_f64 : NULL;
    w->pub.shard_barrier = inner->shard_barrier ? w_shard_barrier : NULL;
    w->pub.failure = inner->failure ? w_failure : NULL;
    w->pub.impl = w;
    return &w->pub;
}
