/* Durations from the environment: see env_seconds.h. */
#include "env_seconds.h"

#include <stdio.h>
#include <stdlib.h>

double env_seconds(const char *name, double fallback) {
    const char *v = getenv(name);
    char *end;
    double t = v ? strtod(v, &end) : 0;
    return v && end != v && t > 0 ? t : fallback;
}

double env_seconds_between(const char *name, double fallback, double lo, double hi, const char *program) {
    const char *v = getenv(name);
    if (!v || !v[0]) return fallback;
    char *end;
    double t = strtod(v, &end);
    if (*end || !(t >= lo && t <= hi)) {
        fprintf(stderr, "%s: %s=%s is not a number of seconds (%g to %g): using %g\n", program, name, v, lo, hi, fallback);
        return fallback;
    }
    return t;
}
