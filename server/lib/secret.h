/* Secrets: the random ones ddpd makes (a run's secret for its event socket), the one
 * way it reads a secret it is given in a file (the API token: a file only its owner
 * can read, unlike a command line), and the one way it compares a secret it was given
 * with the one it holds: in time that depends on the held secret's length only, never
 * on how many bytes match. */
#ifndef DDPD_LIB_SECRET_H
#define DDPD_LIB_SECRET_H

#include <stdbool.h>
#include <stddef.h>

/* 2*nbytes hex digits and a NUL into out, from getrandom(). 0 or -1. */
int random_hex(char *out, size_t nbytes);

/* given == held, in constant time in held's bytes; false when either is NULL or
 * held is empty. */
bool secret_equal(const char *given, const char *held);

/* Reads a secret from the file at `path` into *out (malloc'd; a line end or trailing
 * spaces are not part of it). Refused, with a sentence naming the file and what to do
 * in err: a file that is not a regular file, one that group or others may read or
 * write (its mode is named: chmod 600), one owned by another user than this process's
 * (or root), an empty one, one over 4 KiB, and a secret with spaces or control
 * characters inside. 0 or -1. */
int secret_read_file(const char *path, char **out, char *err, size_t errlen);

#endif
