/* Unit tests of server/lib/downsample.c: a series that fits comes back whole; one that
 * does not is bounded by max_points, keeps its first bucket's and every bucket's
 * extremes (a planted spike and a planted dip survive), its last point, ascending
 * steps, and a NaN (null) loss survives as a spike. */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "downsample.h"

static bool has_step(const downsampler *d, int64_t step) {
    for (size_t i = 0; i < d->n_out; i++)
        if (d->out[i].step == step) return true;
    return false;
}

static bool ascending(const downsampler *d) {
    for (size_t i = 1; i < d->n_out; i++)
        if (d->out[i].step <= d->out[i - 1].step) return false;
    return true;
}

/* A decaying, slightly noisy loss over steps 1..n, with optional plants. */
static void feed(downsampler *d, int64_t n, int64_t spike_at, int64_t dip_at, int64_t nan_at) {
    for (int64_t s = 1; s <= n; s++) {
        double v = 2.0 * exp(-(double)s / (double)n) + 0.01 * (double)((s * 7919) % 13) / 13.0;
        if (s == spike_at) v = 50.0;
        if (s == dip_at) v = -5.0;
        if (s == nan_at) v = NAN;
        ds_add(d, s, v, 1000 + s);
    }
    ds_finish(d);
}

int main(void) {
    downsampler d;

    /* fits: everything, in order */
    ds_init(&d, 1, 100, 100);
    feed(&d, 100, 0, 0, 0);
    CHECK(d.n_out == 100 && d.count == 100, "100 points with max 100: got %zu of %zu", d.n_out, d.count);
    CHECK(ascending(&d), "order");
    ds_free(&d);

    /* no max: everything */
    ds_init(&d, 1, 5000, 0);
    feed(&d, 5000, 0, 0, 0);
    CHECK(d.n_out == 5000, "no max_points keeps all: %zu", d.n_out);
    ds_free(&d);

    /* bounded, spike and dip survive, last kept */
    size_t sizes[] = {3, 4, 5, 10, 101, 1000};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        ds_init(&d, 1, 100000, sizes[k]);
        feed(&d, 100000, 31337, 77777, 0);
        CHECK(d.n_out <= sizes[k], "max_points %zu: got %zu points", sizes[k], d.n_out);
        CHECK(d.n_out >= 3, "max_points %zu: only %zu points", sizes[k], d.n_out);
        CHECK(has_step(&d, 31337), "max_points %zu: the spike at step 31337 was lost", sizes[k]);
        CHECK(has_step(&d, 77777), "max_points %zu: the dip at step 77777 was lost", sizes[k]);
        CHECK(d.n_out && d.out[d.n_out - 1].step == 100000, "max_points %zu: the last point is missing", sizes[k]);
        CHECK(ascending(&d), "max_points %zu: steps not ascending", sizes[k]);
        CHECK(d.count == 100000, "count %zu", d.count);
        bool spike_value = false;
        for (size_t i = 0; i < d.n_out; i++) spike_value |= d.out[i].step == 31337 && d.out[i].value == 50.0 && d.out[i].t == 1000 + 31337;
        CHECK(spike_value, "max_points %zu: the spike's value or time changed", sizes[k]);
        ds_free(&d);
    }

    /* a NaN loss is kept */
    ds_init(&d, 1, 20000, 21);
    feed(&d, 20000, 0, 0, 12345);
    CHECK(d.n_out <= 21, "nan case bounded: %zu", d.n_out);
    bool nan_kept = false;
    for (size_t i = 0; i < d.n_out; i++) nan_kept |= d.out[i].step == 12345 && isnan(d.out[i].value);
    CHECK(nan_kept, "a NaN at step 12345 was lost");
    ds_free(&d);

    /* one more point than fits switches to buckets and stays bounded */
    ds_init(&d, 1, 11, 10);
    feed(&d, 11, 0, 0, 0);
    CHECK(d.n_out <= 10 && d.out[d.n_out - 1].step == 11, "11 into 10: %zu points, last %lld", d.n_out,
          (long long)d.out[d.n_out - 1].step);
    ds_free(&d);

    /* sparse steps (a series read with ?after=, or steps with gaps) */
    ds_init(&d, 1000, 1000000, 7);
    for (int64_t s = 1000; s <= 1000000; s += 1000) ds_add(&d, s, s == 500000 ? 9.0 : 1.0, s);
    ds_finish(&d);
    CHECK(d.n_out <= 7 && has_step(&d, 500000) && d.out[d.n_out - 1].step == 1000000, "sparse: %zu points", d.n_out);
    ds_free(&d);

    /* empty */
    ds_init(&d, 0, 0, 10);
    ds_finish(&d);
    CHECK(d.n_out == 0 && d.count == 0, "empty: %zu", d.n_out);
    ds_free(&d);

    return test_done("test_downsample");
}
