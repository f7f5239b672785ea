/* Ending on a start-up error: see die.h. */
#include "die.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static const char *program = "ddpd";

void die_set_program(const char *name) { program = name; }

const char *die_program(void) { return program; }

void die(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", program);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(2);
}
