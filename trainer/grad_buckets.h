/* Gradient buckets, as DDP does them: consecutive layers (in the order backward
 * produces them) grouped into buckets of about `bucket_mb`, the first one small
 * (1 MB, like DDP) so communication starts early. Backward reports each finished
 * layer; a bucket is all-reduced (averaged over ranks) as soon as its last layer is
 * done, while earlier layers' gradients are still being computed. */
#ifndef DDPD_GRAD_BUCKETS_H
#define DDPD_GRAD_BUCKETS_H

#include <stddef.h>

#include "collectives.h"
#include "mlp.h"

#define GRAD_FIRST_BUCKET_MB 1.0

typedef struct {
    size_t begin, end; /* float offsets into the gradient buffer */
    int last_layer;    /* the bucket is complete once backward has finished this layer */
} grad_bucket;

typedef struct {
    grad_bucket bucket[MLP_MAX_LAYERS];
    int n_buckets;
    int next;          /* the next bucket to launch in this step */
    coll_comm *comm;
    float *grads;
    int failed;        /* a collective failed: the group was aborted */
} grad_buckets;

void grad_buckets_init(grad_buckets *b, const mlp_shape *s, double bucket_mb, coll_comm *comm, float *grads);
/* Call before each backward. */
void grad_buckets_begin(grad_buckets *b);
/* grad_ready_fn for mlp_forward_backward: launches every bucket that is complete. */
void grad_buckets_layer_ready(void *arg, int layer);

#endif
