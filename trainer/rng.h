/* A small deterministic random number generator (xoshiro256** seeded through
 * splitmix64) so that initialisation and sampling depend on the seed alone, the
 * same on every machine and every rank; and a counter-based one for dropout. */
#ifndef DDPD_TRAINER_RNG_H
#define DDPD_TRAINER_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "host_device.h"

typedef struct {
    uint64_t s[4];
} rng_state;

/* Independent streams for one seed: `stream` separates uses (init, sampling...). */
void rng_seed(rng_state *r, uint64_t seed, uint64_t stream);
uint64_t rng_next(rng_state *r);
/* Uniform in [0, n), without modulo bias. */
uint64_t rng_below(rng_state *r, uint64_t n);
/* Uniform float in [lo, hi). */
float rng_uniform(rng_state *r, float lo, float hi);
/* perm <- a uniformly random permutation of 0..n-1 (Fisher-Yates). */
void rng_permutation(rng_state *r, size_t *perm, size_t n);

/* Counter-based randomness (dropout): a number is a pure function of its key and
 * counter, so any element's can be drawn on its own, in any order, on any rank or
 * on the GPU (host_device.h: cnn_kernels.cu runs these very functions), and a
 * resumed run draws what the uninterrupted one drew. splitmix64's finaliser mixes
 * the words in. */
HD_INLINE uint64_t rng_mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
/* The key of one row's dropout masks (seed, global step, example index), and of
 * its mask in one layer. */
HD_INLINE uint64_t rng_dropout_row_key(uint64_t seed, uint64_t step, uint64_t example) {
    uint64_t h = rng_mix64(seed ^ 0x5851f42d4c957f2dULL);
    h = rng_mix64(h ^ (step + 0x9e3779b97f4a7c15ULL));
    return rng_mix64(h ^ (example + 0xd1b54a32d192ed03ULL));
}
HD_INLINE uint64_t rng_dropout_layer_key(uint64_t row_key, uint64_t layer) {
    return rng_mix64(row_key ^ (layer + 0x2545f4914f6cdd1dULL));
}
/* Uniform float in [0, 1) (24 bits) for element `counter` under `key`. */
HD_INLINE float rng_counter_uniform(uint64_t key, uint64_t counter) {
    return (float)(rng_mix64(key ^ (counter * 0x9e3779b97f4a7c15ULL)) >> 40) * (1.0f / 16777216.0f);
}

#endif
