/* Joining paths into fixed buffers without silent truncation. */
#ifndef DDPD_PATHS_H
#define DDPD_PATHS_H

#include <stddef.h>

/* out <- "dir/name"; returns -1 (out holds a truncated path) when it does not fit. */
int path_join(char *out, size_t n, const char *dir, const char *name);

/* mkdir -p: creates `path` and its missing parents (mode 0755). 0, or -1 and errno. */
int mkdir_p(const char *path);

#endif
