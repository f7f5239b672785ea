/* A secret given in a file (an API token: ddpd serve's and ddpd agent's --token-file,
 * ddpctl's --token-file and DDPD_TOKEN_FILE): a file only its owner can read, unlike a
 * command line that ps shows to every local user. One reader, and one set of refusals,
 * for every program. */
#ifndef DDPD_BASE_SECRET_FILE_H
#define DDPD_BASE_SECRET_FILE_H

#include <stddef.h>

/* Reads a secret from the file at `path` into *out (malloc'd; a line end or trailing
 * spaces are not part of it). Refused, with a sentence naming the file and what to do
 * in err: a file that is not a regular file, one that group or others may read or
 * write (its mode is named: chmod 600), one owned by another user than this process's
 * (or root), an empty one, one over 4 KiB, and a secret with spaces or control
 * characters inside. 0 or -1. */
int secret_read_file(const char *path, char **out, char *err, size_t errlen);

#endif
