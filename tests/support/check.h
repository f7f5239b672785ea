/* A tiny test harness for the C unit tests: CHECK keeps going and counts failures,
 * REQUIRE stops the test; test_done() prints "N passed, N failed" and returns the
 * exit code ctest reads: 1 on a failure, and on a test that checked nothing. */
#ifndef DDPD_TESTS_SUPPORT_CHECK_H
#define DDPD_TESTS_SUPPORT_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int check_passed, check_failed;

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (cond) {                                                             \
            check_passed++;                                                     \
        } else {                                                                \
            check_failed++;                                                     \
            fprintf(stderr, "%s:%d: CHECK(%s) failed: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                       \
            fputc('\n', stderr);                                                \
        }                                                                       \
    } while (0)

#define REQUIRE(cond, ...)                                                      \
    do {                                                                        \
        int require_ok_ = (cond) ? 1 : 0;                                       \
        CHECK(require_ok_, __VA_ARGS__);                                        \
        if (!require_ok_) exit(1);                                              \
    } while (0)

#define CHECK_NEAR(a, b, rtol, atol, what)                                      \
    do {                                                                        \
        double a_ = (a), b_ = (b);                                              \
        CHECK(fabs(a_ - b_) <= (atol) + (rtol) * fabs(b_), "%s: %.9g vs %.9g", what, a_, b_); \
    } while (0)

static inline int test_done(const char *name) {
    printf("%s: %d passed, %d failed\n", name, check_passed, check_failed);
    if (!check_passed && !check_failed) fprintf(stderr, "%s: FAILED: made no check\n", name);
    return check_failed || !check_passed ? 1 : 0;
}

#endif
