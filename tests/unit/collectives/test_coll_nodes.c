/* Tests of the cpu collectives across nodes (trainer/nodes/coll_nodes.c) with real
 * processes: two "nodes" of two ranks each, each node its own shared-memory group
 * (as its launcher makes it), the nodes linked by gloo over loopback and met through
 * a rendezvous directory. Every call the trainer makes is checked against a result
 * computed here in the same order, bit for bit, and on every rank; then a node that
 * dies makes its peer's call fail with a reason instead of hanging. Children report
 * their checks through a shared page and their exit status. */
#include "check.h"
#include "coll_nodes.h"
#include "kv_store.h"
#include "rendezvous_rules.h"

#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NODES 2
#define LOCAL 2
#define WORLD (NODES * LOCAL)
#define ARENA ((size_t)8 << 20)
#define RS_N 100003 /* odd: shares of unequal length */
#define AR_N 50000

typedef struct {
    int passed[WORLD], failed[WORLD];
    uint64_t hash[8][WORLD];
    atomic_int arrived;
    atomic_int seen_after_barrier[WORLD];
} report;

static report *rep;
static char kv_dir[] = "/tmp/ddpd-test-coll-nodes-XXXXXX";

static uint64_t fnv1a(const void *p, size_t bytes) {
    const unsigned char *b = p;
    uint64_t h = 1469598103934665603u;
    for (size_t i = 0; i < bytes; i++) h = (h ^ b[i]) * 1099511628211u;
    return h;
}

static float value(int rank, size_t i) { return sinf((float)i * 0.37f + (float)rank) * (float)(rank + 1) / 3.0f; }

/* The average over the 4 ranks as the nodes compute it: each node's average in rank
 * order, then the two summed (either order: one addition) and halved. */
static float expected_avg(size_t i) {
    float node0 = (value(0, i) + value(1, i)) * 0.5f, node1 = (value(2, i) + value(3, i)) * 0.5f;
    return (node0 + node1) * 0.5f;
}

typedef struct {
    size_t next, lo, hi;
    int in_order;
} consumed;

static void on_piece(void *arg, size_t lo, size_t hi) {
    consumed *c = arg;
    if (lo != c->next || hi <= lo) c->in_order = 0;
    c->next = hi;
}

static coll_comm *join(coll_cpu_group *g, int node, int local, int timeout_ms) {
    char err[512], prefix[32];
    kv_store *kv = kv_dir_open(kv_dir, err, sizeof err);
    REQUIRE(kv, "%s", err);
    snprintf(prefix, sizeof prefix, "gloo/local-%d/", local);
    gloo_link_options o = {.store = kv, .prefix = prefix, .rank = node, .size = NODES, .hostname = "127.0.0.1",
                           .connect_timeout_ms = 30000, .timeout_ms = timeout_ms};
    gloo_link *link = gloo_link_open(&o, err, sizeof err);
    kv->close(kv);
    REQUIRE(link, "node %d local %d: %s", node, local, err);
    coll_comm *c = coll_nodes_create(coll_cpu_attach(g, local), link, NODES, node);
    REQUIRE(c, "coll_nodes_create");
    return c;
}

