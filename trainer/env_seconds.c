/* Durations from the environment: see env_seconds.h. */
#include "env_seconds.h"

#include <stdlib.h>

double env_seconds(const char *name, double fallback) {
    const char *v = getenv(name);
    char *end;
    double t = v ? strtod(v, &end) : 0;
    return v && end != v && t > 0 ? t : fallback;
}
