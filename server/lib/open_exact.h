/* Opening a file of a run's directory as the server, which may be root: where runs run
 * as other accounts, a run can put a symlink in its own directory (its log, a
 * `ranks` folder) that names the database or another account's file, and a server
 * that followed it would serve that file as the run's. open_exact opens `path` only
 * when no symlink lies on the way: the file opened must be the very path named (the
 * server's own paths are absolute and free of symlinks: the state directory is
 * realpath'd at start-up). */
#ifndef DDPD_LIB_OPEN_EXACT_H
#define DDPD_LIB_OPEN_EXACT_H

#include <stdio.h>
#include <sys/types.h>

/* open(path, flags | O_NOFOLLOW | O_CLOEXEC), refused with ELOOP when the file it
 * opened is not `path` itself (a symlink on the way). A descriptor, or -1 with errno. */
int open_exact(const char *path, int flags);
/* The same with O_CREAT's mode. */
int open_exact_mode(const char *path, int flags, mode_t mode);

/* The same as a stream for reading ("re"); NULL with errno. */
FILE *fopen_exact(const char *path);

#endif
