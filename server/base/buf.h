/* A growable byte buffer, always NUL-terminated: responses built by hand, lines
 * read from sockets, text assembled piece by piece. */
#ifndef DDPD_SERVER_BASE_BUF_H
#define DDPD_SERVER_BASE_BUF_H

#include <stddef.h>

typedef struct {
    char *data;
    size_t len, cap;
} buf_t;

void buf_reserve(buf_t *b, size_t extra);
void buf_append(buf_t *b, const void *data, size_t n);
void buf_printf(buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void buf_free(buf_t *b);

#endif
