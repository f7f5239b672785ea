/* The end of a run's log file (trainer.log), read backwards from its end so that a
 * long log costs no more than the lines asked for; or a part of the file (a span:
 * one attempt's output in a rank's log) read as if it were the whole. Each is the
 * file `rel` of the run directory `dir`, opened as run_files.h opens a run's files:
 * -1 with errno ELOOP, ENXIO or EXDEV when the run left something there that is not
 * its own file (run_file_planted). */
#ifndef DDPD_SERVER_HOST_LOGTAIL_H
#define DDPD_SERVER_HOST_LOGTAIL_H

#include <stddef.h>

/* The last `n` lines (a final line without its newline counts). *out is malloc'd
 * (NULL and 0 when the file is empty); *end_offset: the file's size they end at
 * (where logtail_read_from goes on). 0, or -1 with errno (ENOENT: no log yet). */
int logtail_read(const char *dir, const char *rel, size_t n, char **out, size_t *len, long long *end_offset);

/* Whole lines from byte `offset` on, at most `max` bytes of them (a line longer
 * than `max` comes in pieces); *next is where the following read starts (the
 * offset after the last newline returned), *size the file's size now. An offset
 * past the end reads nothing. 0, or -1 with errno. */
int logtail_read_from(const char *dir, const char *rel, long long offset, size_t max, char **out, size_t *len, long long *next,
                      long long *size);

/* The bytes [begin, end) of the file as if they were all of it (end -1: to its end,
 * which may grow): the two reads above within them. *end_offset, *next and *size
 * are bytes of the file, not of the span. */
int logtail_read_span(const char *dir, const char *rel, long long begin, long long end, size_t n, char **out, size_t *len,
                      long long *end_offset);
int logtail_read_from_span(const char *dir, const char *rel, long long begin, long long end, long long offset, size_t max, char **out,
                           size_t *len, long long *next, long long *size);

/* The last line that is not blank, trimmed and cut to `maxlen` bytes; NULL if none. */
char *logtail_last_line(const char *dir, const char *rel, size_t maxlen);

#endif
