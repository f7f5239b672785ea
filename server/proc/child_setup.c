/* What a server's child starts with: see child_setup.h. */
#include "child_setup.h"

#include <stdbool.h>
#include <string.h>

#include "base.h"

static bool dropped(const char *var, char *const *drop, char *const *set) {
    for (size_t i = 0; drop && drop[i]; i++)
        if (strncmp(var, drop[i], strlen(drop[i])) == 0) return true;
    size_t name = strcspn(var, "=");
    for (size_t i = 0; set && set[i]; i++)
        if (strncmp(var, set[i], name) == 0 && set[i][name] == '=') return true;
    return false;
}

char **child_env(char *const *base, char *const *drop, char *const *set) {
    size_t n = 0, m = 0;
    while (base && base[n]) n++;
    while (set && set[m]) m++;
    char **env = xmalloc((n + m + 1) * sizeof *env);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (!dropped(base[i], drop, set)) env[k++] = base[i];
    for (size_t i = 0; i < m; i++) env[k++] = set[i];
    env[k] = NULL;
    return env;
}
