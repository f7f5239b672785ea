/* The distributed sampler: padding to a multiple of the world size, striding over
 * ranks, a new order each epoch, and the same permutation on every rank. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "sampler.h"

static void check_world(size_t n, int world) {
    dist_sampler s[8];
    for (int r = 0; r < world; r++) REQUIRE(sampler_init(&s[r], n, world, r, 42) == 0, "init");
    size_t per_rank = (n + (size_t)world - 1) / (size_t)world, total = per_rank * (size_t)world;
    CHECK(s[0].num_samples == per_rank, "n=%zu world=%d: %zu samples per rank", n, world, s[0].num_samples);
    int *seen = calloc(n, sizeof(int));
    size_t *first_epoch = malloc(sizeof(size_t) * per_rank);
    for (int epoch = 0; epoch < 3; epoch++) {
        memset(seen, 0, sizeof(int) * n);
        for (int r = 0; r < world; r++) sampler_set_epoch(&s[r], epoch);
        /* Rank r's i-th index is the padded permutation's element r + i*world: the
         * permutation is the same on every rank (each rank holds its own copy). */
        for (int r = 0; r < world; r++) {
            CHECK(memcmp(s[r].perm, s[0].perm, sizeof(size_t) * total) == 0, "rank %d permutation differs", r);
            for (size_t i = 0; i < per_rank; i++) {
                CHECK(s[r].indices[i] == s[0].perm[(size_t)r + i * (size_t)world], "stride");
                seen[s[r].indices[i]]++;
            }
        }
        int missing = 0, extra = 0;
        for (size_t i = 0; i < n; i++) {
            if (seen[i] == 0) missing++;
            if (seen[i] > 1) extra += seen[i] - 1;
        }
        CHECK(missing == 0, "every example is used each epoch (%d missing)", missing);
        CHECK((size_t)extra == total - n, "padding repeats exactly %zu examples (got %d)", total - n, extra);
        for (size_t i = n; i < total; i++) CHECK(s[0].perm[i] == s[0].perm[i - n], "padding repeats the head");
        if (epoch == 0) memcpy(first_epoch, s[0].indices, sizeof(size_t) * per_rank);
        else if (per_rank > 4)
            CHECK(memcmp(first_epoch, s[0].indices, sizeof(size_t) * per_rank) != 0, "epoch %d order is new", epoch);
    }
    /* The same seed and epoch give the same order; another seed another. */
    dist_sampler again, other;
    sampler_init(&again, n, world, 0, 42);
    sampler_init(&other, n, world, 0, 43);
    sampler_set_epoch(&again, 2);
    sampler_set_epoch(&other, 2);
    CHECK(memcmp(again.indices, s[0].indices, sizeof(size_t) * per_rank) == 0, "reproducible");
    if (per_rank > 4) CHECK(memcmp(other.indices, s[0].indices, sizeof(size_t) * per_rank) != 0, "seed matters");
    sampler_free(&again);
    sampler_free(&other);
    for (int r = 0; r < world; r++) sampler_free(&s[r]);
    free(seen);
    free(first_epoch);
}

int main(void) {
    check_world(10, 1);
    check_world(10, 2);
    check_world(10, 3); /* pads 2 */
    check_world(7, 4);  /* pads 1 */
    check_world(3, 4);  /* fewer examples than ranks: pads by wrapping */
    check_world(60000, 2);
    check_world(1001, 8);
    return test_done("test_sampler");
}
