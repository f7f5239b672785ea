/* The cpu backend of the collectives: the rank processes of one host share one
 * anonymous MAP_SHARED mapping, created by the launcher before fork (no name, no
 * file, no port: nothing to clean up, nothing another job can collide with).
 *
 * Layout of the mapping (every part page-aligned):
 *   control block   barrier (with the abort flag), two sets of per-rank descriptors
 *   staging slots   per rank, two chunks (double-buffered by round parity): the
 *                   data of a rank whose buffer is outside its arena
 *   result area     two chunks (same parity): what broadcast passes through
 *   shared arena    arena_bytes, handed out by coll_comm.alloc_shared: one copy
 *                   that every rank reads and writes (in disjoint shares)
 *   arenas          per rank, arena_bytes, handed out by coll_comm.alloc from the
 *                   bottom and by coll_comm.alloc_mirrored from the top (so that a
 *                   mirrored block sits at the same offset in every rank's arena
 *                   whatever each rank allocated with alloc)
 *
 * Every all-reduce, reduce-scatter and all-gather starts the same way (publish):
 * each rank writes where its buffer is (its arena offset, or STAGED) and its count
 * into descriptor set (call number % 2), BARRIER, and reads everyone's. A set is
 * rewritten two calls later, after the barrier of the call in between, which every
 * reader of the old contents has passed: so calls need no trailing barrier for the
 * descriptors' sake. All ranks see the same descriptors, so they all pick the same
 * path below.
 *
 * All-reduce, every buffer in its arena (the trainer's case; "push", 2 barriers):
 *   rank r reduces its cache-line-aligned 1/world share of the whole buffer, reading
 *   every rank's buffer in place and summing in fixed order 0..W-1 (times 1/W) into
 *   an L1 scratch block, and writes the block into every rank's buffer. Only rank r
 *   touches share r of any buffer, so nothing needs double-buffering; BARRIER, and
 *   all buffers are complete. Each element crosses between cores once each way.
 * All-reduce, some buffer outside its arena (the same, chunked, through slots):
 *   publish also copies a staged rank's chunk 0 into its slot. Then per chunk c:
 *   reduce my share of chunk c from every rank's copy (arena buffer in place, or
 *   slot[c%2]) and write it back over every copy; a staged rank copies chunk c+1
 *   into its other slot; BARRIER; a staged rank copies its slot out to its buffer.
 *   1 + (number of chunks) barriers.
 *   Why reusing slots and results is race-free: every round (of this or of a
 *   broadcast) has one barrier between writing shared memory and reading it, and
 *   rounds alternate between two buffers by a round counter all ranks advance
 *   alike. A buffer of parity p used in round q was last used in round q-2, and
 *   every access of round q-2 finished before its rank arrived at the barrier of
 *   round q-1, which the rank writing it in round q has passed.
 * Reduce-scatter / all-gather (the sharded optimizer): in place between arena
 *   buffers after publish, no further barrier (see collectives.h for what callers
 *   may then write); outside the arenas, a chunked all-reduce / broadcasts. The
 *   extended reduce-scatter also carries a few doubles in the descriptors, which
 *   every rank totals in rank order right after publish's barrier (the step's loss
 *   needs no all-reduce of its own), and hands the reduced share to a consumer
 *   piece by piece (the optimizer updates it while it is in cache).
 * The result does not depend on which rank reduced which share: the arithmetic per
 * element is the same everywhere, so all ranks end bit-identical. */
#include "collectives.h"
#include "futex_barrier.h"
#include "monotonic.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define CACHE_LINE 64
#define PAGE 4096
/* Chunk of the staged all-reduce and of broadcast: 512 KiB measured best here
 * (bench/allreduce.sh); the working set (slots + results) stays within L2. */
#define DEFAULT_CHUNK_BYTES (512u * 1024)
#define MAX_WORLD 256
#define CPU_MAGIC 0x64647063u /* "ddpc" */
/* Busy-wait budget of a barrier before sleeping: long enough to cover the skew
 * between ranks that each have a core, short when ranks outnumber cores. */
#define SPIN_NS_DEDICATED 50000u
#define SPIN_NS_OVERSUBSCRIBED 2000u
/* Elements reduced at a time when world > 2, so the partial sums stay in L1. */
#define REDUCE_BLOCK 2048
/* Scratch block of the in-place paths: small enough to stay in L1. */
#define SCRATCH_BYTES 8192
/* A reduce-scatter hands its result to the consumer (the optimizer) in pieces of
 * this many floats (64 KiB): still in L2 when consumed, few enough calls per step. */
#define CONSUME_PIECE 16384
#define STAGED UINT64_MAX

/* What a rank publishes at the start of a call: where peers find its data, and the
 * small sums that travel beside a reduce-scatter. */
