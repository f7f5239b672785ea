/* Tests of the cpu collectives (trainer/coll_cpu.c) with real forked rank
 * processes, as the launcher runs them: all-reduce results compared bit for bit
 * against a reference summed in the same fixed order, across world sizes 1-4, odd
 * sizes, arena (zero-copy) and plain (staged) buffers, many calls back to back;
 * f64 sums, broadcast from every root, barrier ordering, the extended reduce-scatter
 * (side sums, the consumer), the fixed-order reduce-scatter over batch shards (the
 * same bits for a logical width on any number of ranks), the shared arena, abort of a group whose rank died, and
 * speed with more ranks than cores. Children report through their exit
 * status and a shared page (their check counts and a hash of every result, so the
 * parent can check that all ranks hold the same bits). */
#include "check.h"
#include "collectives.h"

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_RANKS 4
#define MAX_OPS 256
#define SMALL_CHUNK 4096 /* 1024 floats: many rounds for modest sizes */
#define ARENA_BYTES ((size_t)24 << 20)

/* --- shared report area and the fork runner ---------------------------------------- */

typedef struct {
    int passed[MAX_RANKS], failed[MAX_RANKS];
    uint64_t hash[MAX_OPS][MAX_RANKS]; /* hash of each op's result, per rank */
    int ops;                           /* ops recorded (set by rank 0) */
    _Atomic int barrier_cells[MAX_RANKS];
    _Atomic uint64_t abort_at_ns; /* when the parent aborted */
} shared_area;

static shared_area *shared;
static size_t group_chunk_bytes; /* of the group the current ranks run in */

typedef struct {
    size_t chunk_bytes; /* 0: the default */
    int variant;        /* what a rank body does, per test */
} run_opts;

typedef void rank_body(coll_comm *c, const run_opts *o);

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t fnv1a(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211u;
    return h;
}

static void record_hash(coll_comm *c, int op, const void *buf, size_t bytes) {
    if (op >= MAX_OPS) return;
    shared->hash[op][c->rank] = fnv1a(buf, bytes);
    if (c->rank == 0 && op + 1 > shared->ops) shared->ops = op + 1;
}

static void child_main(coll_cpu_group *g, int rank, rank_body *body, const run_opts *o) {
    alarm(60); /* a hung child must not hang the test */
    check_passed = check_failed = 0;
    coll_comm *c = coll_cpu_attach(g, rank);
    if (!c) _exit(2);
    body(c, o);
    shared->passed[rank] = check_passed;
    shared->failed[rank] = check_failed;
    _exit(check_failed ? 1 : 0);
}

