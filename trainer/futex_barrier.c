/* A barrier for rank processes that share memory: generation counter + futex.
 * See futex_barrier.h for why it spins first and then sleeps. The futex calls use
 * FUTEX_WAIT/FUTEX_WAKE without FUTEX_PRIVATE_FLAG: the word lives in a MAP_SHARED
 * mapping that several processes see, and the private variants would key the wait
 * queue on this process's address space only. */
#include "futex_barrier.h"
#include "monotonic.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* How long one FUTEX_WAIT may sleep before re-checking the abort flag. The abort
 * wakes sleepers explicitly; this is only the safety net. */
#define SLEEP_SLICE_NS 10000000L

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static void futex_wait(_Atomic uint32_t *word, uint32_t expected, long timeout_ns) {
    struct timespec ts = {.tv_sec = 0, .tv_nsec = timeout_ns};
    /* EAGAIN (the word changed), EINTR, ETIMEDOUT: the caller re-checks anyway. */
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word) {
    syscall(SYS_futex, (uint32_t *)word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

void futex_barrier_init(futex_barrier *b, uint32_t parties) {
    atomic_init(&b->arrived, 0);
    atomic_init(&b->generation, 0);
    atomic_init(&b->sleepers, 0);
    atomic_init(&b->aborted, 0);
    b->parties = parties;
}

int futex_barrier_is_aborted(futex_barrier *b) {
    return atomic_load_explicit(&b->aborted, memory_order_acquire) != 0;
}

/* The last rank to arrive opens the barrier: reset the count for the next round
 * (before the release, so that nobody arrives early into a stale count), bump the
 * generation, and wake sleepers if there are any. The seq_cst pair
 * (generation++, load sleepers) against (sleepers++, load generation) in the
 * waiter guarantees a sleeper is either woken or never sleeps. */
static void release_all(futex_barrier *b) {
    atomic_store_explicit(&b->arrived, 0, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->generation, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&b->sleepers, memory_order_seq_cst) != 0)
        futex_wake_all(&b->generation);
}

static int generation_moved(futex_barrier *b, uint32_t gen) {
    return atomic_load_explicit(&b->generation, memory_order_acquire) != gen;
}

/* Spin (with a pause) while it is cheap, then sleep on the generation word. */
static void wait_for_release(futex_barrier *b, uint32_t gen, uint64_t spin_ns) {
    uint64_t start = spin_ns ? (uint64_t)mono_ns() : 0;
    for (unsigned spins = 0;; spins++) {
        if (generation_moved(b, gen) || futex_barrier_is_aborted(b)) return;
        if (spin_ns && ((spins & 15) != 15 || (uint64_t)mono_ns() - start < spin_ns)) {
            cpu_relax();
            continue;
        }
        atomic_fetch_add_explicit(&b->sleepers, 1, memory_order_seq_cst);
        if (atomic_load_explicit(&b->generation, memory_order_seq_cst) == gen &&
            !futex_barrier_is_aborted(b))
            futex_wait(&b->generation, gen, SLEEP_SLICE_NS);
        atomic_fetch_sub_explicit(&b->sleepers, 1, memory_order_relaxed);
    }
}

int futex_barrier_wait(futex_barrier *b, uint64_t spin_ns) {
    if (futex_barrier_is_aborted(b)) return -1;
    uint32_t gen = atomic_load_explicit(&b->generation, memory_order_acquire);
    uint32_t before = atomic_fetch_add_explicit(&b->arrived, 1, memory_order_acq_rel);
    if (before + 1 == b->parties)
        release_all(b);
    else
        wait_for_release(b, gen, spin_ns);
    return futex_barrier_is_aborted(b) ? -1 : 0;
}

/* Async-signal-safe. Bumping the generation makes a FUTEX_WAIT that is about to
 * start fail with EAGAIN, so no waiter can miss the wake and sleep a whole slice. */
void futex_barrier_abort(futex_barrier *b) {
    atomic_store_explicit(&b->aborted, 1, memory_order_seq_cst);
    atomic_fetch_add_explicit(&b->generation, 1, memory_order_seq_cst);
    futex_wake_all(&b->generation);
}
