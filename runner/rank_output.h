/* What a rank writes (its stdout and stderr, one pipe): kept verbatim in
 * ranks/rank-N.log (every attempt's, a restart's after a line that says which) and copied line by line, prefixed "[rank N] ", to the launcher's
 * standard output (the run's log when ddpd started it). The last non-empty line is
 * remembered: it explains a rank that failed. Both copies are held to the run's cap
 * on its logs (log_cap.h): past it they are dropped, the pipe still read to its end. */
#ifndef DDPD_RUNNER_RANK_OUTPUT_H
#define DDPD_RUNNER_RANK_OUTPUT_H

#include <stddef.h>

#include "log_cap.h"

#define RANK_OUTPUT_LINE_MAX 4096 /* longer lines are copied in pieces of this size */

typedef struct {
    int rank;
    int fd;      /* the read end of the rank's pipe; -1 once closed */
    int log_fd;  /* ranks/rank-N.log; -1 when it could not be opened */
    log_cap log_cap; /* ranks/rank-N.log's cap */
    char partial[RANK_OUTPUT_LINE_MAX];
    size_t partial_len;
    char last_line[512];
} rank_output;

/* Where this attempt's output of `rank` begins in <run_dir>/ranks/rank-N.log (which
 * keeps every attempt's, one after the other): the log's size once an earlier
 * attempt's unfinished last line is ended with a newline. `marker` (NULL: none) is
 * then written as a line of its own, the first of this attempt's. -1 (errno) when
 * the log cannot be written. */
long long rank_output_begin_attempt(const char *run_dir, int rank, const char *marker);

/* Opens <run_dir>/ranks/rank-N.log (appending) for `pipe_fd`. 0, or -1 (errno)
 * when the log cannot be opened; the output is then still copied to stdout. */
int rank_output_open(rank_output *o, int rank, int pipe_fd, const char *run_dir);

/* Reads what the pipe has. 1 while it is open, 0 at its end (then flushed and
 * closed). */
int rank_output_read(rank_output *o);

/* Copies a partial last line out and closes the pipe and the log. */
void rank_output_close(rank_output *o);

#endif
