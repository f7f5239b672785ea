/* Finding a command run's program: see program_path.h. */
#include "program_path.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char DEFAULT_PATH[] = "/usr/local/bin:/usr/bin:/bin";

const char *program_search_path(char *const *config_env) {
    for (size_t i = 0; config_env && config_env[i]; i++)
        if (strncmp(config_env[i], "PATH=", 5) == 0) return config_env[i] + 5;
    const char *inherited = getenv("PATH");
    return inherited && inherited[0] ? inherited : DEFAULT_PATH;
}

static int executable_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* `path` made absolute and canonical into out (0), else -1. */
static int absolute(const char *path, char *out, size_t n) {
    char real[PATH_MAX];
    if (!executable_file(path) || !realpath(path, real)) return -1;
    return snprintf(out, n, "%s", real) < (int)n ? 0 : -1;
}

int program_resolve(const char *prog, const char *search_path, const char *working_dir, char *out, size_t n) {
    char candidate[PATH_MAX];
    if (prog[0] == '/') return absolute(prog, out, n);
    if (strchr(prog, '/')) {
        snprintf(candidate, sizeof candidate, "%s/%s", working_dir ? working_dir : ".", prog);
        return absolute(candidate, out, n);
    }
    for (const char *p = search_path; p;) {
        const char *colon = strchr(p, ':');
        size_t len = colon ? (size_t)(colon - p) : strlen(p);
        /* an empty entry is the current directory, the ranks' working directory */
        if (len == 0) snprintf(candidate, sizeof candidate, "%s/%s", working_dir ? working_dir : ".", prog);
        else snprintf(candidate, sizeof candidate, "%.*s/%s", (int)len, p, prog);
        if (absolute(candidate, out, n) == 0) return 0;
        p = colon ? colon + 1 : NULL;
    }
    return -1;
}

void program_missing_hint(const char *prog, const char *search_path, char *out, size_t n) {
    if (strchr(prog, '/'))
        snprintf(out, n, "no file %s (a relative path is taken from the working directory: "
                 "set working_dir, ddpctl run --workdir DIR, or name it by its absolute path)", prog);
    else
        snprintf(out, n, "no program %s on the ranks' PATH (%s): name it by its absolute path (e.g. /usr/bin/python3), "
                 "or put its directory on PATH (\"env\": {\"PATH\": ...}; ddpctl run --env PATH=...)", prog,
                 search_path);
}
