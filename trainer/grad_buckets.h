/* Gradient buckets, as DDP does them: consecutive layers with parameters (in the
 * order backward produces them) grouped into buckets of about `bucket_mb`, the first one small
 * (1 MB, like DDP) so communication starts early. Backward reports each finished
 * layer; a bucket is handed to the engine (to be reduced over ranks) as soon as its
 * last layer is done, while earlier layers' gradients are still being computed. */
#ifndef DDPD_TRAINER_GRAD_BUCKETS_H
#define DDPD_TRAINER_GRAD_BUCKETS_H

#include <stddef.h>

#include "model.h"

#define GRAD_FIRST_BUCKET_MB 1.0

typedef struct {
    size_t begin, end; /* float offsets into the gradient buffer */
    int last_layer;    /* the bucket is complete once backward has finished this layer */
} grad_bucket;

/* Called for each complete bucket, in order; non-zero marks the step failed. */
typedef int (*bucket_ready_fn)(void *arg, const grad_bucket *b);

typedef struct {
    grad_bucket bucket[MODEL_MAX_LAYERS];
    int n_buckets;
    int next;          /* the next bucket to hand over in this step */
    bucket_ready_fn ready;
    void *ready_arg;
    int failed;
} grad_buckets;

void grad_buckets_init(grad_buckets *b, const model_shape *s, double bucket_mb, bucket_ready_fn ready, void *arg);
/* Call before each backward. */
void grad_buckets_begin(grad_buckets *b);
/* grad_ready_fn for model_forward_backward: hands over every bucket now complete. */
void grad_buckets_layer_ready(void *arg, int layer);

#endif