typedef struct {
    _Alignas(CACHE_LINE) uint64_t src_off; /* offset in its arena, or STAGED */
    uint64_t count;                        /* elements: must agree */
    uint64_t side_count;                   /* side sums: must agree */
    uint64_t stride, parts, part_m;        /* reduce_scatter_parts: its parts' layout and side sums each */
    double side[COLL_MAX_SIDE_SUMS * COLL_MAX_PARTS]; /* part j's side sum i at j * part_m + i */
} rank_desc;

typedef struct {
    uint32_t magic;
    uint32_t world;
    size_t chunk_bytes, arena_bytes, map_bytes;
    size_t desc_off, slots_off, result_off, shared_off, arenas_off, arena_stride;
    futex_barrier barrier;
} cpu_ctrl;

/* Per-process view: the public comm first so that the vtable hands it back. */
typedef struct {
    coll_comm pub;
    cpu_ctrl *ctrl;
    unsigned char *base;
    uint64_t round; /* slot/result rounds done so far: same on every rank */
    uint64_t calls; /* publishing calls so far: picks the descriptor set */
    size_t arena_used, shared_used, mirrored_used;
    uint64_t spin_ns;
} cpu_comm;

/* One publishing call, as every rank sees it after publish(). */
typedef struct {
    unsigned char *buf;
    size_t n, elem, chunk_elems;
    uint64_t my_off;          /* STAGED or offset in my arena */
    uint64_t offs[MAX_WORLD]; /* every rank's src_off */
    int all_in_arenas;
    double *side;             /* side sums in, their totals over ranks out (side_count of them) */
    size_t side_count;
    /* reduce_scatter_parts: my parts (0: not that call), their stride and side sums
     * (part_m each, in part_side); after publish every rank's parts and stride */
    int parts;
    size_t stride, part_m;
    const double *part_side;
    int nparts[MAX_WORLD];
    uint64_t strides[MAX_WORLD];
    int set;                  /* the descriptor set this call published in */
} call_plan;

typedef void reduce_fn(void *dst, const void *const *srcs, int world, size_t n);

/* --- layout ------------------------------------------------------------------- */

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }
static size_t min_size(size_t a, size_t b) { return a < b ? a : b; }

static rank_desc *desc_of(cpu_comm *c, unsigned set, int rank) {
    return (rank_desc *)(c->base + c->ctrl->desc_off) + set * c->ctrl->world + (unsigned)rank;
}

static unsigned char *slot_of(cpu_comm *c, int rank, unsigned parity) {
    const cpu_ctrl *k = c->ctrl;
    return c->base + k->slots_off + ((size_t)rank * 2 + parity) * k->chunk_bytes;
}

static unsigned char *result_of(cpu_comm *c, unsigned parity) {
    return c->base + c->ctrl->result_off + parity * c->ctrl->chunk_bytes;
}

static unsigned char *shared_area(cpu_comm *c) { return c->base + c->ctrl->shared_off; }

static unsigned char *arena_of(cpu_comm *c, int rank) {
    return c->base + c->ctrl->arenas_off + (size_t)rank * c->ctrl->arena_stride;
}

/* Rank k's buffer of this call (only when it is in k's arena). */
static unsigned char *peer_buf(cpu_comm *c, const call_plan *p, int k) {
    return arena_of(c, k) + p->offs[k];
}

/* Offset of [buf, buf+bytes) in this rank's arena, or STAGED if not inside it. */
static uint64_t arena_offset(cpu_comm *c, const void *buf, size_t bytes) {
    uintptr_t lo = (uintptr_t)arena_of(c, c->pub.rank), p = (uintptr_t)buf;
    if (p < lo || p - lo > c->ctrl->arena_bytes || bytes > c->ctrl->arena_bytes - (p - lo))
        return STAGED;
    return p - lo;
}

/* Rank `rank`'s share [*lo, *hi) of m elements: equal shares rounded up to whole
 * cache lines, so no two ranks write the same line (of an aligned buffer). */
static void share_range(size_t m, size_t elem, int world, int rank, size_t *lo, size_t *hi) {
    size_t line = CACHE_LINE / elem;
    size_t per = round_up((m + (size_t)world - 1) / (size_t)world, line);
    *lo = min_size(per * (size_t)rank, m);
    *hi = min_size(*lo + per, m);
}

void coll_share(size_t n, int world_size, int rank, size_t *lo, size_t *hi) {
    share_range(n, sizeof(float), world_size, rank, lo, hi);
}

void coll_parts_of(int width, int ranks, int rank, int *first, int *count) {
    long w = width, r = ranks;
    *first = (int)(rank * w / r);
    *count = (int)((rank + 1) * w / r) - *first;
}

