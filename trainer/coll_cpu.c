/* The cpu backend of the collectives: the rank processes of one host share one
 * anonymous MAP_SHARED mapping, created by the launcher before fork (no name, no
 * file, no port: nothing to clean up, nothing another job can collide with).
 *
 * Layout of the mapping (every part page-aligned):
 *   control block   barrier, abort flag (inside the barrier), per-rank descriptors
 *   staging slots   per rank, two chunks (double-buffered by round parity)
 *   result area     two chunks (same parity): the reduced shares of one chunk
 *   arenas          per rank, arena_bytes, handed out by coll_comm.alloc
 *
 * All-reduce (reduce-scatter + all-gather, pipelined over chunks):
 *   prologue  each rank publishes where its data is (its arena offset, or "staged")
 *             and, if staged, copies chunk 0 into its slot; BARRIER.
 *   round c   each rank reduces its cache-line-aligned 1/world share of chunk c,
 *             reading every rank's contribution in place (peer arena or peer slot)
 *             and summing in fixed order 0..W-1 into result[c%2]; a staged rank
 *             then copies chunk c+1 into its other slot; BARRIER; each rank copies
 *             result[c%2] (the whole chunk) into its buffer.
 * So a call costs 1 + (number of chunks) barriers. Why it is race-free: every round
 * (of all-reduce or broadcast) has one barrier between writing shared memory and
 * reading it, and rounds alternate between two buffers by a round counter that all
 * ranks advance alike. A buffer of parity p written in round q was last read in
 * round q-2, and every such read finished before its reader arrived at the barrier
 * of round q-1, which the writer has passed. A rank's own arena buffer is read by
 * peers only before the barrier of each round, and its owner writes it only after.
 * The result does not depend on which rank reduced which share: the arithmetic per
 * element is the same everywhere, so all ranks end bit-identical. */
#include "collectives.h"
#include "futex_barrier.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define CACHE_LINE 64
#define PAGE 4096
#define DEFAULT_CHUNK_BYTES (256u * 1024)
#define MAX_WORLD 1024
#define CPU_MAGIC 0x64647063u /* "ddpc" */
/* Busy-wait budget of a barrier before sleeping: long enough to cover the skew
 * between ranks that each have a core, short when ranks outnumber cores. */
#define SPIN_NS_DEDICATED 50000u
#define SPIN_NS_OVERSUBSCRIBED 2000u
/* Elements reduced at a time when world > 2, so the partial sums stay in L1. */
#define REDUCE_BLOCK 2048
#define STAGED UINT64_MAX

/* What a rank publishes at the start of a call: where peers find its data. */
typedef struct {
    _Alignas(CACHE_LINE) uint64_t src_off; /* offset in its arena, or STAGED */
    uint64_t count;                        /* elements or bytes: must agree */
} rank_desc;

typedef struct {
    uint32_t magic;
    uint32_t world;
    size_t chunk_bytes, arena_bytes, map_bytes;
    size_t desc_off, slots_off, result_off, arenas_off, arena_stride;
    futex_barrier barrier;
} cpu_ctrl;

/* Per-process view: the public comm first so that the vtable hands it back. */
typedef struct {
    coll_comm pub;
    cpu_ctrl *ctrl;
    unsigned char *base;
    uint64_t round; /* rounds done so far: same on every rank */
    uint64_t shard_calls; /* reduce-scatter/all-gather calls so far: picks their descriptor set */
    size_t arena_used;
    uint64_t spin_ns;
} cpu_comm;

typedef void reduce_fn(void *dst, const void *const *srcs, int world, size_t n);

/* --- layout ------------------------------------------------------------------- */

static size_t round_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

static rank_desc *desc_of(cpu_comm *c, int rank) {
    return (rank_desc *)(c->base + c->ctrl->desc_off) + rank;
}

/* Reduce-scatter and all-gather publish into one of two further descriptor sets,
 * alternating by call: a set is rewritten two calls later, after a barrier every
 * reader of its previous contents has passed. */
static rank_desc *shard_desc_of(cpu_comm *c, unsigned parity, int rank) {
    return desc_of(c, (int)((1 + parity) * c->ctrl->world) + rank);
}

static unsigned char *slot_of(cpu_comm *c, int rank, unsigned parity) {
    const cpu_ctrl *k = c->ctrl;
    return c->base + k->slots_off + ((size_t)rank * 2 + parity) * k->chunk_bytes;
}

