/* The distributed sampler: see sampler.h. */
#include "sampler.h"

#include <stdlib.h>

#include "rng.h"

#define RNG_STREAM_SAMPLER 2

int sampler_init(dist_sampler *s, size_t dataset_size, int world_size, int rank, uint64_t seed) {
    s->dataset_size = dataset_size;
    s->world_size = world_size;
    s->rank = rank;
    s->seed = seed;
    s->num_samples = (dataset_size + (size_t)world_size - 1) / (size_t)world_size;
    s->indices = malloc(sizeof(size_t) * (s->num_samples ? s->num_samples : 1));
    s->perm = malloc(sizeof(size_t) * (s->num_samples * (size_t)world_size + 1));
    return (s->indices && s->perm) ? 0 : -1;
}

void sampler_set_epoch(dist_sampler *s, int epoch) {
    size_t n = s->dataset_size, total = s->num_samples * (size_t)s->world_size;
    rng_state r;
    rng_seed(&r, s->seed + (uint64_t)epoch, RNG_STREAM_SAMPLER);
    rng_permutation(&r, s->perm, n);
    for (size_t i = n; i < total; i++) s->perm[i] = s->perm[(i - n) % n]; /* pad with the head */
    for (size_t i = 0; i < s->num_samples; i++)
        s->indices[i] = s->perm[(size_t)s->rank + i * (size_t)s->world_size];
}

void sampler_free(dist_sampler *s) {
    free(s->indices);
    free(s->perm);
    s->indices = s->perm = NULL;
}