int coll_set_width(coll_comm *c, int width) {
    int first, count;
    if (width < c->world_size || width > MAX_WORLD) {
        errno = EINVAL;
        return -1;
    }
    coll_parts_of(width, c->world_size, c->rank, &first, &count);
    if (count > COLL_MAX_PARTS || (width > c->world_size && !c->reduce_scatter_parts_f32_ex && !c->parts_on_device)) {
        errno = EINVAL;
        return -1;
    }
    c->width = width;
    c->first_part = first;
    c->parts = count;
    return 0;
}

void coll_part_share_of(size_t n, int width, int ranks, int rank, size_t *lo, size_t *hi) {
    int first, count;
    size_t a, b;
    coll_parts_of(width, ranks, rank, &first, &count);
    coll_share(n, width, first, lo, &b);
    coll_share(n, width, first + count - 1, &a, hi);
}

void coll_part_share(const coll_comm *c, size_t n, size_t *lo, size_t *hi) {
    coll_part_share_of(n, c->width, c->world_size, c->rank, lo, hi);
}

/* The barrier every synchronisation goes through, counted with the time spent in it. */
static int sync_all(cpu_comm *c) {
    uint64_t t0 = (uint64_t)mono_ns();
    int rc = futex_barrier_wait(&c->ctrl->barrier, c->spin_ns);
    c->pub.wait_ns += (uint64_t)mono_ns() - t0;
    c->pub.syncs++;
    return rc;
}
static int aborted(cpu_comm *c) { return futex_barrier_is_aborted(&c->ctrl->barrier); }

/* --- reduction kernels (simple loops over restrict pointers: they vectorize) --- */

static void add2_f32(float *restrict d, const float *restrict a, const float *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}
static void acc_f32(float *restrict d, const float *restrict a, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] += a[i];
}
static void acc_scale_f32(float *restrict d, const float *restrict a, float s, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = (d[i] + a[i]) * s;
}
static void avg2_f32(float *restrict d, const float *restrict a, const float *restrict b, float s,
                     size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = (a[i] + b[i]) * s;
}

/* dst = ((src0 + src1) + ... + src[W-1]) * (1/W), element by element. */
static void reduce_avg_f32(void *dst, const void *const *srcs, int world, size_t n) {
    const float s = 1.0f / (float)world;
    const float *const *f = (const float *const *)srcs;
    float *d = dst;
    if (world == 2) {
        avg2_f32(d, f[0], f[1], s, n);
        return;
    }
    for (size_t o = 0; o < n; o += REDUCE_BLOCK) {
        size_t len = min_size(n - o, REDUCE_BLOCK);
        add2_f32(d + o, f[0] + o, f[1] + o, len);
        for (int k = 2; k < world - 1; k++) acc_f32(d + o, f[k] + o, len);
        acc_scale_f32(d + o, f[world - 1] + o, s, len);
    }
}

static void add2_f64(double *restrict d, const double *restrict a, const double *restrict b, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] = a[i] + b[i];
}
static void acc_f64(double *restrict d, const double *restrict a, size_t n) {
    for (size_t i = 0; i < n; i++) d[i] += a[i];
}

/* dst = (src0 + src1) + ... + src[W-1]. */
static void reduce_sum_f64(void *dst, const void *const *srcs, int world, size_t n) {
    const double *const *f = (const double *const *)srcs;
    double *d = dst;
    for (size_t o = 0; o < n; o += REDUCE_BLOCK) {
        size_t len = min_size(n - o, REDUCE_BLOCK);
        add2_f64(d + o, f[0] + o, f[1] + o, len);
        for (int k = 2; k < world; k++) acc_f64(d + o, f[k] + o, len);
    }
}

/* --- publish: the common prologue ------------------------------------------------- */

static void stage_chunk(cpu_comm *c, const call_plan *p, size_t start) {
    size_t m = min_size(p->n - start, p->chunk_elems);
    if (m == 0) return; /* an empty call may pass no buffer at all (NULL + 0 is undefined) */
    memcpy(slot_of(c, c->pub.rank, (unsigned)(c->round & 1)), p->buf + start * p->elem, m * p->elem);
}

static void plan_call(cpu_comm *c, call_plan *p, void *buf, size_t n, size_t elem) {
    p->buf = buf;
    p->n = n;
    p->elem = elem;
    p->chunk_elems = c->ctrl->chunk_bytes / elem;
    p->my_off = arena_offset(c, buf, n * elem);
    p->side = NULL;
    p->side_count = 0;
    p->parts = 0;
    p->stride = p->part_m = 0;
    p->part_side = NULL;
}

/* Publish where my buffer is (staging chunk 0 if it is outside my arena and the
 * call may go the chunked way) and my side sums, barrier, learn where everyone's
 * buffer is and total the side sums in rank order. -1 if aborted, or if the ranks
 * disagree on a count (a caller bug that would otherwise desynchronise them: every
 * rank sees it and fails alike). */