static unsigned char *result_of(cpu_comm *c, unsigned parity) {
    return c->base + c->ctrl->result_off + parity * c->ctrl->chunk_bytes;
}

static unsigned char *arena_of(cpu_comm *c, int rank) {
    return c->base + c->ctrl->arenas_off + (size_t)rank * c->ctrl->arena_stride;
}

/* Offset of [buf, buf+bytes) in this rank's arena, or STAGED if not inside it. */
static uint64_t arena_offset(cpu_comm *c, const void *buf, size_t bytes) {
    uintptr_t lo = (uintptr_t)arena_of(c, c->pub.rank), p = (uintptr_t)buf;
    if (p < lo || p - lo > c->ctrl->arena_bytes || bytes > c->ctrl->arena_bytes - (p - lo))
        return STAGED;
    return p - lo;
}

/* Rank `rank`'s share [*lo, *hi) of a chunk of m elements: equal shares rounded up
 * to whole cache lines, so no two ranks write the same line of the result area. */
static void share_range(size_t m, size_t elem, int world, int rank, size_t *lo, size_t *hi) {
    size_t line = CACHE_LINE / elem;
    size_t per = round_up((m + (size_t)world - 1) / (size_t)world, line);
    *lo = per * (size_t)rank < m ? per * (size_t)rank : m;
    *hi = *lo + per < m ? *lo + per : m;
}

static int sync_all(cpu_comm *c) { return futex_barrier_wait(&c->ctrl->barrier, c->spin_ns); }

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
        size_t len = n - o < REDUCE_BLOCK ? n - o : REDUCE_BLOCK;
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
        size_t len = n - o < REDUCE_BLOCK ? n - o : REDUCE_BLOCK;
        add2_f64(d + o, f[0] + o, f[1] + o, len);
        for (int k = 2; k < world; k++) acc_f64(d + o, f[k] + o, len);
    }
}

/* --- all-reduce engine ------------------------------------------------------------ */

typedef struct {
    unsigned char *buf;
    size_t n, elem, chunk_elems;
    uint64_t my_off;           /* STAGED or offset in my arena */
    uint64_t offs[MAX_WORLD];  /* every rank's published src_off (only world used) */
} allreduce_call;

static void stage_chunk(cpu_comm *c, const allreduce_call *a, size_t start) {
    size_t m = a->n - start < a->chunk_elems ? a->n - start : a->chunk_elems;
    unsigned parity = (unsigned)(c->round & 1);
    memcpy(slot_of(c, c->pub.rank, parity), a->buf + start * a->elem, m * a->elem);
}

/* Where rank k's element `start + lo` is this round: in place in its arena, or in
 * its staging slot for this round's parity. */
static const void *source_of(cpu_comm *c, const allreduce_call *a, int k, size_t start, size_t lo) {
    if (a->offs[k] == STAGED)
        return slot_of(c, k, (unsigned)(c->round & 1)) + lo * a->elem;
    return arena_of(c, k) + a->offs[k] + (start + lo) * a->elem;
}

/* Publish where my data is (and stage chunk 0), then learn where everyone's is.
 * -1 if aborted, or if the ranks disagree on the element count (a caller bug that
 * would otherwise desynchronise the rounds: every rank sees it and bails out). */
static int allreduce_prologue(cpu_comm *c, allreduce_call *a) {
    int world = c->pub.world_size;
    rank_desc *mine = desc_of(c, c->pub.rank);
    mine->src_off = a->my_off;
    mine->count = a->n;
    if (a->my_off == STAGED) stage_chunk(c, a, 0);
    if (sync_all(c) != 0) return -1;
    for (int k = 0; k < world; k++) {
        const rank_desc *d = desc_of(c, k);
        if (d->count != a->n) {
            errno = EINVAL;
            return -1;
        }
        a->offs[k] = d->src_off;
    }
    return 0;
}

/* One round: reduce my share of the chunk at `start`, stage the next chunk if I am
 * staged, barrier, copy the whole reduced chunk back. */
