/* Allocation that cannot fail: see alloc.h. */
#include "alloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "die.h"

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", die_program(), n);
        abort();
    }
    return p;
}

void *xcalloc(size_t count, size_t size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu x %zu bytes)\n", die_program(), count, size);
        abort();
    }
    return p;
}

void *xrealloc(void *p, size_t n) {
    p = realloc(p, n ? n : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", die_program(), n);
        abort();
    }
    return p;
}

char *xstrdup(const char *s) { return s ? xstrndup(s, strlen(s)) : NULL; }

char *xstrndup(const char *s, size_t n) {
    char *d = xmalloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *xasprintf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        fprintf(stderr, "%s: out of memory\n", die_program());
        abort();
    }
    va_end(ap);
    return s;
}
