/* Min/max/last downsampling of a metric series: see downsample.h for the rules. */
#include "downsample.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

static void emit(downsampler *d, ds_point p) {
    if (d->n_out && d->out[d->n_out - 1].step == p.step) return;
    if (d->n_out == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 64;
        d->out = xrealloc(d->out, d->cap * sizeof *d->out);
    }
    d->out[d->n_out++] = p;
}

/* NaN ranks above every number: a loss that became NaN is the spike to keep. */
static bool higher(double a, double b) { return isnan(a) ? !isnan(b) : (!isnan(b) && a > b); }

static void flush_bucket(downsampler *d) {
    if (!d->in_bucket) return;
    if (d->have_lo && d->have_hi) {
        if (d->lo.step <= d->hi.step) {
            emit(d, d->lo);
            emit(d, d->hi);
        } else {
            emit(d, d->hi);
            emit(d, d->lo);
        }
    } else if (d->have_hi) {
        emit(d, d->hi);
    }
    d->in_bucket = d->have_lo = d->have_hi = false;
}

static void bucket_add(downsampler *d, ds_point p) {
    /* Bucket index by step: steps are (nearly) contiguous, so equal step ranges hold
     * nearly equal numbers of points. 128-bit product: no overflow for any step. */
    __int128 span = (__int128)d->last_step - d->first_step + 1;
    int64_t b = (int64_t)(((__int128)(p.step - d->first_step) * d->buckets) / span);
    if (b >= d->buckets) b = d->buckets - 1;
    if (b < 0) b = 0;
    if (!d->in_bucket || b != d->bucket) {
        flush_bucket(d);
        d->bucket = b;
        d->in_bucket = true;
    }
    if (!isnan(p.value) && (!d->have_lo || p.value < d->lo.value)) {
        d->lo = p;
        d->have_lo = true;
    }
    if (!d->have_hi || higher(p.value, d->hi.value)) {
        d->hi = p;
        d->have_hi = true;
    }
}

void ds_init(downsampler *d, int64_t first_step, int64_t last_step, size_t max_points) {
    memset(d, 0, sizeof *d);
    d->first_step = first_step;
    d->last_step = last_step < first_step ? first_step : last_step;
    d->max_points = max_points;
}

void ds_add(downsampler *d, int64_t step, double value, int64_t t) {
    ds_point p = {step, value, t};
    d->count++;
    d->last = p;
    if (!d->buckets) {
        if (!d->max_points || d->n_out < d->max_points) {
            emit(d, p);
            return;
        }
        /* One point too many: from here on, bucket. Replay what was kept so far. */
        d->buckets = (int64_t)(d->max_points - 1) / 2;
        if (d->buckets < 1) d->buckets = 1;
        size_t n = d->n_out;
        ds_point *kept = d->out;
        d->out = NULL;
        d->n_out = d->cap = 0;
        for (size_t i = 0; i < n; i++) bucket_add(d, kept[i]);
        free(kept);
    }
    bucket_add(d, p);
}

void ds_finish(downsampler *d) {
    if (!d->buckets) return;
    flush_bucket(d);
    /* The last point is always served: it is what a live chart's right edge shows. */
    emit(d, d->last);
}

void ds_free(downsampler *d) {
    free(d->out);
    memset(d, 0, sizeof *d);
}