static int allreduce_round(cpu_comm *c, allreduce_call *a, size_t start, reduce_fn *reduce) {
    int world = c->pub.world_size;
    size_t m = a->n - start < a->chunk_elems ? a->n - start : a->chunk_elems;
    size_t lo, hi;
    share_range(m, a->elem, world, c->pub.rank, &lo, &hi);
    unsigned char *result = result_of(c, (unsigned)(c->round & 1));
    if (hi > lo) {
        const void *srcs[MAX_WORLD];
        for (int k = 0; k < world; k++) srcs[k] = source_of(c, a, k, start, lo);
        reduce(result + lo * a->elem, srcs, world, hi - lo);
    }
    c->round++;
    if (a->my_off == STAGED && start + m < a->n) stage_chunk(c, a, start + m);
    if (sync_all(c) != 0) return -1;
    memcpy(a->buf + start * a->elem, result, m * a->elem);
    return 0;
}

static int allreduce(cpu_comm *c, void *buf, size_t n, size_t elem, reduce_fn *reduce) {
    if (futex_barrier_is_aborted(&c->ctrl->barrier)) return -1;
    if (n == 0 || c->pub.world_size == 1) return 0;
    static _Thread_local allreduce_call a; /* big (offs[]): keep it off the stack */
    a.buf = buf;
    a.n = n;
    a.elem = elem;
    a.chunk_elems = c->ctrl->chunk_bytes / elem;
    a.my_off = arena_offset(c, buf, n * elem);
    if (allreduce_prologue(c, &a) != 0) return -1;
    for (size_t start = 0; start < n; start += a.chunk_elems)
        if (allreduce_round(c, &a, start, reduce) != 0) return -1;
    return 0;
}

static int cpu_allreduce_avg_f32(coll_comm *pub, float *buf, size_t n) {
    return allreduce((cpu_comm *)pub, buf, n, sizeof(float), reduce_avg_f32);
}

static int cpu_allreduce_sum_f64(coll_comm *pub, double *buf, size_t n) {
    return allreduce((cpu_comm *)pub, buf, n, sizeof(double), reduce_sum_f64);
}

/* --- reduce-scatter and all-gather (the sharded optimizer) ------------------------ *
 * Both work in place on buffers in the ranks' arenas: publish (offset, count),
 * barrier, then read the peers' buffers directly. Reduce-scatter writes only this
 * rank's share of its own buffer while peers read only theirs (shares are whole
 * cache lines apart); all-gather reads the owners' shares and writes the others.
 * Buffers outside the arena fall back to the all-reduce or to broadcasts. */

void coll_share(size_t n, int world_size, int rank, size_t *lo, size_t *hi) {
    share_range(n, sizeof(float), world_size, rank, lo, hi);
}

/* Publishes this rank's buffer and learns every rank's offset; -1 if aborted or the
 * ranks disagree (count, or a buffer outside an arena). */
static int shard_prologue(cpu_comm *c, uint64_t my_off, size_t n, uint64_t *offs) {
    unsigned parity = (unsigned)(c->shard_calls++ & 1);
    rank_desc *mine = shard_desc_of(c, parity, c->pub.rank);
    mine->src_off = my_off;
    mine->count = n;
    if (sync_all(c) != 0) return -1;
    for (int k = 0; k < c->pub.world_size; k++) {
        const rank_desc *d = shard_desc_of(c, parity, k);
        if (d->count != n || d->src_off == STAGED) {
            errno = EINVAL;
            return -1;
        }
        offs[k] = d->src_off;
    }
    return 0;
}

static int cpu_reduce_scatter_avg_f32(coll_comm *pub, float *buf, size_t n) {
    cpu_comm *c = (cpu_comm *)pub;
    if (futex_barrier_is_aborted(&c->ctrl->barrier)) return -1;
    if (n == 0 || pub->world_size == 1) return 0;
    uint64_t my_off = arena_offset(c, buf, n * sizeof(float));
    if (my_off == STAGED) return cpu_allreduce_avg_f32(pub, buf, n);
    static _Thread_local uint64_t offs[MAX_WORLD];
    static _Thread_local float block[REDUCE_BLOCK];
    if (shard_prologue(c, my_off, n, offs) != 0) return -1;
    size_t lo, hi;
    coll_share(n, pub->world_size, pub->rank, &lo, &hi);
    const void *srcs[MAX_WORLD];
    for (size_t o = lo; o < hi; o += REDUCE_BLOCK) {
        size_t len = hi - o < REDUCE_BLOCK ? hi - o : REDUCE_BLOCK;
        for (int k = 0; k < pub->world_size; k++) srcs[k] = arena_of(c, k) + offs[k] + o * sizeof(float);
        reduce_avg_f32(block, srcs, pub->world_size, len); /* my own share is a source: reduce aside */
        memcpy(buf + o, block, len * sizeof(float));
    }
    return 0;
}

