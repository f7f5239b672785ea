/* Joining paths into fixed buffers without silent truncation. */
#ifndef DDPD_TRAINER_RUN_IO_PATHS_H
#define DDPD_TRAINER_RUN_IO_PATHS_H

#include <stddef.h>

/* out <- "dir/name"; returns -1 (out holds a truncated path) when it does not fit. */
int path_join(char *out, size_t n, const char *dir, const char *name);

#endif
