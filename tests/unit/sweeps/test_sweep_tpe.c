/* Unit tests of the tree-structured Parzen estimator (server/sweep/sweep_tpe.c) on known
 * functions, with no server: a quadratic's minimum reached in fewer trials than a
 * random search's over many seeds (a float range, a log range, an int range and a
 * categorical, each on its own), the same suggestion for the same seed and
 * observations (and another for another seed), every suggestion inside its range (an
 * int's a whole number, a categorical's an index), a uniform draw before n_startup
 * observations, and NaN objectives and unset values left out. */
#include <math.h>
#include <string.h>

#include "check.h"
#include "sweep_tpe.h"

#define MAX_DIMS 4
#define BUDGET 60

typedef double (*objective)(const double *x);

/* (x - 0.3)^2 + (y + 0.2)^2 on [-1, 1]^2: minimum 0 at (0.3, -0.2) */
static double quad2(const double *x) { return (x[0] - 0.3) * (x[0] - 0.3) + (x[1] + 0.2) * (x[1] + 0.2); }
/* log10(lr) near -2.5 (lr in [1e-5, 1], log), width 170 of 16..512 (int), choice 2 of 5 */
static double mixed(const double *x) {
    double l = log10(x[0]) + 2.5, w = (x[1] - 170) / 100, c = x[2] == 2 ? 0 : 1;
    return l * l + w * w + c;
}

/* Trials until f < target, at most BUDGET (then BUDGET + 1): by TPE, or by uniform
 * draws (options with n_startup past the budget) from the same streams. */
static int trials_to(const tpe_dim *dims, int nd, objective f, double target, uint64_t seed, bool model) {
    double xs[BUDGET][MAX_DIMS];
    tpe_obs obs[BUDGET];
    tpe_options opt = TPE_DEFAULTS;
    if (!model) opt.n_startup = BUDGET + 1;
    for (int t = 0; t < BUDGET; t++) {
        tpe_suggest(dims, nd, obs, t, seed, t, &opt, xs[t]);
        obs[t] = (tpe_obs){.x = xs[t], .y = f(xs[t])};
        if (obs[t].y < target) return t + 1;
    }
    return BUDGET + 1;
}

/* TPE's mean over 100 seeds below `ratio` of random's. */
static void compare(const char *what, const tpe_dim *dims, int nd, objective f, double target, double ratio) {
    int n_seeds = 100;
    double tpe_sum = 0, rnd_sum = 0;
    int tpe_wins = 0, rnd_wins = 0;
    for (int seed = 1; seed <= n_seeds; seed++) {
        int a = trials_to(dims, nd, f, target, (uint64_t)seed, true), b = trials_to(dims, nd, f, target, (uint64_t)seed, false);
        tpe_sum += a;
        rnd_sum += b;
        tpe_wins += a < b;
        rnd_wins += b < a;
    }
    CHECK(tpe_sum < ratio * rnd_sum, "%s: TPE reaches f < %g in fewer trials than random over %d seeds: mean %.1f "
          "against %.1f (TPE sooner in %d, random in %d)", what, target, n_seeds, tpe_sum / n_seeds, rnd_sum / n_seeds,
          tpe_wins, rnd_wins);
    printf("%s: mean trials to f < %g over %d seeds: TPE %.1f, random %.1f (TPE sooner in %d seeds, random in %d)\n",
           what, target, n_seeds, tpe_sum / n_seeds, rnd_sum / n_seeds, tpe_wins, rnd_wins);
}

static void finds_minimum_sooner(void) {
    const tpe_dim two[2] = {{.kind = TPE_FLOAT, .lo = -1, .hi = 1}, {.kind = TPE_FLOAT, .lo = -1, .hi = 1}};
    compare("quadratic on [-1, 1]^2", two, 2, quad2, 0.005, 0.75);
    const tpe_dim mix[3] = {{.kind = TPE_FLOAT, .lo = 1e-5, .hi = 1, .log = true},
                            {.kind = TPE_INT, .lo = 16, .hi = 512},
                            {.kind = TPE_CATEGORICAL, .n_choices = 5}};
    compare("log range, int range and categorical", mix, 3, mixed, 0.3, 0.9);
}

static void repeatable_and_in_range(void) {
    const tpe_dim mix[3] = {{.kind = TPE_FLOAT, .lo = 1e-5, .hi = 1, .log = true},
                            {.kind = TPE_INT, .lo = 16, .hi = 512},
                            {.kind = TPE_CATEGORICAL, .n_choices = 5}};
    double xs[30][3];
    tpe_obs obs[30];
    tpe_options opt = TPE_DEFAULTS;
    bool inside = true;
    for (int t = 0; t < 30; t++) {
        tpe_suggest(mix, 3, obs, t, 42, t, &opt, xs[t]);
        obs[t] = (tpe_obs){.x = xs[t], .y = mixed(xs[t])};
        inside = inside && xs[t][0] >= 1e-5 && xs[t][0] <= 1 && xs[t][1] >= 16 && xs[t][1] <= 512 &&
                 xs[t][1] == floor(xs[t][1]) && xs[t][2] >= 0 && xs[t][2] <= 4 && xs[t][2] == floor(xs[t][2]);
    }
    CHECK(inside, "every suggestion inside its range, an int whole, a categorical an index");
    double a[3], b[3], c[3];
    tpe_suggest(mix, 3, obs, 30, 42, 30, &opt, a);
    tpe_suggest(mix, 3, obs, 30, 42, 30, &opt, b);
    tpe_suggest(mix, 3, obs, 30, 43, 30, &opt, c);
    CHECK(memcmp(a, b, sizeof a) == 0, "the same seed, trial and observations: the same suggestion");
    CHECK(memcmp(a, c, sizeof a) != 0, "another seed: another suggestion");

    /* before n_startup observations with an objective: the uniform draw of the stream */
    tpe_obs few[3] = {{.x = xs[0], .y = 1}, {.x = xs[1], .y = NAN}, {.x = xs[2], .y = 2}};
    tpe_options startup = opt;
    startup.n_startup = 3;
    double u1[3], u2[3];
    tpe_suggest(mix, 3, few, 3, 7, 3, &startup, u1);
    tpe_obs none[1] = {{.x = xs[0], .y = NAN}};
    tpe_suggest(mix, 3, none, 1, 7, 3, &startup, u2);
    CHECK(memcmp(u1, u2, sizeof u1) == 0, "two objectives (one NaN, left out) of n_startup 3: a uniform draw");

    /* a value not set (NaN) is left out of its dimension: the good trials' value decides */
    const tpe_dim cat[1] = {{.kind = TPE_CATEGORICAL, .n_choices = 3}};
    double v[12][1];
    tpe_obs o[12];
    for (int i = 0; i < 12; i++) {
        v[i][0] = i < 4 ? NAN : (double)(i % 3);
        o[i] = (tpe_obs){.x = v[i], .y = i < 4 ? 5 : (i % 3 == 1 ? 0 : 10)};
    }
    int ones = 0;
    for (int seed = 0; seed < 20; seed++) {
        double x[1];
        tpe_suggest(cat, 1, o, 12, (uint64_t)seed, 12, &opt, x);
        ones += x[0] == 1;
    }
    CHECK(ones >= 15, "the choice whose trials were best is suggested most (unset values left out): %d of 20", ones);
}

int main(void) {
    finds_minimum_sooner();
    repeatable_and_in_range();
    return test_done("test_sweep_tpe");
}
