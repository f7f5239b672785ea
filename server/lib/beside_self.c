/* The programs beside the running ddpd: see beside_self.h. */
#include "beside_self.h"

#include <limits.h>
#include <string.h>
#include <unistd.h>

#include "base.h"

char *beside_self(const char *program) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return xstrdup(program);
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    return xasprintf("%s/%s", exe, program);
}
