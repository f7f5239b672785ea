/* A program's settings as a table: one row per setting (its flag, its environment
 * variable, where its value goes in the program's settings struct, its kind, bounds
 * and default, its help), from which the flags and the environment are read, whole
 * numbers are held to their bounds, and the usage text is written. A new setting is
 * one row plus its use. `ddpd serve`/`check` (cmd/settings.c), `ddpd agent` and
 * `ddpd part` each have a table. */
#ifndef DDPD_SERVER_LIB_OPT_TABLE_H
#define DDPD_SERVER_LIB_OPT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define OPT_LIST_MAX 64
#define OPT_UNSET (-1) /* an OPT_INT neither given nor defaulted (its user computes one) */

typedef enum {
    OPT_STRING, /* const char *: the flag's value, else the variable's (kept as given, "" too), else dflt */
    OPT_BOOL,   /* bool: the flag (it takes no value), or the variable set to 1, true or yes */
    OPT_INT,    /* int: a whole number from min to max; "" is the default */
    OPT_PATHS,  /* opt_list: the flag repeated, else the variable, colon-separated, else dflt (one) */
    OPT_WORDS,  /* opt_list: the flag repeated, else the variable, space-separated */
} opt_kind;

typedef struct {
    const char *v[OPT_LIST_MAX];
    int n;
} opt_list;

enum {
    OPT_ENV_BY_HAND = 1, /* the variable is named in the help but read by the program's own code */
};

typedef struct {
    const char *flag;      /* "--listen" */
    const char *meta;      /* its value in the usage ("HOST:PORT"); NULL for a bool */
    const char *env;       /* "DDPD_LISTEN", or NULL: the flag only */
    opt_kind kind;
    size_t field;          /* offsetof(the settings struct, its field) */
    int min, max;          /* OPT_INT */
    const char *dflt;      /* the default as the flag would give it ("10"), or NULL: none, or computed */
    const char *help;      /* what it is, in the usage, before the parenthesis */
    const char *dflt_says; /* the usage's word for a computed default ("default: the number of cores") */
    const char *note;      /* in the parenthesis, after the default */
    const char *after;     /* in the usage, after the parenthesis */
    unsigned flags;        /* OPT_ENV_BY_HAND */
} opt_row;

typedef struct {
    const opt_row *rows;
    size_t n;
    const char *program;  /* "ddpd", "ddpd agent": in "(see ddpd agent --help)" */
    const char *usage;    /* what comes before the options in the usage */
    bool terse_bounds;    /* "--slots 999: a whole number from 0 to 256 is needed" rather than
                             "--slots must be an integer from 0 to 4096 (got "999")" */
} opt_table;

/* Where each row's value came from, after opt_read: its flag, its variable, or NULL
 * (the default). Indexed as the table's rows. */
typedef struct {
    const char *from[128];
} opt_origins;

/* argv[first..]: the flags (--flag VALUE, --flag=VALUE, a bool's --flag), then each
 * row not given by the variable, else its default, into `settings`. --help prints the
 * usage and exits 0; an unknown flag, a missing value or a stray argument dies (exit
 * 2) naming it. A value out of its bounds leaves the default and writes the first
 * such problem, naming the flag, into `problem` (size `problem_size`; "" when none).
 * Lists from a variable point into copies kept by `keep` (opt_keep). */
typedef struct {
    char **owned;
    int n, cap;
} opt_keep;

void opt_read(const opt_table *t, int first, int argc, char **argv, void *settings, opt_origins *origins,
              opt_keep *keep, char *problem, size_t problem_size);

/* A string the settings point into, freed by opt_keep_free; returns it. */
char *opt_keep_add(opt_keep *keep, char *s);
void opt_keep_free(opt_keep *keep);

/* The row of `flag`, or NULL. */
const opt_row *opt_find(const opt_table *t, const char *flag);

/* "1", "true" or "yes" (any case). */
bool opt_truthy(const char *v);

/* The usage: t->usage, then a paragraph per row. */
void opt_usage(const opt_table *t, FILE *out);
/* The same for a manual page, in roff (roff.h): t->usage after its "usage:" lines
 * (the page's synopsis says them), then a tagged entry per row. */
void opt_roff(const opt_table *t, FILE *out);

#endif
