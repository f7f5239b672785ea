/* How much room the file system holding a path has left, to tell "no space left"
 * from other failures: SQLite says "disk I/O error" or "database or disk is full"
 * when it cannot grow a file, which does not say where or what to do. */
#ifndef DDPD_SERVER_LIB_DISK_SPACE_H
#define DDPD_SERVER_LIB_DISK_SPACE_H

#include <stdbool.h>
#include <stddef.h>

/* Below this, a write that failed is blamed on space. */
#define DISK_SPACE_LOW_BYTES (1024ULL * 1024ULL)

/* Whether the file system holding `path` (a file, or a directory) has less than
 * DISK_SPACE_LOW_BYTES left for this process (root may use the blocks reserved for
 * it); *avail: the bytes left. False when it cannot be told (statvfs fails). */
bool disk_space_low(const char *path, unsigned long long *avail);

/* For a file that could not be written: when the file system of its directory is
 * low, "no space left on DIR (N bytes free)" into out, and true. */
bool disk_space_explain(const char *file, char *out, size_t len);

#endif
