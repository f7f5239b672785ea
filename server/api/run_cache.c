/* The cache of GET /runs/{id}'s answers: a hash table of runs with an LRU list
 * through them, under one mutex. See run_cache.h. */
#include "run_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define BUCKETS 2048 /* a power of two, about 2x RUN_CACHE_RUNS */

typedef struct node {
    int64_t id;
    run_cache_entry e;        /* e.body: the kept bytes */
    struct node *next_in_bucket;
    struct node *newer, *older; /* the LRU list */
} node;

static struct {
    pthread_mutex_t mu;
    node *buckets[BUCKETS];
    node *newest, *oldest;
    size_t runs, bytes;
} C = {.mu = PTHREAD_MUTEX_INITIALIZER};

static _Atomic uint64_t served, built; /* counted apart: no second lock per request */

static size_t bucket_of(int64_t id) { return (size_t)((uint64_t)id * 0x9E3779B97F4A7C15u >> 53) & (BUCKETS - 1); }

static node **find_link(int64_t id) {
    node **p = &C.buckets[bucket_of(id)];
    while (*p && (*p)->id != id) p = &(*p)->next_in_bucket;
    return p;
}

static void lru_unlink(node *n) {
    if (n->newer) n->newer->older = n->older;
    else C.newest = n->older;
    if (n->older) n->older->newer = n->newer;
    else C.oldest = n->newer;
    n->newer = n->older = NULL;
}

static void lru_push_newest(node *n) {
    n->older = C.newest;
    n->newer = NULL;
    if (C.newest) C.newest->newer = n;
    C.newest = n;
    if (!C.oldest) C.oldest = n;
}

static void drop_locked(node **link) {
    node *n = *link;
    *link = n->next_in_bucket;
    lru_unlink(n);
    C.runs--;
    C.bytes -= n->e.len;
    free(n->e.body);
    free(n);
}

bool run_cache_get(int64_t id, uint64_t version, bool want_body, run_cache_entry *out) {
    pthread_mutex_lock(&C.mu);
    node *n = *find_link(id);
    bool hit = n && n->e.version == version;
    if (hit) {
        *out = n->e;
        out->body = NULL;
        if (want_body) {
            out->body = xmalloc(n->e.len ? n->e.len : 1);
            memcpy(out->body, n->e.body, n->e.len);
        }
        if (C.newest != n) {
            lru_unlink(n);
            lru_push_newest(n);
        }
    }
    pthread_mutex_unlock(&C.mu);
    return hit;
}

void run_cache_put(int64_t id, const run_cache_entry *e, const char *body, size_t len) {
    if (len > RUN_CACHE_BYTES / 4) return; /* one huge config must not empty the cache */
    char *copy = xmalloc(len ? len : 1);
    memcpy(copy, body, len);
    pthread_mutex_lock(&C.mu);
    node **link = find_link(id);
    if (*link && (*link)->e.version > e->version) { /* a newer answer got here first */
        pthread_mutex_unlock(&C.mu);
        free(copy);
        return;
    }
    if (*link) drop_locked(link);
    while (C.oldest && (C.runs >= RUN_CACHE_RUNS || C.bytes + len > RUN_CACHE_BYTES))
        drop_locked(find_link(C.oldest->id));
    node *n = xmalloc(sizeof *n);
    *n = (node){.id = id, .e = *e};
    n->e.body = copy;
    n->e.len = len;
    n->next_in_bucket = C.buckets[bucket_of(id)];
    C.buckets[bucket_of(id)] = n;
    lru_push_newest(n);
    C.runs++;
    C.bytes += len;
    pthread_mutex_unlock(&C.mu);
}

void run_cache_forget(int64_t id) {
    pthread_mutex_lock(&C.mu);
    node **link = find_link(id);
    if (*link) drop_locked(link);
    pthread_mutex_unlock(&C.mu);
}

void run_cache_clear(void) {
    pthread_mutex_lock(&C.mu);
    while (C.oldest) drop_locked(find_link(C.oldest->id));
    pthread_mutex_unlock(&C.mu);
}

void run_cache_note(bool from_cache) { atomic_fetch_add_explicit(from_cache ? &served : &built, 1, memory_order_relaxed); }

void run_cache_take_stats(run_cache_stats *out) {
    pthread_mutex_lock(&C.mu);
    *out = (run_cache_stats){atomic_load_explicit(&served, memory_order_relaxed),
                             atomic_load_explicit(&built, memory_order_relaxed), C.runs, C.bytes};
    pthread_mutex_unlock(&C.mu);
}