static int cpu_broadcast(coll_comm *pub, void *buf, size_t bytes, int root);

static int cpu_allgather_f32(coll_comm *pub, float *buf, size_t n) {
    cpu_comm *c = (cpu_comm *)pub;
    if (futex_barrier_is_aborted(&c->ctrl->barrier)) return -1;
    if (n == 0 || pub->world_size == 1) return 0;
    uint64_t my_off = arena_offset(c, buf, n * sizeof(float));
    size_t lo, hi;
    if (my_off == STAGED) {
        for (int k = 0; k < pub->world_size; k++) {
            coll_share(n, pub->world_size, k, &lo, &hi);
            if (cpu_broadcast(pub, buf + lo, (hi - lo) * sizeof(float), k) != 0) return -1;
        }
        return 0;
    }
    static _Thread_local uint64_t offs[MAX_WORLD];
    if (shard_prologue(c, my_off, n, offs) != 0) return -1;
    for (int k = 0; k < pub->world_size; k++) {
        if (k == pub->rank) continue;
        coll_share(n, pub->world_size, k, &lo, &hi);
        if (hi > lo) memcpy(buf + lo, arena_of(c, k) + offs[k] + lo * sizeof(float), (hi - lo) * sizeof(float));
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
    if (futex_barrier_is_aborted(&c->ctrl->barrier)) return -1;
    if (pub->world_size == 1) return 0;
    unsigned char *p = buf;
    for (size_t start = 0; start < bytes; start += c->ctrl->chunk_bytes) {
        size_t m = bytes - start < c->ctrl->chunk_bytes ? bytes - start : c->ctrl->chunk_bytes;
        unsigned char *area = result_of(c, (unsigned)(c->round & 1));
        c->round++;
        if (pub->rank == root) memcpy(area, p + start, m);
        if (sync_all(c) != 0) return -1;
        if (pub->rank != root) memcpy(p + start, area, m);
    }
    return 0;
}

static int cpu_barrier(coll_comm *pub) { return sync_all((cpu_comm *)pub); }

/* Bump allocation in this rank's arena, cache-line aligned; never freed. */
static void *cpu_alloc(coll_comm *pub, size_t bytes) {
    cpu_comm *c = (cpu_comm *)pub;
    size_t need = round_up(bytes ? bytes : 1, CACHE_LINE);
    if (need < bytes || need > c->ctrl->arena_bytes - c->arena_used) return NULL;
    void *p = arena_of(c, pub->rank) + c->arena_used;
    c->arena_used += need;
    return p;
}

/* --- group lifetime -------------------------------------------------------------- */

/* Fill in the offsets of every part of the mapping; 0 on size overflow. */
static size_t plan_layout(cpu_ctrl *k, int world, size_t arena_bytes, size_t chunk_bytes) {
    size_t w = (size_t)world;
    k->world = (uint32_t)world;
    k->chunk_bytes = chunk_bytes;
    k->arena_bytes = arena_bytes;
    k->arena_stride = round_up(arena_bytes, PAGE);
    if (k->arena_stride < arena_bytes || k->arena_stride > (SIZE_MAX / 2) / w) return 0;
    k->desc_off = round_up(sizeof(cpu_ctrl), PAGE);
    k->slots_off = k->desc_off + round_up(3 * w * sizeof(rank_desc), PAGE);
    k->result_off = k->slots_off + w * 2 * chunk_bytes;
    k->arenas_off = k->result_off + 2 * chunk_bytes;
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
    c->pub.rank = rank;
    c->pub.world_size = (int)k->world;
    c->pub.backend = "cpu";
    c->pub.allreduce_avg_f32 = cpu_allreduce_avg_f32;
    c->pub.allreduce_sum_f64 = cpu_allreduce_sum_f64;
    c->pub.reduce_scatter_avg_f32 = cpu_reduce_scatter_avg_f32;
    c->pub.allgather_f32 = cpu_allgather_f32;
    c->pub.broadcast = cpu_broadcast;
    c->pub.barrier = cpu_barrier;
    c->pub.alloc = cpu_alloc;
    c->pub.impl = c;
    return &c->pub;
}

void coll_cpu_group_abort(coll_cpu_group *g) {
    if (g) futex_barrier_abort(&((cpu_ctrl *)g)->barrier);
}

void coll_cpu_group_destroy(coll_cpu_group *g) {
    if (g) munmap(g, ((cpu_ctrl *)g)->map_bytes);
}
