/* Whole lines from a file a run writes (its journal), in bounded memory whatever the
 * file holds: a line longer than the reader's bound is skipped without being
 * buffered (counted, with its bytes), and the holes of a sparse file inside such a
 * line are jumped over (SEEK_DATA) rather than read, so a 3 GiB line of nothing costs
 * neither 3 GiB of memory nor the time to read it. Reads with pread at the reader's
 * own offset; the caller bounds what one call may read (`budget`), so that a thread
 * that keeps the server alive is never held long by one file. */
#ifndef DDPD_SERVER_LIB_LINE_READER_H
#define DDPD_SERVER_LIB_LINE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    int fd;
    int64_t consumed;      /* the first byte not yet handed out or skipped: the start of a line */
    int64_t read_to;       /* the file offset of buf[len] */
    char *buf;
    size_t len, pos, cap;  /* buf[pos..len): read, not yet handed out */
    size_t max_line;       /* a longer line is skipped */
    bool skipping;         /* inside a line over max_line */
    int64_t skipped_lines; /* lines skipped for their length */
    int64_t skipped_bytes;
} line_reader;

/* A reader of fd (not closed by the reader) from `offset`, a line's start. */
void line_reader_init(line_reader *r, int fd, int64_t offset, size_t max_line);
void line_reader_free(line_reader *r);

/* The next whole line (its newline included) into *line, *len (valid until the next
 * call): 1. 0: no whole line now (the end of the file, a last line still without its
 * newline, or `*budget` bytes read by this reader: come back later), -1 a read error
 * (errno). *budget (when not NULL) is decreased by the bytes read from the file;
 * holes jumped over are not counted. */
int line_reader_next(line_reader *r, const char **line, size_t *len, int64_t *budget);

/* The bytes after `consumed` that were read but hold no newline yet (a last line not
 * yet whole). Once its writers are gone, line_reader_drop_rest skips it, torn. */
size_t line_reader_rest(const line_reader *r);
void line_reader_drop_rest(line_reader *r);

#endif
