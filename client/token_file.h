/* ddpctl's token from a file (--token-file PATH, DDPD_TOKEN_FILE): its first line, so
 * that the token is neither on the command line (ps shows it to every local user)
 * nor in the shell's history. The file must be its owner's only, as ssh asks of a
 * key. */
#ifndef DDPCTL_TOKEN_FILE_H
#define DDPCTL_TOKEN_FILE_H

#include <stddef.h>

/* The token in `path` (malloc'd), or NULL with a sentence in err naming the file and
 * what to do. */
char *token_file_read(const char *path, char *err, size_t errlen);

#endif
