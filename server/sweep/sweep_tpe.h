/* A tree-structured Parzen estimator (TPE: Bergstra et al. 2011, as Optuna's default
 * sampler, its parameters independent): the next point of a search from the points
 * tried and how well each did. Pure: no database, no clock; its randomness is a stream
 * of (seed, trial) alone, so the same observations give the same suggestion again (a
 * sweep with a seed makes the same choices twice). Tested on known functions
 * (tests/unit/sweeps/test_sweep_tpe.c).
 *
 * Each dimension is modelled on its own: the observations are split at the gamma
 * quantile of their objective into the good ones and the rest; a Parzen estimator of
 * each (a mixture of normals, truncated to the range, one at each observation with
 * the distance to its neighbours as its width, and a broad prior; for a categorical
 * one the counts plus a prior) gives l(x) and g(x); of n_candidates draws from l the
 * one with the highest l(x)/g(x) is taken. */
#ifndef DDPD_SERVER_SWEEP_SWEEP_TPE_H
#define DDPD_SERVER_SWEEP_SWEEP_TPE_H

#include <stdbool.h>
#include <stdint.h>

typedef enum { TPE_FLOAT, TPE_INT, TPE_CATEGORICAL } tpe_kind;

typedef struct {
    tpe_kind kind;
    double lo, hi;  /* a float's or an int's range (both ends in it) */
    bool log;       /* modelled on log(x) (lo > 0) */
    int n_choices;  /* a categorical's: its values are the indices 0..n_choices-1 */
} tpe_dim;

typedef struct {
    const double *x; /* a value for each dimension (a categorical's index); NaN: not set (a
                      * conditional parameter that did not apply): left out of that dimension */
    double y;        /* the objective, lower is better; NaN: none, the observation is left out */
} tpe_obs;

typedef struct {
    int n_startup;    /* fewer observations with an objective than this: a uniform draw */
    int n_candidates; /* draws from l(x) per dimension */
    double gamma;     /* the good ones: ceil(gamma * n), at least 1, at most 25 */
} tpe_options;

#define TPE_DEFAULTS ((tpe_options){.n_startup = 10, .n_candidates = 24, .gamma = 0.25})

/* The next point into x[n_dims] (an int's value a whole number, a categorical's an
 * index), from obs[0..n_obs) and the stream (seed, trial). */
void tpe_suggest(const tpe_dim *dims, int n_dims, const tpe_obs *obs, int n_obs, uint64_t seed, int trial,
                 const tpe_options *opt, double *x);

/* The same stream's uniform draw in [0, 1) (a draw's `i`-th number): for a random
 * search to compare with. */
double tpe_uniform(uint64_t seed, int trial, int i);

#endif
