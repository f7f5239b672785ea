/* Path joining: see paths.h. */
#include "paths.h"

#include <stdio.h>

int path_join(char *out, size_t n, const char *dir, const char *name) {
    int len = snprintf(out, n, "%s/%s", dir, name);
    return (len < 0 || (size_t)len >= n) ? -1 : 0;
}
