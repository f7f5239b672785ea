/* The tree-structured Parzen estimator: see sweep_tpe.h. */
#include "sweep_tpe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

/* SplitMix64 over (seed, trial, i): one stream per trial, whatever came before. */
double tpe_uniform(uint64_t seed, int trial, int i) {
    uint64_t z = seed ^ 0x5DEECE66DULL;
    z += 0x9E3779B97F4A7C15ULL * ((uint64_t)(uint32_t)trial * 0x100000001B3ULL + (uint64_t)(uint32_t)i + 7);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return (double)(z >> 11) * 0x1.0p-53;
}

typedef struct {
    uint64_t seed;
    int trial, i;
} stream;

static double next_u(stream *s) { return tpe_uniform(s->seed, s->trial, s->i++); }

static double normal_draw(stream *s) {
    double u1 = next_u(s), u2 = next_u(s);
    if (u1 < 1e-300) u1 = 1e-300;
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

static double normal_cdf(double z) { return 0.5 * erfc(-z / M_SQRT2); }

/* A mixture of normals on [lo, hi], each truncated to it. */
typedef struct {
    int n;
    double *mu, *sigma, *w;
    double lo, hi;
} parzen;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The estimator of points v[0..n) (in the modelled space) on [lo, hi]: one normal at
 * each, its width the larger distance to its neighbours (the range's ends counting as
 * neighbours), clipped to [(hi - lo) / min(100, n + 1), hi - lo]; and the prior, a
 * normal at the middle as wide as the range, of weight 1 as each point. */
static parzen parzen_of(const double *v, int n, double lo, double hi) {
    parzen p = {.n = n + 1, .lo = lo, .hi = hi};
    p.mu = xmalloc((size_t)p.n * sizeof *p.mu);
    p.sigma = xmalloc((size_t)p.n * sizeof *p.sigma);
    p.w = xmalloc((size_t)p.n * sizeof *p.w);
    double *s = xmalloc((size_t)(n > 0 ? n : 1) * sizeof *s);
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double range = hi - lo, min_sigma = range / fmin(100.0, n + 1.0);
    for (int i = 0; i < n; i++) {
        double left = s[i] - (i > 0 ? s[i - 1] : lo), right = (i + 1 < n ? s[i + 1] : hi) - s[i];
        p.mu[i] = s[i];
        p.sigma[i] = fmin(fmax(fmax(left, right), min_sigma), range);
        p.w[i] = 1.0 / (n + 1);
    }
    p.mu[n] = lo + range / 2;
    p.sigma[n] = range;
    p.w[n] = 1.0 / (n + 1);
    free(s);
    return p;
}

static void parzen_free(parzen *p) {
    free(p->mu);
    free(p->sigma);
    free(p->w);
}

static double parzen_log_pdf(const parzen *p, double x) {
    double sum = 0;
    for (int i = 0; i < p->n; i++) {
        double z = (x - p->mu[i]) / p->sigma[i];
        double mass = normal_cdf((p->hi - p->mu[i]) / p->sigma[i]) - normal_cdf((p->lo - p->mu[i]) / p->sigma[i]);
        if (mass < 1e-12) mass = 1e-12;
        sum += p->w[i] * exp(-0.5 * z * z) / (p->sigma[i] * sqrt(2 * M_PI) * mass);
    }
    return log(sum > 1e-300 ? sum : 1e-300);
}

static double parzen_draw(const parzen *p, stream *s) {
    double u = next_u(s), acc = 0;
    int k = p->n - 1;
    for (int i = 0; i < p->n; i++) {
        acc += p->w[i];
        if (u < acc) {
            k = i;
            break;
        }
    }
    for (int tries = 0; tries < 64; tries++) {
        double x = p->mu[k] + p->sigma[k] * normal_draw(s);
        if (x >= p->lo && x <= p->hi) return x;
    }
    return fmin(fmax(p->mu[k], p->lo), p->hi);
}

/* The modelled space of a float or an int: log where asked; an int's range widened by
 * half a step on each side so that its ends are as likely as the rest. */
static void model_range(const tpe_dim *d, double *lo, double *hi) {
    double a = d->lo, b = d->hi;
    if (d->kind == TPE_INT) {
        a -= 0.5;
        b += 0.5;
        if (d->log && a <= 0) a = d->lo * 0.5;
    }
    *lo = d->log ? log(a) : a;
    *hi = d->log ? log(b) : b;
}

static double to_model(const tpe_dim *d, double x) { return d->log ? log(x) : x; }

static double from_model(const tpe_dim *d, double m) {
    double x = d->log ? exp(m) : m;
    if (d->kind == TPE_INT) x = round(x);
    return fmin(fmax(x, d->lo), d->hi);
}

typedef struct {
    double y;
    int at;
} ranked;

static int cmp_ranked(const void *a, const void *b) {
    const ranked *x = a, *y = b;
    if (x->y != y->y) return x->y < y->y ? -1 : 1;
    return x->at - y->at; /* ties: the earlier first */
}

/* One dimension's choice, from the good ones' values good[0..ng) and the rest's. */
static double suggest_dim(const tpe_dim *d, const double *good, int ng, const double *bad, int nb, stream *s,
                          int n_candidates) {
    if (d->kind == TPE_CATEGORICAL) {
        int k = d->n_choices > 0 ? d->n_choices : 1;
        double *lw = xcalloc((size_t)k, sizeof *lw), *gw = xcalloc((size_t)k, sizeof *gw), lsum = 0, gsum = 0;
        for (int c = 0; c < k; c++) lw[c] = gw[c] = 1.0 / k; /* the prior: one observation spread evenly */
        for (int i = 0; i < ng; i++) lw[(int)good[i]] += 1;
        for (int i = 0; i < nb; i++) gw[(int)bad[i]] += 1;
        for (int c = 0; c < k; c++) {
            lsum += lw[c];
            gsum += gw[c];
        }
        int best = 0;
        double best_score = -INFINITY;
        for (int j = 0; j < n_candidates; j++) {
            double u = next_u(s) * lsum, acc = 0;
            int c = k - 1;
            for (int i = 0; i < k; i++) {
                acc += lw[i];
                if (u < acc) {
                    c = i;
                    break;
                }
            }
            double score = log(lw[c] / lsum) - log(gw[c] / gsum);
            if (score > best_score) {
                best_score = score;
                best = c;
            }
        }
        free(lw);
        free(gw);
        return best;
    }
    double lo, hi;
    model_range(d, &lo, &hi);
    double *gm = xmalloc((size_t)(ng > 0 ? ng : 1) * sizeof *gm), *bm = xmalloc((size_t)(nb > 0 ? nb : 1) * sizeof *bm);
    for (int i = 0; i < ng; i++) gm[i] = to_model(d, good[i]);
    for (int i = 0; i < nb; i++) bm[i] = to_model(d, bad[i]);
    parzen l = parzen_of(gm, ng, lo, hi), g = parzen_of(bm, nb, lo, hi);
    double best = lo + (hi - lo) / 2, best_score = -INFINITY;
    for (int j = 0; j < n_candidates; j++) {
        double m = parzen_draw(&l, s);
        double score = parzen_log_pdf(&l, m) - parzen_log_pdf(&g, m);
        if (score > best_score) {
            best_score = score;
            best = m;
        }
    }
    parzen_free(&l);
    parzen_free(&g);
    free(gm);
    free(bm);
    return from_model(d, best);
}

static double uniform_dim(const tpe_dim *d, stream *s) {
    double u = next_u(s);
    if (d->kind == TPE_CATEGORICAL) {
        int c = (int)(u * d->n_choices);
        return c < d->n_choices ? c : d->n_choices - 1;
    }
    double lo, hi;
    model_range(d, &lo, &hi);
    return from_model(d, lo + u * (hi - lo));
}

void tpe_suggest(const tpe_dim *dims, int n_dims, const tpe_obs *obs, int n_obs, uint64_t seed, int trial,
                 const tpe_options *opt, double *x) {
    stream s = {.seed = seed, .trial = trial};
    ranked *r = xmalloc((size_t)(n_obs > 0 ? n_obs : 1) * sizeof *r);
    int n = 0;
    for (int i = 0; i < n_obs; i++)
        if (!isnan(obs[i].y)) r[n++] = (ranked){.y = obs[i].y, .at = i};
    if (n < opt->n_startup || n < 2) {
        for (int d = 0; d < n_dims; d++) x[d] = uniform_dim(&dims[d], &s);
        free(r);
        return;
    }
    qsort(r, (size_t)n, sizeof *r, cmp_ranked);
    int n_good = (int)ceil(opt->gamma * n);
    if (n_good < 1) n_good = 1;
    if (n_good > 25) n_good = 25;
    if (n_good >= n) n_good = n - 1;
    double *good = xmalloc((size_t)n * sizeof *good), *bad = xmalloc((size_t)n * sizeof *bad);
    for (int d = 0; d < n_dims; d++) {
        int ng = 0, nb = 0;
        for (int i = 0; i < n; i++) {
            double v = obs[r[i].at].x[d];
            if (isnan(v)) continue;
            if (i < n_good) good[ng++] = v;
            else bad[nb++] = v;
        }
        x[d] = suggest_dim(&dims[d], good, ng, bad, nb, &s, opt->n_candidates);
    }
    free(good);
    free(bad);
    free(r);
}
