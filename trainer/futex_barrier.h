/* A barrier for processes that share memory (the cpu collectives' rank processes).
 * It lives inside a MAP_SHARED mapping, so it uses the shared (not the private)
 * futex operations. Waiters spin for a few microseconds, then sleep on a futex with
 * a timeout so that they re-check the abort flag: it stays cheap when every rank has
 * a core, and does not burn the cores when there are more ranks than cores.
 * futex_barrier_abort() makes every current and future wait return -1 at once. */
#ifndef DDPD_TRAINER_FUTEX_BARRIER_H
#define DDPD_TRAINER_FUTEX_BARRIER_H

#include <stdatomic.h>
#include <stdint.h>

typedef struct futex_barrier {
    /* Each field on its own cache line: arrivals, the futex word and the sleeper
     * count are written by different ranks at different times. */
    _Alignas(64) _Atomic uint32_t arrived;   /* ranks arrived in this generation */
    _Alignas(64) _Atomic uint32_t generation; /* the futex word: bumped on release */
    _Alignas(64) _Atomic uint32_t sleepers;  /* ranks inside FUTEX_WAIT (or about to be) */
    _Alignas(64) _Atomic uint32_t aborted;
    uint32_t parties;
} futex_barrier;

/* Zero-initialised memory plus parties is a valid barrier; this sets it up. */
void futex_barrier_init(futex_barrier *b, uint32_t parties);
/* Wait until all `parties` arrived. `spin_ns` bounds the busy wait before sleeping.
 * 0 when released, -1 when the barrier was (or gets) aborted. */
int futex_barrier_wait(futex_barrier *b, uint64_t spin_ns);
/* Async-signal-safe: atomics and a futex syscall only. */
void futex_barrier_abort(futex_barrier *b);
int futex_barrier_is_aborted(futex_barrier *b);

#endif
