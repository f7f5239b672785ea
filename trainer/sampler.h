/* DistributedSampler's semantics: each epoch a permutation drawn from seed + epoch,
 * padded (by repeating its head) to a multiple of the world size; rank r takes every
 * world_size-th index starting at r. Every rank computes the same permutation, so no
 * communication is needed to agree on it. */
#ifndef DDPD_TRAINER_SAMPLER_H
#define DDPD_TRAINER_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    size_t dataset_size;
    int world_size, rank;
    uint64_t seed;
    size_t num_samples; /* per rank: ceil(dataset_size / world_size) */
    size_t *indices;    /* this rank's num_samples indices for the current epoch */
    size_t *perm;       /* scratch: the padded permutation */
} dist_sampler;

int sampler_init(dist_sampler *s, size_t dataset_size, int world_size, int rank, uint64_t seed);
/* Computes this rank's indices for `epoch` (the tutorial's sampler.set_epoch). */
void sampler_set_epoch(dist_sampler *s, int epoch);
void sampler_free(dist_sampler *s);

#endif
