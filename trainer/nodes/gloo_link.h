/* A link to the same rank's peers on the other nodes of a run, over gloo (the CPU
 * collective library PyTorch's CPU backend is built on, Debian's libgloo): its TCP
 * transport, its rendezvous through our kv_store, its ring all-reduce, broadcast
 * and barrier. gloo is C++; this is its C face, so the trainer stays C. No call
 * throws: every failure (a peer gone, a timeout) returns -1, and gloo_link_error
 * says what gloo said.
 *
 * The link's members are `size` processes, one per node, `rank` being this node's
 * index; they meet under `prefix` in the store (every member passes the same). */
#ifndef DDPD_TRAINER_NODES_GLOO_LINK_H
#define DDPD_TRAINER_NODES_GLOO_LINK_H

#include <stddef.h>

#include "kv_store.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct gloo_link gloo_link;

typedef struct {
    kv_store *store;
    const char *prefix;  /* "gloo/local-0/": this link's keys in the store */
    int rank, size;
    /* where this process listens: the interface by name (GLOO_SOCKET_IFNAME, as
     * PyTorch's gloo reads it) when set, else the address of `hostname` */
    const char *iface;
    const char *hostname;
    int connect_timeout_ms; /* to meet every member */
    int timeout_ms;         /* of each collective call afterwards */
} gloo_link_options;

/* Connects every member to every other (blocks until all have come, or the
 * connect timeout). NULL and err on failure. */
gloo_link *gloo_link_open(const gloo_link_options *o, char *err, size_t errlen);

/* In place, over the members, summed in the order of gloo's ring (fixed for a
 * given size and count: the same bits run after run, on every member). 0 or -1. */
int gloo_link_allreduce_sum_f32(gloo_link *l, float *buf, size_t n);
int gloo_link_allreduce_sum_f64(gloo_link *l, double *buf, size_t n);
/* Both at once, in one call (one round trip where two would cost two): f[0..nf)
 * summed as floats and d[0..nd) as doubles, each as gloo_link_allreduce_sum_f32
 * and _f64 would sum them (with two members, bit for bit the same). */
int gloo_link_allreduce_sum_f32_f64(gloo_link *l, float *f, size_t nf, double *d, size_t nd);
/* buf on every member <- buf on member `root`. */
int gloo_link_broadcast(gloo_link *l, void *buf, size_t bytes, int root);
int gloo_link_barrier(gloo_link *l);

/* What the last failed call met, "" if none. */
const char *gloo_link_error(const gloo_link *l);
void gloo_link_close(gloo_link *l);

#ifdef __cplusplus
}
#endif

#endif
