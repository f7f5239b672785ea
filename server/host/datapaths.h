/* Where a submitted run may read files from. Paths in a submitted config are
 * relative to the server's data roots (the first root that holds the file wins), or
 * absolute and inside one of them; the trainer gets them as absolute, canonical
 * paths. Absolute paths outside every root, paths whose ".." climbs out of a root,
 * symlinks that lead out of every root (into another root is fine: nothing outside
 * the roots is read), and missing files are refused, each with the JSON pointer of
 * the offending field. */
#ifndef DDPD_SERVER_HOST_DATAPATHS_H
#define DDPD_SERVER_HOST_DATAPATHS_H

#include <jansson.h>

#include "validator.h"

typedef struct {
    char **roots; /* canonical (realpath) directories */
    int n;
} data_roots;

/* Adds `dir` (made canonical). -1 with a sentence in err when it is not a directory. */
int data_roots_add(data_roots *r, const char *dir, char *err, size_t errlen);
void data_roots_free(data_roots *r);
/* "/usr/share/datasets, /srv/data": for messages. malloc'd. */
char *data_roots_list(const data_roots *r);

/* Resolves the string at `pointer` in `config` (a path relative to one of `roots`)
 * and writes the canonical absolute path at the same place in `resolved`. Fields
 * that are absent or not strings are left alone (the schema reports those). A
 * violation is appended to `errs`. `what` names the roots in messages ("data roots"). */
void datapaths_resolve_field(const data_roots *roots, const char *what, const json_t *config,
                             json_t *resolved, const char *pointer, schema_errors *errs);

/* The same for a directory (a command run's working_dir; "." is the root itself),
 * which may also be given as an absolute path inside one of the roots. */
void datapaths_resolve_dir(const data_roots *roots, const char *what, const json_t *config, json_t *resolved,
                           const char *pointer, schema_errors *errs);

/* A path a config was given at submission (then absolute and canonical: as the
 * functions above wrote it; a file the run's account may have rewritten since) made
 * canonical again, as its reader would open it now, and written back at `pointer` in
 * `config` when it lies inside one of `roots`; else a violation naming where it
 * leads. Absent and empty fields are left alone. A path that no longer exists is
 * judged by its longest part that does, made canonical, and the rest as written
 * (which may hold no "." or ".."), and written back as "" (it reads nothing). */
void datapaths_recheck(const data_roots *roots, const char *what, json_t *config, const char *pointer,
                       schema_errors *errs);

/* The four data files of a run config (/data/train/images, ...). */
void datapaths_resolve_config(const data_roots *roots, const json_t *config, json_t *resolved,
                              schema_errors *errs);

#endif
