/* What a directory holds on disk, measured the way a directory a run's account owns
 * must be: by descriptors, never following a link, never opening a file. Each entry
 * is fstatat'd (AT_SYMLINK_NOFOLLOW) beneath its parent's descriptor and counts its
 * blocks (st_blocks * 512: a sparse file counts what it holds, not its size; a link
 * counts itself, not what it names; a FIFO or a socket is never opened); a file with
 * several hard links counts once; a subdirectory is opened with O_NOFOLLOW |
 * O_DIRECTORY beneath its parent and walked, one on another filesystem is not. A walk
 * stops at a depth and a number of entries (a directory made to be slow to walk): it
 * then says so, with what it counted down to there. */
#ifndef DDPD_SERVER_LIB_DIR_USAGE_H
#define DDPD_SERVER_LIB_DIR_USAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int max_depth;        /* directories below the walked one; deeper ones count themselves only */
    uint64_t max_entries; /* entries looked at, in all */
} dir_usage_limits;

/* Limits no real run directory comes near: 256 levels, 4 million entries. */
#define DIR_USAGE_LIMITS_DEFAULT ((dir_usage_limits){.max_depth = 256, .max_entries = 4u << 20})

typedef struct {
    uint64_t bytes;   /* what its entries hold on disk, the directory's own blocks included */
    uint64_t entries; /* entries counted */
    bool incomplete;  /* stopped at a limit: bytes is at least what it holds; why says which */
    char why[160];
} dir_usage;

/* Measures the directory `path` (itself a link: refused). 0; or -1 and why in out->why
 * (it cannot be opened: missing, not a directory, no right to it). A subdirectory
 * that cannot be opened counts its own blocks. */
int dir_usage_measure(const char *path, const dir_usage_limits *limits, dir_usage *out);

#endif