static void rank_main(coll_comm *c) {
    int r = c->rank;
    CHECK(c->world_size == WORLD && c->nodes == NODES && c->shard_world == LOCAL && c->shard_rank == r % LOCAL &&
              strcmp(c->backend, "cpu+gloo") == 0,
          "rank %d: world %d nodes %d shard %d/%d backend %s", r, c->world_size, c->nodes, c->shard_rank,
          c->shard_world, c->backend);

    /* the training step's call: reduce-scatter in the arena, side sums, consumer */
    float *g = c->alloc(c, sizeof(float) * RS_N);
    REQUIRE(g, "alloc");
    for (int round = 0; round < 2; round++) {
        for (size_t i = 0; i < RS_N; i++) g[i] = value(r, i);
        double sums[2] = {r + 0.5, 2.0 * r};
        size_t lo, hi;
        coll_share(RS_N, c->shard_world, c->shard_rank, &lo, &hi);
        consumed seen = {.next = lo, .in_order = 1};
        CHECK(c->reduce_scatter_avg_f32_ex(c, g, RS_N, sums, 2, on_piece, &seen) == 0, "reduce-scatter: %s", c->failure(c));
        size_t wrong = 0;
        for (size_t i = lo; i < hi; i++) wrong += memcmp(&g[i], &(float){expected_avg(i)}, sizeof(float)) != 0;
        CHECK(wrong == 0, "rank %d: %zu of %zu elements of its share differ from the nodes' average", r, wrong, hi - lo);
        CHECK(seen.in_order && seen.next == hi, "rank %d: the consumer got its share in order (%zu of %zu)", r, seen.next, hi);
        CHECK(sums[0] == 8.0 && sums[1] == 12.0, "rank %d: side sums %g %g (8 12)", r, sums[0], sums[1]);
        rep->hash[round][r] = fnv1a(g + lo, sizeof(float) * (hi - lo)); /* same share bits on both nodes, both rounds */
        CHECK(c->barrier(c) == 0, "barrier"); /* before g is written again */
    }

    /* all-reduce of a buffer outside the arena: every rank the same bits */
    float *a = malloc(sizeof(float) * AR_N);
    for (size_t i = 0; i < AR_N; i++) a[i] = value(r, i);
    CHECK(c->allreduce_avg_f32(c, a, AR_N) == 0, "all-reduce: %s", c->failure(c));
    size_t off = 0;
    double worst = 0;
    for (size_t i = 0; i < AR_N; i++) {
        off += memcmp(&a[i], &(float){expected_avg(i)}, sizeof(float)) != 0;
        double one_host = (((double)value(0, i) + value(1, i)) + value(2, i) + value(3, i)) / 4;
        double d = fabs(a[i] - one_host) / (fabs(one_host) + 1.0); /* values are about 1: rounding, not cancellation */
        if (d > worst) worst = d;
    }
    CHECK(off == 0, "rank %d: %zu all-reduced elements differ from the nodes' average", r, off);
    CHECK(worst < 1e-6, "rank %d: the nodes' average is within float rounding of one host's (%.3g)", r, worst);
    rep->hash[2][r] = fnv1a(a, sizeof(float) * AR_N);
    free(a);

    double s[2] = {r, 1};
    CHECK(c->allreduce_sum_f64(c, s, 2) == 0 && s[0] == 6 && s[1] == 4, "rank %d: sum %g %g (6 4)", r, s[0], s[1]);
    double half[1] = {1};
    CHECK(c->shard_sum_f64(c, half, 1) == 0 && half[0] == LOCAL, "rank %d: a shard sum counts the node's ranks: %g", r,
          half[0]);

    /* broadcast from a rank of either node */
    for (int root = WORLD - 1; root >= 0; root -= 3) {
        unsigned char b[3000];
        for (size_t i = 0; i < sizeof b; i++) b[i] = (unsigned char)(r == root ? i * 7 + root : 0xee);
        CHECK(c->broadcast(c, b, sizeof b, root) == 0, "broadcast from %d: %s", root, c->failure(c));
        int bad = 0;
        for (size_t i = 0; i < sizeof b; i++) bad += b[i] != (unsigned char)(i * 7 + root);
        CHECK(bad == 0, "rank %d: %d bytes of rank %d's broadcast wrong", r, bad, root);
    }

    /* the parameters: rank 0 writes its node's shared copy, every node gets it */
    float *p = c->alloc_shared(c, sizeof(float) * 4096);
    REQUIRE(p, "alloc_shared");
    if (r == 0)
        for (int i = 0; i < 4096; i++) p[i] = (float)i * 0.5f;
    CHECK(c->broadcast_shared(c, p, sizeof(float) * 4096, 0) == 0, "broadcast_shared: %s", c->failure(c));
    int bad = 0;
    for (int i = 0; i < 4096; i++) bad += p[i] != (float)i * 0.5f;
    CHECK(bad == 0, "rank %d: %d parameters differ from rank 0's", r, bad);
    CHECK(c->shard_barrier(c) == 0, "shard barrier");

    /* the parameters, one copy per rank: a share goes to its own node's ranks only */
    float *q = c->alloc_mirrored(c, sizeof(float) * 4096);
    REQUIRE(q, "alloc_mirrored");
    size_t qlo, qhi;
    coll_share(4096, c->shard_world, c->shard_rank, &qlo, &qhi);
    float node_base = 10000.0f * (float)(r / LOCAL);
    for (size_t i = qlo; i < qhi; i++) q[i] = node_base + (float)i;
    CHECK(c->mirror_f32(c, q, qlo, qhi) == 0, "mirror_f32");
    CHECK(c->shard_barrier(c) == 0, "shard barrier");
    int qbad = 0;
    for (size_t i = 0; i < 4096; i++) qbad += q[i] != node_base + (float)i;
    CHECK(qbad == 0, "rank %d: %d elements of its copy are not its node's", r, qbad);
    CHECK(c->barrier(c) == 0, "barrier");

    /* a barrier holds everyone until all arrived */
    atomic_fetch_add(&rep->arrived, 1);
    CHECK(c->barrier(c) == 0, "barrier");
    atomic_store(&rep->seen_after_barrier[r], atomic_load(&rep->arrived));
    CHECK(c->barrier(c) == 0, "barrier");
}

