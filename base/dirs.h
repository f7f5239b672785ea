/* Making a directory and the ones above it: one helper for the server's state dir, the
 * agent's, `ddpd user`'s and the trainer's run and cache dirs. */
#ifndef DDPD_BASE_DIRS_H
#define DDPD_BASE_DIRS_H

#include <sys/types.h>

/* mkdir -p: each missing directory of `path` made with `mode` (less the umask); one
 * that exists is fine. 0, or -1 with errno (ENAMETOOLONG past PATH_MAX). */
int mkdir_p(const char *path, mode_t mode);

#endif
