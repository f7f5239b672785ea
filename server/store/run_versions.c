/* The table of run versions: see run_versions.h. */
#include "run_versions.h"

#include <stdatomic.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static _Atomic uint64_t slots[RUN_VERSION_SLOTS];
static _Atomic uint64_t counter; /* the last number handed out: the store's version */
static _Atomic uint64_t identity;

static size_t slot_of(int64_t id) { return (size_t)((uint64_t)id % RUN_VERSION_SLOTS); }

void run_versions_reset(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 40);
    }
    if (atomic_load_explicit(&counter, memory_order_relaxed)) /* a second opening (tests): the table's pages are untouched at the first */
        for (size_t i = 0; i < RUN_VERSION_SLOTS; i++) atomic_store_explicit(&slots[i], 0, memory_order_relaxed);
    atomic_store_explicit(&counter, 0, memory_order_relaxed);
    atomic_store_explicit(&identity, r, memory_order_release);
}

uint64_t run_versions_identity(void) { return atomic_load_explicit(&identity, memory_order_acquire); }

uint64_t run_version(int64_t id) { return atomic_load_explicit(&slots[slot_of(id)], memory_order_acquire); }

uint64_t runs_version(void) { return atomic_load_explicit(&counter, memory_order_acquire); }

void run_versions_bump(const int64_t *ids, size_t n) {
    if (!n) return;
    /* One writer: a plain increment; readers see it with acquire. */
    uint64_t v = atomic_load_explicit(&counter, memory_order_relaxed) + 1;
    for (size_t i = 0; i < n; i++)
        if (ids[i] > 0) atomic_store_explicit(&slots[slot_of(ids[i])], v, memory_order_release);
    atomic_store_explicit(&counter, v, memory_order_release);
}
