/* Allocation that cannot fail: out of memory, the program says so (under its die.h
 * name) and aborts (there is no useful way on for a service whose every part
 * allocates). */
#ifndef DDPD_BASE_ALLOC_H
#define DDPD_BASE_ALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size); /* zeroed */
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s); /* NULL stays NULL */
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