static int publish(cpu_comm *c, call_plan *p, int may_stage) {
    int world = c->pub.world_size;
    unsigned set = (unsigned)(c->calls++ & 1);
    rank_desc *mine = desc_of(c, set, c->pub.rank);
    mine->src_off = p->my_off;
    mine->count = p->n;
    mine->side_count = p->side_count;
    for (size_t i = 0; i < p->side_count; i++) mine->side[i] = p->side[i];
    mine->parts = (uint64_t)p->parts;
    mine->stride = p->stride;
    mine->part_m = p->part_m;
    for (size_t i = 0; i < (size_t)p->parts * p->part_m; i++) mine->side[i] = p->part_side[i];
    p->set = (int)set;
    if (may_stage && p->my_off == STAGED) stage_chunk(c, p, 0);
    if (sync_all(c) != 0) return -1;
    p->all_in_arenas = 1;
    for (int k = 0; k < world; k++) {
        const rank_desc *d = desc_of(c, set, k);
        if (d->count != p->n || d->side_count != p->side_count) {
            errno = EINVAL;
            return -1;
        }
        if ((p->parts > 0) != (d->parts > 0) || d->part_m != p->part_m) {
            errno = EINVAL;
            return -1;
        }
        p->offs[k] = d->src_off;
        p->nparts[k] = (int)d->parts;
        p->strides[k] = d->stride;
        if (d->src_off == STAGED) p->all_in_arenas = 0;
    }
    for (size_t i = 0; i < p->side_count; i++) { /* ((s0 + s1) + s2) + ...: reduce_sum_f64's order */
        double total = desc_of(c, set, 0)->side[i];
        for (int k = 1; k < world; k++) total += desc_of(c, set, k)->side[i];
        p->side[i] = total;
    }
    return 0;
}

/* Elements [lo, hi): reduce over the world's `srcs` (element i of rank k at
 * srcs[k] + i * elem) and write the result to each of the `ndst` dsts, block by
 * block through an L1 scratch, since a destination is usually also a source. */
static void reduce_range(int world, size_t elem, unsigned char *const *srcs, unsigned char *const *dsts,
                         int ndst, size_t lo, size_t hi, reduce_fn *reduce) {
    size_t block = SCRATCH_BYTES / elem;
    _Alignas(CACHE_LINE) unsigned char scratch[SCRATCH_BYTES];
    const void *in[MAX_WORLD];
    for (size_t o = lo; o < hi; o += block) {
        size_t len = min_size(hi - o, block);
        for (int k = 0; k < world; k++) in[k] = srcs[k] + o * elem;
        reduce(scratch, in, world, len);
        for (int d = 0; d < ndst; d++) memcpy(dsts[d] + o * elem, scratch, len * elem);
    }
}

/* Every rank's buffer of this call (all in their arenas). */
static void arena_bufs(cpu_comm *c, const call_plan *p, unsigned char **bufs) {
    for (int k = 0; k < c->pub.world_size; k++) bufs[k] = peer_buf(c, p, k);
}

/* --- all-reduce ------------------------------------------------------------------ */

/* Every buffer in its arena: reduce my share, write it into every buffer, barrier. */
static int allreduce_push(cpu_comm *c, const call_plan *p, reduce_fn *reduce) {
    int world = c->pub.world_size;
    unsigned char *bufs[MAX_WORLD];
    size_t lo, hi;
    arena_bufs(c, p, bufs);
    share_range(p->n, p->elem, world, c->pub.rank, &lo, &hi);
    reduce_range(world, p->elem, bufs, bufs, world, lo, hi, reduce);
    return sync_all(c);
}

/* Where rank k's copy of the chunk at `start` is this round: in place in its arena
 * buffer, or in its staging slot of this round's parity. */
static unsigned char *chunk_of(cpu_comm *c, const call_plan *p, int k, size_t start) {
    if (p->offs[k] == STAGED) return slot_of(c, k, (unsigned)(c->round & 1));
    return peer_buf(c, p, k) + start * p->elem;
}

/* One round of the chunked path: reduce my share of the chunk at `start` and write
 * it back over every rank's copy (arena buffer or slot: only I touch that share);
 * stage the next chunk if I am staged; barrier; if staged, copy my slot out. */
static int chunked_round(cpu_comm *c, const call_plan *p, size_t start, reduce_fn *reduce) {
    int world = c->pub.world_size;
    size_t m = min_size(p->n - start, p->chunk_elems), lo, hi;
    unsigned char *chunks[MAX_WORLD];
    for (int k = 0; k < world; k++) chunks[k] = chunk_of(c, p, k, start);
    share_range(m, p->elem, world, c->pub.rank, &lo, &hi);
    reduce_range(world, p->elem, chunks, chunks, world, lo, hi, reduce);
    c->round++;
    if (p->my_off == STAGED && start + m < p->n) stage_chunk(c, p, start + m);
    if (sync_all(c) != 0) return -1;
    if (p->my_off == STAGED) memcpy(p->buf + start * p->elem, chunks[c->pub.rank], m * p->elem);
    return 0;
}

