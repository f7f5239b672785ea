/* A small deterministic random number generator (xoshiro256** seeded through
 * splitmix64) so that initialisation and sampling depend on the seed alone, the
 * same on every machine and every rank. */
#ifndef DDPD_RNG_H
#define DDPD_RNG_H

#include <stddef.h>
#include <stdint.h>

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

#endif
