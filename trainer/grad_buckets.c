/* Gradient buckets: see grad_buckets.h. Layers are never split across buckets. */
#include "grad_buckets.h"

void grad_buckets_init(grad_buckets *b, const model_shape *s, double bucket_mb, bucket_ready_fn ready, void *arg) {
    b->n_buckets = 0;
    b->ready = ready;
    b->ready_arg = arg;
    b->failed = 0;
    double cap_bytes = (bucket_mb < GRAD_FIRST_BUCKET_MB ? bucket_mb : GRAD_FIRST_BUCKET_MB) * 1024 * 1024;
    grad_bucket *cur = NULL;
    for (int l = s->n_layers - 1; l >= 0; l--) { /* backward order = buffer order */
        if (!model_layer_has_params(s, l)) continue;
        if (!cur || (double)(cur->end - cur->begin) * sizeof(float) >= cap_bytes) {
            if (cur) cap_bytes = bucket_mb * 1024 * 1024;
            cur = &b->bucket[b->n_buckets++];
            cur->begin = model_layer_begin(s, l);
        }
        cur->end = model_layer_end(s, l);
        cur->last_layer = l;
    }
}

void grad_buckets_begin(grad_buckets *b) {
    b->next = 0;
    b->failed = 0;
}

void grad_buckets_layer_ready(void *arg, int layer) {
    grad_buckets *b = arg;
    while (b->next < b->n_buckets && b->bucket[b->next].last_layer >= layer) {
        const grad_bucket *k = &b->bucket[b->next++];
        if (!b->failed && b->ready(b->ready_arg, k) != 0) b->failed = 1;
    }
}