static int allreduce_chunked(cpu_comm *c, const call_plan *p, reduce_fn *reduce) {
    for (size_t start = 0; start < p->n; start += p->chunk_elems)
        if (chunked_round(c, p, start, reduce) != 0) return -1;
    return 0;
}

static call_plan *this_thread_plan(void) {
    static _Thread_local call_plan plan; /* offs[] is big: keep it off the stack */
    return &plan;
}

static int allreduce(cpu_comm *c, void *buf, size_t n, size_t elem, reduce_fn *reduce) {
    if (aborted(c)) return -1;
    if (n == 0 || c->pub.world_size == 1) return 0;
    call_plan *p = this_thread_plan();
    plan_call(c, p, buf, n, elem);
    if (publish(c, p, 1) != 0) return -1;
    return p->all_in_arenas ? allreduce_push(c, p, reduce) : allreduce_chunked(c, p, reduce);
}

static int cpu_allreduce_avg_f32(coll_comm *pub, float *buf, size_t n) {
    return allreduce((cpu_comm *)pub, buf, n, sizeof(float), reduce_avg_f32);
}

static int cpu_allreduce_sum_f64(coll_comm *pub, double *buf, size_t n) {
    return allreduce((cpu_comm *)pub, buf, n, sizeof(double), reduce_sum_f64);
}

/* --- reduce-scatter and all-gather (the sharded optimizer) ------------------------ */

/* In place: my share of my buffer <- the average of everyone's share. Peers read
 * only their own shares of my buffer, so writing mine while they do is safe. */
static int cpu_reduce_scatter_avg_f32(coll_comm *pub, float *buf, size_t n) {
    cpu_comm *c = (cpu_comm *)pub;
    if (aborted(c)) return -1;
    if (n == 0 || pub->world_size == 1) return 0;
    call_plan *p = this_thread_plan();
    plan_call(c, p, buf, n, sizeof(float));
    if (publish(c, p, 1) != 0) return -1;
    if (!p->all_in_arenas) return allreduce_chunked(c, p, reduce_avg_f32); /* a superset */
    unsigned char *bufs[MAX_WORLD], *mine = p->buf;
    size_t lo, hi;
    arena_bufs(c, p, bufs);
    coll_share(n, pub->world_size, pub->rank, &lo, &hi);
    reduce_range(pub->world_size, sizeof(float), bufs, &mine, 1, lo, hi, reduce_avg_f32);
    return 0;
}

/* Hands my share [lo, hi) of a reduce-scatter to `consume` piece by piece (pieces
 * of CONSUME_PIECE elements), reducing each piece first when `bufs` is given (in
 * place between arenas), or taking it as it is (already reduced). */
static void reduce_and_consume(cpu_comm *c, unsigned char *const *bufs, unsigned char *mine, size_t lo, size_t hi,
                               coll_consume_fn consume, void *arg) {
    for (size_t o = lo; o < hi; o += CONSUME_PIECE) {
        size_t end = min_size(hi, o + CONSUME_PIECE);
        if (bufs) reduce_range(c->pub.world_size, sizeof(float), bufs, &mine, 1, o, end, reduce_avg_f32);
        if (consume) consume(arg, o, end);
    }
}

static int cpu_reduce_scatter_avg_f32_ex(coll_comm *pub, float *buf, size_t n, double *sums, size_t m,
                                         coll_consume_fn consume, void *arg) {
    cpu_comm *c = (cpu_comm *)pub;
    if (aborted(c)) return -1;
    if (m > COLL_MAX_SIDE_SUMS) {
        errno = EINVAL;
        return -1;
    }
    size_t lo, hi;
    coll_share(n, pub->world_size, pub->rank, &lo, &hi);
    if (pub->world_size == 1 || (n == 0 && m == 0)) {
        reduce_and_consume(c, NULL, NULL, lo, hi, consume, arg);
        return 0;
    }
    call_plan *p = this_thread_plan();
    plan_call(c, p, buf, n, sizeof(float));
    p->side = sums;
    p->side_count = m;
    if (publish(c, p, 1) != 0) return -1;
    if (!p->all_in_arenas) {
        if (n && allreduce_chunked(c, p, reduce_avg_f32) != 0) return -1; /* a superset */
        reduce_and_consume(c, NULL, NULL, lo, hi, consume, arg);
        return 0;
    }
    unsigned char *bufs[MAX_WORLD];
    arena_bufs(c, p, bufs);
    reduce_and_consume(c, bufs, p->buf, lo, hi, consume, arg);
    return 0;
}

/* --- the fixed-order reduce-scatter over batch shards (parts) ---------------------- */

/* Every part's buffer of this call, in part order: rank k's parts follow each other
 * in its arena at its stride. 0, or -1 when the parts do not make the width. */
