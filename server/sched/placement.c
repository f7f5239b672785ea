/* Where a run across nodes goes: see placement.h. */
#include "placement.h"

static int choose_k(const place_candidate *c, int n, int world_size, int k, bool by_capacity, int *out) {
    if (k < 1 || world_size % k != 0) return 0;
    int per_node = world_size / k, got = 0;
    for (int i = 0; i < n && got < k; i++)
        if ((by_capacity ? c[i].capacity : c[i].free) >= per_node) out[got++] = c[i].id;
    return got == k ? k : 0;
}

int placement_choose(const place_candidate *c, int n, int world_size, int nodes_wanted, bool by_capacity, int *out) {
    if (world_size < 1) return 0;
    if (nodes_wanted > 0) return choose_k(c, n, world_size, nodes_wanted, by_capacity, out);
    for (int k = 1; k <= n && k <= world_size; k++)
        if (choose_k(c, n, world_size, k, by_capacity, out)) return k;
    return 0;
}