static int run_ranks(void (*body)(coll_cpu_group **, int, int)) {
    coll_cpu_group *groups[NODES];
    for (int k = 0; k < NODES; k++) REQUIRE((groups[k] = coll_cpu_group_create(LOCAL, ARENA)), "group");
    pid_t pids[WORLD];
    for (int r = 0; r < WORLD; r++) {
        pids[r] = fork();
        REQUIRE(pids[r] >= 0, "fork");
        if (pids[r] == 0) {
            check_passed = check_failed = 0; /* the child counts its own */
            body(groups, r / LOCAL, r % LOCAL);
            rep->passed[r] = check_passed;
            rep->failed[r] = check_failed;
            _exit(check_failed ? 1 : 0);
        }
    }
    int ok = 1;
    for (int r = 0; r < WORLD; r++) {
        int st;
        waitpid(pids[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = 0;
        check_passed += rep->passed[r];
        check_failed += rep->failed[r];
    }
    for (int k = 0; k < NODES; k++) coll_cpu_group_destroy(groups[k]);
    return ok;
}

static void full_body(coll_cpu_group **groups, int node, int local) {
    coll_comm *c = join(groups[node], node, local, 30000);
    REQUIRE(c->rank == node * LOCAL + local, "rank %d", c->rank);
    rank_main(c);
}

static void test_every_call(void) {
    CHECK(run_ranks(full_body), "every rank exited 0");
    for (int r = 0; r < WORLD; r++) {
        CHECK(rep->hash[0][r] == rep->hash[1][r], "rank %d: the same inputs, the same bits, call after call", r);
        CHECK(rep->hash[2][r] == rep->hash[2][0], "rank %d holds rank 0's all-reduced bits", r);
        CHECK(rep->seen_after_barrier[r] == WORLD, "rank %d left the barrier before all arrived (%d)", r,
              rep->seen_after_barrier[r]);
    }
    /* the same local rank holds the same share on both nodes: one copy per node */
    for (int l = 0; l < LOCAL; l++)
        CHECK(rep->hash[0][l] == rep->hash[0][LOCAL + l], "local rank %d's share is the same on both nodes", l);
}

/* Two nodes of one rank each: node 1 leaves after meeting; node 0's next call fails
 * with gloo's reason, well before its timeout. */
static void death_body(coll_cpu_group **groups, int node, int local) {
    if (local != 0) return; /* one rank per node here */
    coll_comm *c = join(groups[node], node, 0, 20000);
    CHECK(c->barrier(c) == 0, "both nodes met"); /* node 1 leaves only once node 0 has connected */
    if (node == 1) _exit(0);
    float x[1024] = {0};
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = c->allreduce_avg_f32(c, x, 1024);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double took = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
    CHECK(rc == -1, "a call with a node gone fails");
    CHECK(c->failure(c)[0] != '\0', "and says why");
    fprintf(stderr, "test_coll_nodes: the call with node 1 gone failed in %.2f s: %s\n", took, c->failure(c));
    CHECK(took < 15, "before the collective timeout (%.1f s)", took);
}

static void test_node_dies(void) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", kv_dir);
    CHECK(system(cmd) == 0, "emptied the rendezvous");
    coll_cpu_group *groups[NODES];
    for (int k = 0; k < NODES; k++) REQUIRE((groups[k] = coll_cpu_group_create(1, ARENA)), "group");
    memset(rep, 0, sizeof *rep);
    pid_t pids[NODES];
    for (int k = 0; k < NODES; k++) {
        pids[k] = fork();
        if (pids[k] == 0) {
            check_passed = check_failed = 0;
            death_body(groups, k, 0);
            rep->passed[k] = check_passed;
            rep->failed[k] = check_failed;
            _exit(check_failed ? 1 : 0);
        }
    }
    for (int k = 0; k < NODES; k++) {
        int st;
        waitpid(pids[k], &st, 0);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "node %d's process ended cleanly", k);
    }
    check_passed += rep->passed[0];
    check_failed += rep->failed[0];
}

static void test_rendezvous_dir(void) {
    char err[256];
    kv_store *kv = kv_dir_open(kv_dir, err, sizeof err);
    REQUIRE(kv, "%s", err);
    CHECK(kv_put(kv, "a/b:c", "xyz", 3, err, sizeof err) == 0, "put: %s", err);
    void *data = NULL;
    size_t len = 0;
    CHECK(kv_get(kv, "a/b:c", 100, &data, &len, err, sizeof err) == 0 && len == 3 && memcmp(data, "xyz", 3) == 0,
          "get what was put");
    free(data);
    CHECK(kv_get(kv, "missing", 50, &data, &len, err, sizeof err) == -1 && strstr(err, "missing"),
          "a key that never comes times out, named: %s", err);
    CHECK(kv_put(kv, "bad key", "x", 1, err, sizeof err) == -1, "a key with a space is refused");
    CHECK(!rendezvous_key_ok("", 0) && !rendezvous_key_ok("a b", 3) && rendezvous_key_ok("gloo/local-0/1", 14),
          "key rules");
    kv->close(kv);
    CHECK(kv_dir_open("/nonexistent-ddpd", err, sizeof err) == NULL && strstr(err, "not a directory"), "%s", err);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN); /* a gloo peer that went away */
    rep = mmap(NULL, sizeof *rep, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(rep != MAP_FAILED, "mmap");
    REQUIRE(mkdtemp(kv_dir), "mkdtemp");
    test_rendezvous_dir();
    test_every_call();
    test_node_dies();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", kv_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", kv_dir);
    return test_done("test_coll_nodes");
}