static int part_bufs(cpu_comm *c, const call_plan *p, unsigned char **bufs) {
    int s = 0;
    for (int k = 0; k < c->pub.world_size; k++)
        for (int j = 0; j < p->nparts[k]; j++) {
            if (s == c->pub.width) return -1;
            bufs[s++] = peer_buf(c, p, k) + (size_t)j * p->strides[k] * sizeof(float);
        }
    return s == c->pub.width ? 0 : -1;
}

/* sums[0..m) <- the total over all parts of their side sums, in part order:
 * ((part 0 + part 1) + part 2) + ..., as reduce_sum_f64 adds. */
static void total_part_sides(cpu_comm *c, const call_plan *p, double *sums, size_t m) {
    for (size_t i = 0; i < m; i++) {
        double total = 0;
        int s = 0;
        for (int k = 0; k < c->pub.world_size; k++) {
            const rank_desc *d = desc_of(c, (unsigned)p->set, k);
            for (int j = 0; j < p->nparts[k]; j++, s++) total = s ? total + d->side[(size_t)j * m + i] : d->side[i];
        }
        sums[i] = total;
    }
}

static int cpu_reduce_scatter_parts_f32_ex(coll_comm *pub, float *buf, size_t stride, size_t n, double *sums,
                                           size_t m, coll_consume_fn consume, void *arg) {
    cpu_comm *c = (cpu_comm *)pub;
    if (aborted(c)) return -1;
    if (m > COLL_MAX_SIDE_SUMS || pub->parts < 1 || pub->parts > COLL_MAX_PARTS || (pub->parts > 1 && stride < n)) {
        errno = EINVAL;
        return -1;
    }
    size_t lo, hi;
    coll_part_share(pub, n, &lo, &hi);
    if (pub->width == 1) { /* one part: it is its own average */
        reduce_and_consume(c, NULL, NULL, lo, hi, consume, arg);
        return 0;
    }
    call_plan *p = this_thread_plan();
    plan_call(c, p, buf, (size_t)(pub->parts - 1) * stride + n, sizeof(float));
    p->n = n; /* the count every rank must agree on; my_off covered all my parts */
    p->parts = pub->parts;
    p->stride = stride;
    p->part_m = m;
    p->part_side = sums;
    if (pub->world_size == 1) { /* every part is mine: no peer to meet */
        p->offs[0] = p->my_off;
        p->all_in_arenas = p->my_off != STAGED;
        p->nparts[0] = pub->parts;
        p->strides[0] = stride;
        if (p->my_off == STAGED) {
            errno = EINVAL;
            return -1;
        }
        rank_desc *mine = desc_of(c, (unsigned)(c->calls & 1), 0);
        mine->part_m = m;
        for (size_t i = 0; i < (size_t)p->parts * m; i++) mine->side[i] = sums[i];
        p->set = (int)(c->calls & 1);
    } else if (publish(c, p, 0) != 0) {
        return -1;
    }
    unsigned char *bufs[MAX_WORLD];
    if (!p->all_in_arenas || p->my_off == STAGED || part_bufs(c, p, bufs) != 0) {
        errno = EINVAL; /* every part's buffer must be in its arena; the parts must make the width */
        return -1;
    }
    total_part_sides(c, p, sums, m);
    for (size_t o = lo; o < hi; o += CONSUME_PIECE) {
        size_t end = min_size(hi, o + CONSUME_PIECE);
        reduce_range(pub->width, sizeof(float), bufs, &p->buf, 1, o, end, reduce_avg_f32);
        if (consume) consume(arg, o, end);
    }
    return 0;
}

static int cpu_broadcast(coll_comm *pub, void *buf, size_t bytes, int root);

/* Every share from its owner's buffer into mine (pull); outside the arenas, one
 * broadcast per share. */
static int cpu_allgather_f32(coll_comm *pub, float *buf, size_t n) {
    cpu_comm *c = (cpu_comm *)pub;
    if (aborted(c)) return -1;
    if (n == 0 || pub->world_size == 1) return 0;
    call_plan *p = this_thread_plan();
    plan_call(c, p, buf, n, sizeof(float));
    if (publish(c, p, 0) != 0) return -1;
    for (int k = 0; k < pub->world_size; k++) {
        size_t lo, hi;
        coll_share(n, pub->world_size, k, &lo, &hi);
        if (!p->all_in_arenas) {
            if (cpu_broadcast(pub, buf + lo, (hi - lo) * sizeof(float), k) != 0) return -1;
        } else if (k != pub->rank && hi > lo) {
            memcpy(buf + lo, peer_buf(c, p, k) + lo * sizeof(float), (hi - lo) * sizeof(float));
        }
    }
    return 0;
}

/* --- broadcast, barrier, alloc ----------------------------------------------------- */