static shared_area *new_shared(void) {
    void *m = mmap(NULL, sizeof(shared_area), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(m != MAP_FAILED, "mmap of the report area");
    return m;
}

/* Fork `world` ranks running `body`; the parent checks every exit status, adds the
 * children's check counts, and checks that all ranks hashed the same results. */
static void run_ranks(const char *what, int world, rank_body *body, const run_opts *o) {
    coll_cpu_group *g = coll_cpu_group_create_tuned(world, ARENA_BYTES, o->chunk_bytes);
    REQUIRE(g != NULL, "%s: group create", what);
    group_chunk_bytes = coll_cpu_group_chunk_bytes(g);
    shared = new_shared();
    pid_t pids[MAX_RANKS];
    for (int r = 0; r < world; r++) {
        pids[r] = fork();
        REQUIRE(pids[r] >= 0, "fork");
        if (pids[r] == 0) child_main(g, r, body, o);
    }
    for (int r = 0; r < world; r++) {
        int st = 0;
        waitpid(pids[r], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s world %d: rank %d ended with status 0x%x",
              what, world, r, st);
        check_passed += shared->passed[r];
        check_failed += shared->failed[r];
    }
    int diverged = 0;
    for (int op = 0; op < shared->ops; op++)
        for (int r = 1; r < world; r++) diverged += shared->hash[op][r] != shared->hash[op][0];
    CHECK(diverged == 0, "%s world %d: %d results differ between ranks", what, world, diverged);
    munmap(shared, sizeof *shared);
    coll_cpu_group_destroy(g);
}

/* --- inputs and references ------------------------------------------------------------ */

static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* Values in [-256, 256) of widely varying magnitude, so that a different summation
 * order gives different bits. */
static double input_value(uint64_t seed, int rank, size_t i) {
    uint64_t h = mix64(seed * 0x100000001b3u ^ ((uint64_t)rank << 48) ^ i);
    double unit = (double)(int32_t)(h >> 32) / 2147483648.0;
    return ldexp(unit, (int)(h & 15) - 7);
}

static void fill_f32(float *buf, size_t n, uint64_t seed, int rank) {
    for (size_t i = 0; i < n; i++) buf[i] = (float)input_value(seed, rank, i);
}

/* The average every rank must hold: summed over ranks 0, 1, ..., W-1, times 1/W. */
static void reference_avg_f32(float *ref, size_t n, uint64_t seed, int world) {
    const float inv = 1.0f / (float)world;
    for (size_t i = 0; i < n; i++) {
        float acc = (float)input_value(seed, 0, i);
        for (int k = 1; k < world; k++) acc += (float)input_value(seed, k, i);
        ref[i] = acc * inv;
    }
}

static void fill_f64(double *buf, size_t n, uint64_t seed, int rank) {
    for (size_t i = 0; i < n; i++) buf[i] = input_value(seed, rank, i) * 1e-3 + (double)rank * 1e6;
}

static void reference_sum_f64(double *ref, size_t n, uint64_t seed, int world) {
    for (size_t i = 0; i < n; i++) {
        double acc = input_value(seed, 0, i) * 1e-3;
        for (int k = 1; k < world; k++) acc += input_value(seed, k, i) * 1e-3 + (double)k * 1e6;
        ref[i] = acc;
    }
}

/* --- all-reduce of f32 ------------------------------------------------------------------ */

enum source { FROM_ARENA, FROM_MALLOC, MIXED };
static const char *source_name[] = {"arena", "malloc", "mixed"};

/* A buffer of n floats: in the arena (at an offset that differs between ranks, so
 * that offsets really are published rather than assumed equal), or malloc'd and
 * misaligned by one float. `arena_buf` is this rank's arena block. */
static float *pick_buffer(enum source s, int rank, float *arena_buf, float *heap_buf) {
    int in_arena = s == FROM_ARENA || (s == MIXED && rank % 2 == 0);
    return in_arena ? arena_buf + 3 * rank : heap_buf + 1;
}

/* One all-reduce, checked bit for bit against the reference. */
static void check_avg_once(coll_comm *c, float *buf, size_t n, uint64_t seed, int op, const char *what) {
    fill_f32(buf, n, seed, c->rank);
    int rc = c->allreduce_avg_f32(c, buf, n);
    CHECK(rc == 0, "%s: allreduce of %zu floats returned %d", what, n, rc);
    float *ref = malloc((n + 1) * sizeof(float));
    reference_avg_f32(ref, n, seed, c->world_size);
    CHECK(memcmp(buf, ref, n * sizeof(float)) == 0, "%s: rank %d of %d, %zu floats differ from the reference",
          what, c->rank, c->world_size, n);
    record_hash(c, op, buf, n * sizeof(float));
    free(ref);
}

static void body_avg_sizes(coll_comm *c, const run_opts *o) {
    (void)o;
    size_t ce = group_chunk_bytes / sizeof(float);
    size_t w = (size_t)c->world_size;
    const size_t sizes[] = {0, 1, 7, 15, 16, 17, 63, 65, 1000, ce - 1, ce, ce + 1, ce * w + 3,
                            3 * ce + 5, 1000003};
    size_t nsizes = sizeof sizes / sizeof sizes[0];
    float *arena = c->alloc(c, (1000003 + 64) * sizeof(float));
    float *heap = malloc((1000003 + 64) * sizeof(float));
    REQUIRE(arena && heap, "buffers");
    int op = 0;
    for (int s = FROM_ARENA; s <= MIXED; s++)
        for (size_t i = 0; i < nsizes; i++, op++) {
            char what[64];
            snprintf(what, sizeof what, "avg %s n=%zu", source_name[s], sizes[i]);
            check_avg_once(c, pick_buffer(s, c->rank, arena, heap), sizes[i], 1000 + op, op, what);
        }
    free(heap);
}

/* 50 buckets of different sizes, each checked, ranks skewed by small sleeps so that
 * a fast rank runs ahead into the next call while others still read this one. */
static void body_avg_buckets(coll_comm *c, const run_opts *o) {
    (void)o;
    float *arena = c->alloc(c, (300000 + 64) * sizeof(float));
    float *heap = malloc((300000 + 64) * sizeof(float));
    REQUIRE(arena && heap, "buffers");
    for (int b = 0; b < 50; b++) {
        size_t n = 1 + mix64(77 + (uint64_t)b) % 300000;
        if (b % 7 == 3) n = 1 + b % 5;
        if ((b + c->rank) % 5 == 0) usleep(200);
        check_avg_once(c, pick_buffer((enum source)(b % 3), c->rank, arena, heap), n, 5000 + b, b, "bucket");
    }
    free(heap);
}

/* 50 buckets back to back with no pause between calls (distinct buffers, as the
 * trainer's gradient buckets are), verified afterwards. */
static void body_avg_burst(coll_comm *c, const run_opts *o) {
    (void)o;
    enum { BUCKETS = 50 };
    float *bufs[BUCKETS];
    size_t ns[BUCKETS];
    for (int b = 0; b < BUCKETS; b++) {
        ns[b] = 1 + mix64(991 + (uint64_t)b) % 40000;
        int arena = (b % 2) == 0;
        bufs[b] = arena ? c->alloc(c, ns[b] * sizeof(float)) : malloc(ns[b] * sizeof(float));
        REQUIRE(bufs[b] != NULL, "bucket %d", b);
        fill_f32(bufs[b], ns[b], 9000 + b, c->rank);
    }
    int failures = 0;
    for (int b = 0; b < BUCKETS; b++) failures += c->allreduce_avg_f32(c, bufs[b], ns[b]) != 0;
    CHECK(failures == 0, "%d of the back-to-back all-reduces failed", failures);
    for (int b = 0; b < BUCKETS; b++) {
        float *ref = malloc(ns[b] * sizeof(float));
        reference_avg_f32(ref, ns[b], 9000 + b, c->world_size);
        CHECK(memcmp(ref, bufs[b], ns[b] * sizeof(float)) == 0, "burst bucket %d (%zu floats) differs", b, ns[b]);
        record_hash(c, b, bufs[b], ns[b] * sizeof(float));
        free(ref);
        if (b % 2) free(bufs[b]);
    }
}

/* --- reduce-scatter and all-gather (the sharded optimizer) ----------------------------- */

/* The shares partition [0, n) into whole cache lines, in rank order. */
static void check_shares(size_t n, int world) {
    size_t expect_lo = 0;
    for (int r = 0; r < world; r++) {
        size_t lo, hi;
        coll_share(n, world, r, &lo, &hi);
        CHECK(lo == expect_lo && hi >= lo && hi <= n, "share %d of %zu (world %d): [%zu, %zu)", r, n, world, lo, hi);
        CHECK(lo == n || lo % 16 == 0, "share %d of %zu starts on a cache line (%zu)", r, n, lo);
        expect_lo = hi;
    }
    CHECK(expect_lo == n, "shares of %zu (world %d) cover it: end at %zu", n, world, expect_lo);
}

/* Reduce-scatter then all-gather, over many buckets back to back, as the engine
 * does each step: the own share after the reduce-scatter, and the whole buffer
 * after the all-gather, must equal the reference bit for bit. Ranks are skewed
 * so a fast rank reuses descriptors while a slow one still reads. */
static void body_sharded(coll_comm *c, const run_opts *o) {
    const size_t sizes[] = {1, 15, 16, 17, 33, 1000, 4097, 65536 + 5, 300001};
    enum { N = sizeof sizes / sizeof sizes[0] };
    /* variant 0: all in arenas, 1: all malloc'd, 2: mixed (even ranks in arenas) */
    int from_arena = o->variant == 0 || (o->variant == 2 && c->rank % 2 == 0);
    float *bufs[N];
    for (int i = 0; i < N; i++) {
        bufs[i] = from_arena ? c->alloc(c, sizes[i] * sizeof(float)) : malloc((sizes[i] + 1) * sizeof(float));
        REQUIRE(bufs[i] != NULL, "buffer %d", i);
        fill_f32(bufs[i], sizes[i], 700 + (uint64_t)i, c->rank);
    }
    for (int i = 0; i < N; i++) {
        if ((i + c->rank) % 3 == 0) usleep(300);
        CHECK(c->reduce_scatter_avg_f32(c, bufs[i], sizes[i]) == 0, "reduce-scatter of %zu", sizes[i]);
    }
    for (int i = 0; i < N; i++) {
        float *ref = malloc(sizes[i] * sizeof(float));
        reference_avg_f32(ref, sizes[i], 700 + (uint64_t)i, c->world_size);
        size_t lo, hi;
        coll_share(sizes[i], c->world_size, c->rank, &lo, &hi);
        CHECK(memcmp(bufs[i] + lo, ref + lo, (hi - lo) * sizeof(float)) == 0,
              "reduce-scatter %zu: rank %d's share differs from the reference", sizes[i], c->rank);
        /* Ranks update their shares (here: scale them), then gather. */
        for (size_t k = lo; k < hi; k++) bufs[i][k] *= 2.0f;
        for (size_t k = 0; k < sizes[i]; k++) ref[k] *= 2.0f;
        if ((i + c->rank) % 4 == 1) usleep(300);
        CHECK(c->allgather_f32(c, bufs[i], sizes[i]) == 0, "all-gather of %zu", sizes[i]);
        CHECK(memcmp(bufs[i], ref, sizes[i] * sizeof(float)) == 0,
              "all-gather %zu (%s): rank %d's buffer differs from the reference", sizes[i],
              from_arena ? "arena" : "malloc", c->rank);
        record_hash(c, i, bufs[i], sizes[i] * sizeof(float));
        free(ref);
        if (!from_arena) free(bufs[i]);
    }
    for (size_t n = 0; n < 200; n += 7) check_shares(n, c->world_size);
    check_shares(1000003, c->world_size);
}

/* The extended reduce-scatter: what the consumer is handed, piece by piece. */
typedef struct {
    const float *buf, *ref;
    size_t next, pieces, bad_order, bad_values;
} consume_log;

static void log_piece(void *arg, size_t lo, size_t hi) {
    consume_log *l = arg;
    if (lo != l->next || hi <= lo) l->bad_order++;
    if (memcmp(l->buf + lo, l->ref + lo, (hi - lo) * sizeof(float)) != 0) l->bad_values++;
    l->next = hi;
    l->pieces++;
}

/* reduce_scatter_avg_f32_ex over many buckets: the own share as the plain
 * reduce-scatter gives it, handed to the consumer in order and already reduced when
 * handed over, covering the share exactly; side sums (0 to COLL_MAX_SIDE_SUMS)
 * totalled in rank order on every rank, bit for bit; side sums alone (n = 0). */
static void body_sharded_ex(coll_comm *c, const run_opts *o) {
    const size_t sizes[] = {0, 1, 15, 17, 1000, 16384 * 2 + 3, 16384 * 5, 300001};
    enum { N = sizeof sizes / sizeof sizes[0] };
    int from_arena = o->variant == 0 || (o->variant == 2 && c->rank % 2 == 0);
    for (int i = 0; i < N; i++) {
        size_t n = sizes[i], m = (size_t)i % (COLL_MAX_SIDE_SUMS + 1);
        float *buf = from_arena ? c->alloc(c, (n + 1) * sizeof(float)) : malloc((n + 1) * sizeof(float));
        float *ref = malloc((n + 1) * sizeof(float));
        REQUIRE(buf && ref, "buffers");
        fill_f32(buf, n, 1300 + (uint64_t)i, c->rank);
        reference_avg_f32(ref, n, 1300 + (uint64_t)i, c->world_size);
        double side[COLL_MAX_SIDE_SUMS], want[COLL_MAX_SIDE_SUMS];
        fill_f64(side, m, 1400 + (uint64_t)i, c->rank);
        reference_sum_f64(want, m, 1400 + (uint64_t)i, c->world_size);
        size_t lo, hi;
        coll_share(n, c->world_size, c->rank, &lo, &hi);
        consume_log log = {.buf = buf, .ref = ref, .next = lo};
        if ((i + c->rank) % 3 == 0) usleep(300);
        int rc = c->reduce_scatter_avg_f32_ex(c, buf, n, side, m, log_piece, &log);
        CHECK(rc == 0, "reduce-scatter ex of %zu with %zu side sums returned %d", n, m, rc);
        CHECK(memcmp(buf + lo, ref + lo, (hi - lo) * sizeof(float)) == 0, "ex %zu: rank %d's share differs", n,
              c->rank);
        CHECK(log.bad_order == 0 && log.next == hi, "ex %zu: the pieces run through [%zu, %zu) in order (ended at %zu)",
              n, lo, hi, log.next);
        CHECK(log.bad_values == 0, "ex %zu: %zu pieces were handed over before they held their average", n,
              log.bad_values);
        CHECK((hi > lo) == (log.pieces > 0), "ex %zu: %zu pieces for a share of %zu", n, log.pieces, hi - lo);
        CHECK(memcmp(side, want, m * sizeof(double)) == 0, "ex %zu: the %zu side sums differ from the rank-order sums",
              n, m);
        record_hash(c, i, side, m * sizeof(double));
        if (!from_arena) free(buf);
        free(ref);
    }
    double one = (double)c->rank + 0.25; /* no consumer, no buffer: the sums alone */
    CHECK(c->reduce_scatter_avg_f32_ex(c, NULL, 0, &one, 1, NULL, NULL) == 0, "side sums alone");
    double expect = 0.25;
    for (int k = 1; k < c->world_size; k++) expect += (double)k + 0.25;
    CHECK(one == expect, "side sums alone: %.17g, want %.17g", one, expect);
    double many[COLL_MAX_SIDE_SUMS + 1] = {0};
    CHECK(c->reduce_scatter_avg_f32_ex(c, NULL, 0, many, COLL_MAX_SIDE_SUMS + 1, NULL, NULL) == -1,
          "more than COLL_MAX_SIDE_SUMS side sums are refused");
}

/* --- the fixed-order reduce-scatter over batch shards (parts) -------------------------- */

/* Element by element, what grouping by rank would give with two parts per rank,
 * ((p0 + p1) + (p2 + p3)) / 4: the order the parts reduce-scatter must not take. */
static void grouped_avg_f32(float *out, size_t n, uint64_t seed) {
    for (size_t i = 0; i < n; i++) {
        float a = (float)input_value(seed, 0, i) + (float)input_value(seed, 1, i);
        float b = (float)input_value(seed, 2, i) + (float)input_value(seed, 3, i);
        out[i] = (a + b) * 0.25f;
    }
}

/* reduce_scatter_parts_f32_ex with the logical width in o->variant, spread over the
 * world's ranks (coll_set_width): part s holds the values a rank s would hold in an
 * all-reduce of that width, and every rank's share must be bit for bit the average
 * summed in part order 0, 1, ..., W-1 (reference_avg_f32 over W), whatever the number
 * of ranks; side sums totalled in part order; the shares tile the buffer; the
 * consumer gets each piece reduced, in order. */
static void body_parts(coll_comm *c, const run_opts *o) {
    int width = o->variant;
    REQUIRE(coll_set_width(c, width) == 0, "width %d on %d ranks", width, c->world_size);
    int first, count;
    coll_parts_of(width, c->world_size, c->rank, &first, &count);
    CHECK(c->first_part == first && c->parts == count && count >= 1, "rank %d of %d: parts %d+%d", c->rank,
          c->world_size, c->first_part, c->parts);
    const size_t sizes[] = {1, 15, 17, 1000, 16384 * 2 + 3, 300001};
    enum { N = sizeof sizes / sizeof sizes[0] };
    for (int i = 0; i < N; i++) {
        size_t n = sizes[i], stride = (n + 15) / 16 * 16 + 16 * (size_t)c->rank, m = 1 + (size_t)i % 3;
        float *buf = c->alloc(c, ((size_t)count * stride + 1) * sizeof(float));
        float *ref = malloc((n + 1) * sizeof(float));
        REQUIRE(buf && ref, "buffers");
        double side[COLL_MAX_PARTS * 3], want[3];
        for (int j = 0; j < count; j++) {
            fill_f32(buf + (size_t)j * stride, n, 2100 + (uint64_t)i, first + j);
            fill_f64(side + (size_t)j * m, m, 2200 + (uint64_t)i, first + j);
        }
        reference_avg_f32(ref, n, 2100 + (uint64_t)i, width);
        reference_sum_f64(want, m, 2200 + (uint64_t)i, width);
        size_t lo, hi;
        coll_part_share(c, n, &lo, &hi);
        consume_log log = {.buf = buf, .ref = ref, .next = lo};
        if ((i + c->rank) % 3 == 0) usleep(300);
        int rc = c->reduce_scatter_parts_f32_ex(c, buf, stride, n, side, m, log_piece, &log);
        CHECK(rc == 0, "parts: width %d, %zu floats returned %d", width, n, rc);
        CHECK(memcmp(buf + lo, ref + lo, (hi - lo) * sizeof(float)) == 0,
              "parts: width %d on %d ranks, %zu floats: rank %d's share differs from the part-order sum", width,
              c->world_size, n, c->rank);
        CHECK(log.bad_order == 0 && log.bad_values == 0 && log.next == hi, "parts %zu: the consumer's pieces", n);
        CHECK(memcmp(side, want, m * sizeof(double)) == 0, "parts %zu: side sums differ from the part-order sums", n);
        record_hash(c, i, side, m * sizeof(double));
        if (width == 4 && n == 300001) {
            float *grouped = malloc(n * sizeof(float));
            REQUIRE(grouped, "buffer");
            grouped_avg_f32(grouped, n, 2100 + (uint64_t)i);
            CHECK(memcmp(grouped, ref, n * sizeof(float)) != 0,
                  "the inputs tell a sum grouped by rank from the part-order sum (else this test shows nothing)");
            free(grouped);
        }
        free(ref);
    }
    /* the shares of every rank tile [0, n): one rank's hi is the next one's lo */
    for (size_t n = 1; n < 5000; n += 997) {
        size_t lo, hi;
        coll_part_share(c, n, &lo, &hi);
        size_t want_lo, want_hi, unused;
        coll_share(n, width, first, &want_lo, &unused);
        coll_share(n, width, first + count - 1, &unused, &want_hi);
        CHECK(lo == want_lo && hi == want_hi, "part share of %zu: [%zu, %zu)", n, lo, hi);
        CHECK(c->rank != 0 || lo == 0, "rank 0's share starts at 0");
        CHECK(c->rank != c->world_size - 1 || hi == n, "the last rank's share ends at n");
    }
    double none = 0;
    CHECK(c->reduce_scatter_parts_f32_ex(c, NULL, 0, 0, &none, COLL_MAX_SIDE_SUMS + 1, NULL, NULL) == -1,
          "more than COLL_MAX_SIDE_SUMS side sums are refused");
}

static void test_set_width_validation(void) {
    coll_cpu_group *g = coll_cpu_group_create(2, 1 << 20);
    REQUIRE(g != NULL, "group");
    coll_comm *c = coll_cpu_attach(g, 1);
    REQUIRE(c != NULL, "attach");
    CHECK(c->width == 2 && c->first_part == 1 && c->parts == 1, "one part per rank by default");
    CHECK(coll_set_width(c, 1) == -1, "a width below the ranks is refused");
    CHECK(coll_set_width(c, 2 * COLL_MAX_PARTS + 2) == -1, "more than COLL_MAX_PARTS parts per rank are refused");
    CHECK(coll_set_width(c, 5) == 0 && c->first_part == 2 && c->parts == 3, "width 5 on 2 ranks: rank 1 has parts 2-4");
    free(c); /* a rank's comm lives until its process exits; this one is the parent's: one calloc */
    coll_cpu_group_destroy(g);
}

/* --- sum of f64, broadcast, barrier, alloc ---------------------------------------------- */

static void body_sum_f64(coll_comm *c, const run_opts *o) {
    (void)o;
    const size_t sizes[] = {0, 1, 2, 5, 9, 1023, 100003};
    double *arena = c->alloc(c, 100003 * sizeof(double));
    REQUIRE(arena != NULL, "arena");
    int op = 0;
    for (int from_arena = 0; from_arena < 2; from_arena++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, op++) {
            size_t n = sizes[i];
            double *buf = from_arena ? arena : malloc((n + 1) * sizeof(double));
            double *ref = malloc((n + 1) * sizeof(double));
            fill_f64(buf, n, 300 + op, c->rank);
            CHECK(c->allreduce_sum_f64(c, buf, n) == 0, "sum_f64 n=%zu", n);
            reference_sum_f64(ref, n, 300 + op, c->world_size);
            CHECK(memcmp(buf, ref, n * sizeof(double)) == 0, "sum_f64 n=%zu (arena %d) differs", n, from_arena);
            record_hash(c, op, buf, n * sizeof(double));
            if (!from_arena) free(buf);
            free(ref);
        }
}

static unsigned char pattern_byte(int root, size_t i) { return (unsigned char)(mix64((uint64_t)root * 131 + i) >> 56); }

static void body_broadcast(coll_comm *c, const run_opts *o) {
    (void)o;
    size_t chunk = group_chunk_bytes;
    const size_t sizes[] = {0, 1, 3, 63, 4097, chunk - 1, 2 * chunk + 13, 3000001};
    unsigned char *buf = malloc(3000001 + 1);
    unsigned char *want = malloc(3000001 + 1);
    int op = 0;
    for (int root = 0; root < c->world_size; root++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++, op++) {
            size_t n = sizes[i];
            for (size_t j = 0; j < n; j++) want[j] = pattern_byte(root + (int)i, j);
            if (c->rank == root)
                memcpy(buf, want, n);
            else
                memset(buf, 0xee, n);
            CHECK(c->broadcast(c, buf, n, root) == 0, "broadcast root %d bytes %zu", root, n);
            CHECK(memcmp(buf, want, n) == 0, "broadcast root %d bytes %zu: rank %d differs", root, n, c->rank);
            record_hash(c, op, buf, n);
        }
    CHECK(c->broadcast(c, buf, 1, c->world_size) == -1, "broadcast with a bad root fails");
    free(buf);
    free(want);
}

/* Each round every rank writes a cell before the barrier; after it, every rank must
 * see every cell of this round; a second barrier keeps the next writes out. Ranks
 * are skewed by sleeps, so an early release would be seen. */
static void body_barrier(coll_comm *c, const run_opts *o) {
    (void)o;
    int w = c->world_size, stale = 0, failed = 0;
    for (int round = 1; round <= 300; round++) {
        if ((round + c->rank) % 17 == 0) usleep(1000);
        atomic_store_explicit(&shared->barrier_cells[c->rank], round * w + c->rank, memory_order_relaxed);
        failed += c->barrier(c) != 0;
        for (int s = 0; s < w; s++)
            stale += atomic_load_explicit(&shared->barrier_cells[s], memory_order_relaxed) != round * w + s;
        failed += c->barrier(c) != 0;
    }
    CHECK(failed == 0, "%d barriers failed", failed);
    CHECK(stale == 0, "rank %d saw %d stale cells after a barrier", c->rank, stale);
}

static void body_alloc(coll_comm *c, const run_opts *o) {
    (void)o;
    char *a = c->alloc(c, 100), *b = c->alloc(c, 1);
    CHECK(a && b && (uintptr_t)a % 64 == 0 && (uintptr_t)b % 64 == 0, "alloc is cache-line aligned");
    CHECK(b >= a + 100, "allocations do not overlap");
    CHECK(c->alloc(c, ARENA_BYTES) == NULL, "an exhausted arena gives NULL");
    memset(a, c->rank, 100); /* each rank's arena is its own */
    CHECK(c->barrier(c) == 0, "barrier");
    CHECK(a[99] == (char)c->rank, "arena private to rank");
    CHECK(strcmp(c->backend, "cpu") == 0, "backend name");
}

/* A fresh block of n floats must be zero on every rank; once all have looked, this
 * rank writes i * 0.5 + add into its share [*lo, *hi) of it. */
static void fill_fresh_share(coll_comm *c, float *a, size_t n, float add, const char *what, size_t *lo, size_t *hi) {
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += a[i] != 0.0f;
    CHECK(nonzero == 0, "a fresh %s block is zero (%zu are not)", what, nonzero);
    CHECK(c->barrier(c) == 0, "barrier");
    coll_share(n, c->world_size, c->rank, lo, hi);
    for (size_t i = *lo; i < *hi; i++) a[i] = (float)i * 0.5f + add;
}

/* The shared arena: the same zeroed blocks on every rank, written by each in its own
 * share and read whole by all after a barrier; exhausted, NULL. */
static void body_alloc_shared(coll_comm *c, const run_opts *o) {
    (void)o;
    enum { N = 100003 };
    float *a = c->alloc_shared(c, N * sizeof(float));
    char *b = c->alloc_shared(c, 1);
    REQUIRE(a && b, "shared blocks");
    CHECK((uintptr_t)a % 64 == 0 && (uintptr_t)b % 64 == 0 && (char *)b >= (char *)(a + N), "aligned, disjoint");
    shared->hash[0][c->rank] = (uint64_t)(uintptr_t)a; /* the same address on every rank */
    shared->hash[1][c->rank] = (uint64_t)(uintptr_t)b;
    if (c->rank == 0) shared->ops = 2;
    size_t lo, hi;
    fill_fresh_share(c, a, N, 0.0f, "shared", &lo, &hi);
    CHECK(c->barrier(c) == 0, "barrier");
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += a[i] != (float)i * 0.5f;
    CHECK(wrong == 0, "rank %d sees every rank's share (%zu wrong)", c->rank, wrong);
    CHECK(c->alloc_shared(c, ARENA_BYTES) == NULL, "an exhausted shared arena gives NULL");
}

/* Mirrored memory: a zeroed copy per rank, at the same offset of every arena whatever
 * each rank allocated before; each rank fills its share of its copy and mirrors it
 * (in uneven pieces: streaming stores have an aligned middle and a plain head and
 * tail), and after a barrier every copy is whole and the same; a write outside the
 * mirrored share stays in its own copy; memory that is not mirrored is refused. */
static void body_alloc_mirrored(coll_comm *c, const run_opts *o) {
    (void)o;
    enum { N = 100003 };
    for (int k = 0; k < c->rank; k++) CHECK(c->alloc(c, 1000) != NULL, "alloc"); /* uneven alloc use */
    float *a = c->alloc_mirrored(c, N * sizeof(float));
    char *g = c->alloc(c, 1);
    REQUIRE(a && g, "mirrored block");
    CHECK((uintptr_t)a % 64 == 0 && (g + 1 <= (char *)a || g >= (char *)(a + N)), "aligned, apart from alloc's");
    size_t lo, hi;
    fill_fresh_share(c, a, N, 1.0f, "mirrored", &lo, &hi);
    size_t cut = lo + (hi - lo) / 3 + 1 < hi ? lo + (hi - lo) / 3 + 1 : hi;
    CHECK(c->mirror_f32(c, a, lo, cut) == 0 && c->mirror_f32(c, a, cut, hi) == 0, "mirror my share");
    CHECK(c->shard_barrier(c) == 0, "barrier");
    size_t wrong = 0;
    for (size_t i = 0; i < N; i++) wrong += a[i] != (float)i * 0.5f + 1.0f;
    CHECK(wrong == 0, "rank %d's copy holds every rank's share (%zu wrong)", c->rank, wrong);
    record_hash(c, 0, a, N * sizeof(float)); /* the same bytes on every rank */
    CHECK(c->barrier(c) == 0, "barrier");
    size_t outside = hi < N ? hi : 0; /* an element of another rank's share */
    a[outside] = -1.0f;
    CHECK(c->barrier(c) == 0, "barrier");
    size_t foreign = 0;
    for (size_t i = 0; i < N; i++) foreign += a[i] == -1.0f && i != outside;
    CHECK(foreign == 0, "rank %d's copy is its own: %zu elements came from a peer's unmirrored write", c->rank, foreign);
    float stray[16];
    errno = 0;
    CHECK(c->mirror_f32(c, stray, 0, 16) == -1 && errno == EINVAL, "memory outside the arena is refused");
    CHECK(c->mirror_f32(c, a, 5, 4) == -1 && errno == EINVAL, "a range that ends before it starts is refused");
    CHECK(c->alloc_mirrored(c, ARENA_BYTES) == NULL, "an exhausted arena gives NULL");
}

/* More ranks than cores: thousands of small all-reduces must stay fast (spinning
 * alone would hand each barrier a scheduler time slice). */
static void body_oversubscribed(coll_comm *c, const run_opts *o) {
    (void)o;
    float v[4];
    uint64_t t0 = now_ns();
    int failed = 0;
    for (int i = 0; i < 2000; i++) {
        for (int j = 0; j < 4; j++) v[j] = (float)(c->rank + j);
        failed += c->allreduce_avg_f32(c, v, 4) != 0;
        if (i % 100 == 99) { /* all ranks agree to give up early if hopeless */
            double late = (double)(now_ns() - t0) > 5e9;
            failed += c->allreduce_sum_f64(c, &late, 1) != 0;
            if (late > 0) break;
        }
    }
    double s = (double)(now_ns() - t0) / 1e9;
    CHECK(failed == 0, "small all-reduces failed");
    CHECK(s < 5.0, "2000 small all-reduces over %d ranks took %.2f s", c->world_size, s);
    if (c->rank == 0) printf("  oversubscribed: 2000 x 4-float all-reduce, %d ranks: %.3f s\n", c->world_size, s);
}

/* --- abort ------------------------------------------------------------------------------ */

/* Ranks 0 and 1 wait in an all-reduce that rank 2 never enters (it exits); the
 * parent aborts the group; the waiters must return -1 within 100 ms, and every later
 * collective must fail at once. */
static void abort_survivor(coll_cpu_group *g, int rank) {
    alarm(30);
    check_passed = check_failed = 0;
    coll_comm *c = coll_cpu_attach(g, rank);
    if (!c) _exit(2);
    float *buf = c->alloc(c, 100000 * sizeof(float));
    int rc = c->allreduce_avg_f32(c, buf, 100000);
    uint64_t back = now_ns();
    uint64_t at = atomic_load(&shared->abort_at_ns);
    CHECK(rc == -1, "a pending all-reduce returns -1 after abort (got %d)", rc);
    CHECK(at != 0 && back - at < 100000000u, "returned %.1f ms after the abort", (double)(back - at) / 1e6);
    double d = 0;
    CHECK(c->barrier(c) == -1, "barrier after abort");
    CHECK(c->allreduce_sum_f64(c, &d, 1) == -1, "sum after abort");
    CHECK(c->broadcast(c, &d, sizeof d, 0) == -1, "broadcast after abort");
    CHECK(c->allreduce_avg_f32(c, buf, 10) == -1, "all-reduce after abort");
    shared->passed[rank] = check_passed;
    shared->failed[rank] = check_failed;
    _exit(check_failed ? 1 : 0);
}

static void test_abort(unsigned delay_us) {
    coll_cpu_group *g = coll_cpu_group_create(3, 1 << 20);
    REQUIRE(g != NULL, "group");
    shared = new_shared();
    pid_t pids[3];
    for (int r = 0; r < 3; r++) {
        pids[r] = fork();
        REQUIRE(pids[r] >= 0, "fork");
        if (pids[r] == 0) {
            if (r == 2) _exit(0); /* dies without entering a collective */
            abort_survivor(g, r);
        }
    }
    int st = 0;
    waitpid(pids[2], &st, 0);
    usleep(delay_us); /* let the survivors get into the all-reduce (and asleep) */
    atomic_store(&shared->abort_at_ns, now_ns());
    coll_cpu_group_abort(g);
    for (int r = 0; r < 2; r++) {
        waitpid(pids[r], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "abort (delay %u us): survivor %d status 0x%x", delay_us, r, st);
        check_passed += shared->passed[r];
        check_failed += shared->failed[r];
    }
    munmap(shared, sizeof *shared);
    coll_cpu_group_destroy(g);
}

static void test_attach_validation(void) {
    coll_cpu_group *g = coll_cpu_group_create(2, 4096);
    REQUIRE(g != NULL, "group");
    CHECK(coll_cpu_attach(g, 2) == NULL, "rank beyond the world is refused");
    CHECK(coll_cpu_attach(g, -1) == NULL, "negative rank is refused");
    CHECK(coll_cpu_group_create(0, 4096) == NULL, "world 0 is refused");
    CHECK(coll_cpu_group_chunk_bytes(g) % 4096 == 0, "chunk is whole pages");
    coll_cpu_group_destroy(g);
}

int main(void) {
    alarm(300); /* the whole test must not hang */
    setvbuf(stdout, NULL, _IONBF, 0);
    test_attach_validation();
    const run_opts dflt = {0, 0}, small = {SMALL_CHUNK, 0};
    for (int w = 1; w <= MAX_RANKS; w++) {
        run_ranks("avg sizes (default chunk)", w, body_avg_sizes, &dflt);
        run_ranks("avg sizes (small chunk)", w, body_avg_sizes, &small);
        run_ranks("avg buckets", w, body_avg_buckets, &small);
        run_ranks("avg burst", w, body_avg_burst, &dflt);
        run_ranks("avg burst (small chunk)", w, body_avg_burst, &small);
        run_ranks("sum f64", w, body_sum_f64, &small);
        const run_opts sharded_arena = {SMALL_CHUNK, 0}, sharded_malloc = {SMALL_CHUNK, 1},
                       sharded_mixed = {SMALL_CHUNK, 2};
        run_ranks("reduce-scatter/all-gather (arena)", w, body_sharded, &sharded_arena);
        run_ranks("reduce-scatter/all-gather (malloc)", w, body_sharded, &sharded_malloc);
        run_ranks("reduce-scatter/all-gather (mixed)", w, body_sharded, &sharded_mixed);
        run_ranks("reduce-scatter ex (arena)", w, body_sharded_ex, &sharded_arena);
        run_ranks("reduce-scatter ex (malloc)", w, body_sharded_ex, &sharded_malloc);
        run_ranks("reduce-scatter ex (mixed)", w, body_sharded_ex, &sharded_mixed);
        run_ranks("broadcast", w, body_broadcast, &dflt);
        run_ranks("broadcast (small chunk)", w, body_broadcast, &small);
        run_ranks("barrier", w, body_barrier, &dflt);
        run_ranks("alloc", w, body_alloc, &dflt);
        run_ranks("alloc shared", w, body_alloc_shared, &dflt);
        run_ranks("alloc mirrored", w, body_alloc_mirrored, &dflt);
        printf("  world %d done (%d passed, %d failed so far)\n", w, check_passed, check_failed);
    }
    test_set_width_validation();
    const int widths[] = {1, 2, 3, 4, 8};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int w = 1; w <= MAX_RANKS && w <= widths[i]; w++) {
            const run_opts parts = {SMALL_CHUNK, widths[i]};
            run_ranks("parts reduce-scatter", w, body_parts, &parts);
        }
    printf("  parts done (%d passed, %d failed so far)\n", check_passed, check_failed);
    run_ranks("oversubscribed", 4, body_oversubscribed, &dflt);
    test_abort(200000);
    test_abort(1000);
    test_abort(0);
    return test_done("test_collectives");
}
