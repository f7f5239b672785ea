/* Opening a run's data files inside the data roots it was given, at the moment
 * they are opened. The server checks a submitted config's paths against its data
 * roots, but a run may wait in the queue and a directory can be swapped for a
 * symlink in between; so the trainer, given the same roots (--data-root), opens
 * every data file beneath its root and refuses a path that leads out of it
 * (openat2 with RESOLVE_BENEATH; where the kernel lacks it, no symlink at all). */
#ifndef DDPD_TRAINER_DATA_OPEN_H
#define DDPD_TRAINER_DATA_OPEN_H

#include <stddef.h>

#define DATA_ROOTS_MAX 16

typedef struct {
    const char *dirs[DATA_ROOTS_MAX];
    int n; /* 0: paths are opened as given (ddp-trainer run on its own) */
} data_roots;

/* Adds a root; -1 (and err) when there are too many. */
int data_roots_add(data_roots *r, const char *dir, char *err, size_t errlen);

/* Opens `path` read-only: as given when `roots` is NULL or empty; else an absolute
 * path must lie inside one of the roots and a relative one is taken from the first
 * root that has it, and either is opened beneath that root. Returns the fd of a
 * regular file, or -1 with a sentence in err naming the file (relative to its root). */
int data_open(const data_roots *roots, const char *path, char *err, size_t errlen);

/* How to name `path` in a message: relative to the root it lies in (server paths
 * stay out of reasons a user reads), else as given. */
const char *data_display_name(const data_roots *roots, const char *path);

#endif