/* Chunk by chunk through the result area: the root writes result[parity], barrier,
 * the others read it. One barrier per chunk (see the round argument at the top). */
static int cpu_broadcast(coll_comm *pub, void *buf, size_t bytes, int root) {
    cpu_comm *c = (cpu_comm *)pub;
    if (root < 0 || root >= pub->world_size) {
        errno = EINVAL;
        return -1;
    }
    if (aborted(c)) return -1;
    if (pub->world_size == 1) return 0;
    unsigned char *data = buf;
    for (size_t start = 0; start < bytes; start += c->ctrl->chunk_bytes) {
        size_t m = min_size(bytes - start, c->ctrl->chunk_bytes);
        unsigned char *area = result_of(c, (unsigned)(c->round & 1));
        c->round++;
        if (pub->rank == root) memcpy(area, data + start, m);
        if (sync_all(c) != 0) return -1;
        if (pub->rank != root) memcpy(data + start, area, m);
    }
    return 0;
}

static int cpu_barrier(coll_comm *pub) { return sync_all((cpu_comm *)pub); }

/* The shared arena is one copy: once everyone has passed a barrier, root's writes
 * are what every rank reads. */
static int cpu_broadcast_shared(coll_comm *pub, void *buf, size_t bytes, int root) {
    (void)buf;
    (void)bytes;
    if (root < 0 || root >= pub->world_size) {
        errno = EINVAL;
        return -1;
    }
    return pub->world_size > 1 ? sync_all((cpu_comm *)pub) : 0;
}

/* The end of a rank's arena that alloc_mirrored hands out from (cache-line aligned). */
static size_t arena_top(const cpu_comm *c) { return c->ctrl->arena_bytes / CACHE_LINE * CACHE_LINE; }

/* Bytes of this rank's arena that alloc and alloc_mirrored have not handed out. */
static size_t arena_free(const cpu_comm *c) { return arena_top(c) - c->arena_used - c->mirrored_used; }

/* Bump allocation in this rank's arena, cache-line aligned; never freed. */
static void *cpu_alloc(coll_comm *pub, size_t bytes) {
    cpu_comm *c = (cpu_comm *)pub;
    size_t need = round_up(bytes ? bytes : 1, CACHE_LINE);
    if (need < bytes || need > arena_free(c)) return NULL;
    void *p = arena_of(c, pub->rank) + c->arena_used;
    c->arena_used += need;
    return p;
}

/* Bump allocation in the shared arena: every rank makes the same calls, so every
 * rank gets the same block. The mapping starts zeroed; nothing is cleared here, as
 * a rank that got its block first may already be writing it. */
static void *cpu_alloc_shared(coll_comm *pub, size_t bytes) {
    cpu_comm *c = (cpu_comm *)pub;
    size_t need = round_up(bytes ? bytes : 1, CACHE_LINE);
    if (need < bytes || need > c->ctrl->arena_bytes - c->shared_used) return NULL;
    void *p = shared_area(c) + c->shared_used;
    c->shared_used += need;
    return p;
}

/* Bump allocation down from the top of this rank's arena: every rank makes the same
 * calls, so each rank's copy sits at the same offset of its arena. */
static void *cpu_alloc_mirrored(coll_comm *pub, size_t bytes) {
    cpu_comm *c = (cpu_comm *)pub;
    size_t need = round_up(bytes ? bytes : 1, CACHE_LINE);
    if (need < bytes || need > arena_free(c)) return NULL;
    c->mirrored_used += need;
    return arena_of(c, pub->rank) + arena_top(c) - c->mirrored_used;
}

/* dst[0, n) <- src[0, n), past the caches where the machine can (x86-64: streaming
 * stores, which the caller fences). */
static void copy_streaming(float *dst, const float *src, size_t n) {
#if defined(__x86_64__)
    size_t i = 0;
    for (; i < n && ((uintptr_t)(dst + i) & 15); i++) dst[i] = src[i];
    for (; i + 4 <= n; i += 4) _mm_stream_ps(dst + i, _mm_loadu_ps(src + i));
    for (; i < n; i++) dst[i] = src[i];
#else
    memcpy(dst, src, n * sizeof(float));
#endif
}

/* My copy's [lo, hi) into every peer's copy, at the same offset of its arena; one
 * store fence after all of them orders the streaming stores before the barrier
 * that publishes them. */
static int cpu_mirror_f32(coll_comm *pub, float *buf, size_t lo, size_t hi) {
    cpu_comm *c = (cpu_comm *)pub;
    uint64_t off = hi < lo ? STAGED : arena_offset(c, buf + lo, (hi - lo) * sizeof(float));
    if (off == STAGED) {
        errno = EINVAL;
        return -1;
    }
    for (int k = 0; k < pub->world_size; k++)
        if (k != pub->rank) copy_streaming((float *)(arena_of(c, k) + off), buf + lo, hi - lo);
#if defined(__x86_64__)
    _mm_sfence();
#endif
    return 0;
}

