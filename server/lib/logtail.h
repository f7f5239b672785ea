/* The end of a run's log file (trainer.log), read backwards from its end so that a
 * long log costs no more than the lines asked for. */
#ifndef DDPD_LOGTAIL_H
#define DDPD_LOGTAIL_H

#include <stddef.h>

/* The last `n` lines (a final line without its newline counts). *out is malloc'd
 * (NULL and 0 when the file is empty). 0, or -1 with errno (ENOENT: no log yet). */
int logtail_read(const char *path, size_t n, char **out, size_t *len);

/* The last line that is not blank, trimmed and cut to `maxlen` bytes; NULL if none. */
char *logtail_last_line(const char *path, size_t maxlen);

#endif