/* --- group lifetime -------------------------------------------------------------- */

/* Fill in the offsets of every part of the mapping; 0 on size overflow. */
static size_t plan_layout(cpu_ctrl *k, int world, size_t arena_bytes, size_t chunk_bytes) {
    size_t w = (size_t)world;
    k->world = (uint32_t)world;
    k->chunk_bytes = chunk_bytes;
    k->arena_bytes = arena_bytes;
    k->arena_stride = round_up(arena_bytes, PAGE);
    if (k->arena_stride < arena_bytes || k->arena_stride > (SIZE_MAX / 2) / (w + 1)) return 0;
    k->desc_off = round_up(sizeof(cpu_ctrl), PAGE);
    k->slots_off = k->desc_off + round_up(2 * w * sizeof(rank_desc), PAGE);
    k->result_off = k->slots_off + w * 2 * chunk_bytes;
    k->shared_off = k->result_off + 2 * chunk_bytes;
    k->arenas_off = k->shared_off + k->arena_stride;
    k->map_bytes = k->arenas_off + w * k->arena_stride;
    return k->map_bytes;
}

coll_cpu_group *coll_cpu_group_create_tuned(int world_size, size_t arena_bytes, size_t chunk_bytes) {
    cpu_ctrl plan;
    chunk_bytes = round_up(chunk_bytes ? chunk_bytes : DEFAULT_CHUNK_BYTES, PAGE);
    if (world_size < 1 || world_size > MAX_WORLD || chunk_bytes > ((size_t)1 << 30) ||
        plan_layout(&plan, world_size, arena_bytes, chunk_bytes) == 0) {
        errno = EINVAL;
        return NULL;
    }
    void *m = mmap(NULL, plan.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return NULL;
    cpu_ctrl *k = m;
    *k = plan;
    k->magic = CPU_MAGIC;
    futex_barrier_init(&k->barrier, (uint32_t)world_size);
    return (coll_cpu_group *)k;
}

coll_cpu_group *coll_cpu_group_create(int world_size, size_t arena_bytes) {
    return coll_cpu_group_create_tuned(world_size, arena_bytes, DEFAULT_CHUNK_BYTES);
}

size_t coll_cpu_group_chunk_bytes(const coll_cpu_group *g) {
    return ((const cpu_ctrl *)g)->chunk_bytes;
}

coll_comm *coll_cpu_attach(coll_cpu_group *g, int rank) {
    cpu_ctrl *k = (cpu_ctrl *)g;
    if (!k || k->magic != CPU_MAGIC || rank < 0 || (uint32_t)rank >= k->world) {
        errno = EINVAL;
        return NULL;
    }
    cpu_comm *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    c->ctrl = k;
    c->base = (unsigned char *)k;
    c->spin_ns = cpus > 0 && k->world <= (uint32_t)cpus ? SPIN_NS_DEDICATED : SPIN_NS_OVERSUBSCRIBED;
    c->pub.rank = c->pub.shard_rank = rank;
    c->pub.world_size = c->pub.shard_world = (int)k->world;
    c->pub.nodes = 1;
    c->pub.backend = "cpu";
    c->pub.allreduce_avg_f32 = cpu_allreduce_avg_f32;
    c->pub.allreduce_sum_f64 = cpu_allreduce_sum_f64;
    c->pub.reduce_scatter_avg_f32 = cpu_reduce_scatter_avg_f32;
    c->pub.allgather_f32 = cpu_allgather_f32;
    c->pub.reduce_scatter_avg_f32_ex = cpu_reduce_scatter_avg_f32_ex;
    c->pub.reduce_scatter_parts_f32_ex = cpu_reduce_scatter_parts_f32_ex;
    c->pub.width = (int)k->world;
    c->pub.first_part = rank;
    c->pub.parts = 1;
    c->pub.broadcast = cpu_broadcast;
    c->pub.barrier = cpu_barrier;
    c->pub.broadcast_shared = cpu_broadcast_shared;
    c->pub.shard_sum_f64 = cpu_allreduce_sum_f64;
    c->pub.shard_barrier = cpu_barrier;
    c->pub.alloc = cpu_alloc;
    c->pub.alloc_shared = cpu_alloc_shared;
    c->pub.alloc_mirrored = cpu_alloc_mirrored;
    c->pub.mirror_f32 = cpu_mirror_f32;
    c->pub.impl = c;
    return &c->pub;
}

void coll_cpu_group_abort(coll_cpu_group *g) {
    if (g) futex_barrier_abort(&((cpu_ctrl *)g)->barrier);
}

void coll_cpu_group_destroy(coll_cpu_group *g) {
    if (g) munmap(g, ((cpu_ctrl *)g)->map_bytes);
}
